// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/sinks.hpp
/// Replay destinations ("sinks") for dlq::KeyValueStorage: the message type, the sink
/// detection trait, an in-memory set of queues (dlq::kv::MemoryQueues) and a type-erased
/// sink (dlq::kv::AnySink). A sink onto Redis lists, dlq::kv::RedisListSink, is in
/// dlq/redis/kv_store.hpp (it needs hiredis).
///
/// A sink receives the payloads replay moves out of a key-value store. Accepted shapes, in
/// order of preference (the first two get one call per replay step):
///
///     s.push_many(const std::vector<dlq::kv::Message>&)
///     s(const std::vector<dlq::kv::Message>&)
///     s.push(std::string_view queue, std::string_view payload)
///     s(std::string_view queue, std::string_view payload)
///
/// or a std::reference_wrapper to one of those. Replay calls the sink first and removes the
/// records only after it returned (at-least-once): a sink must have stored the payloads
/// durably — or thrown — when it returns. A sink that writes into the dead letters' own store
/// (dlq::kv::JobQueue: `store()` and `writes_for`) is instead written in the same store
/// transaction that removes the records (exactly-once; see dlq/kv/storage.hpp).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"

namespace dlq {
namespace kv {

/// One payload to push to a queue. The views stay valid for the duration of the sink call.
struct Message {
  std::string_view queue;    ///< destination queue name
  std::string_view payload;  ///< the exact payload bytes
};

namespace detail {

template <class T>
struct unwrap_reference {
  using type = T;
};
template <class T>
struct unwrap_reference<std::reference_wrapper<T>> {
  using type = T;
};
template <class T>
using sink_target_t = typename unwrap_reference<std::remove_cv_t<T>>::type;

template <class S, class = void>
struct sink_has_push_many : std::false_type {};
template <class S>
struct sink_has_push_many<S, std::void_t<decltype(std::declval<S&>().push_many(
                                 std::declval<const std::vector<Message>&>()))>> : std::true_type {
};

template <class S, class = void>
struct sink_has_push : std::false_type {};
template <class S>
struct sink_has_push<
    S, std::void_t<decltype(std::declval<S&>().push(std::string_view{}, std::string_view{}))>>
    : std::true_type {};

template <class S>
inline constexpr bool sink_is_batch_callable = std::is_invocable_v<S&, const std::vector<Message>&>;
template <class S>
inline constexpr bool sink_is_callable =
    std::is_invocable_v<S&, std::string_view, std::string_view>;

/// Delivers messages to a sink, in one call when the sink takes batches.
template <class Sink>
void deliver(Sink& sink_or_ref, const std::vector<Message>& messages) {
  using S = sink_target_t<Sink>;
  S& sink = sink_or_ref;
  if constexpr (sink_has_push_many<S>::value) {
    sink.push_many(messages);
  } else if constexpr (sink_is_batch_callable<S>) {
    sink(messages);
  } else if constexpr (sink_has_push<S>::value) {
    for (const Message& m : messages)
      sink.push(m.queue, m.payload);
  } else {
    for (const Message& m : messages)
      sink(m.queue, m.payload);
  }
}

}  // namespace detail

/// True when `S` (or the type a std::reference_wrapper `S` refers to) can receive replayed
/// payloads; see the shapes at the top of dlq/kv/sinks.hpp.
template <class S>
inline constexpr bool is_sink_v = [] {
  using T = detail::sink_target_t<std::remove_reference_t<S>>;
  return detail::sink_has_push_many<T>::value || detail::sink_is_batch_callable<T> ||
         detail::sink_has_push<T>::value || detail::sink_is_callable<T>;
}();

/// An in-memory set of FIFO queues: the default replay destination of KeyValueStorage, for
/// unit tests and for services that consume replayed jobs in-process. A handle: copies share
/// the same queues. Thread-safe.
class MemoryQueues {
 public:
  /// An empty set of queues.
  MemoryQueues() : state_(std::make_shared<state>()) {}

  /// Appends every message's payload to its queue, in order, under one lock.
  void push_many(const std::vector<Message>& messages) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const Message& m : messages)
      queue_locked(m.queue).emplace_back(m.payload);
  }

  /// Appends `payload` to `queue`.
  void push(std::string_view queue, std::string_view payload) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    queue_locked(queue).emplace_back(payload);
  }

  /// Removes and returns the oldest payload of `queue`; std::nullopt when it is empty.
  std::optional<std::string> pop(std::string_view queue) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->queues.find(queue);
    if (it == state_->queues.end() || it->second.empty()) return std::nullopt;
    std::string front = std::move(it->second.front());
    it->second.pop_front();
    return front;
  }

  /// Number of payloads waiting in `queue`.
  std::size_t size(std::string_view queue) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->queues.find(queue);
    return it == state_->queues.end() ? 0 : it->second.size();
  }

  /// A copy of `queue`'s payloads, oldest first.
  std::vector<std::string> contents(std::string_view queue) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->queues.find(queue);
    if (it == state_->queues.end()) return {};
    return std::vector<std::string>(it->second.begin(), it->second.end());
  }

  /// Empties every queue.
  void clear() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queues.clear();
  }

 private:
  struct state {
    mutable std::mutex mutex;
    std::map<std::string, std::deque<std::string>, std::less<>> queues;
  };

  std::deque<std::string>& queue_locked(std::string_view queue) {
    auto it = state_->queues.find(queue);
    if (it == state_->queues.end())
      it = state_->queues.emplace(std::string(queue), std::deque<std::string>{}).first;
    return it->second;
  }

  std::shared_ptr<state> state_;
};

/// A type-erased sink: holds any sink shape (see the top of dlq/kv/sinks.hpp) behind one
/// type, so `KeyValueStorage<Store, dlq::kv::AnySink>` can be named without knowing the
/// sink's type. A default-constructed AnySink has no destination and throws on use.
class AnySink {
 public:
  /// No destination: push_many throws dlq::invalid_argument.
  AnySink() = default;

  /// Wraps `sink` (copied or moved in; use std::ref to refer to one you own).
  template <class S, class = std::enable_if_t<!std::is_same_v<std::decay_t<S>, AnySink> &&
                                              is_sink_v<std::decay_t<S>>>>
  AnySink(S&& sink)  // NOLINT(google-explicit-constructor): implicit by design
      : deliver_(
            [s = std::decay_t<S>(std::forward<S>(sink))](
                const std::vector<Message>& messages) mutable { detail::deliver(s, messages); }) {}

  /// True when a destination is set.
  explicit operator bool() const noexcept { return static_cast<bool>(deliver_); }

  /// Delivers `messages` to the wrapped sink.
  /// @throws dlq::invalid_argument if no sink is set; whatever the wrapped sink throws.
  void push_many(const std::vector<Message>& messages) {
    if (!deliver_)
      throw invalid_argument(
          "[dlq.kv] replay: no replay destination is set; construct the KeyValueStorage with "
          "a sink (a callable or an object with push/push_many)");
    deliver_(messages);
  }

 private:
  std::function<void(const std::vector<Message>&)> deliver_;
};

}  // namespace kv
}  // namespace dlq
