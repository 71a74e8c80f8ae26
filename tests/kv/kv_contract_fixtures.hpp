// Contract-suite fixtures (tests/contract/contract_suite.hpp) for dlq::KeyValueStorage over
// each store. The replay destination is the adapter's default sink, a dlq::kv::MemoryQueues;
// push_raw stores bytes the way another program would: a record without an id.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/storage.hpp"
#include "kv_fixtures.hpp"
#if DLQ_TEST_HAVE_SQLITE
#include "dlq/sqlite/sqlite_store.hpp"
#endif

template <class Store>
struct KvFixtureBase {
  using storage_type = dlq::KeyValueStorage<Store>;

  explicit KvFixtureBase(Store store) : storage_(std::move(store)) {}

  storage_type& storage() { return storage_; }

  std::vector<std::string> source(std::string_view queue) {
    return storage_.sink().contents(queue);
  }

  void push_raw(std::string_view queue, std::string_view raw) {
    storage_.push(dlq::Record{queue, {}, {}, raw});
  }

 private:
  storage_type storage_;
};

struct KvMemoryFixture : KvFixtureBase<dlq::kv::MemoryStore> {
  KvMemoryFixture() : KvFixtureBase(dlq::kv::MemoryStore{}) {}
};
static_assert(dlq::detail::has_stats<KvMemoryFixture::storage_type>::value,
              "the memory store reads stats at one instant (the contract suite relies on it)");

/// A store with only the four required members: the adapter's fallbacks pass the suite too.
struct KvMinimalFixture : KvFixtureBase<kvtest::MinimalStore> {
  KvMinimalFixture() : KvFixtureBase(kvtest::MinimalStore{}) {}
};
static_assert(!dlq::detail::has_stats<KvMinimalFixture::storage_type>::value,
              "the minimal store exercises the size()+range() fallback of stats");

#if DLQ_TEST_HAVE_SQLITE
/// Holds the temporary directory before the store that lives in it.
struct KvTempDirHolder {
  kvtest::TempDir dir;
};

struct KvSqliteFixture : KvTempDirHolder, KvFixtureBase<dlq::kv::SqliteStore> {
  KvSqliteFixture() : KvFixtureBase(dlq::kv::SqliteStore(dir.file("dlq.db"))) {}
};
static_assert(dlq::detail::has_stats<KvSqliteFixture::storage_type>::value,
              "the SQLite store reads stats at one instant (the contract suite relies on it)");

struct KvSqliteNormalFixture : KvTempDirHolder, KvFixtureBase<dlq::kv::SqliteStore> {
  KvSqliteNormalFixture() : KvFixtureBase(dlq::kv::SqliteStore(dir.file("dlq.db"), options())) {}
  static dlq::kv::SqliteOptions options() {
    dlq::kv::SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;
    return o;
  }
};
#endif

#if DLQ_TEST_HAVE_REDIS
/// KeyValueStorage over RedisStore on the shared test server, in its own key namespace, and
/// replaying into an in-memory sink.
struct KvRedisFixture : KvFixtureBase<dlq::kv::RedisStore> {
  KvRedisFixture() : KvFixtureBase(kvtest::RedisKv{}.make()) {}
};
static_assert(dlq::detail::has_stats<KvRedisFixture::storage_type>::value,
              "the Redis store reads stats at one instant (the contract suite relies on it)");
#endif
