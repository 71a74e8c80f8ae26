// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/async_batches.hpp
/// Internal to dlq::asio: send_batch on an asynchronous storage — every job validated, each
/// counted under the poison guard (pipelined, in the jobs' order), each queue's jobs pushed
/// as one command (all pipelined), and the results joined. Not part of the API.
#pragma once

#include <asio/dispatch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/async_queue.hpp"
#include "dlq/asio/detail/async_sends.hpp"
#include "dlq/asio/detail/send_steps.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/retention.hpp"

namespace dlq::asio::detail {

template <class Storage>
void async_queue<Storage>::send(std::vector<FailedJob> jobs, const char* where, send_done done) {
  ::asio::dispatch(executor, [self = this->shared_from_this(), jobs = std::move(jobs), where,
                              done = std::move(done)]() mutable {
    self->send_async(std::move(jobs), where, std::move(done));
  });
}

// The send path of a batch: validate every job; with the poison guard on, count each job
// (its count pipelined, all awaited); prepare each envelope with the blocking front end's
// queue core; push each queue's jobs as one command (all pipelined) under the queue's
// retention; count and report every entry stored.
template <class Storage>
struct async_queue<Storage>::send_join {
  std::vector<FailedJob> jobs;
  std::vector<dlq::detail::prepared_entry> entries;
  // Each queue's jobs, when the batch spans several queues (else all go in one push).
  std::vector<std::pair<std::string_view, std::vector<std::size_t>>> parts;
  std::vector<char> stored;  // per entry
  std::size_t remaining = 0;
  std::exception_ptr error;
  send_done done;
  const char* where = "";
  std::chrono::system_clock::time_point now;
  std::vector<dlq::detail::poison_mark> marks;  // poison guard: per job
};

// Groups a batch over several queues into each queue's jobs; @throws invalid_argument when
// one of them has max_length with Overflow::reject (the batch would not be all or nothing).
template <class Parts>
void split_by_queue(const std::vector<FailedJob>& js, Parts& parts,
                    const dlq::detail::queue_core& core, const char* where) {
  for (std::size_t i = 0; i < js.size(); ++i) {
    const std::string_view q = js[i].queue;
    auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == q; });
    if (it == parts.end()) {
      parts.emplace_back(q, std::vector<std::size_t>{});
      it = parts.end() - 1;
    }
    it->second.push_back(i);
  }
  for (const auto& p : parts) {
    const Retention& r = core.retention_of(p.first);
    if (r.max_length != 0 && r.overflow == Overflow::reject)
      throw invalid_argument(
          dlq::detail::message("asio", where,
                               "a batch over several queues where queue '" + std::string(p.first) +
                                   "' has max_length with Overflow::reject",
                               "send one queue's jobs per batch (each is then all or nothing)"));
  }
}

template <class Storage>
void async_queue<Storage>::send_async(std::vector<FailedJob> jobs, const char* where,
                                      send_done done) {
  dlq::detail::queue_core& core = core_;
  std::shared_ptr<send_join> join;
  try {
    for (const FailedJob& j : jobs) {
      const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
      dlq::detail::queue_core::validate(v, where);
      dlq::detail::check_payload(j.queue, j.payload, core.options.payloads == Payloads::json_only);
    }
    if (jobs.empty()) return done(nullptr, {});
    join = std::make_shared<send_join>();
    join->jobs = std::move(jobs);
    const std::vector<FailedJob>& js = join->jobs;
    bool one_queue = true;
    for (std::size_t i = 1; i < js.size() && one_queue; ++i)
      one_queue = js[i].queue == js.front().queue;
    if (!one_queue) split_by_queue(js, join->parts, core, where);
    join->now = core.now();
  } catch (...) {
    return done(std::current_exception(), {});
  }
  join->done = std::move(done);
  join->where = where;
  if (core.options.poison_guard.park_after > 0) return count_batch(std::move(join));
  push_batch(std::move(join));
}

// send_batch under the poison guard: each job's count, pipelined in the jobs' order (the
// blocking send_batch counts them one after the other, in the same order); a batch of
// one job is first checked against a full queue, as send_to_dlq. The first failure
// fails the batch before anything is pushed.
template <class Storage>
void async_queue<Storage>::count_batch(std::shared_ptr<send_join> join) {
  auto self = this->shared_from_this();
  auto count_all = [self, join] {
    join->marks.assign(join->jobs.size(), {});
    join->remaining = join->jobs.size();
    for (std::size_t i = 0; i < join->jobs.size(); ++i) {
      const FailedJob& j = join->jobs[i];
      const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
      self->storage_.bump_count(j.queue, dlq::detail::queue_core::poison_key(v),
                                self->core_.options.poison_guard.remember_for,
                                [self, join, i](std::exception_ptr e, std::int64_t count) {
                                  if (e && !join->error) {
                                    self->count_failure(e);
                                    join->error = count_failed(e, join->where);
                                  } else if (!e) {
                                    join->marks[i] = self->core_.mark(count);
                                  }
                                  if (--join->remaining != 0) return;
                                  if (join->error) return join->done(join->error, {});
                                  self->push_batch(join);
                                });
    }
  };
  const std::string queue = join->jobs.front().queue;
  if (join->jobs.size() == 1) {
    return admit_counted(queue, std::move(count_all),
                         [join](std::exception_ptr e) { join->done(e, {}); });
  }
  // Several jobs (one queue, under Overflow::reject: a batch over several queues is
  // refused there): counted whatever the length, as the blocking send_batch — but after
  // one LLEN too, its answer unused, so that the batch keeps its place among the single
  // sends' LLEN, count and push (each step pipelined in issue order): without it, a batch
  // issued after a send was stored before it.
  const Retention& r = core_.retention_of(queue);
  if (r.max_length == 0 || r.overflow != Overflow::reject) return count_all();
  storage_.size(
      queue, [count_all = std::move(count_all)](std::exception_ptr, std::size_t) { count_all(); });
}

// Prepares every envelope (with its poison mark, if counted) and pushes each queue's
// part.
template <class Storage>
void async_queue<Storage>::push_batch(std::shared_ptr<send_join> join) {
  dlq::detail::queue_core& core = core_;
  try {
    const std::vector<FailedJob>& js = join->jobs;
    join->entries.reserve(js.size());
    for (std::size_t i = 0; i < js.size(); ++i) {
      const FailedJob& j = js[i];
      const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
      join->entries.push_back(
          core.prepare(v, join->now, dlq::detail::queue_core::make_id(j.failure, join->now, false),
                       join->marks.empty() ? dlq::detail::poison_mark{} : join->marks[i]));
    }
  } catch (...) {
    return join->done(std::current_exception(), {});
  }
  join->stored.assign(join->jobs.size(), 0);
  join->remaining = join->parts.empty() ? 1 : join->parts.size();
  const std::size_t n_parts = join->remaining;
  for (std::size_t part = 0; part < n_parts; ++part) {
    std::vector<std::string> envelopes;
    std::string_view queue;
    if (join->parts.empty()) {
      queue = join->jobs.front().queue;
      envelopes.reserve(join->entries.size());
      for (auto& e : join->entries)
        envelopes.push_back(std::move(e.envelope));  // not needed after
    } else {
      queue = join->parts[part].first;
      envelopes.reserve(join->parts[part].second.size());
      for (std::size_t i : join->parts[part].second)
        envelopes.push_back(std::move(join->entries[i].envelope));
    }
    const Retention& r = core.retention_of(queue);
    storage_.push(
        queue, std::move(envelopes), r.max_length, r.overflow == Overflow::evict_oldest,
        [self = this->shared_from_this(), join, part](std::exception_ptr e, PushResult result) {
          self->pushed(*join, part, e, std::move(result));
        });
  }
}

// One queue's push of a send completed.
template <class Storage>
void async_queue<Storage>::pushed(send_join& join, std::size_t part, std::exception_ptr e,
                                  PushResult result) {
  dlq::detail::queue_core& c = core_;
  const std::string_view queue =
      join.parts.empty() ? std::string_view(join.jobs.front().queue) : join.parts[part].first;
  e = settle_push(queue, e, result);
  if (e) {
    if (!join.error) join.error = e;
  } else if (join.parts.empty()) {
    std::fill(join.stored.begin(), join.stored.end(), 1);
  } else {
    for (std::size_t i : join.parts[part].second)
      join.stored[i] = 1;
  }
  if (--join.remaining != 0) return;
  std::vector<std::string> ids;
  ids.reserve(join.entries.size());
  for (std::size_t i = 0; i < join.entries.size(); ++i) {
    if (join.stored[i] != 0) c.after_send(join.entries[i]);
    ids.push_back(std::move(join.entries[i].id));
  }
  if (join.error) return join.done(join.error, {});
  join.done(nullptr, std::move(ids));
}

}  // namespace dlq::asio::detail
