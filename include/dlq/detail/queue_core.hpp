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
#include <thread>
#include <utility>

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
  explicit queue_core(Options o) : options(std::move(o)) {
    if (options.replay_batch_items == 0) options.replay_batch_items = 1000;
    if (options.replay_batch_bytes == 0) options.replay_batch_bytes = std::size_t{1} << 20;
    if (options.max_conflicts == 0) options.max_conflicts = 100;
  }

  Options options;
  live_counters counters;

  // --- hooks, clock, sleep ---------------------------------------------------------------

  /// Calls Options::on_event; an exception it throws is counted and logged, never propagated.
  void emit(EventKind kind, std::string_view queue, std::string_view id,
            std::string_view detail) noexcept {
    if (!options.on_event) return;
    try {
      options.on_event(Event{kind, queue, id, detail});
    } catch (const std::exception& e) {
      counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
      log(LogLevel::warning,
          std::string("[dlq.hooks] on_event threw: ") + e.what() + "; the operation went on");
    } catch (...) {
      counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
      log(LogLevel::warning,
          "[dlq.hooks] on_event threw a non-std exception; the operation went on");
    }
  }

  /// Passes a message to Options::log; an exception it throws is counted, never propagated.
  void log(LogLevel level, const std::string& message) noexcept {
    if (!options.log) return;
    try {
      options.log(level, message);
    } catch (...) {
      counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  /// Options::clock, else the system clock.
  std::chrono::system_clock::time_point now() const {
    return options.clock ? options.clock() : std::chrono::system_clock::now();
  }

  /// Options::sleep, else std::this_thread::sleep_for.
  void wait(std::chrono::nanoseconds d) const {
    if (options.sleep) {
      options.sleep(d);
    } else {
      std::this_thread::sleep_for(d);
    }
  }

  /// Exponential back-off with a little jitter after the n-th conflict in a row.
  void back_off(std::size_t consecutive, std::size_t salt) const {
    const auto base = std::chrono::microseconds(50) * (1u << std::min<std::size_t>(consecutive, 9));
    const auto jitter = std::chrono::microseconds(fnv1a64(std::to_string(salt)) % 50);
    wait(std::min<std::chrono::microseconds>(base, std::chrono::milliseconds(20)) + jitter);
  }

  /// Counts a storage failure by type (conflicts are counted per conflicting batch).
  void count_failure(const storage_error& e) noexcept {
    constexpr auto r = std::memory_order_relaxed;
    if (dynamic_cast<const conflict_error*>(&e) != nullptr) return;
    if (dynamic_cast<const timeout_error*>(&e) != nullptr) {
      counters.timeout_errors.fetch_add(1, r);
    } else if (dynamic_cast<const connection_error*>(&e) != nullptr) {
      counters.connection_errors.fetch_add(1, r);
    } else if (dynamic_cast<const reply_error*>(&e) != nullptr) {
      counters.reply_errors.fetch_add(1, r);
    } else {
      counters.other_storage_errors.fetch_add(1, r);
    }
  }

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

  static void validate_queue(std::string_view queue, const char* where) {
    if (queue.empty())
      throw invalid_argument(
          message("queue", where, "the queue name is empty", "pass the name of the source queue"));
    if (queue.find('\0') != std::string_view::npos)
      throw invalid_argument(message("queue", where, "the queue name contains a NUL byte",
                                     "use a printable queue name"));
  }

  static void validate(const job_view& job, const char* where) {
    validate_queue(job.queue, where);
    const Failure& f = *job.failure;
    if (f.attempt < 0)
      throw invalid_argument(message("send", "send_to_dlq",
                                     "attempt is negative (" + std::to_string(f.attempt) + ")",
                                     "pass the number of attempts made (1 or more)"));
    if (!f.context.is_null() && !f.context.is_object())
      throw invalid_argument(message("send", "send_to_dlq",
                                     std::string("context is a JSON ") + f.context.type_name(),
                                     "pass a JSON object of fields, or leave it null"));
  }

  /// A fresh entry id (UUIDv7), or the job id where the storage is keyed by job id.
  static std::string make_id(const Failure& f, std::chrono::system_clock::time_point now,
                             bool keyed_by_job_id) {
    if (keyed_by_job_id && !f.job_id.empty()) return f.job_id;
    static id_generator generator;  // process-wide: ids increase across instances
    return generator.next(now);
  }

  /// The poison guard's key of a job: its job id, else a fingerprint of its payload.
  static std::string poison_key(const job_view& job) {
    if (!job.failure->job_id.empty()) return "job:" + job.failure->job_id;
    std::string key = "payload:";
    append_hex(key, fnv1a64(job.payload), 16);
    return key;
  }

  /// +1 to a poison count kept in this process (for storages without bump_count).
  std::int64_t bump_local_count(std::string_view queue, const std::string& key) {
    std::string id(queue);
    id.push_back('\0');
    id += key;
    std::lock_guard<std::mutex> lock(poison_mutex_);
    return poison_counts_.bump(id, options.poison_guard.remember_for);
  }

  /// The mark of an entry whose job has now been dead-lettered `count` times.
  poison_mark mark(std::int64_t count) const {
    return poison_mark{count, count > options.poison_guard.park_after};
  }

  /// The prepare step: the envelope of `job` with its id and poison mark, dead-lettered now.
  prepared_entry prepare(const job_view& job, std::chrono::system_clock::time_point now,
                         std::string id, poison_mark mark) const {
    prepared_entry p{job.queue, job.failure, std::move(id), mark, {}};
    const Failure& f = *job.failure;
    envelope_input in;
    in.queue = job.queue;
    in.payload = job.payload;
    in.failure = &f;
    in.worker = f.worker.empty() ? std::string_view(options.worker) : std::string_view(f.worker);
    in.id = p.id;
    in.time = now;
    in.dead_letter_count = mark.count;
    in.parked = mark.parked;
    write_envelope(p.envelope, in);
    return p;
  }

  /// After a successful push: counters and events. Never throws.
  void after_send(const prepared_entry& p) noexcept {
    counters.sent.fetch_add(1, std::memory_order_relaxed);
    emit(EventKind::dead_lettered, p.queue, p.id, p.failure->error);
    if (p.mark.parked) {
      counters.parked.fetch_add(1, std::memory_order_relaxed);
      emit(EventKind::parked, p.queue, p.id, std::to_string(p.mark.count));
    }
  }

 private:
  std::mutex poison_mutex_;
  counter_map poison_counts_;  // where the storage keeps no counts
};

}  // namespace dlq::detail
