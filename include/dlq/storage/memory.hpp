// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file storage/memory.hpp
/// dlq::MemoryStorage — the in-memory backend, for unit tests of workers and for embedding.
///
/// It keeps, per queue, the dead-letter list, the corrupt list and the source queue (the
/// list replay pushes payloads back to, which a test or an in-process worker consumes with
/// source_pop). It is thread-safe and follows the same protocol as the Redis backend: a
/// replay step copies its window out under the lock, lets the front end decide without the
/// lock held, then re-checks that the window is unchanged and applies every decision at once
/// under the lock — so concurrent sends, removals and replays behave as they do on Redis.
///
///     dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;
///     dlq.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
///     dlq.replay_all("orders");
///     auto job = dlq.storage().source_pop("orders");  // R"({"order":42})"
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/counter_map.hpp"
#include "dlq/detail/kept_prefix.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Thread-safe in-memory storage. Movable, not copyable.
class MemoryStorage {
 public:
  /// Replay position: the number of items a replay kept in place so far, and which ones
  /// (so that the replay finds its place again when another client removes some of them).
  struct replay_cursor {
    std::size_t offset = 0;      ///< items kept at the head of the list so far
    detail::kept_prefix kept{};  ///< the kept items (hashes), in list order
  };

  MemoryStorage() : state_(std::make_unique<state>()) {}

  /// Appends one envelope to the queue's dead-letter list; returns the list's new length.
  std::size_t push(const Record& record) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& dead = lists_for(record.queue).dead;
    dead.emplace_back(record.envelope);
    return dead.size();
  }

  /// Appends one envelope only while the dead-letter list has fewer than `max_length`
  /// items (atomically); false when it is full.
  bool push_bounded(const Record& record, std::size_t max_length) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& dead = lists_for(record.queue).dead;
    if (dead.size() >= max_length) return false;
    dead.emplace_back(record.envelope);
    return true;
  }

  /// Appends `records` (all of one queue) only if the dead-letter list then holds at most
  /// `max_length` items, atomically: all of them or none. False when they do not fit.
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return true;
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& dead = lists_for(records.front().queue).dead;
    if (dead.size() + records.size() > max_length) return false;
    for (const Record& r : records)
      dead.emplace_back(r.envelope);
    return true;
  }

  /// Appends `records` (all of one queue) and, under the same lock, removes the oldest items
  /// beyond `max_length`; returns the removed items, oldest first.
  std::vector<std::string> push_capped(const std::vector<Record>& records, std::size_t max_length) {
    std::vector<std::string> evicted;
    if (records.empty()) return evicted;
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& dead = lists_for(records.front().queue).dead;
    for (const Record& r : records)
      dead.emplace_back(r.envelope);
    while (dead.size() > max_length) {
      evicted.push_back(std::move(dead.front()));
      dead.pop_front();
    }
    return evicted;
  }

  /// Adds one to the counter `key` of `queue` and returns its new value. A counter expires
  /// `ttl` after its last bump; at most 100 000 are kept — beyond that the ones closest to
  /// expiry are dropped first — so the bookkeeping stays bounded.
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl) {
    std::string id(queue);
    id.push_back('\0');
    id.append(key);
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->counters.bump(id, ttl);
  }

  /// Appends several envelopes, all at once (no other operation sees half of them).
  void push_many(const std::vector<Record>& records) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const Record& r : records)
      lists_for(r.queue).dead.emplace_back(r.envelope);
  }

  /// Number of items in one of the queue's lists.
  std::size_t size(std::string_view queue, ListKind kind) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    return l ? list_of(*l, kind).size() : 0;
  }

  /// Items [start, start + count) of one of the queue's lists (fewer at the end).
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    return l ? slice(list_of(*l, kind), start, count) : std::vector<std::string>{};
  }

  /// Removes the first item equal to `raw`; false when there is none.
  bool remove(std::string_view queue, ListKind kind, std::string_view /*id*/,
              std::string_view raw) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    if (!l) return false;
    auto& list = list_of(*l, kind);
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (*it == raw) {
        list.erase(it);
        return true;
      }
    }
    return false;
  }

  /// Removes every item of one of the queue's lists and returns how many there were.
  std::size_t purge(std::string_view queue, ListKind kind) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    if (!l) return 0;
    auto& list = list_of(*l, kind);
    const std::size_t n = list.size();
    list.clear();
    return n;
  }

  /// Names of the queues that have dead-letter or corrupt items, sorted.
  std::vector<std::string> queues() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<std::string> names;
    for (const auto& [name, l] : state_->queues)
      if (!l.dead.empty() || !l.corrupt.empty()) names.push_back(name);
    return names;
  }

  /// Dead-letter list sizes of several queues, read at one instant.
  std::vector<std::size_t> sizes(const std::vector<std::string>& names) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<std::size_t> out;
    out.reserve(names.size());
    for (const auto& name : names) {
      const lists* l = find_lists(name);
      out.push_back(l ? l->dead.size() : 0);
    }
    return out;
  }

  /// Length and first and last item of both lists of each queue, in order, each queue read
  /// under the lock at one instant (the storage member `stats`, see dlq/stats.hpp).
  std::vector<QueueEnds> stats(const std::vector<std::string>& names) {
    auto ends = [](const std::deque<std::string>& list) {
      ListEnds e;
      e.length = list.size();
      if (!list.empty()) {
        e.first = list.front();
        e.last = list.back();
      }
      return e;
    };
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<QueueEnds> out(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (const lists* l = find_lists(names[i])) out[i] = {ends(l->dead), ends(l->corrupt)};
    }
    return out;
  }

  /// One replay step (see dlq/storage.hpp for the protocol).
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide) {
    std::vector<std::string> window;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      const lists* l = find_lists(queue);
      if (!l) return {};
      find_place(l->dead, cursor);
      window = slice(l->dead, cursor.offset, max_items);
    }
    if (window.empty()) return {};

    struct planned {
      Action action = Action::keep;
      std::string destination;
      std::string payload;
    };
    std::vector<planned> plan(window.size());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < window.size(); ++i) {
      Decision d;
      decide(window[i], d);
      plan[i].action = d.action;
      if (d.action == Action::replay) {
        plan[i].destination.assign(d.destination.data(), d.destination.size());
        plan[i].payload.assign(d.payload.data(), d.payload.size());
      } else if (d.action == Action::keep) {
        ++kept;
      }
    }

    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    const std::size_t begin = cursor.offset;
    if (!l || l->dead.size() < begin + window.size()) return {0, true};
    for (std::size_t i = 0; i < window.size(); ++i)
      if (l->dead[begin + i] != window[i]) return {0, true};
    if (kept != window.size()) {
      std::size_t write = begin;
      for (std::size_t i = 0; i < window.size(); ++i) {
        std::string& item = l->dead[begin + i];
        switch (plan[i].action) {
          case Action::keep:
            if (write != begin + i) l->dead[write] = std::move(item);
            ++write;
            break;
          case Action::replay:
            lists_for(plan[i].destination).source.push_back(std::move(plan[i].payload));
            break;
          case Action::set_aside:
            l->corrupt.push_back(std::move(item));
            break;
          case Action::discard:
            break;
        }
      }
      const auto first = l->dead.begin() + static_cast<std::ptrdiff_t>(write);
      l->dead.erase(first, first + static_cast<std::ptrdiff_t>(window.size() - kept));
    }
    for (std::size_t i = 0; i < window.size(); ++i)
      if (plan[i].action == Action::keep) cursor.kept.add(window[i]);
    cursor.offset += kept;
    return {window.size(), false};
  }

  /// Nothing to recover: a replay step applies at once or not at all. Returns 0.
  std::size_t recover(std::string_view /*queue*/) { return 0; }

  // --- the audit trail (see dlq/audit.hpp) -----------------------------------------------

  /// Most audit records kept per queue; older ones are dropped first.
  static constexpr std::size_t audit_max_records = 10000;

  /// Appends one audit record (JSON text) made at `at` to the queue's trail.
  void audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                    std::string_view record) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto& trail = state_->audit[std::string(queue)];
    trail.emplace_back(at, std::string(record));
    if (trail.size() > audit_max_records) trail.pop_front();
  }

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<std::string> out;
    const auto it = state_->audit.find(queue);
    if (it == state_->audit.end()) return out;
    for (const auto& [at, record] : it->second) {
      if (out.size() >= limit) break;
      if (at >= since) out.push_back(record);
    }
    return out;
  }

  // --- the source queues (where replay puts jobs back) ----------------------------------

  /// Appends a job payload to a source queue (what a producer does).
  void source_push(std::string_view queue, std::string_view payload) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists_for(queue).source.emplace_back(payload);
  }

  /// Takes the oldest job payload from a source queue (what a worker does); nullopt if empty.
  std::optional<std::string> source_pop(std::string_view queue) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    if (!l || l->source.empty()) return std::nullopt;
    std::string job = std::move(l->source.front());
    l->source.pop_front();
    return job;
  }

  /// Reliable take for `consumer` (see dlq/source_queue.hpp): the jobs it already holds
  /// (up to `max`, oldest first) if any, else up to `max` jobs moved from the head of the
  /// source queue to the tail of its in-flight list, atomically.
  std::vector<std::string> source_take(std::string_view queue, std::string_view consumer,
                                       std::size_t max) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists& l = lists_for(queue);
    auto held = l.in_flight.find(consumer);
    if (held != l.in_flight.end() && !held->second.empty()) return slice(held->second, 0, max);
    std::vector<std::string> out;
    if (l.source.empty()) return out;
    if (held == l.in_flight.end())
      held = l.in_flight.emplace(std::string(consumer), std::deque<std::string>{}).first;
    while (out.size() < max && !l.source.empty()) {
      out.push_back(l.source.front());
      held->second.push_back(std::move(l.source.front()));
      l.source.pop_front();
    }
    return out;
  }

  /// Removes from `consumer`'s in-flight list one item equal to each of `payloads` and, when
  /// `requeue`, appends it to the source queue; all at once. Returns how many were found.
  std::size_t source_settle(std::string_view queue, std::string_view consumer,
                            const std::vector<std::string_view>& payloads, bool requeue) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    if (!l) return 0;
    auto held = l->in_flight.find(consumer);
    if (held == l->in_flight.end()) return 0;
    std::size_t n = 0;
    for (std::string_view p : payloads) {
      auto it = std::find(held->second.begin(), held->second.end(), p);
      if (it == held->second.end()) continue;
      if (requeue) l->source.push_back(std::move(*it));
      held->second.erase(it);
      ++n;
    }
    if (held->second.empty()) l->in_flight.erase(held);
    return n;
  }

  /// Moves every job `consumer` holds to the tail of the source queue, in order; returns how
  /// many.
  std::size_t source_recover(std::string_view queue, std::string_view consumer) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    lists* l = find_lists(queue);
    if (!l) return 0;
    auto held = l->in_flight.find(consumer);
    if (held == l->in_flight.end()) return 0;
    const std::size_t n = held->second.size();
    for (std::string& p : held->second)
      l->source.push_back(std::move(p));
    l->in_flight.erase(held);
    return n;
  }

  /// The consumers that hold jobs from a source queue, sorted.
  std::vector<std::string> source_consumers(std::string_view queue) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::vector<std::string> out;
    if (const lists* l = find_lists(queue))
      for (const auto& [name, held] : l->in_flight)
        if (!held.empty()) out.push_back(name);
    return out;
  }

  /// Number of jobs `consumer` holds from a source queue (taken, not acked).
  std::size_t source_in_flight(std::string_view queue, std::string_view consumer) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    if (!l) return 0;
    auto held = l->in_flight.find(consumer);
    return held == l->in_flight.end() ? 0 : held->second.size();
  }

  /// Number of job payloads waiting in a source queue.
  std::size_t source_size(std::string_view queue) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    return l ? l->source.size() : 0;
  }

  /// Job payloads [start, start + count) of a source queue, oldest first (default: all).
  std::vector<std::string> source_range(
      std::string_view queue, std::size_t start = 0,
      std::size_t count = std::numeric_limits<std::size_t>::max()) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    return l ? slice(l->source, start, count) : std::vector<std::string>{};
  }

 private:
  struct lists {
    std::deque<std::string> dead;
    std::deque<std::string> corrupt;
    std::deque<std::string> source;
    std::map<std::string, std::deque<std::string>, std::less<>> in_flight;  // by consumer
  };
  struct state {
    std::mutex mutex;
    std::map<std::string, lists, std::less<>> queues;
    detail::counter_map counters;
    std::map<std::string, std::deque<std::pair<std::chrono::system_clock::time_point, std::string>>,
             std::less<>>
        audit;
  };

  static std::deque<std::string>& list_of(lists& l, ListKind kind) {
    return kind == ListKind::dead ? l.dead : l.corrupt;
  }
  static const std::deque<std::string>& list_of(const lists& l, ListKind kind) {
    return kind == ListKind::dead ? l.dead : l.corrupt;
  }
  static std::vector<std::string> slice(const std::deque<std::string>& list, std::size_t start,
                                        std::size_t count) {
    std::vector<std::string> out;
    if (start >= list.size()) return out;
    const std::size_t n = std::min(count, list.size() - start);
    out.reserve(n);
    const auto first = list.begin() + static_cast<std::ptrdiff_t>(start);
    out.assign(first, first + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  // The items before the cursor are the ones the replay kept, minus any another client
  // removed since (remove(), a trim, another replayer): if the last kept item is no longer
  // just before the cursor, move the cursor back to the first item not examined yet —
  // else that item would be skipped.
  static void find_place(const std::deque<std::string>& dead, replay_cursor& cursor) {
    if (cursor.offset == 0 || cursor.kept.size() != cursor.offset) return;  // a hand-made cursor
    if (dead.size() >= cursor.offset && cursor.kept.is_last(dead[cursor.offset - 1])) return;
    cursor.kept.begin_realign();
    for (std::size_t i = 0; i < cursor.offset && i < dead.size(); ++i)
      if (!cursor.kept.feed(dead[i])) break;
    cursor.offset = cursor.kept.finish_realign();
  }
  lists* find_lists(std::string_view queue) {
    auto it = state_->queues.find(queue);
    return it == state_->queues.end() ? nullptr : &it->second;
  }
  lists& lists_for(std::string_view queue) {
    auto it = state_->queues.find(queue);
    if (it == state_->queues.end()) it = state_->queues.emplace(std::string(queue), lists{}).first;
    return it->second;
  }

  std::unique_ptr<state> state_;
};

}  // namespace dlq

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::dlq defines DLQ_COMPILED_LIB): these
// instantiations are built once, in src/memory.cpp; a translation unit that includes this header
// instantiates none of them.
#if defined(DLQ_COMPILED_LIB)
#include "dlq/dead_letter_queue.hpp"
namespace dlq {
extern template class DeadLetterQueue<MemoryStorage>;
extern template class DeadLetterQueue<MemoryStorage&>;
}  // namespace dlq
#endif
