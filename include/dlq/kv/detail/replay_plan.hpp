// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/detail/replay_plan.hpp
/// One replay step of dlq::KeyValueStorage as data, without I/O: what the decider said about
/// each record read (the payloads to push, the removals and moves to apply), and whether the
/// records are still unchanged when read again. KeyValueStorage::replay_step does the reads
/// and writes around it; tests/kv/test_replay_plan.cpp tests it without a store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/storage.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// What one replay step does with the records it read. Its views point into the items the
/// plan was made from, into the collection names given to plan_replay and into `owned`:
/// those must outlive the plan, and the plan must not be copied or moved.
struct replay_plan {
  replay_plan() = default;
  replay_plan(const replay_plan&) = delete;
  replay_plan& operator=(const replay_plan&) = delete;

  std::vector<std::string> destinations;  ///< distinct destination queues, usually one
  /// (index into destinations, payload) per Action::replay, in record order. The payload
  /// views its item when it is a part of it (the usual case: the front end cuts the payload
  /// out of the envelope), else `owned`.
  std::vector<std::pair<std::size_t, std::string_view>> payloads;
  std::deque<std::string> owned;  ///< payloads the decider made itself (stable addresses)
  /// One per record to replay, discard (delete) or set aside (move_to the corrupt list), each
  /// a compare-and-delete on the version read.
  std::vector<Removal> removals;

  /// The messages to push: one per payload, in record order.
  std::vector<Message> messages() const {
    std::vector<Message> out;
    out.reserve(payloads.size());
    for (const auto& p : payloads)
      out.push_back(Message{destinations[p.first], p.second});
    return out;
  }
};

/// True when `part` lies inside `whole` (both views of one buffer).
inline bool views_part_of(std::string_view part, std::string_view whole) noexcept {
  const char* p = part.data();
  const char* begin = whole.data();
  return p != nullptr && std::less_equal<const char*>()(begin, p) &&
         std::less_equal<const char*>()(p + part.size(), begin + whole.size());
}

/// Adds one Action::replay decision about `item` to `plan`.
/// @throws dlq::invalid_argument if the decision names no destination.
inline void plan_replay_one(const Item& item, const Decision& decision, std::string_view dead,
                            replay_plan& plan) {
  if (decision.destination.empty())
    throw invalid_argument(::dlq::detail::message("kv", "replay_step", "empty destination queue",
                                                  "the decider must name a destination"));
  std::size_t d = 0;
  while (d < plan.destinations.size() && plan.destinations[d] != decision.destination)
    ++d;
  if (d == plan.destinations.size()) plan.destinations.emplace_back(decision.destination);
  if (views_part_of(decision.payload, item.value)) {
    plan.payloads.emplace_back(d, decision.payload);
  } else {
    plan.owned.emplace_back(decision.payload);
    plan.payloads.emplace_back(d, plan.owned.back());
  }
  plan.removals.push_back(Removal{dead, item.id, item.version, {}});
}

/// Asks `decide` about each of `items` (records of the collection `dead`, oldest first) and
/// fills `plan`: replays, discards and moves to the collection `corrupt` (set-aside); kept
/// records leave no trace.
/// @throws dlq::invalid_argument if a replay decision names no destination; what `decide`
///         throws.
inline void plan_replay(const std::vector<Item>& items, const std::string& dead,
                        const std::string& corrupt, Decider decide, replay_plan& plan) {
  plan.payloads.reserve(items.size());
  plan.removals.reserve(items.size());
  for (const Item& item : items) {
    Decision decision;
    decide(item.value, decision);
    if (decision.action == Action::replay) {
      plan_replay_one(item, decision, dead, plan);
    } else if (decision.action == Action::set_aside) {
      plan.removals.push_back(Removal{dead, item.id, item.version, corrupt});
    } else if (decision.action == Action::discard) {
      plan.removals.push_back(Removal{dead, item.id, item.version, {}});
    }
  }
}

/// True when every record of `removals` (ascending versions, as read) is still stored with
/// the version read: `now` is the ascending list of versions of the same window read again.
/// Removals only shrink a window and new or replaced records land after it, so every
/// surviving record is in `now`.
inline bool still_unchanged(const std::vector<Removal>& removals,
                            const std::vector<std::uint64_t>& now) noexcept {
  std::size_t j = 0;
  for (const Removal& r : removals) {
    while (j < now.size() && now[j] < r.version)
      ++j;
    if (j == now.size() || now[j] != r.version) return false;
  }
  return true;
}

}  // namespace detail
}  // namespace kv
}  // namespace dlq
