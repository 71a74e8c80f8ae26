// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/async_sends.hpp
/// Internal to dlq::asio: send_to_dlq on an asynchronous storage — the envelope built in the
/// initiating call, the poison guard's length check and count, the push, and the blocking
/// front end's steps after every push (settle_push). Not part of the API.
#pragma once

#include <asio/dispatch.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "dlq/asio/detail/async_queue.hpp"
#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/send_steps.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/policies.hpp"
#include "dlq/retention.hpp"

namespace dlq::asio::detail {

template <class Storage>
one_send async_queue<Storage>::prepare_one(std::string_view queue, std::string_view payload,
                                           const Failure& f) const {
  one_send s;
  try {
    const dlq::detail::queue_core& core = core_;
    const dlq::detail::job_view v{queue, payload, &f};
    dlq::detail::queue_core::validate(v, "send_to_dlq");
    dlq::detail::check_payload(queue, payload, core.options.payloads == Payloads::json_only);
    const auto now = core.now();
    s.queue.assign(queue.data(), queue.size());
    if (core.options.poison_guard.park_after > 0) {
      // The envelope holds the count: it is built once the count is known.
      s.id = dlq::detail::queue_core::make_id(f, now, false);
      s.job = std::make_unique<counted_job>(counted_job{std::string(payload), f, now});
      return s;
    }
    dlq::detail::prepared_entry p =
        core.prepare(v, now, dlq::detail::queue_core::make_id(f, now, false), {});
    s.id = std::move(p.id);
    s.envelope = std::move(p.envelope);
    if (core.options.on_event) s.error = f.error;
  } catch (...) {
    s.refused = std::current_exception();
  }
  return s;
}

template <class Storage>
template <class Handler>
void async_queue<Storage>::send_one(one_send s, Handler handler) {
  if (s.refused) return post_result(executor, std::move(handler), s.refused, std::string());
  ::asio::dispatch(
      executor, [self = this->shared_from_this(), s = std::move(s),
                 h = std::move(handler)]() mutable { self->push_one(std::move(s), std::move(h)); });
}

// On the executor: the one push, then the blocking front end's after-send steps.
template <class Storage>
template <class Handler>
struct async_queue<Storage>::one_pushed {
  std::shared_ptr<async_queue> self;
  std::string queue, id, error;
  dlq::detail::poison_mark mark;
  Handler handler;

  void operator()(std::exception_ptr e, PushResult result) {
    e = self->settle_push(queue, e, result);
    if (e) return dispatch_result(self->executor, std::move(handler), e, std::string());
    self->core_.after_send(queue, id, error, mark);
    dispatch_result(self->executor, std::move(handler), nullptr, std::move(id));
  }
};

// A send_to_dlq under the poison guard, from its length check to its push.
template <class Storage>
template <class Handler>
struct async_queue<Storage>::counting_one {
  one_send s;
  Handler handler;
};

// The blocking front end's admit() for one job under the poison guard: under
// Overflow::reject a full queue refuses the send before it is counted (one LLEN);
// `go()` runs the count when the queue has room (or no such retention), else
// `refused(e)` completes the send.
template <class Storage>
template <class Go, class Refused>
void async_queue<Storage>::admit_counted(const std::string& queue, Go go, Refused refused) {
  const Retention& r = core_.retention_of(queue);
  if (r.max_length == 0 || r.overflow != Overflow::reject) return go();
  auto self = this->shared_from_this();
  storage_.size(queue, [self, queue, go = std::move(go), refused = std::move(refused)](
                           std::exception_ptr e, std::size_t length) mutable {
    self->count_failure(e);
    const Retention& limit = self->core_.retention_of(queue);
    if (!e && length >= limit.max_length) {
      try {
        self->core_.reject(queue, limit);
      } catch (...) {
        e = std::current_exception();
      }
    }
    if (e) return refused(e);
    go();
  });
}

template <class Storage>
template <class Handler>
void async_queue<Storage>::push_one(one_send s, Handler handler) {
  if (s.job) return count_one(std::move(s), std::move(handler));
  push_built(std::move(s), std::move(handler), {});
}

// send_to_dlq under the poison guard: the length check (Overflow::reject), the count,
// then the envelope with its mark and the push.
template <class Storage>
template <class Handler>
void async_queue<Storage>::count_one(one_send s, Handler handler) {
  auto c = std::make_shared<counting_one<Handler>>(
      counting_one<Handler>{std::move(s), std::move(handler)});
  auto self = this->shared_from_this();
  const std::string queue = c->s.queue;
  admit_counted(
      queue, [self, c] { self->bump_one(c); },
      [self, c](std::exception_ptr e) {
        dispatch_result(self->executor, std::move(c->handler), e, std::string());
      });
}

template <class Storage>
template <class Handler>
void async_queue<Storage>::bump_one(std::shared_ptr<counting_one<Handler>> c) {
  const counted_job& j = *c->s.job;
  const dlq::detail::job_view v{c->s.queue, j.payload, &j.failure};
  storage_.bump_count(
      c->s.queue, dlq::detail::queue_core::poison_key(v), core_.options.poison_guard.remember_for,
      [self = this->shared_from_this(), c](std::exception_ptr e, std::int64_t count) {
        one_send& s = c->s;
        dlq::detail::poison_mark mark;
        if (e) {
          self->count_failure(e);
          e = count_failed(e, "send_to_dlq");
        } else {
          try {
            const counted_job& job = *s.job;
            const dlq::detail::job_view view{s.queue, job.payload, &job.failure};
            dlq::detail::prepared_entry p =
                self->core_.prepare(view, job.now, std::move(s.id), self->core_.mark(count));
            s.id = std::move(p.id);
            s.envelope = std::move(p.envelope);
            mark = p.mark;
            if (self->core_.options.on_event) s.error = job.failure.error;
          } catch (...) {
            e = std::current_exception();
          }
        }
        if (e) return dispatch_result(self->executor, std::move(c->handler), e, std::string());
        s.job.reset();
        self->push_built(std::move(s), std::move(c->handler), mark);
      });
}

template <class Storage>
template <class Handler>
void async_queue<Storage>::push_built(one_send s, Handler handler, dlq::detail::poison_mark mark) {
  one_pushed<Handler> done{
      this->shared_from_this(), std::move(s.queue), std::move(s.id), std::move(s.error), mark,
      std::move(handler)};
  const Retention& r = core_.retention_of(done.queue);
  // push_one reads the queue (for the key) before it takes `done`.
  storage_.push_one(done.queue, s.envelope, r.max_length, r.overflow == Overflow::evict_oldest,
                    std::move(done));
}

// The blocking front end's steps after one queue's push: the failure counted, a push
// the retention refused turned into its error, evictions reported. Returns the push's
// error (null when it stored).
template <class Storage>
std::exception_ptr async_queue<Storage>::settle_push(std::string_view queue, std::exception_ptr e,
                                                     const PushResult& result) {
  dlq::detail::queue_core& c = core_;
  count_failure(e);
  if (!e && !result.stored) {
    try {
      c.reject(queue, c.retention_of(queue));
    } catch (...) {
      e = std::current_exception();
    }
  }
  if (!e && !result.evicted.empty()) {
    dlq::detail::report_evictions(c, queue, result.evicted, "max_length");
    dlq::detail::log_evictions(c, queue, result.evicted.size(), "max_length");
  }
  return e;
}

}  // namespace dlq::asio::detail
