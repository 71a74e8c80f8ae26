// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/pool.hpp
/// dlq::redis::ConnectionPool: connections to one server shared by many threads, so that
/// many worker threads can use one DeadLetterQueue. Connections are opened lazily, up to
/// PoolOptions::size; a thread holds one for the duration of one storage operation.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::redis {

/// A thread-safe pool of Connection objects to one server.
class ConnectionPool {
 public:
  /// Exclusive use of one pooled connection; returns it to the pool when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_ != nullptr && conn_ != nullptr) pool_->give_back(std::move(conn_));
    }
    /// The leased connection.
    Connection& operator*() const noexcept { return *conn_; }
    /// The leased connection.
    Connection* operator->() const noexcept { return conn_.get(); }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  /// Creates an empty pool; no connection is opened until acquire() needs one. Does not throw
  /// except std::bad_alloc.
  explicit ConnectionPool(ConnectionOptions options, PoolOptions pool = {})
      : options_(std::move(options)), pool_(pool), endpoint_(options_.endpoint()) {
    if (pool_.size == 0) pool_.size = 1;
  }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool() = default;

  /// Takes an idle connection, or creates one if fewer than PoolOptions::size exist, or
  /// waits for one to be given back. The connection itself connects on first use.
  /// @throws dlq::timeout_error when none became free within PoolOptions::wait_timeout.
  Lease acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto available = [this] { return !idle_.empty() || created_ < pool_.size; };
    if (!available()) {
      if (pool_.wait_timeout.count() > 0) {
        if (!cv_.wait_for(lock, pool_.wait_timeout, available)) {
          throw dlq::timeout_error(
              dlq::detail::message("redis", endpoint_,
                                   "no pooled connection became free within " +
                                       std::to_string(pool_.wait_timeout.count()) + " ms (all " +
                                       std::to_string(pool_.size) + " in use)",
                                   "raise PoolOptions::size or PoolOptions::wait_timeout"));
        }
      } else {
        cv_.wait(lock, available);
      }
    }
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    ++created_;
    lock.unlock();
    return Lease(this, std::make_unique<Connection>(options_));
  }

  /// The options every pooled connection uses.
  const ConnectionOptions& options() const noexcept { return options_; }
  /// "host:port" of the server, for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// The most connections this pool opens.
  std::size_t capacity() const noexcept { return pool_.size; }

 private:
  void give_back(std::unique_ptr<Connection> conn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(std::move(conn));
    }
    cv_.notify_one();
  }

  ConnectionOptions options_;
  PoolOptions pool_;
  std::string endpoint_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t created_ = 0;
};

}  // namespace dlq::redis
