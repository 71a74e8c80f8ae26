// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/memory_store.hpp
/// dlq::kv::MemoryStore — an in-memory key-value store for dlq::KeyValueStorage: the
/// unit-testing default for the key-value shape, with the same semantics as the durable
/// stores (versions, oldest-first windows, atomic batches, compare-and-delete).
///
///     dlq::kv::MemoryStore store;
///     dlq::KeyValueStorage storage(store);   // replays into a dlq::kv::MemoryQueues
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/counter_map.hpp"
#include "dlq/kv/store.hpp"

namespace dlq {
namespace kv {

/// In-memory key-value store (see the contract in dlq/kv/store.hpp). Nothing
/// survives the process. A handle: copies share the same data. Thread-safe: every call takes
/// one lock, so each batch is atomic.
class MemoryStore {
 public:
  /// An empty store.
  MemoryStore() : state_(std::make_shared<state>()) {}

  /// Inserts or replaces each record, in order, atomically. Every saved record gets a new
  /// version greater than every version given before, so a replaced record moves to the end.
  void save(const std::vector<Write>& writes) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const Write& w : writes)
      save_locked(collection_locked(w.collection), w);
  }

  /// As save, and returns how many records the collection of the last write holds after it
  /// (0 when `writes` is empty).
  std::size_t save_and_count(const std::vector<Write>& writes) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    collection* last = nullptr;
    for (const Write& w : writes) {
      last = &collection_locked(w.collection);
      save_locked(*last, w);
    }
    return last == nullptr ? 0 : last->by_id.size();
  }

  /// Saves `write` (as save) only if its collection holds fewer than `max_records` records or
  /// already holds a record with its id, atomically. @returns false (nothing written) when
  /// the collection is full.
  bool save_if_below(const Write& write, std::size_t max_records) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    collection* c = find_locked(write.collection);
    const std::size_t n = c == nullptr ? 0 : c->by_id.size();
    if (n >= max_records && (c == nullptr || c->by_id.find(write.id) == c->by_id.end()))
      return false;
    save_locked(c != nullptr ? *c : collection_locked(write.collection), write);
    return true;
  }

  /// Saves every write (all of one collection; as save) only if the collection then holds at
  /// most `max_records` records (a replacement is not growth), atomically. @returns false
  /// (nothing written) when they do not fit.
  bool save_if_fits(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    collection* c = find_locked(writes.front().collection);
    std::set<std::string_view> added;
    for (const Write& w : writes)
      if (c == nullptr || c->by_id.find(w.id) == c->by_id.end()) added.insert(w.id);
    if ((c == nullptr ? 0 : c->by_id.size()) + added.size() > max_records) return false;
    collection& target = c != nullptr ? *c : collection_locked(writes.front().collection);
    for (const Write& w : writes)
      save_locked(target, w);
    return true;
  }

  /// As save, atomically, then removes the oldest records of the last write's collection
  /// beyond `max_records`. @returns the removed records, oldest first.
  std::vector<Item> save_capped(const std::vector<Write>& writes, std::size_t max_records) {
    std::vector<Item> removed;
    std::lock_guard<std::mutex> lock(state_->mutex);
    collection* last = nullptr;
    for (const Write& w : writes) {
      last = &collection_locked(w.collection);
      save_locked(*last, w);
    }
    while (last != nullptr && last->by_id.size() > max_records) {
      auto oldest = last->by_version.begin();
      removed.push_back(Item{*oldest->second.id, std::move(oldest->second.value), oldest->first});
      last->by_id.erase(removed.back().id);
      last->by_version.erase(oldest);
    }
    if (last != nullptr && last->by_id.empty())
      state_->collections.erase(state_->collections.find(writes.back().collection));
    return removed;
  }

  /// Adds one to the counter (collection, key) and returns its new value; it expires `ttl`
  /// (clamped to [1 s, 100 years]) after this increment. Counters are not records. At most 100 000
  /// are kept: beyond that, expired ones and then those closest to expiry are dropped (see
  /// dlq::detail::counter_map), so the bookkeeping stays bounded.
  std::int64_t increment(std::string_view collection_name, std::string_view key,
                         std::chrono::seconds ttl) {
    std::string name;
    name.reserve(collection_name.size() + 1 + key.size());
    name.append(collection_name).push_back('\0');
    name.append(key);
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->counters.bump(name, detail::counter_ttl(ttl));
  }

  /// The record `id` of `collection`, or std::nullopt.
  std::optional<Item> load(std::string_view collection_name, std::string_view id) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const collection* c = find_locked(collection_name);
    if (c == nullptr) return std::nullopt;
    auto it = c->by_id.find(id);
    if (it == c->by_id.end()) return std::nullopt;
    return Item{it->first, c->by_version.at(it->second).value, it->second};
  }

  /// The records of `collection` in `window`, oldest first.
  std::vector<Item> list(std::string_view collection_name, const Window& window) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<Item> out;
    const collection* c = find_locked(collection_name);
    if (c == nullptr) return out;
    each_in_window(*c, window, [&out](std::uint64_t version, const entry& e) {
      out.push_back(Item{*e.id, e.value, version});
    });
    return out;
  }

  /// The versions of the records of `collection` in `window`, oldest first (list without
  /// copying ids and values).
  std::vector<std::uint64_t> versions(std::string_view collection_name,
                                      const Window& window) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<std::uint64_t> out;
    const collection* c = find_locked(collection_name);
    if (c == nullptr) return out;
    each_in_window(*c, window,
                   [&out](std::uint64_t version, const entry&) { out.push_back(version); });
    return out;
  }

  /// Applies every removal whose record exists with the expected version (any version when
  /// it is 0), atomically. @returns how many were applied.
  std::size_t remove(const std::vector<Removal>& removals) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return remove_locked(removals);
  }

  /// Atomically: if every removal's record exists with the expected version (any when 0),
  /// applies all of them and then saves `writes` (as save); otherwise changes nothing.
  /// @returns true when applied.
  bool remove_and_save(const std::vector<Removal>& removals, const std::vector<Write>& writes) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const Removal& r : removals) {
      const collection* c = find_locked(r.collection);
      if (c == nullptr) return false;
      auto it = c->by_id.find(r.id);
      if (it == c->by_id.end() || (r.version != 0 && it->second != r.version)) return false;
    }
    remove_locked(removals);
    for (const Write& w : writes)
      save_locked(collection_locked(w.collection), w);
    return true;
  }

  /// True when `other` is this store or a copy of it (the same data).
  bool shares_data_with(const MemoryStore& other) const noexcept { return state_ == other.state_; }

 private:
  std::size_t remove_locked(const std::vector<Removal>& removals) {
    std::size_t applied = 0;
    for (const Removal& r : removals) {
      auto cit = state_->collections.find(r.collection);
      if (cit == state_->collections.end()) continue;
      collection& c = cit->second;
      auto it = c.by_id.find(r.id);
      if (it == c.by_id.end() || (r.version != 0 && it->second != r.version)) continue;
      if (!r.move_to.empty() && r.move_to == r.collection) {
        ++applied;  // moving a record onto itself leaves it where it is
        continue;
      }
      auto vit = c.by_version.find(it->second);
      std::string value = std::move(vit->second.value);
      c.by_version.erase(vit);
      c.by_id.erase(it);
      if (!r.move_to.empty()) {
        save_locked(collection_locked(r.move_to), r.id, std::move(value));
      }
      if (c.by_id.empty()) state_->collections.erase(cit);
      ++applied;
    }
    return applied;
  }

 public:
  /// Number of records in `collection`.
  std::size_t count(std::string_view collection_name) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const collection* c = find_locked(collection_name);
    return c == nullptr ? 0 : c->by_id.size();
  }

  /// The record count and the oldest and newest record of `collection`, under the lock.
  Ends ends(std::string_view collection_name) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    Ends out;
    const collection* c = find_locked(collection_name);
    if (c == nullptr || c->by_version.empty()) return out;
    out.count = c->by_id.size();
    const auto& [first_version, first] = *c->by_version.begin();
    const auto& [last_version, last] = *c->by_version.rbegin();
    out.first = Item{*first.id, first.value, first_version};
    out.last = Item{*last.id, last.value, last_version};
    return out;
  }

  /// Removes every record of `collection`. @returns how many were removed.
  std::size_t remove_all(std::string_view collection_name) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->collections.find(collection_name);
    if (it == state_->collections.end()) return 0;
    const std::size_t n = it->second.by_id.size();
    state_->collections.erase(it);
    return n;
  }

 private:
  struct entry {
    const std::string* id;  // the key in collection::by_id (node-based map: stable address)
    std::string value;
  };
  struct collection {
    std::map<std::string, std::uint64_t, std::less<>> by_id;
    std::map<std::uint64_t, entry> by_version;
  };
  struct state {
    mutable std::mutex mutex;
    std::uint64_t last_version = 0;
    std::map<std::string, collection, std::less<>> collections;
    dlq::detail::counter_map counters;  // increment's counters
  };

  collection& collection_locked(std::string_view name) {
    auto it = state_->collections.find(name);
    if (it == state_->collections.end())
      it = state_->collections.emplace(std::string(name), collection{}).first;
    return it->second;
  }

  const collection* find_locked(std::string_view name) const {
    auto it = state_->collections.find(name);
    return it == state_->collections.end() ? nullptr : &it->second;
  }

  // Calls f(version, entry) for each record of `c` in `window`, oldest first.
  template <class F>
  static void each_in_window(const collection& c, const Window& window, F&& f) {
    auto it = c.by_version.upper_bound(window.after);
    for (std::size_t skip = window.offset; skip > 0 && it != c.by_version.end(); --skip)
      ++it;
    for (std::size_t n = 0; it != c.by_version.end() && (window.limit == 0 || n < window.limit);
         ++it, ++n)
      f(it->first, it->second);
  }

  collection* find_locked(std::string_view name) {
    auto it = state_->collections.find(name);
    return it == state_->collections.end() ? nullptr : &it->second;
  }

  void save_locked(collection& c, const Write& w) { save_locked(c, w.id, std::string(w.value)); }

  // Stores `value` as record `id` of `c` under a new version (replacing the record if any).
  void save_locked(collection& c, std::string_view id, std::string value) {
    const std::uint64_t version = ++state_->last_version;
    auto it = c.by_id.find(id);
    if (it != c.by_id.end()) {
      c.by_version.erase(it->second);
      it->second = version;
    } else {
      it = c.by_id.emplace(std::string(id), version).first;
    }
    c.by_version.emplace(version, entry{&it->first, std::move(value)});
  }

  std::shared_ptr<state> state_;
};

}  // namespace kv
}  // namespace dlq
