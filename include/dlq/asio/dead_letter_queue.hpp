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
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/asio/detail/small.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/retention.hpp"
#include "dlq/storage/memory.hpp"

namespace dlq::asio {

/// True for a storage whose calls never block (they take a mutex at most): the async queue
/// runs them inline and completes through the executor. Specialise it for your own such
/// storage. Default: false, except for dlq::MemoryStorage.
template <class Storage>
struct runs_inline : std::false_type {};
template <>
struct runs_inline<MemoryStorage> : std::true_type {};

/// An operation completed early because its cancellation slot was emitted (terminal
/// cancellation; see AsyncDeadLetterQueue). outcome_unknown() is true for a send: its
/// command may have gone out, and may still be stored (it is never sent again); false for
/// a read.
class cancelled_error : public dlq::storage_error {
 public:
  using storage_error::storage_error;
};

/// What an asynchronous storage's push reports.
struct PushResult {
  bool stored = true;                ///< false: Overflow::reject refused it, nothing stored
  std::vector<std::string> evicted;  ///< raw items evicted by Overflow::evict_oldest
};

namespace detail {

template <class T>
using done_fn = std::function<void(std::exception_ptr, T)>;

// Completes `handler` with (e, value) through asio::post on `ex`; the handler's associated
// executor (if it has one, e.g. a coroutine's or a strand) runs it.
template <class Handler, class T>
void post_result(const ::asio::any_io_executor& ex, Handler handler, std::exception_ptr e,
                 T value) {
  auto hex = ::asio::get_associated_executor(handler, ex);
  ::asio::post(
      ex, ::asio::bind_executor(hex, [h = std::move(handler), e, v = std::move(value)]() mutable {
        std::move(h)(e, std::move(v));
      }));
}

// Completes `handler` with (e, value) from a completion already running on `ex` (the
// connection's read handler, or a posted failure), never from an initiating call: called
// at once when the handler's associated executor is `ex` itself (a callback, a coroutine
// on the same executor; an exception it throws leaves the loop's run() as from a posted
// handler), else dispatched to its executor (a strand, another io_context).
template <class Handler, class T>
void dispatch_result(const ::asio::any_io_executor& ex, Handler handler, std::exception_ptr e,
                     T value) {
  auto hex = ::asio::get_associated_executor(handler, ex);
  if constexpr (std::is_same_v<decltype(hex), ::asio::any_io_executor>) {
    if (hex == ex) return std::move(handler)(std::move(e), std::move(value));
  }
  ::asio::dispatch(hex, [h = std::move(handler), e, v = std::move(value)]() mutable {
    std::move(h)(e, std::move(v));
  });
}

// A completion handler whose cancellation slot is connected (a coroutine's, one bound with
// asio::bind_cancellation_slot, the losing side of an awaitable `||`). Terminal
// cancellation completes it at once (posted) with cancelled_error; the operation itself goes
// on (a command in flight cannot be taken back), and its result is dropped when it
// arrives. Whichever comes first completes the handler, once; the slot is cleared before
// the handler runs. The queue's executor is single-threaded, and the cancellation is
// emitted on it (asio's rule for per-operation cancellation).
template <class Handler, class T>
class cancellable {
  struct shared {
    std::optional<Handler> handler;
    ::asio::cancellation_slot slot;
    ::asio::any_io_executor executor;  // the queue's
    bool write = false;
    const char* what = "";
  };

 public:
  using executor_type = ::asio::associated_executor_t<Handler, ::asio::any_io_executor>;

  cancellable(::asio::any_io_executor ex, Handler h, bool write, const char* what)
      : s_(std::make_shared<shared>()), hex_(::asio::get_associated_executor(h, ex)) {
    s_->slot = ::asio::get_associated_cancellation_slot(h);
    s_->executor = std::move(ex);
    s_->write = write;
    s_->what = what;
    s_->handler.emplace(std::move(h));
    // Weak: the slot's signal may live in what the handler owns (the coroutine frame, an
    // awaitable `||`'s state); a strong reference would be a cycle keeping them when the
    // operation's completion is destroyed without being run (its io_context destroyed).
    s_->slot.assign([w = std::weak_ptr<shared>(s_)](::asio::cancellation_type type) {
      const std::shared_ptr<shared> s = w.lock();
      if (!s || (type & ::asio::cancellation_type::terminal) == ::asio::cancellation_type::none ||
          !s->handler)
        return;
      Handler taken = std::move(*s->handler);
      s->handler.reset();
      const bool unknown = s->write;
      auto e = std::make_exception_ptr(cancelled_error(
          dlq::detail::message("asio", s->what, "the operation was cancelled",
                               unknown ? "the send may still be stored (outcome unknown); it is "
                                         "not sent again — check before sending it again"
                                       : "nothing was changed"),
          unknown));
      // Not from inside the emit: the slot is cleared first, then the handler runs.
      ::asio::post(s->executor, [s, taken = std::move(taken), e]() mutable {
        s->slot.clear();
        s->slot = {};
        post_result(s->executor, std::move(taken), e, T{});
      });
    });
  }

  executor_type get_executor() const noexcept { return hex_; }

  void operator()(std::exception_ptr e, T value) {
    if (!s_->handler) return;  // cancelled: completed already
    Handler h = std::move(*s_->handler);
    s_->handler.reset();
    s_->slot.clear();
    s_->slot = {};
    std::move(h)(std::move(e), std::move(value));
  }

 private:
  std::shared_ptr<shared> s_;
  executor_type hex_;  // the handler's associated executor
};

// Calls `start(handler)`, or `start(cancellable(handler))` when the handler's cancellation
// slot is connected.
template <class T, class Handler, class Start>
void start_cancellable(const ::asio::any_io_executor& ex, Handler handler, bool write,
                       const char* what, Start&& start) {
  if (!::asio::get_associated_cancellation_slot(handler).is_connected())
    return start(std::move(handler));
  start(cancellable<Handler, T>(ex, std::move(handler), write, what));
}

// A job kept for the poison guard: its envelope is built once its count is known.
struct counted_job {
  std::string payload;
  Failure failure;
  std::chrono::system_clock::time_point now;  // the send's clock, read in the initiating call
};

// One send_to_dlq on an asynchronous storage, prepared in the initiating call: the job is
// not copied, only its envelope, id and queue are kept (and Failure::error when an
// on_event hook will report it) — except with the poison guard on, where the job is kept
// (`job`) and the envelope is built after its count.
struct one_send {
  std::string queue;
  std::string id;
  std::string envelope;
  std::string error;
  std::exception_ptr refused;        // the job was refused before anything was sent
  std::unique_ptr<counted_job> job;  // poison guard: the job, its envelope not built yet
};

// The error of a send whose poison count failed: the same type (and reply code), but not
// outcome_unknown — the entry was not written, whatever happened to the count.
// A counter key holding something else (another type, or text INCR refuses) fails every
// send of that job until it is deleted or expires: the hint says so, not "send it again".
inline std::exception_ptr count_failed(const std::exception_ptr& e, const char* where) {
  const auto text = [where](const std::exception& x, const char* hint) {
    return dlq::detail::message(
        "asio", where,
        std::string("the poison guard's count failed, the entry was not stored (") + x.what() + ")",
        hint);
  };
  const char* const again = "send it again; the count may or may not have been bumped";
  try {
    std::rethrow_exception(e);
  } catch (const reply_error& x) {
    const bool not_a_count = x.code() == "WRONGTYPE" ||
                             std::string_view(x.what()).find("not an integer") != std::string::npos;
    return std::make_exception_ptr(reply_error(
        text(x, not_a_count ? "the counter key named above holds something that is not a poison "
                              "count, so every send of this job fails the same way: delete that "
                              "key (it was not bumped) before sending the job again"
                            : again),
        x.code(), false));
  } catch (const timeout_error& x) {
    return std::make_exception_ptr(timeout_error(text(x, again), false));
  } catch (const connection_error& x) {
    return std::make_exception_ptr(connection_error(text(x, again), false));
  } catch (const protocol_error& x) {
    return std::make_exception_ptr(protocol_error(text(x, again), false));
  } catch (const conflict_error& x) {
    return std::make_exception_ptr(conflict_error(text(x, again), false));
  } catch (const storage_error& x) {
    return std::make_exception_ptr(storage_error(text(x, again), false));
  } catch (...) {
    return e;
  }
}

// Wraps a completion handler into a copyable callback that completes it with post_result.
template <class T, class Handler>
done_fn<T> make_done(::asio::any_io_executor ex, Handler&& handler) {
  auto h = std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
  return [h, ex](std::exception_ptr e, T value) {
    post_result(ex, std::move(*h), std::move(e), std::move(value));
  };
}

// The send path's completions: move-only, stored inline (no allocation for a handler of
// up to 128 bytes with its executor).
template <class T>
using once_fn = unique_fn<void(std::exception_ptr, T), 128>;

// Wraps a completion handler into a move-only callback that completes it with post_result.
template <class T, class Handler>
once_fn<T> make_once(::asio::any_io_executor ex, Handler&& handler) {
  return [h = std::forward<Handler>(handler), ex = std::move(ex)](std::exception_ptr e,
                                                                  T value) mutable {
    post_result(ex, std::move(h), std::move(e), std::move(value));
  };
}

// A send's completion: the ids of a batch, or the one id of send_to_dlq.
struct send_done {
  once_fn<std::vector<std::string>> batch;
  once_fn<std::string> one;
  void operator()(std::exception_ptr e, std::vector<std::string> ids) {
    if (one) return one(e, ids.empty() ? std::string() : std::move(ids.front()));
    batch(e, std::move(ids));
  }
};

template <class S, class = void>
struct is_async_storage : std::false_type {};
template <class S>
struct is_async_storage<S, std::void_t<typename S::async_storage_tag>> : std::true_type {};

inline std::vector<Entry> parse_all(std::vector<std::string> raws) {
  std::vector<Entry> out;
  out.reserve(raws.size());
  for (auto& raw : raws)
    out.push_back(parse_entry(std::move(raw)));
  return out;
}

// The id of a stored item, exactly as the blocking front end derives it.
inline std::string stored_id(const std::string& raw) {
  dlq::detail::envelope_view view;
  return dlq::detail::view_envelope(raw, view) ? dlq::detail::entry_id(view, raw)
                                               : dlq::detail::derived_id(raw);
}

}  // namespace detail

/// The asynchronous front end (see the file comment). `Storage` is an asynchronous storage
/// (dlq::asio::RedisListStorage) or a storage for which runs_inline is true
/// (dlq::MemoryStorage). Not copyable; destroying it closes its connection.
template <class Storage>
class AsyncDeadLetterQueue {
  static constexpr bool async_storage = detail::is_async_storage<Storage>::value;
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
      : state_(
            std::make_shared<state>(std::move(executor), std::move(storage), std::move(options))) {}

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
  // The blocking front end of an inline storage (never instantiated for an asynchronous one).
  using blocking_type = std::conditional_t<async_storage, char, DeadLetterQueue<Storage>>;

  struct state : std::enable_shared_from_this<state> {
    state(executor_type ex, Storage s, Options o) : executor(std::move(ex)) {
      if constexpr (async_storage) {
        storage_.emplace(std::move(s));
        core_ = std::make_unique<dlq::detail::queue_core>(std::move(o));
      } else {
        blocking_ = std::make_unique<blocking_type>(std::move(s), std::move(o));
      }
    }

    executor_type executor;

    Storage& storage() {
      if constexpr (async_storage) {
        return *storage_;
      } else {
        return blocking_->storage();
      }
    }
    const Options& options() const noexcept {
      if constexpr (async_storage) {
        return core_->options;
      } else {
        return blocking_->options();
      }
    }
    Counters counters() const noexcept {
      if constexpr (async_storage) {
        return core_->counters.snapshot();
      } else {
        return blocking_->counters();
      }
    }

    // --- inline storages: the blocking queue, completed through the executor -------------
    template <class T, class Done, class F>
    void run_inline(Done& done, F&& f) {
      T value{};
      std::exception_ptr e;
      try {
        value = f();
      } catch (...) {
        e = std::current_exception();
      }
      done(e, std::move(value));
    }

    // --- the operations --------------------------------------------------------------------
    void send(std::vector<FailedJob> jobs, const char* where, detail::send_done done) {
      if constexpr (!async_storage) {
        run_inline<std::vector<std::string>>(done, [&] {
          if (jobs.size() == 1 && std::string_view(where) == "send_to_dlq") {
            const FailedJob& j = jobs.front();
            return std::vector<std::string>{blocking_->send_to_dlq(j.queue, j.payload, j.failure)};
          }
          return blocking_->send_batch(jobs);
        });
      } else {
        ::asio::dispatch(executor, [self = this->shared_from_this(), jobs = std::move(jobs), where,
                                    done = std::move(done)]() mutable {
          self->send_async(std::move(jobs), where, std::move(done));
        });
      }
    }

    // --- send_to_dlq on an asynchronous storage --------------------------------------------
    // The send steps of send_async for one job (validate, check_payload, the clock, the id,
    // the envelope), run on the calling thread; a refusal is kept for the completion.
    detail::one_send prepare_one(std::string_view queue, std::string_view payload,
                                 const Failure& f) const {
      detail::one_send s;
      try {
        const dlq::detail::queue_core& core = *core_;
        const dlq::detail::job_view v{queue, payload, &f};
        dlq::detail::queue_core::validate(v, "send_to_dlq");
        dlq::detail::check_payload(queue, payload, core.options.payloads == Payloads::json_only);
        const auto now = core.now();
        s.queue.assign(queue.data(), queue.size());
        if (core.options.poison_guard.park_after > 0) {
          // The envelope holds the count: it is built once the count is known.
          s.id = dlq::detail::queue_core::make_id(f, now, false);
          s.job = std::make_unique<detail::counted_job>(
              detail::counted_job{std::string(payload), f, now});
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

    template <class Handler>
    void send_one(detail::one_send s, Handler handler) {
      if (s.refused)
        return detail::post_result(executor, std::move(handler), s.refused, std::string());
      ::asio::dispatch(executor, [self = this->shared_from_this(), s = std::move(s),
                                  h = std::move(handler)]() mutable {
        self->push_one(std::move(s), std::move(h));
      });
    }

    // On the executor: the one push, then the blocking front end's after-send steps.
    template <class Handler>
    struct one_pushed {
      std::shared_ptr<state> self;
      std::string queue, id, error;
      dlq::detail::poison_mark mark;
      Handler handler;

      void operator()(std::exception_ptr e, PushResult result) {
        e = self->settle_push(queue, e, result);
        if (e) return detail::dispatch_result(self->executor, std::move(handler), e, std::string());
        self->core_->after_send(queue, id, error, mark);
        detail::dispatch_result(self->executor, std::move(handler), nullptr, std::move(id));
      }
    };

    // A send_to_dlq under the poison guard, from its length check to its push.
    template <class Handler>
    struct counting_one {
      detail::one_send s;
      Handler handler;
    };

    // The blocking front end's admit() for one job under the poison guard: under
    // Overflow::reject a full queue refuses the send before it is counted (one LLEN);
    // `go()` runs the count when the queue has room (or no such retention), else
    // `refused(e)` completes the send.
    template <class Go, class Refused>
    void admit_counted(const std::string& queue, Go go, Refused refused) {
      const Retention& r = core_->retention_of(queue);
      if (r.max_length == 0 || r.overflow != Overflow::reject) return go();
      auto self = this->shared_from_this();
      storage_->size(queue, [self, queue, go = std::move(go), refused = std::move(refused)](
                                std::exception_ptr e, std::size_t length) mutable {
        self->count_failure(e);
        const Retention& limit = self->core_->retention_of(queue);
        if (!e && length >= limit.max_length) {
          try {
            self->core_->reject(queue, limit);
          } catch (...) {
            e = std::current_exception();
          }
        }
        if (e) return refused(e);
        go();
      });
    }

    template <class Handler>
    void push_one(detail::one_send s, Handler handler) {
      if (s.job) return count_one(std::move(s), std::move(handler));
      push_built(std::move(s), std::move(handler), {});
    }

    // send_to_dlq under the poison guard: the length check (Overflow::reject), the count,
    // then the envelope with its mark and the push.
    template <class Handler>
    void count_one(detail::one_send s, Handler handler) {
      auto c = std::make_shared<counting_one<Handler>>(
          counting_one<Handler>{std::move(s), std::move(handler)});
      auto self = this->shared_from_this();
      const std::string queue = c->s.queue;
      admit_counted(
          queue, [self, c] { self->bump_one(c); },
          [self, c](std::exception_ptr e) {
            detail::dispatch_result(self->executor, std::move(c->handler), e, std::string());
          });
    }

    template <class Handler>
    void bump_one(std::shared_ptr<counting_one<Handler>> c) {
      const detail::counted_job& j = *c->s.job;
      const dlq::detail::job_view v{c->s.queue, j.payload, &j.failure};
      storage_->bump_count(
          c->s.queue, dlq::detail::queue_core::poison_key(v),
          core_->options.poison_guard.remember_for,
          [self = this->shared_from_this(), c](std::exception_ptr e, std::int64_t count) {
            detail::one_send& s = c->s;
            dlq::detail::poison_mark mark;
            if (e) {
              self->count_failure(e);
              e = detail::count_failed(e, "send_to_dlq");
            } else {
              try {
                const detail::counted_job& job = *s.job;
                const dlq::detail::job_view view{s.queue, job.payload, &job.failure};
                dlq::detail::prepared_entry p =
                    self->core_->prepare(view, job.now, std::move(s.id), self->core_->mark(count));
                s.id = std::move(p.id);
                s.envelope = std::move(p.envelope);
                mark = p.mark;
                if (self->core_->options.on_event) s.error = job.failure.error;
              } catch (...) {
                e = std::current_exception();
              }
            }
            if (e)
              return detail::dispatch_result(self->executor, std::move(c->handler), e,
                                             std::string());
            s.job.reset();
            self->push_built(std::move(s), std::move(c->handler), mark);
          });
    }

    template <class Handler>
    void push_built(detail::one_send s, Handler handler, dlq::detail::poison_mark mark) {
      one_pushed<Handler> done{
          this->shared_from_this(), std::move(s.queue), std::move(s.id), std::move(s.error), mark,
          std::move(handler)};
      const Retention& r = core_->retention_of(done.queue);
      // push_one reads the queue (for the key) before it takes `done`.
      storage_->push_one(done.queue, s.envelope, r.max_length, r.overflow == Overflow::evict_oldest,
                         std::move(done));
    }

    void size(std::string queue, detail::done_fn<std::size_t> done) {
      if constexpr (!async_storage) {
        run_inline<std::size_t>(done, [&] { return blocking_->size(queue); });
      } else {
        try {
          dlq::detail::queue_core::validate_queue(queue, "size");
        } catch (...) {
          return done(std::current_exception(), 0);
        }
        auto self = this->shared_from_this();
        ::asio::dispatch(executor, [self, queue = std::move(queue), done = std::move(done)] {
          self->storage_->size(queue, self->counted(done));
        });
      }
    }

    void peek(std::string queue, std::size_t start, std::size_t count,
              detail::done_fn<std::vector<Entry>> done) {
      if constexpr (!async_storage) {
        run_inline<std::vector<Entry>>(done, [&] { return blocking_->peek(queue, start, count); });
      } else {
        try {
          dlq::detail::queue_core::validate_queue(queue, "peek");
        } catch (...) {
          return done(std::current_exception(), {});
        }
        auto self = this->shared_from_this();
        ::asio::dispatch(
            executor, [self, queue = std::move(queue), start, count, done = std::move(done)] {
              self->storage_->range(
                  queue, start, count,
                  [self, done](std::exception_ptr e, std::vector<std::string> raws) {
                    self->count_failure(e);
                    done(e, e ? std::vector<Entry>{} : detail::parse_all(std::move(raws)));
                  });
            });
      }
    }

    void get(std::string queue, std::string id, detail::done_fn<std::optional<Entry>> done) {
      if constexpr (!async_storage) {
        run_inline<std::optional<Entry>>(done, [&] { return blocking_->get(queue, id); });
      } else {
        try {
          dlq::detail::queue_core::validate_queue(queue, "get");
        } catch (...) {
          return done(std::current_exception(), std::nullopt);
        }
        auto self = this->shared_from_this();
        ::asio::dispatch(executor, [self, queue = std::move(queue), id = std::move(id),
                                    done = std::move(done)]() mutable {
          auto scan = std::make_shared<get_scan>();
          scan->queue = std::move(queue);
          scan->id = std::move(id);
          scan->plain = dlq::detail::id_stored_verbatim(scan->id);
          scan->done = std::move(done);
          self->get_page(std::move(scan));
        });
      }
    }

   private:
    // Counts a storage error by type (as the blocking front end's guarded()).
    void count_failure(const std::exception_ptr& e) noexcept {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const storage_error& s) {
        core_->count_failure(s);
      } catch (...) {  // NOLINT(bugprone-empty-catch): only storage errors are counted
      }
    }

    template <class T>
    detail::done_fn<T> counted(detail::done_fn<T> done) {
      auto self = this->shared_from_this();
      return [self, done = std::move(done)](std::exception_ptr e, T v) {
        self->count_failure(e);
        done(e, std::move(v));
      };
    }

    static constexpr std::size_t get_page_size = 512;

    // One async_get: the blocking get's scan (DeadLetterQueue::find_raw), one round trip
    // per step. Pages are read by offset while other clients may remove entries (a replay,
    // a trim): each page after the first is read from the last item of the page before;
    // when that item is not there the list moved left under the scan, which finds the item
    // again (a page back) and goes on after it, so no entry slides past unseen. If it was
    // removed itself the scan starts over (at most 3 times; then "not found").
    struct get_scan {
      std::string queue, id;
      bool plain = false;  // the id is stored verbatim: a cheap pre-check (id_stored_verbatim)
      std::size_t start = 0;
      std::optional<std::string> last;  // the last item of the previous page
      int restarts = 0;
      detail::done_fn<std::optional<Entry>> done;
    };

    void get_page(std::shared_ptr<get_scan> scan) {
      auto self = this->shared_from_this();
      const bool anchored = scan->last.has_value();
      storage_->range(scan->queue, anchored ? scan->start - 1 : scan->start,
                      anchored ? get_page_size + 1 : get_page_size,
                      [self, scan, anchored](std::exception_ptr e, std::vector<std::string> raws) {
                        self->count_failure(e);
                        if (e) return scan->done(e, std::nullopt);
                        if (anchored && (raws.empty() || raws.front() != *scan->last))
                          return self->get_reanchor(scan);
                        const std::size_t first = anchored ? 1 : 0;
                        for (std::size_t i = first; i < raws.size(); ++i) {
                          std::string& raw = raws[i];
                          if (scan->plain && raw.find(scan->id) == std::string::npos) continue;
                          if (detail::stored_id(raw) == scan->id)
                            return scan->done(nullptr, parse_entry(std::move(raw)));
                        }
                        if (raws.size() - first < get_page_size)
                          return scan->done(nullptr, std::nullopt);
                        scan->last = std::move(raws.back());
                        scan->start += get_page_size;
                        self->get_page(scan);
                      });
    }

    // The list moved left under the scan: find the last item seen a page back.
    void get_reanchor(std::shared_ptr<get_scan> scan) {
      auto self = this->shared_from_this();
      const std::size_t start = scan->start;
      const std::size_t back = start - 1 > get_page_size ? start - 1 - get_page_size : 0;
      storage_->range(scan->queue, back, start - back,
                      [self, scan, back](std::exception_ptr e, std::vector<std::string> before) {
                        self->count_failure(e);
                        if (e) return scan->done(e, std::nullopt);
                        const auto it = std::find(before.rbegin(), before.rend(), *scan->last);
                        if (it != before.rend()) {
                          scan->start = back + static_cast<std::size_t>(before.rend() - it);
                        } else if (++scan->restarts <= 3) {
                          scan->start = 0;
                          scan->last.reset();
                        } else {
                          return scan->done(nullptr, std::nullopt);
                        }
                        self->get_page(scan);
                      });
    }

    // The send path of an asynchronous storage: validate every job; with the poison guard
    // on, count each job (its count pipelined, all awaited); prepare each envelope with the
    // blocking front end's queue core; push each queue's jobs as one command (all
    // pipelined) under the queue's retention; count and report every entry stored.
    struct send_join {
      std::vector<FailedJob> jobs;
      std::vector<dlq::detail::prepared_entry> entries;
      // Each queue's jobs, when the batch spans several queues (else all go in one push).
      std::vector<std::pair<std::string_view, std::vector<std::size_t>>> parts;
      std::vector<char> stored;  // per entry
      std::size_t remaining = 0;
      std::exception_ptr error;
      detail::send_done done;
      const char* where = "";
      std::chrono::system_clock::time_point now;
      std::vector<dlq::detail::poison_mark> marks;  // poison guard: per job
    };

    void send_async(std::vector<FailedJob> jobs, const char* where, detail::send_done done) {
      dlq::detail::queue_core& core = *core_;
      std::shared_ptr<send_join> join;
      try {
        for (const FailedJob& j : jobs) {
          const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
          dlq::detail::queue_core::validate(v, where);
          dlq::detail::check_payload(j.queue, j.payload,
                                     core.options.payloads == Payloads::json_only);
        }
        if (jobs.empty()) return done(nullptr, {});
        join = std::make_shared<send_join>();
        join->jobs = std::move(jobs);
        const std::vector<FailedJob>& js = join->jobs;
        auto& parts = join->parts;
        bool one_queue = true;
        for (std::size_t i = 1; i < js.size() && one_queue; ++i)
          one_queue = js[i].queue == js.front().queue;
        if (!one_queue) {
          for (std::size_t i = 0; i < js.size(); ++i) {
            const std::string_view q = js[i].queue;
            auto it = std::find_if(parts.begin(), parts.end(),
                                   [&](const auto& p) { return p.first == q; });
            if (it == parts.end()) {
              parts.emplace_back(q, std::vector<std::size_t>{});
              it = parts.end() - 1;
            }
            it->second.push_back(i);
          }
          for (const auto& p : parts) {
            const Retention& r = core.retention_of(p.first);
            if (r.max_length != 0 && r.overflow == Overflow::reject)
              throw invalid_argument(dlq::detail::message(
                  "asio", where,
                  "a batch over several queues where queue '" + std::string(p.first) +
                      "' has max_length with Overflow::reject",
                  "send one queue's jobs per batch (each is then all or nothing)"));
          }
        }
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
    void count_batch(std::shared_ptr<send_join> join) {
      auto self = this->shared_from_this();
      auto count_all = [self, join] {
        join->marks.assign(join->jobs.size(), {});
        join->remaining = join->jobs.size();
        for (std::size_t i = 0; i < join->jobs.size(); ++i) {
          const FailedJob& j = join->jobs[i];
          const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
          self->storage_->bump_count(j.queue, dlq::detail::queue_core::poison_key(v),
                                     self->core_->options.poison_guard.remember_for,
                                     [self, join, i](std::exception_ptr e, std::int64_t count) {
                                       if (e && !join->error) {
                                         self->count_failure(e);
                                         join->error = detail::count_failed(e, join->where);
                                       } else if (!e) {
                                         join->marks[i] = self->core_->mark(count);
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
      const Retention& r = core_->retention_of(queue);
      if (r.max_length == 0 || r.overflow != Overflow::reject) return count_all();
      storage_->size(queue, [count_all = std::move(count_all)](std::exception_ptr, std::size_t) {
        count_all();
      });
    }

    // Prepares every envelope (with its poison mark, if counted) and pushes each queue's
    // part.
    void push_batch(std::shared_ptr<send_join> join) {
      dlq::detail::queue_core& core = *core_;
      try {
        const std::vector<FailedJob>& js = join->jobs;
        join->entries.reserve(js.size());
        for (std::size_t i = 0; i < js.size(); ++i) {
          const FailedJob& j = js[i];
          const dlq::detail::job_view v{j.queue, j.payload, &j.failure};
          join->entries.push_back(core.prepare(
              v, join->now, dlq::detail::queue_core::make_id(j.failure, join->now, false),
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
        storage_->push(
            queue, std::move(envelopes), r.max_length, r.overflow == Overflow::evict_oldest,
            [self = this->shared_from_this(), join, part](std::exception_ptr e, PushResult result) {
              self->pushed(*join, part, e, std::move(result));
            });
      }
    }

    // The blocking front end's steps after one queue's push: the failure counted, a push
    // the retention refused turned into its error, evictions reported. Returns the push's
    // error (null when it stored).
    std::exception_ptr settle_push(std::string_view queue, std::exception_ptr e,
                                   const PushResult& result) {
      dlq::detail::queue_core& c = *core_;
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

    // One queue's push of a send completed.
    void pushed(send_join& join, std::size_t part, std::exception_ptr e, PushResult result) {
      dlq::detail::queue_core& c = *core_;
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

    std::optional<Storage> storage_;                 // asynchronous storage
    std::unique_ptr<dlq::detail::queue_core> core_;  // asynchronous storage
    std::unique_ptr<blocking_type> blocking_;        // inline storage
  };

  std::shared_ptr<state> state_;
};

}  // namespace dlq::asio
