// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/sentinel_link.hpp
/// The I/O of a pool's shared view of the sentinels (detail::sentinel::SharedView decides):
/// one connection to one sentinel, kept open, asked `SENTINEL get-master-addr-by-name` at
/// most once per SentinelOptions::check_interval for all the pool's connections. A
/// ConnectionPool of a redis+sentinel:// URL makes one and gives it to every connection it
/// creates (Connection::share_sentinel_check); a Connection alone asks on a short connection
/// of its own per interval instead.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "dlq/redis/connection.hpp"
#include "dlq/redis/detail/sentinel.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::redis::detail {

/// One pool's link to the sentinels for the master checks. Thread-safe.
class SentinelLink {
 public:
  /// For connections made with `options` (a Sentinel master's). Opens nothing yet.
  explicit SentinelLink(const ConnectionOptions& options)
      : sentinel_(options.sentinel),
        connect_timeout_(options.connect_timeout),
        command_timeout_(options.command_timeout) {}
  SentinelLink(const SentinelLink&) = delete;
  SentinelLink& operator=(const SentinelLink&) = delete;

  /// Whether a connection to `host`:`port`, whose master the sentinels named at `named_at`,
  /// must go because they name another one now. Asks a sentinel first when the interval has
  /// passed and no other connection is asking (the others use the latest answer). Never
  /// throws but std::bad_alloc: an unreachable sentinel changes nothing but which is next.
  bool must_go(const std::string& host, int port, sentinel::SharedView::clock::time_point named_at) {
    if (view_.begin_check(sentinel::SharedView::clock::now(), sentinel_.check_interval)) ask();
    return view_.must_go(host, port, named_at);
  }

 private:
  void ask() {
    std::lock_guard<std::mutex> lock(mutex_);  // one asker at a time (begin_check): uncontended
    const std::size_t n = sentinel_.sentinels.size();
    if (n == 0) return view_.failed(0);
    try {
      if (!conn_) conn_.emplace(options_for(sentinel_.sentinels[view_.sentinel() % n]));
      const Reply r = conn_->run(
          std::move(Command("SENTINEL").arg("get-master-addr-by-name").arg(sentinel_.master_name)),
          Effect::read);
      view_.answered(sentinel::read_master_address(*r));
    } catch (const std::exception&) {  // refused or unreachable: the next sentinel next time
      conn_.reset();
      view_.failed(n);
    }
  }

  ConnectionOptions options_for(const SentinelAddress& a) const {
    return sentinel_connection_options(a, sentinel_, connect_timeout_, command_timeout_);
  }

  const SentinelOptions sentinel_;
  const std::chrono::milliseconds connect_timeout_;
  const std::chrono::milliseconds command_timeout_;
  sentinel::SharedView view_;
  std::mutex mutex_;                // conn_
  std::optional<Connection> conn_;  // to the sentinel view_.sentinel(), kept open
};

}  // namespace dlq::redis::detail
