// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/dead_letter_queue_send.hpp
/// DeadLetterQueue's send path (send_to_dlq, send_batch), the same for one job and for a
/// batch: validate every job; check that the jobs fit (Overflow::reject); prepare each
/// envelope (id, poison count, JSON); push each queue's jobs under its retention —
/// Overflow::reject stores all of them or none, Overflow::evict_oldest evicts the oldest
/// beyond max_length atomically with the push where the storage can (push_capped: every
/// shipped storage), and every eviction is reported with its id; count and report every
/// entry stored. Included by dlq/dead_letter_queue.hpp; include that header, not this one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/dead_letter_queue.hpp"

namespace dlq {

template <class Storage>
DLQ_MEMBER_INLINE std::string DeadLetterQueue<Storage>::send_to_dlq(std::string_view queue,
                                                                    std::string_view payload,
                                                                    const Failure& failure) {
  const detail::job_view job{queue, payload, &failure};
  return std::move(send(&job, 1, "send_to_dlq").front());
}

template <class Storage>
DLQ_MEMBER_INLINE std::string DeadLetterQueue<Storage>::send_to_dlq(std::string_view queue,
                                                                    std::string_view payload,
                                                                    std::string error,
                                                                    std::int64_t attempt,
                                                                    std::string worker) {
  Failure f;
  f.error = std::move(error);
  f.attempt = attempt;
  f.worker = std::move(worker);
  return send_to_dlq(queue, payload, f);
}

template <class Storage>
DLQ_MEMBER_INLINE std::vector<std::string> DeadLetterQueue<Storage>::send_batch(
    const std::vector<FailedJob>& jobs) {
  std::vector<detail::job_view> views;
  views.reserve(jobs.size());
  for (const auto& job : jobs)
    views.push_back(detail::job_view{job.queue, job.payload, &job.failure});
  return send(views.data(), views.size(), "send_batch");
}

// The send path (see the file comment).
template <class Storage>
DLQ_MEMBER_INLINE std::vector<std::string> DeadLetterQueue<Storage>::send(
    const detail::job_view* jobs, std::size_t n, const char* where) {
  for (std::size_t i = 0; i < n; ++i) {
    detail::queue_core::validate(jobs[i], where);
    detail::check_payload(jobs[i].queue, jobs[i].payload,
                          core_->options.payloads == Payloads::json_only);
  }
  if (n == 0) return {};
  return guarded([&] {
    std::vector<queue_part> parts;
    for (std::size_t i = 0; i < n; ++i) {
      auto it = std::find_if(parts.begin(), parts.end(),
                             [&](const queue_part& p) { return p.queue == jobs[i].queue; });
      if (it == parts.end()) it = parts.insert(parts.end(), queue_part{jobs[i].queue, {}});
      it->jobs.push_back(i);
    }
    for (const auto& part : parts)
      admit(part, parts.size() > 1, n == 1 ? &jobs[0] : nullptr);
    const auto now = core_->now();
    std::vector<detail::prepared_entry> entries;
    entries.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      entries.push_back(prepare(jobs[i], now));
    if (parts.size() > 1 && !any_retention(parts)) {
      push_all(entries);  // one storage call for the whole batch
    } else {
      for (const auto& part : parts)
        push_part(part, entries);
    }
    std::vector<std::string> ids;
    ids.reserve(n);
    for (auto& e : entries) {
      core_->after_send(e);
      ids.push_back(std::move(e.id));
    }
    return ids;
  });
}

template <class Storage>
DLQ_MEMBER_INLINE bool DeadLetterQueue<Storage>::any_retention(
    const std::vector<queue_part>& parts) const {
  return std::any_of(parts.begin(), parts.end(), [this](const queue_part& p) {
    return core_->retention_of(p.queue).max_length != 0;
  });
}

// Retention before the push (Overflow::reject): a part that does not fit refuses the whole
// send before anything is stored. Where the storage bounds the push atomically, the push
// decides (this check runs only when the send spans several queues, so that one full queue
// refuses the whole batch) — except that a single job (`single`) is also checked here when
// the poison guard is on, so that a send refused by a full queue does not bump the job's
// count (prepare bumps it before the push). A job already stored under its job id
// (keyed_by_job_id) is a replacement, not growth: the push admits it.
template <class Storage>
DLQ_MEMBER_INLINE void DeadLetterQueue<Storage>::admit(const queue_part& part, bool several_queues,
                                                       const detail::job_view* single) {
  const Retention& r = core_->retention_of(part.queue);
  if (r.max_length == 0 || r.overflow != Overflow::reject) return;
  if (!several_queues && bounded_atomically(part.jobs.size())) {
    if (single == nullptr || core_->options.poison_guard.park_after <= 0) return;
    if (storage_.size(part.queue, ListKind::dead) < r.max_length) return;
    if constexpr (detail::keyed_by_job_id<storage_type>::value) {
      const std::string& job_id = single->failure->job_id;
      if (!job_id.empty() && find_raw(part.queue, ListKind::dead, job_id)) return;
    }
    core_->reject(part.queue, r);
  }
  if (storage_.size(part.queue, ListKind::dead) + part.jobs.size() > r.max_length)
    core_->reject(part.queue, r);
}

// The prepare step: id, poison count and envelope of one job.
template <class Storage>
DLQ_MEMBER_INLINE detail::prepared_entry DeadLetterQueue<Storage>::prepare(
    const detail::job_view& job, std::chrono::system_clock::time_point now) {
  std::string id =
      detail::queue_core::make_id(*job.failure, now, detail::keyed_by_job_id<storage_type>::value);
  return core_->prepare(job, now, std::move(id), count_poison(job));
}

template <class Storage>
DLQ_MEMBER_INLINE detail::poison_mark DeadLetterQueue<Storage>::count_poison(
    const detail::job_view& job) {
  const PoisonGuard& g = core_->options.poison_guard;
  if (g.park_after <= 0) return {};
  const std::string key = detail::queue_core::poison_key(job);
  if constexpr (detail::has_bump_count<storage_type>::value) {
    return core_->mark(
        static_cast<std::int64_t>(storage_.bump_count(job.queue, key, g.remember_for)));
  } else {
    return core_->mark(core_->bump_local_count(job.queue, key));
  }
}

template <class Storage>
DLQ_MEMBER_INLINE void DeadLetterQueue<Storage>::push_all(
    const std::vector<detail::prepared_entry>& entries) {
  std::vector<Record> records;
  records.reserve(entries.size());
  for (const auto& e : entries)
    records.push_back(e.record());
  storage_.push_many(records);
}

// Pushes one queue's part under the queue's retention: Overflow::reject pushes all or
// nothing; Overflow::evict_oldest evicts the oldest beyond max_length — atomically with the
// push where the storage has push_capped, else right after it (a sweep).
template <class Storage>
DLQ_MEMBER_INLINE void DeadLetterQueue<Storage>::push_part(
    const queue_part& part, const std::vector<detail::prepared_entry>& entries) {
  std::vector<Record> records;
  records.reserve(part.jobs.size());
  for (std::size_t i : part.jobs)
    records.push_back(entries[i].record());
  const Retention& r = core_->retention_of(part.queue);
  if (r.max_length != 0 && r.overflow == Overflow::reject) {
    bool stored = true;
    if constexpr (detail::has_push_bounded_many<storage_type>::value) {
      stored = storage_.push_bounded(records, r.max_length);
    } else if constexpr (detail::has_push_bounded<storage_type>::value) {
      if (records.size() == 1) {
        stored = storage_.push_bounded(records.front(), r.max_length);
      } else {
        storage_.push_many(records);  // checked by admit(): approximate under races
      }
    } else {
      push_records(records, false);  // checked by admit(): approximate under races
    }
    if (!stored) core_->reject(part.queue, r);
    return;
  }
  if (r.max_length != 0) {  // Overflow::evict_oldest
    if constexpr (detail::has_push_capped<storage_type>::value) {
      const std::vector<std::string> evicted = storage_.push_capped(records, r.max_length);
      detail::report_evictions(*core_, part.queue, evicted, "max_length");
      detail::log_evictions(*core_, part.queue, evicted.size(), "max_length");
    } else {
      const std::size_t length = push_records(records);
      detail::storage_dead_list<storage_type> list(storage_, part.queue);
      detail::enforce_length_after_send(*core_, list, part.queue, r, length);
    }
    return;
  }
  push_records(records, false);
}

// push (one record) or push_many; returns the dead list's new length when the storage
// says it (push returning a length), else 0. Without `need_length`, a storage whose push
// reads the length at a cost (detail::push_counts_list: a count of the list on SQLite and
// PostgreSQL, linear in its length) gets push_many.
template <class Storage>
DLQ_MEMBER_INLINE std::size_t DeadLetterQueue<Storage>::push_records(
    const std::vector<Record>& records, bool need_length) {
  if (records.size() != 1 || (!need_length && detail::push_counts_list<storage_type>::value)) {
    storage_.push_many(records);
    return 0;
  }
  if constexpr (detail::push_returns_size<storage_type>::value) {
    return static_cast<std::size_t>(storage_.push(records.front()));
  } else {
    storage_.push(records.front());
    return 0;
  }
}

}  // namespace dlq
