// Fixtures for the PostgreSQL tests: the private server's URL (ctest fixture `postgres`,
// tests/support/postgres.sh) and stores in a schema of their own, so that tests run in
// parallel on one server.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "dlq/kv/storage.hpp"
#include "dlq/postgres/kv_store.hpp"
#include "dlq/postgres/migrate.hpp"

namespace pgtest {

/// The private server's URL, from the file named by DLQ_TEST_POSTGRES_URL_FILE.
inline std::string url() {
  const char* file = std::getenv("DLQ_TEST_POSTGRES_URL_FILE");
  if (file == nullptr) throw std::runtime_error("DLQ_TEST_POSTGRES_URL_FILE is not set (run through ctest)");
  std::ifstream in(file);
  std::string u;
  if (!std::getline(in, u) || u.empty())
    throw std::runtime_error(std::string("no URL in ") + file + " (did postgres_server_start fail?)");
  return u;
}

/// The URL for the suites, which check what the store does, not what survives a crash:
/// with synchronous_commit off for their sessions (a COMMIT does not wait for its WAL
/// flush; the server keeps fsync on), through libpq's `options` parameter of the URL. The
/// suite takes 44 s so and 116 s with every commit flushed (2 cores, loopback).
inline std::string suite_url() {
  return url() + "?options=-c%20synchronous_commit%3Doff";
}

/// A schema name no other test uses (this process's id and a counter), with a quote and a
/// space in it: every statement must quote it.
inline std::string unique_schema() {
  static std::atomic<int> n{0};
  return "dlq test \"" + std::to_string(::getpid()) + "\" " + std::to_string(n++);
}

/// Options naming a fresh schema, migrated.
inline dlq::postgres::Options migrated() {
  dlq::postgres::Options o;
  o.schema = unique_schema();
  dlq::postgres::migrate(url(), o);
  return o;
}

/// The key-value store suite's fixture (tests/contract/kv_store_suite.hpp).
struct PostgresKv {
  using store_type = dlq::kv::PostgresStore;
  static constexpr bool durable = true;
  store_type make() { return store_type(suite_url(), migrated()); }
};

/// The same store, with no idle connection kept: each call opens and closes one.
struct PostgresNoPoolKv {
  using store_type = dlq::kv::PostgresStore;
  static constexpr bool durable = true;
  store_type make() {
    dlq::postgres::Options o = migrated();
    o.max_idle_connections = 0;
    return store_type(suite_url(), o);
  }
};

}  // namespace pgtest
