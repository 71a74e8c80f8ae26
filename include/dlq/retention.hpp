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
#include "dlq/detail/compiled.hpp"
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
void report_evictions(queue_core& core, std::string_view queue,
                      const std::vector<std::string>& raws, std::string_view reason);

/// Logs that `n` entries of `queue` were evicted for `reason` (nothing when n is 0).
void log_evictions(queue_core& core, std::string_view queue, std::size_t n,
                   std::string_view reason);

/// Walks `list` from its oldest end, deleting the entries `evict` selects until it says
/// stop or the list ends; reports each eviction (`reason` is the event detail) and returns
/// how many there were. @throws conflict_error when the list keeps changing under it; what
/// the storage throws.
std::size_t sweep(queue_core& core, dead_list& list, std::string_view queue,
                  std::string_view reason, evict_rule evict);

/// Evicts the oldest entries beyond r.max_length. `known_length` is the list length right
/// after a push (0 = unknown: read it). @throws as sweep (trim() reports it to its caller).
std::size_t enforce_length(queue_core& core, dead_list& list, std::string_view queue,
                           const Retention& r, std::size_t known_length);

/// enforce_length() after a send: the entry is already stored, so a storage failure here is
/// logged, never thrown at the sender; the next send or trim() retries.
void enforce_length_after_send(queue_core& core, dead_list& list, std::string_view queue,
                               const Retention& r, std::size_t known_length);

/// Evicts entries older than r.max_age (by Options::clock) from the oldest end, up to the
/// first newer one. @throws as sweep.
std::size_t enforce_age(queue_core& core, dead_list& list, std::string_view queue,
                        const Retention& r);

/// trim(queue): both sweeps as the queue's retention says.
TrimReport trim(queue_core& core, dead_list& list, std::string_view queue);

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

#if defined(DLQ_HEADER_ONLY)
#include "dlq/retention-inl.hpp"
#endif
