// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/dead_letter_queue.hpp
/// dlq::asio::AsyncDeadLetterQueue — the worker-facing operations of dlq::DeadLetterQueue
/// (send_to_dlq, send_batch, size, peek, get) as Asio asynchronous operations. CMake:
/// dlq::asio (standalone Asio >= 1.22; Debian: libasio-dev). The core and the blocking
/// backends never include Asio.
///
///     asio::io_context io;
///     dlq::asio::AsyncDeadLetterQueue<dlq::MemoryStorage> q(io.get_executor());
///     q.async_send_to_dlq("orders", payload, failure,
///                         [](std::exception_ptr e, std::string id) { … });   // a callback
///     std::future<std::string> f = q.async_send_to_dlq(…, asio::use_future);
///     std::string id = co_await q.async_send_to_dlq(…, asio::use_awaitable);  // C++20
///
/// Completion signatures: every operation completes with `void(std::exception_ptr, T)` —
/// send: T = std::string (the entry id); send_batch: std::vector<std::string>; size:
/// std::size_t; peek: std::vector<dlq::Entry>; get: std::optional<dlq::Entry>. The
/// exception_ptr is null on success; else it holds the same dlq::error subclass the blocking
/// call throws (dlq::invalid_argument, dlq::queue_full_error, dlq::storage_error and its
/// subclasses, with outcome_unknown() set when a write was sent and its answer lost) and T is
/// value-initialised. With asio::use_future the future rethrows it; with asio::use_awaitable
/// the co_await rethrows it. Errors found before anything is sent (a bad argument) are
/// delivered the same way, never thrown from the initiating call.
///
/// Storages. Two kinds:
/// - an asynchronous storage (dlq::asio::RedisListStorage, dlq/asio/redis.hpp): the queue
///   builds each envelope exactly as the blocking front end does (detail::queue_core: ids,
///   clock, worker, wire format, Payloads policy, the poison guard's marks — counted by the
///   storage's bump_count first —, counters, events) and hands it to the storage, which
///   completes without blocking the executor;
/// - a storage whose calls never block (dlq::MemoryStorage, for which
///   dlq::asio::runs_inline is true): the queue runs the blocking dlq::DeadLetterQueue
///   inline and completes through asio::post on the queue's executor — never inside the
///   initiating call — so a coroutine worker is unit-tested on memory exactly as it runs on
///   Redis. A storage that may block (the blocking RedisListStorage, SQLite) is refused at
///   compile time: call its blocking queue from a thread pool instead.
///
/// Thread-safety: the executor must be single-threaded (an io_context run by one thread, or
/// a strand); initiate operations from any thread — they are dispatched to the executor.
/// Cancellation: on an asynchronous storage every operation honours its handler's
/// cancellation slot. Terminal cancellation (emitted on the queue's executor) completes the
/// handler at once with dlq::asio::cancelled_error — outcome_unknown() for a send, whose
/// command may still be stored, once — while the operation itself goes on and its result is
/// dropped; partial or total cancellation alone is ignored. close() cancels everything.
/// Operator operations (replay, trim, purge, search, …) are not offered here: run them with
/// the blocking dlq::DeadLetterQueue over a blocking storage on the same keys (from a worker
/// thread); both see the same entries.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/asio/detail/async_queue.hpp"
#include "dlq/asio/detail/cancellable.hpp"
#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/inline_queue.hpp"
#include "dlq/asio/detail/send_steps.hpp"
#include "dlq/asio/errors.hpp"
#include "dlq/asio/storage.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage/memory.hpp"

namespace dlq::asio {

/// The asynchronous front end (see the file comment). `Storage` is an asynchronous storage
/// (dlq::asio::RedisListStorage) or a storage for which runs_inline is true
/// (dlq::MemoryStorage). Not copyable; destroying it closes its connection.
template <class Storage>
class AsyncDeadLetterQueue {
  static constexpr bool async_storage = is_async_storage<Storage>::value;
  static_assert(async_storage || runs_inline<Storage>::value,
                "dlq::asio::AsyncDeadLetterQueue: this storage may block the event loop; use "
                "dlq::asio::RedisListStorage, dlq::MemoryStorage, or run the blocking "
                "dlq::DeadLetterQueue on a thread pool");

 public:
  using executor_type = ::asio::any_io_executor;

  /// Creates the front end. Completions run on `executor` (or the handler's own associated
  /// executor). An asynchronous storage must have been created with the same executor.
  /// Every policy of `options` applies as on the blocking front end, the poison guard
  /// included (PoisonGuard: on an asynchronous storage each send first awaits the job's
  /// count, one more round trip, see async_send_to_dlq).
  explicit AsyncDeadLetterQueue(executor_type executor, Storage storage = Storage(),
                                Options options = {})
      : state_(std::make_shared<state_type>(std::move(executor), std::move(storage),
                                            std::move(options))) {}

  AsyncDeadLetterQueue(const AsyncDeadLetterQueue&) = delete;
  AsyncDeadLetterQueue& operator=(const AsyncDeadLetterQueue&) = delete;
  /// Closes the storage's connection at once, on the calling thread: destroy the queue on
  /// the executor's thread (or while nothing runs the executor), and before its io_context.
  ~AsyncDeadLetterQueue() {
    if constexpr (async_storage) state_->storage().close();
  }

  /// The executor completions run on.
  executor_type get_executor() const noexcept { return state_->executor; }
  /// The options this queue was created with (after defaults were applied).
  const Options& options() const noexcept { return state_->options(); }
  /// The counters since this queue was created (see dlq::Counters).
  Counters counters() const noexcept { return state_->counters(); }
  /// The storage, for backend-specific calls.
  Storage& storage() noexcept { return state_->storage(); }

  /// Closes the storage's connection: every operation in flight completes with a
  /// dlq::connection_error (outcome_unknown() == true for a send that was already sent: it
  /// may have been stored) unless its answer arrived first; later operations complete with
  /// a dlq::connection_error. Nothing is stored twice: no send is retried. The close runs on
  /// the executor (dispatched: at once when called from it), so it may be called from any
  /// thread; destroy the queue before its io_context. A no-op for an inline storage (its
  /// operations have finished when they are initiated).
  void close() noexcept {
    if constexpr (async_storage) {
      try {
        ::asio::dispatch(state_->executor, [st = state_] { st->storage().close(); });
      } catch (...) {  // NOLINT(bugprone-empty-catch): the connection closes when destroyed
      }
    }
  }

  /// Dead-letters one job, as dlq::DeadLetterQueue::send_to_dlq. Completes with
  /// `void(std::exception_ptr, std::string id)`. The arguments need not outlive the call:
  /// on an asynchronous storage the envelope (id, clock, wire format) is built during it, on
  /// the calling thread; otherwise they are copied. On an asynchronous storage the handler
  /// runs from the connection's read handler when its associated executor is the queue's
  /// (else it is dispatched to its own) — never inside this call.
  ///
  /// With the poison guard on (PoisonGuard::park_after > 0) on an asynchronous storage, the
  /// job is copied instead, and the send first awaits the job's count (the storage's
  /// bump_count: on Redis the blocking storage's counter, shared with the blocking front
  /// end); the envelope is then built with its mark (dead_letter_count, parked), exactly as
  /// the blocking send writes it, and pushed. Under Retention::max_length with
  /// Overflow::reject the queue's length is read first (one LLEN): a full queue refuses the
  /// send with dlq::queue_full_error without counting it. A count that fails completes the
  /// send with the storage's error type (dlq::timeout_error, dlq::connection_error, …) and
  /// outcome_unknown() == false: the entry was not written (the count itself may have been
  /// bumped).
  template <class CompletionToken>
  auto async_send_to_dlq(std::string_view queue, std::string_view payload, const Failure& failure,
                         CompletionToken&& token) {
    if constexpr (async_storage) {
      // The envelope is built here, on the calling thread (as the blocking send_to_dlq
      // would): only it, the id and the queue are kept, not a copy of the job.
      return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::string)>(
          [st = state_](auto handler, detail::one_send s) {
            detail::start_cancellable<std::string>(
                st->executor, std::move(handler), true, "send_to_dlq",
                [&](auto h) { st->send_one(std::move(s), std::move(h)); });
          },
          token, state_->prepare_one(queue, payload, failure));
    } else {
      return send_jobs(queue, payload, failure, std::forward<CompletionToken>(token));
    }
  }

 private:
  template <class CompletionToken>
  auto send_jobs(std::string_view queue, std::string_view payload, const Failure& failure,
                 CompletionToken&& token) {
    std::vector<FailedJob> jobs;
    jobs.push_back(FailedJob{std::string(queue), std::string(payload), failure});
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::string)>(
        [st = state_](auto handler, std::vector<FailedJob> owned) {
          detail::send_done done;
          done.one = detail::make_once<std::string>(st->executor, std::move(handler));
          st->send(std::move(owned), "send_to_dlq", std::move(done));
        },
        token, std::move(jobs));
  }

 public:
  /// The Python seed's signature: (queue, payload, error, attempt, worker, token).
  template <class CompletionToken>
  auto async_send_to_dlq(std::string_view queue, std::string_view payload, std::string error,
                         std::int64_t attempt, std::string worker, CompletionToken&& token) {
    Failure f;
    f.error = std::move(error);
    f.attempt = attempt;
    f.worker = std::move(worker);
    return async_send_to_dlq(queue, payload, f, std::forward<CompletionToken>(token));
  }

  /// Dead-letters several jobs, as dlq::DeadLetterQueue::send_batch (ids in order).
  /// Completes with `void(std::exception_ptr, std::vector<std::string>)`. On an
  /// asynchronous storage each queue's jobs go out as one command, all of them pipelined; a
  /// batch over several queues of which one has Retention::max_length with Overflow::reject
  /// is refused with dlq::invalid_argument (send one queue's jobs per batch there).
  template <class CompletionToken>
  auto async_send_batch(std::vector<FailedJob> jobs, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken,
                                  void(std::exception_ptr, std::vector<std::string>)>(
        [st = state_](auto handler, std::vector<FailedJob> owned) {
          detail::start_cancellable<std::vector<std::string>>(
              st->executor, std::move(handler), true, "send_batch", [&](auto h) {
                detail::send_done done;
                done.batch =
                    detail::make_once<std::vector<std::string>>(st->executor, std::move(h));
                st->send(std::move(owned), "send_batch", std::move(done));
              });
        },
        token, std::move(jobs));
  }

  /// Number of entries in the queue's dead-letter list. Completes with
  /// `void(std::exception_ptr, std::size_t)`.
  template <class CompletionToken>
  auto async_size(std::string_view queue, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::size_t)>(
        [st = state_](auto handler, std::string q) {
          detail::start_cancellable<std::size_t>(
              st->executor, std::move(handler), false, "size", [&](auto h) {
                st->size(std::move(q), detail::make_done<std::size_t>(st->executor, std::move(h)));
              });
        },
        token, std::string(queue));
  }

  /// Entries [start, start + count) of the dead-letter list, oldest first (unreadable
  /// entries included with ok() == false). Defaults as peek(): start 0, count 10 — pass
  /// them explicitly here. Completes with `void(std::exception_ptr, std::vector<Entry>)`.
  template <class CompletionToken>
  auto async_peek(std::string_view queue, std::size_t start, std::size_t count,
                  CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::vector<Entry>)>(
        [st = state_, start, count](auto handler, std::string q) {
          detail::start_cancellable<std::vector<Entry>>(
              st->executor, std::move(handler), false, "peek", [&](auto h) {
                st->peek(std::move(q), start, count,
                         detail::make_done<std::vector<Entry>>(st->executor, std::move(h)));
              });
        },
        token, std::string(queue));
  }

  /// The entry with this id, or nullopt. Completes with
  /// `void(std::exception_ptr, std::optional<Entry>)`. On an asynchronous storage the list
  /// is read in pages of 512 (one round trip each) until the id is found, re-anchored as the
  /// blocking get when other clients remove entries meanwhile.
  template <class CompletionToken>
  auto async_get(std::string_view queue, std::string_view id, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(std::exception_ptr, std::optional<Entry>)>(
        [st = state_](auto handler, std::string q, std::string wanted) {
          detail::start_cancellable<std::optional<Entry>>(
              st->executor, std::move(handler), false, "get", [&](auto h) {
                st->get(std::move(q), std::move(wanted),
                        detail::make_done<std::optional<Entry>>(st->executor, std::move(h)));
              });
        },
        token, std::string(queue), std::string(id));
  }

 private:
  // The state the operations share: the storage with the blocking front end's queue core,
  // or the blocking front end itself over an inline storage.
  using state_type = std::conditional_t<async_storage, detail::async_queue<Storage>,
                                        detail::inline_queue<Storage>>;

  std::shared_ptr<state_type> state_;
};

}  // namespace dlq::asio
