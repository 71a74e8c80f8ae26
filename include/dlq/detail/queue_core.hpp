// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The part of a DeadLetterQueue that does not depend on the storage type: the options, the
// counters, the hooks (events, log), the clock and the sleep, retention lookup, validation
// and the envelope a send prepares. The replay and retention engines (dlq/replay.hpp,
// dlq/retention.hpp) run over it and a type-erased dead list (detail/dead_list.hpp), so they
// are compiled once, whatever the storage.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "dlq/detail/compiled.hpp"
#include "dlq/detail/counter_map.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage.hpp"

namespace dlq::detail {

/// What the poison guard decided for a new entry.
struct poison_mark {
  std::int64_t count = 0;  ///< 0 = guard off
  bool parked = false;
};

/// One job to send, as views: what send_to_dlq and send_batch both pass to prepare().
struct job_view {
  std::string_view queue;
  std::string_view payload;
  const Failure* failure = nullptr;
};

/// One envelope ready to store: the send path's "prepare" step produces it, the push takes
/// record(), and after_send() reports it.
struct prepared_entry {
  std::string_view queue;
  const Failure* failure = nullptr;
  std::string id;
  poison_mark mark;
  std::string envelope;

  Record record() const { return Record{queue, id, failure->job_id, envelope}; }
};

/// Options, counters, hooks, clock and sleep of one queue. Not movable (atomics, a mutex):
/// the queue holds it by pointer. Safe to use from several threads at once.
class queue_core {
 public:
  explicit queue_core(Options o);

  Options options;
  live_counters counters;

  // --- hooks, clock, sleep ---------------------------------------------------------------

  /// Calls Options::on_event; an exception it throws is counted and logged, never propagated.
  void emit(EventKind kind, std::string_view queue, std::string_view id,
            std::string_view detail) noexcept;

  /// Passes a message to Options::log; an exception it throws is counted, never propagated.
  void log(LogLevel level, const std::string& message) noexcept;

  /// Options::clock, else the system clock.
  std::chrono::system_clock::time_point now() const {
    return options.clock ? options.clock() : std::chrono::system_clock::now();
  }

  /// Options::sleep, else std::this_thread::sleep_for.
  void wait(std::chrono::nanoseconds d) const;

  /// Exponential back-off with a little jitter after the n-th conflict in a row.
  void back_off(std::size_t consecutive, std::size_t salt) const;

  /// Counts a storage failure by type (conflicts are counted per conflicting batch).
  void count_failure(const storage_error& e) noexcept;

  // --- retention -------------------------------------------------------------------------

  /// The retention of `queue`: Options::retention_for's entry, else Options::retention.
  const Retention& retention_of(std::string_view queue) const {
    const auto it = options.retention_for.find(queue);
    return it == options.retention_for.end() ? options.retention : it->second;
  }

  /// Counts, logs and throws the queue_full_error of Overflow::reject.
  [[noreturn]] void reject(std::string_view queue, const Retention& r) {
    counters.rejected.fetch_add(1, std::memory_order_relaxed);
    const std::string text =
        message("retention", "queue '" + std::string(queue) + "'",
                "the dead-letter queue is full (max_length " + std::to_string(r.max_length) +
                    ", overflow = reject); the entry was not stored",
                "replay or purge entries, or raise Retention::max_length");
    log(LogLevel::warning, text);
    throw queue_full_error(text);
  }

  // --- the send path ---------------------------------------------------------------------

  static void validate_queue(std::string_view queue, const char* where);

  static void validate(const job_view& job, const char* where);
  /// Whether `value` is, or holds at any depth, a discarded value (see validate).
  static bool holds_discarded(const nlohmann::json& value);

  /// A fresh entry id (UUIDv7), or the job id where the storage is keyed by job id.
  static std::string make_id(const Failure& f, std::chrono::system_clock::time_point now,
                             bool keyed_by_job_id);

  /// The poison guard's key of a job: its job id, else a fingerprint of its payload.
  static std::string poison_key(const job_view& job);

  /// +1 to a poison count kept in this process (for storages without bump_count).
  std::int64_t bump_local_count(std::string_view queue, const std::string& key);

  /// The mark of an entry whose job has now been dead-lettered `count` times.
  poison_mark mark(std::int64_t count) const {
    return poison_mark{count, count > options.poison_guard.park_after};
  }

  /// The prepare step: the envelope of `job` with its id and poison mark, dead-lettered now.
  prepared_entry prepare(const job_view& job, std::chrono::system_clock::time_point now,
                         std::string id, poison_mark mark) const;

  /// After a successful push: counters and events. Never throws.
  void after_send(const prepared_entry& p) noexcept {
    after_send(p.queue, p.id, p.failure->error, p.mark);
  }

  /// after_send() from the parts of an entry (`error`: its Failure::error).
  void after_send(std::string_view queue, std::string_view id, std::string_view error,
                  poison_mark mark) noexcept;

 private:
  std::mutex poison_mutex_;
  counter_map poison_counts_;  // where the storage keeps no counts
};

}  // namespace dlq::detail

#if defined(DLQ_HEADER_ONLY)
#include "dlq/detail/queue_core-inl.hpp"
#endif
