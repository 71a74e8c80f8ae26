// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// What a replay kept in place at the head of a dead-letter list, so that a storage whose
// replay cursor is an offset (MemoryStorage, RedisListStorage) can find its place again
// when other clients removed some of those kept items meanwhile (remove(), replay_ids(),
// a trim, another replayer). Without it the offset points past the first item the replay
// has not examined yet, and that item is silently skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/detail/id.hpp"

namespace dlq::detail {

/// The kept items of one replay run, as 64-bit hashes in list order (8 bytes each; a replay
/// that keeps nothing — replay-all without filters — costs nothing). size() is the number of
/// kept items, i.e. the cursor's offset while the list is untouched.
class kept_prefix {
 public:
  /// Number of kept items remembered.
  std::size_t size() const noexcept { return hashes_.size(); }

  /// Records one more kept item (the next in list order).
  void add(std::string_view raw) { hashes_.push_back(fnv1a64(raw)); }

  /// Records the items of `more` after these (a step's kept items, once it applied).
  void append(const kept_prefix& more) {
    hashes_.insert(hashes_.end(), more.hashes_.begin(), more.hashes_.end());
  }

  /// True when `item` (the item now just before the cursor) is the last kept item: the
  /// kept prefix has not shrunk (items are only ever removed from it, never inserted).
  bool is_last(std::string_view item) const noexcept {
    return !hashes_.empty() && hashes_.back() == fnv1a64(item);
  }

  /// Finding the place again after kept items were removed: call begin_realign(), then
  /// feed() the list's items from its head, in order, until it returns false (the item is not
  /// a kept one: the first not examined) or the list ends; then finish_realign() forgets the
  /// kept items that are gone and returns how many are left — the offset of the first item
  /// not examined. The items before the cursor are a subsequence of the kept ones (others only
  /// ever remove them), so a greedy in-order match finds them.
  void begin_realign() {
    matched_ = 0;
    still_.clear();
  }
  /// The next item from the head; false when it is not a kept item (stop feeding).
  bool feed(std::string_view item) {
    const std::uint64_t h = fnv1a64(item);
    while (matched_ < hashes_.size() && hashes_[matched_] != h)
      ++matched_;
    if (matched_ == hashes_.size()) return false;
    still_.push_back(h);
    ++matched_;
    return true;
  }
  /// Ends the realign; returns the number of kept items still at the head.
  std::size_t finish_realign() {
    hashes_.swap(still_);
    still_.clear();
    still_.shrink_to_fit();
    return hashes_.size();
  }

 private:
  std::vector<std::uint64_t> hashes_;
  std::vector<std::uint64_t> still_;  // during a realign
  std::size_t matched_ = 0;           // during a realign
};

}  // namespace dlq::detail
