// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Helpers for the Redis tests: the shared test server's URL, unique key layouts so tests can
// run in parallel on one server, and a raw client for setting up and checking data.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include "dlq/detail/id.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"

namespace dlq::test {

/// The URL of the shared test server (ctest fixture `redis`). Throws — failing the test —
/// when the fixture did not run: Redis tests never skip.
inline std::string shared_redis_url() {
  const char* file = std::getenv("DLQ_TEST_REDIS_URL_FILE");
  if (file == nullptr || *file == '\0') {
    throw std::runtime_error(
        "DLQ_TEST_REDIS_URL_FILE is not set: run this test through ctest (fixture `redis` "
        "starts the server), or set it to a file holding a redis:// URL");
  }
  std::ifstream in(file);
  std::string url;
  if (!(in >> url) || url.empty()) {
    throw std::runtime_error(std::string("cannot read the test server URL from ") + file +
                             ": did the redis_server_start fixture fail?");
  }
  return url;
}

/// A fresh dlq entry id (UUIDv7, as the front end makes them) for hand-built envelopes.
inline std::string new_id() {
  static detail::id_generator ids;
  return ids.next(std::chrono::system_clock::now());
}

/// A prefix no other test (or test process) uses: "t<pid>.<n>.<random>:".
inline std::string unique_prefix() {
  static std::atomic<int> counter{0};
  static const unsigned salt = std::random_device{}();
  return "t" + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
         std::to_string(salt % 100000) + ":";
}

/// The default (cluster-safe) layout under a unique prefix.
inline RedisListOptions unique_layout(const std::string& prefix = unique_prefix()) {
  RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  return o;
}

/// A raw connection for test setup and checks.
class RawClient {
 public:
  explicit RawClient(const std::string& url) : conn_(redis::parse_url(url)) {}
  explicit RawClient(redis::ConnectionOptions o) : conn_(std::move(o)) {}

  /// Runs a command given as strings; returns the reply (errors are not thrown).
  redis::Reply cmd(const std::vector<std::string>& args) {
    redis::Command c;
    for (const auto& a : args)
      c.arg(std::string_view(a));
    return conn_.run(c, redis::Effect::write);
  }
  long long integer(const std::vector<std::string>& args) {
    redis::Command c;
    for (const auto& a : args)
      c.arg(std::string_view(a));
    return redis::integer(conn_.run(c, redis::Effect::write), conn_, c.label());
  }
  std::vector<std::string> strings(const std::vector<std::string>& args) {
    redis::Command c;
    for (const auto& a : args)
      c.arg(std::string_view(a));
    return redis::strings(conn_.run(c, redis::Effect::write), conn_, c.label());
  }
  /// Every item of a list, read in chunks of 500 items (a list holding 1 MiB items read
  /// 5000 at a time was a 240 MB answer, which a loaded machine did not read within the
  /// client's command timeout).
  std::vector<std::string> list(const std::string& key) {
    std::vector<std::string> out;
    for (long long start = 0;; start += 500) {
      auto part = strings({"LRANGE", key, std::to_string(start), std::to_string(start + 499)});
      out.insert(out.end(), part.begin(), part.end());
      if (part.size() < 500) return out;
    }
  }
  /// RPUSHes items in chunks.
  void rpush(const std::string& key, const std::vector<std::string>& items) {
    for (std::size_t i = 0; i < items.size(); i += 1000) {
      redis::Command c("RPUSH");
      c.arg(std::string_view(key));
      for (std::size_t j = i; j < items.size() && j < i + 1000; ++j)
        c.arg(std::string_view(items[j]));
      redis::integer(conn_.run(c, redis::Effect::write), conn_, c.label());
    }
  }
  redis::Connection& connection() { return conn_; }

 private:
  redis::Connection conn_;
};

/// Milliseconds since `start`.
inline long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

// How many times each value of `field` occurs in `list` (entries carry "field":"…").
inline std::map<std::string, int> counts_of(const std::vector<std::string>& list,
                                     const std::string& field) {
  const std::string pattern = "\"" + field + "\":\"";
  std::map<std::string, int> n;
  for (const std::string& item : list) {
    const auto at = item.find(pattern);
    if (at == std::string::npos) continue;
    const auto from = at + pattern.size();
    ++n[item.substr(from, item.find('"', from) - from)];
  }
  return n;
}

}  // namespace dlq::test
