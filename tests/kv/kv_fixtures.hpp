// Fixtures for the key-value backend's tests: one per store, so that the same test cases run
// over every store (TEMPLATE_LIST_TEST_CASE over kv_fixtures; the key-value store suite,
// tests/contract/kv_store_suite.hpp, takes them by name). The in-memory ones are in
// tests/contract/kv_memory_fixtures.hpp.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "contract/kv_memory_fixtures.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/storage.hpp"
#if DLQ_TEST_HAVE_SQLITE
#include "dlq/sqlite/sqlite_store.hpp"
#endif
#if DLQ_TEST_HAVE_REDIS
#include "dlq/redis/kv_store.hpp"
#include "redis/redis_test_util.hpp"
#endif

namespace kvtest {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/dlq-kv-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const noexcept { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

#if DLQ_TEST_HAVE_REDIS
/// The Redis store on the shared test server (ctest fixture `redis`), in a key namespace of
/// its own so that tests can run in parallel.
struct RedisKv {
  using store_type = dlq::kv::RedisStore;
  static constexpr bool durable = true;
  store_type make() {
    dlq::kv::RedisStoreOptions o;
    o.key_prefix = dlq::test::unique_prefix();
    return store_type(dlq::test::shared_redis_url(), o);
  }
};
#endif

#if DLQ_TEST_HAVE_SQLITE
struct SqliteKv {
  using store_type = dlq::kv::SqliteStore;
  static constexpr bool durable = true;
  TempDir dir;
  store_type make() { return store_type(dir.file("kv.db")); }
};

struct SqliteNormalKv {
  using store_type = dlq::kv::SqliteStore;
  static constexpr bool durable = true;
  TempDir dir;
  store_type make() {
    dlq::kv::SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;
    o.max_idle_connections = 0;  // a fresh connection per call: exercises open/close paths
    return store_type(dir.file("kv.db"), o);
  }
};
#endif

#if DLQ_TEST_HAVE_REDIS
using kv_fixtures = std::tuple<RedisKv>;
#elif DLQ_TEST_HAVE_SQLITE
using kv_fixtures = std::tuple<SqliteKv, SqliteNormalKv>;
#else
using kv_fixtures = std::tuple<MemoryKv, MinimalKv>;
#endif

}  // namespace kvtest
