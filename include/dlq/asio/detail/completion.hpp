// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/completion.hpp
/// Internal to dlq::asio: how a completion handler is called — posted, or at once when
/// already on its executor — and the callback types that carry it (detail::done_fn,
/// detail::once_fn). Shared by the front end and the Redis connection. Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include "dlq/asio/detail/small.hpp"

namespace dlq::asio::detail {

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

}  // namespace dlq::asio::detail
