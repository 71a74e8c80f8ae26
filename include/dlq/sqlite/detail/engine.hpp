// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/detail/engine.hpp
/// The engine under dlq::kv::SqliteStore: the state a store and its copies share — a pool of
/// connections, group commit (writers that arrive while a transaction runs are committed
/// together by the next one, one fsync for all) and the retry while another connection or
/// process holds the file's lock, up to SqliteOptions::busy_timeout.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/sqlite/detail/connection.hpp"
#include "dlq/sqlite/detail/schema.hpp"
#include "dlq/sqlite/options.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// The state a SqliteStore and its copies share: the path, the options and a pool of idle
/// connections.
class sqlite_database {
 public:
  sqlite_database(std::string path, SqliteOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}

  const std::string& path() const noexcept { return path_; }
  const SqliteOptions& options() const noexcept { return options_; }

  /// A connection for one call; returned to the pool when the lease ends.
  class lease {
   public:
    lease(sqlite_database& db, std::unique_ptr<sqlite_connection> c) : db_(db), c_(std::move(c)) {}
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() {
      c_->rollback_quietly();
      db_.release(std::move(c_));
    }
    sqlite_connection& operator*() const noexcept { return *c_; }
    sqlite_connection* operator->() const noexcept { return c_.get(); }

   private:
    sqlite_database& db_;
    std::unique_ptr<sqlite_connection> c_;
  };

  lease acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<sqlite_connection> c = std::move(idle_.back());
        idle_.pop_back();
        return lease(*this, std::move(c));
      }
    }
    return lease(*this, open_connection());
  }

  /// Runs `body(connection)` in a `BEGIN IMMEDIATE` transaction and commits it, retrying the
  /// whole transaction while another connection holds the lock, up to the busy timeout.
  ///
  /// Group commit: writers of one store that arrive while a transaction is running queue up;
  /// the next transaction runs all their bodies, in arrival order, and commits once — one
  /// fsync for all of them. Each caller returns only after the commit that holds its write.
  /// A body that throws is taken out of the group (its caller gets the error) and the others
  /// are run again without it; a failed commit fails every caller in the group.
  template <class Body>
  auto write(const char* what, Body&& body) {
    using result_type = decltype(body(std::declval<sqlite_connection&>()));
    std::optional<result_type> result;
    write_request request;
    request.what = what;
    request.body = [&](sqlite_connection& c) { result = body(c); };
    submit(request);
    if (request.error) std::rethrow_exception(request.error);
    return std::move(*result);
  }

  /// Runs `body(connection)` (reads, autocommit), retrying while the database is locked.
  template <class Body>
  auto read(const char* what, Body&& body) {
    return retrying(what, [&] {
      lease c = acquire();
      return body(*c);
    });
  }

  /// Opens the file, checks (or creates, or migrates) the schema. Called once per store.
  void initialize() {
    retrying("opening the database", [&] {
      lease c = acquire();
      sqlite_set_up(*c, path_);
      return 0;
    });
  }

 private:
  /// One caller's part of a group commit.
  struct write_request {
    const char* what = "";
    std::function<void(sqlite_connection&)> body;
    std::exception_ptr error;  // set when this request failed
    bool done = false;         // guarded by group_mutex_
  };
  /// Thrown inside a group transaction when one body failed: the group is run again without it.
  struct body_failed {};

  void submit(write_request& request) {
    std::unique_lock<std::mutex> lock(group_mutex_);
    pending_.push_back(&request);
    while (!request.done) {
      if (leader_active_) {
        group_done_.wait(lock);
        continue;
      }
      leader_active_ = true;  // this thread commits everything queued so far
      std::vector<write_request*> group;
      group.swap(pending_);
      lock.unlock();
      run_group(group);
      lock.lock();
      for (write_request* r : group)
        r->done = true;
      leader_active_ = false;
      group_done_.notify_all();
    }
  }

  void run_group(std::vector<write_request*> live) noexcept {
    while (!live.empty()) {
      write_request* failed = nullptr;
      try {
        retrying(live.front()->what, [&] {
          lease c = acquire();
          { sqlite_use(*c, sqlite_stmt::begin_immediate).step(live.front()->what); }
          for (write_request* r : live) {
            try {
              r->body(*c);
            } catch (const sqlite_busy&) {
              throw;  // the lock was lost: retry the whole group
            } catch (...) {
              r->error = std::current_exception();
              failed = r;
              throw body_failed{};
            }
          }
          {
            sqlite_use(*c, sqlite_stmt::commit).step(live.front()->what, /*outcome_unknown=*/true);
          }
          return 0;
        });
        return;  // committed: every live request succeeded
      } catch (const body_failed&) {
        live.erase(std::find(live.begin(), live.end(), failed));  // rolled back; run the rest
      } catch (...) {
        for (write_request* r : live)
          r->error = std::current_exception();
        return;
      }
    }
  }

  template <class Fn>
  auto retrying(const char* what, Fn&& fn) -> decltype(fn()) {
    const auto start = std::chrono::steady_clock::now();
    std::chrono::milliseconds pause{1};
    for (;;) {
      try {
        return fn();
      } catch (const sqlite_busy&) {
        // The lease rolled back. Another connection holds the lock; wait a little and retry.
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= options_.busy_timeout)
        throw timeout_error(dlq::detail::message(
            "sqlite", path_,
            std::string(what) + " failed: the database stayed locked by another connection for " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                " ms; nothing was written",
            "retry later, or raise SqliteOptions::busy_timeout; look for a process holding a "
            "long transaction on this file"));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds{50});
    }
  }

  std::unique_ptr<sqlite_connection> open_connection() {
    auto c = std::make_unique<sqlite_connection>(path_, options_);
    c->exec(options_.synchronous == SqliteSync::full ? "PRAGMA synchronous=FULL"
                                                     : "PRAGMA synchronous=NORMAL",
            "setting PRAGMA synchronous");
    // The record counts' triggers rely on it being off (see sqlite_migration_v1_to_v2).
    c->exec("PRAGMA recursive_triggers=OFF", "setting PRAGMA recursive_triggers");
    return c;
  }

  void release(std::unique_ptr<sqlite_connection> c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(c));
  }

  std::string path_;
  SqliteOptions options_;
  std::mutex mutex_;  // guards idle_
  std::vector<std::unique_ptr<sqlite_connection>> idle_;
  std::mutex group_mutex_;  // guards pending_, leader_active_ and write_request::done
  std::condition_variable group_done_;
  std::vector<write_request*> pending_;
  bool leader_active_ = false;
};

}  // namespace detail
}  // namespace kv
}  // namespace dlq
