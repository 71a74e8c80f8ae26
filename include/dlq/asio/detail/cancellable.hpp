// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/cancellable.hpp
/// Internal to dlq::asio: per-operation cancellation of the front end's operations — a
/// completion handler whose cancellation slot is connected is wrapped so that terminal
/// cancellation completes it at once with dlq::asio::cancelled_error. Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/post.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/errors.hpp"
#include "dlq/errors.hpp"

namespace dlq::asio::detail {

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
      cancel(s);
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
  // Terminal cancellation: the handler is taken and completed with cancelled_error.
  static void cancel(const std::shared_ptr<shared>& s) {
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
  }

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

}  // namespace dlq::asio::detail
