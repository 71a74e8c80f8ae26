// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/queue_core-inl.hpp
/// The definitions of queue_core.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by queue_core.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include <thread>

#include "dlq/detail/queue_core.hpp"
#include "dlq/queue_names.hpp"

namespace dlq::detail {

DLQ_INLINE queue_core::queue_core(Options o) : options(std::move(o)) {
  if (options.replay_batch_items == 0) options.replay_batch_items = 1000;
  if (options.replay_batch_bytes == 0) options.replay_batch_bytes = std::size_t{1} << 20;
  if (options.max_conflicts == 0) options.max_conflicts = 100;
}

DLQ_INLINE void queue_core::emit(EventKind kind, std::string_view queue, std::string_view id,
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
    log(LogLevel::warning, "[dlq.hooks] on_event threw a non-std exception; the operation went on");
  }
}

DLQ_INLINE void queue_core::log(LogLevel level, const std::string& message) noexcept {
  if (!options.log) return;
  try {
    options.log(level, message);
  } catch (...) {
    counters.hook_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

DLQ_INLINE void queue_core::wait(std::chrono::nanoseconds d) const {
  if (options.sleep) {
    options.sleep(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

DLQ_INLINE void queue_core::back_off(std::size_t consecutive, std::size_t salt) const {
  const auto base = std::chrono::microseconds(50) * (1u << std::min<std::size_t>(consecutive, 9));
  const auto jitter = std::chrono::microseconds(fnv1a64(std::to_string(salt)) % 50);
  wait(std::min<std::chrono::microseconds>(base, std::chrono::milliseconds(20)) + jitter);
}

DLQ_INLINE void queue_core::count_failure(const storage_error& e) noexcept {
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

DLQ_INLINE void queue_core::validate_queue(std::string_view queue, const char* where) {
  detail::check_queue_name("queue", where, queue);  // the rule of dlq/queue_names.hpp
}

DLQ_INLINE void queue_core::validate(const job_view& job, const char* where) {
  validate_queue(job.queue, where);
  const Failure& f = *job.failure;
  if (f.attempt < 0)
    throw invalid_argument(message("send", "send_to_dlq",
                                   "attempt is negative (" + std::to_string(f.attempt) + ")",
                                   "pass the number of attempts made (1 or more)"));
  if (f.job_id.size() > max_job_id_bytes)  // PostgreSQL's index bound (dlq/entry.hpp)
    throw invalid_argument(message("send", where,
                                   "the job id is " + std::to_string(f.job_id.size()) +
                                       " bytes, longer than the " +
                                       std::to_string(max_job_id_bytes) + " dlq accepts",
                                   "use a shorter job id (a hash of a longer one)"));
  if (!f.context.is_null() && !f.context.is_object())
    throw invalid_argument(message("send", "send_to_dlq",
                                   std::string("context is a JSON ") + f.context.type_name(),
                                   "pass a JSON object of fields, or leave it null"));
  // A discarded value (a failed parse with allow_exceptions = false) below the top level would
  // be written as `<discarded>`, which no JSON reader reads: the stored entry would be
  // unreadable. Refused here, before anything is written.
  if (f.context.is_object() && holds_discarded(f.context))
    throw invalid_argument(message("send", "send_to_dlq",
                                   "context holds a discarded JSON value (the result of a "
                                   "failed nlohmann::json::parse(..., nullptr, false))",
                                   "check each parse's is_discarded() before putting it "
                                   "into the context"));
}

DLQ_INLINE bool queue_core::holds_discarded(const nlohmann::json& value) {
  if (value.is_discarded()) return true;
  if (const auto* object = value.get_ptr<const nlohmann::json::object_t*>()) {
    for (const auto& member : *object)
      if (holds_discarded(member.second)) return true;
  } else if (const auto* array = value.get_ptr<const nlohmann::json::array_t*>()) {
    for (const auto& element : *array)
      if (holds_discarded(element)) return true;
  }
  return false;
}

DLQ_INLINE std::string queue_core::make_id(const Failure& f,
                                           std::chrono::system_clock::time_point now,
                                           bool keyed_by_job_id) {
  if (keyed_by_job_id && !f.job_id.empty()) return f.job_id;
  static id_generator generator;  // process-wide: ids increase across instances
  return generator.next(now);
}

DLQ_INLINE std::string queue_core::poison_key(const job_view& job) {
  if (!job.failure->job_id.empty()) return "job:" + job.failure->job_id;
  std::string key = "payload:";
  append_hex(key, fnv1a64(job.payload), 16);
  return key;
}

DLQ_INLINE std::int64_t queue_core::bump_local_count(std::string_view queue,
                                                     const std::string& key) {
  std::string id(queue);
  id.push_back('\0');
  id += key;
  std::lock_guard<std::mutex> lock(poison_mutex_);
  return poison_counts_.bump(id, options.poison_guard.remember_for);
}

DLQ_INLINE prepared_entry queue_core::prepare(const job_view& job,
                                              std::chrono::system_clock::time_point now,
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

DLQ_INLINE void queue_core::after_send(std::string_view queue, std::string_view id,
                                       std::string_view error, poison_mark mark) noexcept {
  counters.sent.fetch_add(1, std::memory_order_relaxed);
  emit(EventKind::dead_lettered, queue, id, error);
  if (mark.parked) {
    counters.parked.fetch_add(1, std::memory_order_relaxed);
    emit(EventKind::parked, queue, id, std::to_string(mark.count));
  }
}

}  // namespace dlq::detail
