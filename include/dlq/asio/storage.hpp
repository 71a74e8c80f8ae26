// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/storage.hpp
/// The asynchronous storage contract: what a backend must provide so that
/// dlq::asio::AsyncDeadLetterQueue runs on it without blocking its executor (the async
/// counterpart of dlq/storage.hpp), and the trait that admits a blocking storage whose calls
/// never block (dlq::asio::runs_inline).
///
/// The front end owns everything that is the same on every backend (envelopes, ids, clock,
/// validation, policies, counters, events: the blocking front end's detail::queue_core); an
/// asynchronous storage only stores and reads bytes, and completes each call later on the
/// executor it was created with. dlq::asio::RedisListStorage (dlq/asio/redis.hpp) is one.
///
/// Required members of an asynchronous storage `S` (checked by dlq::asio::is_async_storage
/// through the tag; the rest is used as written here):
///
///     using async_storage_tag = void;                       // marks S as asynchronous
///     template <class Done>                                 // Done: void(std::exception_ptr,
///     void push(std::string_view queue,                     //            dlq::asio::PushResult)
///               std::vector<std::string> envelopes, std::size_t max_length,
///               bool evict_oldest, Done&& done);            // append, as one atomic command
///     template <class Done>
///     void push_one(std::string_view queue, std::string_view envelope,
///                   std::size_t max_length, bool evict_oldest, Done&& done);
///                                                           // push() of one envelope; `queue`
///                                                           // is read before `done` is taken
///     void size(std::string_view queue,
///               std::function<void(std::exception_ptr, std::size_t)> done);
///     void range(std::string_view queue, std::size_t start, std::size_t count,
///                std::function<void(std::exception_ptr, std::vector<std::string>)> done);
///     template <class Done>                                 // Done: void(std::exception_ptr,
///     void bump_count(std::string_view queue,               //            std::int64_t)
///                     std::string_view key, std::chrono::seconds ttl, Done&& done);
///     void close() noexcept;                                // fail what is in flight
///
/// Rules for every member: called on the executor (AsyncDeadLetterQueue dispatches there);
/// `done` runs exactly once, on the executor, never inside the call; it gets a null
/// exception_ptr on success, else a dlq::storage_error subclass (outcome_unknown() set when a
/// write was sent and its answer lost) and a value-initialised value. push with
/// `max_length == 0` appends; with `max_length > 0` and `evict_oldest` it appends and removes
/// the oldest items beyond `max_length` atomically (PushResult::evicted, oldest first); else
/// it appends all of them only if the list then holds at most `max_length` items
/// (PushResult::stored == false: none appended). range reads items [start, start + count),
/// clamped as the blocking storage's range. bump_count adds one to a counter that expires
/// `ttl` after its last bump and returns the new value (the poison guard).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace dlq {
class MemoryStorage;
}

namespace dlq::asio {

/// What an asynchronous storage's push reports.
struct PushResult {
  bool stored = true;                ///< false: Overflow::reject refused it, nothing stored
  std::vector<std::string> evicted;  ///< raw items evicted by Overflow::evict_oldest
};

/// True for a storage that declares `using async_storage_tag = void;` (see the file comment).
template <class S, class = void>
struct is_async_storage : std::false_type {};
template <class S>
struct is_async_storage<S, std::void_t<typename S::async_storage_tag>> : std::true_type {};

/// True for a storage whose calls never block (they take a mutex at most): the async queue
/// runs them inline and completes through the executor. Specialise it for your own such
/// storage. Default: false, except for dlq::MemoryStorage.
template <class Storage>
struct runs_inline : std::false_type {};
template <>
struct runs_inline<MemoryStorage> : std::true_type {};

}  // namespace dlq::asio
