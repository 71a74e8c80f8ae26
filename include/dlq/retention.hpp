// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file retention.hpp
/// Retention enforcement (dlq::Retention, in dlq/policies.hpp): what trim() reports, the
/// length and age sweeps, and dlq::TrimTimer, which trims a queue periodically.
///
/// A sweep walks a queue's dead list from its oldest end in bounded atomic batches (the
/// batched walk replay uses too, detail/batched_walk.hpp) and deletes (Action::discard) the
/// entries it selects: for max_length the oldest beyond the length, for max_age the old ones
/// up to the first newer entry (entries without a readable time are kept). Every eviction is
/// counted (Counters::evicted) and reported as an EventKind::evicted event with the entry's id.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlq/detail/batched_walk.hpp"
#include "dlq/detail/function_ref.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"

namespace dlq {

/// What trim() removed.
struct TrimReport {
  std::size_t evicted_for_length = 0;  ///< entries beyond Retention::max_length
  std::size_t evicted_for_age = 0;     ///< entries older than Retention::max_age
  std::size_t evicted() const noexcept { return evicted_for_length + evicted_for_age; }
};

namespace detail {

/// Decides, per entry from the oldest, whether a sweep evicts it, given how many entries the
/// sweep has selected so far (applied batches and the batch being decided). It may set `stop`
/// to end the sweep (the entry it is called with is then kept). It keeps no count of its own:
/// a batch redone after a conflict is decided anew from the same `selected`.
using evict_rule = function_ref<bool(std::string_view raw, std::size_t selected, bool& stop)>;

/// Counts and reports (one EventKind::evicted event per entry, with its id) the evictions of
/// `raws` (stored items, oldest first) from `queue` for `reason`.
inline void report_evictions(queue_core& core, std::string_view queue,
                             const std::vector<std::string>& raws, std::string_view reason) {
  core.counters.evicted.fetch_add(raws.size(), std::memory_order_relaxed);
  (reason == "max_age" ? core.counters.evicted_for_age : core.counters.evicted_for_length)
      .fetch_add(raws.size(), std::memory_order_relaxed);
  for (const auto& raw : raws) {
    envelope_view view;
    const std::string id = view_envelope(raw, view) ? entry_id(view, raw) : derived_id(raw);
    core.emit(EventKind::evicted, queue, id, reason);
  }
}

/// Logs that `n` entries of `queue` were evicted for `reason` (nothing when n is 0).
inline void log_evictions(queue_core& core, std::string_view queue, std::size_t n,
                          std::string_view reason) {
  if (n == 0) return;
  core.log(LogLevel::info, "[dlq.retention] queue '" + std::string(queue) + "': evicted " +
                               std::to_string(n) + " entries (" + std::string(reason) + ")");
}

/// Walks `list` from its oldest end, deleting the entries `evict` selects until it says
/// stop or the list ends; reports each eviction (`reason` is the event detail) and returns
/// how many there were. @throws conflict_error when the list keeps changing under it; what
/// the storage throws.
inline std::size_t sweep(queue_core& core, dead_list& list, std::string_view queue,
                         std::string_view reason, evict_rule evict) {
  batched_walk walk(core, list, 16);
  std::size_t evicted = 0;
  bool stop = false;
  std::vector<std::string> raws;  // evicted by the batch being decided
  bool step_stop = false;
  auto begin = [&] {
    raws.clear();
    step_stop = false;
  };
  auto decide = [&](std::string_view raw, Decision& d) {
    if (step_stop || !evict(raw, evicted + raws.size(), step_stop)) return;
    d.action = Action::discard;
    raws.emplace_back(raw);
  };
  auto give_up = [&](std::size_t) {
    return message("retention", "queue '" + std::string(queue) + "'",
                   "the list kept changing under the trim", "nothing was lost; run trim() again");
  };
  while (!stop) {
    if (walk.next(std::numeric_limits<std::size_t>::max(), Decider(decide), begin, give_up) == 0)
      break;
    stop = step_stop;
    evicted += raws.size();
    report_evictions(core, queue, raws, reason);
  }
  log_evictions(core, queue, evicted, reason);
  return evicted;
}

/// Evicts the oldest entries beyond r.max_length. `known_length` is the list length right
/// after a push (0 = unknown: read it). Runs after an entry is stored, so a storage failure
/// here is logged, never thrown at the sender: the next send or trim() retries.
inline std::size_t enforce_length(queue_core& core, dead_list& list, std::string_view queue,
                                  const Retention& r, std::size_t known_length) {
  try {
    const std::size_t length = known_length != 0 ? known_length : list.size();
    if (length <= r.max_length) return 0;
    const std::size_t excess = length - r.max_length;
    return sweep(core, list, queue, "max_length",
                 [excess](std::string_view, std::size_t selected, bool& stop) {
                   stop = selected >= excess;
                   return !stop;
                 });
  } catch (const storage_error& e) {
    core.log(LogLevel::error, std::string("[dlq.retention] queue '") + std::string(queue) +
                                  "': eviction failed: " + e.what() + "; trim() will retry");
    return 0;
  }
}

/// Evicts entries older than r.max_age (by Options::clock) from the oldest end, up to the
/// first newer one. @throws as sweep.
inline std::size_t enforce_age(queue_core& core, dead_list& list, std::string_view queue,
                               const Retention& r) {
  const auto cutoff = core.now() - r.max_age;
  return sweep(core, list, queue, "max_age",
               [&cutoff](std::string_view raw, std::size_t, bool& stop) {
                 envelope_view view;
                 if (!view_envelope(raw, view)) return false;  // unreadable: keep, go on
                 const auto t = iso_time::parse(string_field(view.dead_lettered_at));
                 if (!t) return false;  // no readable time: keep, go on
                 if (*t >= cutoff) {
                   stop = true;
                   return false;
                 }
                 return true;
               });
}

/// trim(queue): both sweeps as the queue's retention says.
inline TrimReport trim(queue_core& core, dead_list& list, std::string_view queue) {
  TrimReport report;
  const Retention& r = core.retention_of(queue);
  if (r.max_length != 0) report.evicted_for_length = enforce_length(core, list, queue, r, 0);
  if (r.max_age.count() > 0) report.evicted_for_age = enforce_age(core, list, queue, r);
  return report;
}

}  // namespace detail

/// Calls trim() on every queue of a DeadLetterQueue at a fixed interval on a background
/// thread, so that max_age is enforced even when no new failure arrives. Stops (and joins)
/// when destroyed. An error of one run is counted in the queue's counters, logged through
/// Options::log, and the next run tries again.
///
///     dlq::TrimTimer timer(dlq, std::chrono::minutes(1));
template <class Queue>
class TrimTimer {
 public:
  /// Starts trimming `queue` every `interval`; the first run is one interval from now.
  /// `queue` must outlive the timer.
  TrimTimer(Queue& queue, std::chrono::milliseconds interval)
      : queue_(queue), interval_(interval), thread_([this] { run(); }) {}

  TrimTimer(const TrimTimer&) = delete;
  TrimTimer& operator=(const TrimTimer&) = delete;

  ~TrimTimer() { stop(); }

  /// Stops the timer and waits for a run in progress to finish. Idempotent.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Number of completed runs (for tests and health checks).
  std::size_t runs() const noexcept { return runs_.load(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      try {
        (void)queue_.trim();
      } catch (const std::exception& e) {  // counted by the queue; the next run retries
        if (const auto& log = queue_.options().log) {
          try {
            log(LogLevel::error, std::string("[dlq.retention] trim timer: ") + e.what() +
                                     "; retrying at the next interval");
          } catch (...) {
          }
        }
      }
      ++runs_;
      lock.lock();
    }
  }

  Queue& queue_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<std::size_t> runs_{0};
  std::thread thread_;
};

template <class Queue>
TrimTimer(Queue&, std::chrono::milliseconds) -> TrimTimer<Queue>;

}  // namespace dlq
