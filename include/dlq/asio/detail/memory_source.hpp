// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/memory_source.hpp
/// Internal to dlq::asio: the backend of dlq::asio::AsyncSourceQueue<dlq::MemoryStorage> —
/// the blocking dlq::MemorySourceQueue run inline (its calls never block) with each result
/// posted to the executor, never delivered inside the initiating call. Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>

#include <cstddef>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/source_queue.hpp"
#include "dlq/storage/memory.hpp"

namespace dlq::asio::detail {

/// The backend of AsyncSourceQueue<Storage>: specialised per storage (memory here, Redis in
/// dlq/asio/redis_source_queue.hpp). Each member completes `done` on the executor.
template <class Storage>
class source_backend;

template <>
class source_backend<MemoryStorage> {
 public:
  source_backend(::asio::any_io_executor ex, MemoryStorage& storage)
      : ex_(std::move(ex)), queue_(storage) {}

  void take(const std::string& q, const std::string& c, std::size_t max,
            done_fn<std::vector<SourceJob>> done) {
    run(std::move(done), [&] { return queue_.take(q, c, max); });
  }
  void settle(const std::string& q, const std::string& c, const std::vector<SourceJob>& jobs,
              bool requeue, done_fn<std::size_t> done) {
    run(std::move(done),
        [&] { return requeue ? queue_.nack(q, c, jobs) : queue_.ack(q, c, jobs); });
  }
  void recover(const std::string& q, const std::string& c, done_fn<std::size_t> done) {
    run(std::move(done), [&] { return queue_.recover(q, c); });
  }
  void size(const std::string& q, done_fn<std::size_t> done) {
    run(std::move(done), [&] { return queue_.size(q); });
  }
  void in_flight(const std::string& q, const std::string& c, done_fn<std::size_t> done) {
    run(std::move(done), [&] { return queue_.in_flight(q, c); });
  }
  void close() noexcept {}

 private:
  // Runs `f` now (memory never blocks) and posts its result or exception.
  template <class T, class F>
  void run(done_fn<T> done, F&& f) {
    std::exception_ptr e;
    T value{};
    try {
      value = f();
    } catch (...) {
      e = std::current_exception();
    }
    ::asio::post(ex_, [done = std::move(done), e, v = std::move(value)]() mutable {
      done(e, std::move(v));
    });
  }

  ::asio::any_io_executor ex_;
  MemorySourceQueue queue_;
};

}  // namespace dlq::asio::detail
