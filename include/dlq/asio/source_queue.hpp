// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/source_queue.hpp
/// dlq::asio::AsyncSourceQueue — the worker's side of a source queue (dlq/source_queue.hpp:
/// reliable take into the worker's in-flight list, ack, requeue, recover, dead-letter) as
/// Asio asynchronous operations, on memory (`AsyncSourceQueue<dlq::MemoryStorage>`, this
/// header) and Redis, single server or Cluster (`AsyncSourceQueue<dlq::asio::RedisListStorage>`,
/// dlq/asio/redis.hpp). CMake: dlq::asio (and dlq::redis for Redis).
///
///     dlq::asio::AsyncSourceQueue<dlq::asio::RedisListStorage> jobs(ex, storage);
///     const std::string me = "host-7/1";              // one stable name per worker
///     for (;;) {
///       auto batch = co_await jobs.async_take("orders", me, 16, 2s, asio::use_awaitable);
///       for (auto& job : batch) {
///         std::exception_ptr failed;                  // (no co_await inside a catch)
///         try { co_await handle(job); } catch (...) { failed = std::current_exception(); }
///         if (!failed)
///           co_await jobs.async_ack("orders", me, {job}, asio::use_awaitable);
///         else                                        // retries exhausted: stored, then acked
///           co_await jobs.async_dead_letter(dlq, "orders", me, job, failure_of(failed),
///                                           asio::use_awaitable);
///       }
///     }
///
/// Semantics are the blocking source queue's, decided in one place: on memory the blocking
/// dlq::MemorySourceQueue itself runs (inline: it never blocks), on Redis the keys, scripts,
/// arguments and bounds of dlq/redis/source_protocol.hpp, which dlq::RedisSourceQueue uses
/// too — so blocking and async workers share one queue. At-least-once: a job is at every
/// instant in the queue, in one consumer's in-flight list, or acked; each move is one
/// atomic script; a worker killed mid-job leaves its jobs in flight, where its next take (same
/// consumer name) or async_recover() finds them.
///
/// The wait: a non-blocking poll, not BLMOVE. async_take with a `wait` runs the reliable
/// take script (LRANGE of the in-flight list, else LMOVE × max, plus SADD — one atomic
/// step); when it finds nothing it waits on a steady_timer of the executor (5 ms, doubled
/// after each empty try up to 100 ms: SourceQueueOptions) and tries again until jobs come or
/// `wait` is over. Why not BLMOVE:
/// - a blocking command holds its connection: the storage's one pipelined connection (one
///   per master on a cluster) answers in order, so every send, ack and take of the loop would
///   queue behind it. A dedicated connection per waiting take (8 coroutines: 8 more
///   connections per master), routed to the queue's master on a cluster, would be needed;
/// - BLMOVE moves one job and knows nothing of the take's other steps (the consumer's held
///   jobs first, the consumers set): a worker killed between BLMOVE and the SADD would hold
///   a job that no recover finds by listing consumers, so the move would have to be split
///   into BLMOVE to a staging key plus a script — a second place for the decisions;
/// - cancelling a BLMOVE means closing its connection, and a command timeout would have to be
///   longer than any wait.
/// The poll's costs (checked by tests/asio/test_asio_source_queue.cpp): a job pushed while
/// a take waits is taken within the current delay (≤ 100 ms by default; lower poll_max for
/// less latency), and an idle waiting take sends one script per delay — 10 per second at
/// the cap — which Redis answers in microseconds. Nothing holds the loop: a timer on the
/// same io_context keeps its schedule while a take waits.
///
/// Completions: `void(std::exception_ptr, T)` as dlq::asio::AsyncDeadLetterQueue — the same
/// dlq::error subclasses as the blocking calls (bad names: dlq::invalid_argument through the
/// token), posted to the executor, never inside the initiating call. Initiate from any
/// thread; the executor must be single-threaded (one thread or a strand).
/// Cancellation (the handler's cancellation slot, terminal): async_take stops polling and
/// completes at once with dlq::asio::cancelled_error — outcome_unknown() when a try was in
/// flight: the jobs it moved stay in this consumer's in-flight list and its next take returns
/// them (nothing is lost, nothing handed out twice). The other operations complete at once
/// with cancelled_error (outcome unknown: the move may still happen) as the dead-letter
/// queue's sends do.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
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

#include "dlq/asio/detail/cancellable.hpp"
#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/memory_source.hpp"
#include "dlq/asio/detail/source_take.hpp"
#include "dlq/entry.hpp"
#include "dlq/source_queue.hpp"

namespace dlq::asio {

/// How a waiting async_take polls (see the file comment).
struct SourceQueueOptions {
  /// The sleep after the first empty try; doubled after each further one.
  std::chrono::milliseconds poll_first{5};
  /// The longest sleep between two tries (the latency of a job pushed while a take waits).
  std::chrono::milliseconds poll_max{100};
};

/// The asynchronous source queue (see the file comment). `Storage`: dlq::MemoryStorage or
/// dlq::asio::RedisListStorage. A handle: copies share the backend; the storage (memory) or
/// its connection (Redis: the handle is copied) must outlive the operations.
template <class Storage>
class AsyncSourceQueue {
 public:
  using executor_type = ::asio::any_io_executor;

  /// The source queues of `storage` (no I/O). Completions run on `executor` (for Redis: the
  /// storage's own executor).
  AsyncSourceQueue(executor_type executor, Storage& storage, SourceQueueOptions options = {})
      : ex_(executor), backend_(std::make_shared<backend_type>(executor, storage)) {
    delays_.first =
        options.poll_first.count() > 0 ? options.poll_first : std::chrono::milliseconds(1);
    delays_.most = std::max(options.poll_max, delays_.first);
  }

  /// The executor completions run on.
  executor_type get_executor() const noexcept { return ex_; }

  /// Reliable take (dlq/source_queue.hpp `take`): up to `max` jobs (0 = 1; at most 1000 on
  /// Redis), oldest first, moved atomically into `consumer`'s in-flight list — or the jobs
  /// `consumer` already holds. When there are none, tries again (a poll, see the file
  /// comment) until some come or `wait` has passed (0: one try). Completes with
  /// `void(std::exception_ptr, std::vector<dlq::SourceJob>)`: empty when the wait ended.
  /// One consumer name per worker (coroutine) at a time: a take by a name that holds jobs
  /// completes with those jobs, so two coroutines sharing a name run the same job twice.
  template <class CompletionToken>
  auto async_take(std::string_view queue, std::string_view consumer, std::size_t max,
                  std::chrono::milliseconds wait, CompletionToken&& token) {
    using result = std::vector<SourceJob>;
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, result)>(
        [ex = ex_, b = backend_, d = delays_, max, wait](auto handler, std::string q,
                                                         std::string c) {
          ::asio::dispatch(ex, [ex, b, d, max, wait, q = std::move(q), c = std::move(c),
                                h = std::move(handler)]() mutable {
            auto once = [b](const std::string& qq, const std::string& cc, std::size_t m,
                            detail::done_fn<result> done) { b->take(qq, cc, m, std::move(done)); };
            std::make_shared<detail::take_op<decltype(h)>>(ex, std::move(h), once, std::move(q),
                                                           std::move(c), max, wait, d)
                ->start();
          });
        },
        token, std::string(queue), std::string(consumer));
  }

  /// Done (dlq/source_queue.hpp `ack`): removes `jobs` from `consumer`'s in-flight list.
  /// Completes with `void(std::exception_ptr, std::size_t)`: how many were held (a job
  /// recovered and taken by another consumer meanwhile is not, and is not touched).
  template <class CompletionToken>
  auto async_ack(std::string_view queue, std::string_view consumer, std::vector<SourceJob> jobs,
                 CompletionToken&& token) {
    return settle(queue, consumer, std::move(jobs), false, std::forward<CompletionToken>(token));
  }

  /// Give back (dlq/source_queue.hpp `nack`): moves `jobs` from `consumer`'s in-flight list
  /// to the queue's tail. Completes with `void(std::exception_ptr, std::size_t)`: how many
  /// were held. On Redis a queue key of another type refuses it (dlq::reply_error
  /// WRONGTYPE), nothing moved.
  template <class CompletionToken>
  auto async_requeue(std::string_view queue, std::string_view consumer, std::vector<SourceJob> jobs,
                     CompletionToken&& token) {
    return settle(queue, consumer, std::move(jobs), true, std::forward<CompletionToken>(token));
  }

  /// `consumer` is gone for good (dlq/source_queue.hpp `recover`): every job it holds goes
  /// back to the queue's tail, in order (on Redis one script per 1000 jobs). Completes with
  /// `void(std::exception_ptr, std::size_t)`: how many.
  template <class CompletionToken>
  auto async_recover(std::string_view queue, std::string_view consumer, CompletionToken&& token) {
    return run<std::size_t>(token, true, "recover", std::string(queue), std::string(consumer),
                            [](auto& b, std::string& q, std::string& c, auto done) {
                              b.recover(q, c, std::move(done));
                            });
  }

  /// Jobs waiting in `queue` (one LLEN on Redis). Completes with
  /// `void(std::exception_ptr, std::size_t)`.
  template <class CompletionToken>
  auto async_size(std::string_view queue, CompletionToken&& token) {
    return run<std::size_t>(
        token, false, "size", std::string(queue), std::string(),
        [](auto& b, std::string& q, std::string&, auto done) { b.size(q, std::move(done)); });
  }

  /// Jobs `consumer` holds from `queue` (one LLEN on Redis). Completes with
  /// `void(std::exception_ptr, std::size_t)`.
  template <class CompletionToken>
  auto async_in_flight(std::string_view queue, std::string_view consumer, CompletionToken&& token) {
    return run<std::size_t>(token, false, "in_flight", std::string(queue), std::string(consumer),
                            [](auto& b, std::string& q, std::string& c, auto done) {
                              b.in_flight(q, c, std::move(done));
                            });
  }

  /// dlq::dead_letter made asynchronous: sends `job`'s payload with `failure` to `dlq` (an
  /// AsyncDeadLetterQueue, which must outlive the operation), and only once it is stored
  /// acks the job. Completes with `void(std::exception_ptr, std::string id)`. A failed send
  /// leaves the job in flight (delivered again, never lost); a failed ack after the send
  /// is reported too (the entry is stored; the job is delivered again and may be
  /// dead-lettered twice — at-least-once, as the blocking dead_letter). An empty queue or
  /// consumer name is refused (dlq::invalid_argument) before anything is sent.
  template <class Dlq, class CompletionToken>
  auto async_dead_letter(Dlq& dlq, std::string_view queue, std::string_view consumer, SourceJob job,
                         Failure failure, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::string)>(
        [ex = ex_, b = backend_, dq = &dlq](auto handler, std::string q, std::string c, SourceJob j,
                                            Failure f) {
          ::asio::dispatch(ex, [ex, b, dq, q = std::move(q), c = std::move(c), j = std::move(j),
                                f = std::move(f), h = std::move(handler)]() mutable {
            detail::start_cancellable<std::string>(
                ex, std::move(h), true, "dead_letter", [&](auto hh) {
                  auto done = detail::make_done<std::string>(ex, std::move(hh));
                  try {  // as dlq::dead_letter: refused before anything is sent
                    dlq::detail::check_source_names("source", q, c, "dead_letter");
                  } catch (...) {
                    return done(std::current_exception(), std::string());
                  }
                  dq->async_send_to_dlq(
                      q, j.payload, f, [b, q, c, j, done](std::exception_ptr e, std::string id) {
                        if (e) return done(e, std::string());
                        b->settle(q, c, {j}, false, [done, id](std::exception_ptr e2, std::size_t) {
                          done(e2, e2 ? std::string() : id);
                        });
                      });
                });
          });
        },
        token, std::string(queue), std::string(consumer), std::move(job), std::move(failure));
  }

  /// Closes the Redis connection — the storage's, shared with every handle on it (an
  /// AsyncDeadLetterQueue on the same storage too): every operation in flight completes with
  /// dlq::connection_error, a waiting take at its next try. A no-op on memory.
  void close() noexcept { backend_->close(); }

 private:
  using backend_type = detail::source_backend<Storage>;

  template <class CompletionToken>
  auto settle(std::string_view queue, std::string_view consumer, std::vector<SourceJob> jobs,
              bool requeue, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::size_t)>(
        [ex = ex_, b = backend_, requeue](auto handler, std::string q, std::string c,
                                          std::vector<SourceJob> j) {
          ::asio::dispatch(ex, [ex, b, requeue, q = std::move(q), c = std::move(c),
                                j = std::move(j), h = std::move(handler)]() mutable {
            detail::start_cancellable<std::size_t>(
                ex, std::move(h), true, requeue ? "requeue" : "ack", [&](auto hh) {
                  b->settle(q, c, j, requeue, detail::make_done<std::size_t>(ex, std::move(hh)));
                });
          });
        },
        token, std::string(queue), std::string(consumer), std::move(jobs));
  }

  // An operation of one call to the backend: `call(backend, queue, consumer, done)`. The
  // token is passed on as an lvalue: asio::async_initiate takes it by lvalue reference.
  template <class T, class CompletionToken, class Call>
  auto run(CompletionToken& token, bool write, const char* what, std::string queue,
           std::string consumer, Call call) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, T)>(
        [ex = ex_, b = backend_, write, what, call](auto handler, std::string q, std::string c) {
          ::asio::dispatch(ex, [ex, b, write, what, call, q = std::move(q), c = std::move(c),
                                h = std::move(handler)]() mutable {
            detail::start_cancellable<T>(ex, std::move(h), write, what, [&](auto hh) {
              call(*b, q, c, detail::make_done<T>(ex, std::move(hh)));
            });
          });
        },
        token, std::move(queue), std::move(consumer));
  }

  executor_type ex_;
  std::shared_ptr<backend_type> backend_;
  detail::poll_delays delays_;
};

}  // namespace dlq::asio
