// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/options.hpp
/// The options of dlq::kv::PostgresStore and dlq::postgres::migrate: which schema holds the
/// tables, the connection pool, timeouts and retries.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace dlq {
namespace postgres {

/// Options of dlq::kv::PostgresStore (dlq/postgres/kv_store.hpp) and of migrate().
struct Options {
  /// The PostgreSQL schema (namespace) that holds dlq's tables. Default "dlq". Any name
  /// (it is always quoted: "Orders", names with spaces or quotes are kept as written) but
  /// not empty, without NUL bytes and at most 63 bytes long (PostgreSQL truncates longer
  /// identifiers; a longer name is a dlq::invalid_argument). Several applications, or tests, can share a database
  /// with one schema each.
  std::string schema = "dlq";
  /// Idle connections kept open for reuse (a call with none idle opens one). Default 4;
  /// 0 = close each connection after its call.
  std::size_t max_idle_connections = 4;
  /// How long opening a connection may take, when the URL does not say (libpq's
  /// `connect_timeout`, whole seconds, at least 2). Default 10 s.
  std::chrono::seconds connect_timeout{10};
  /// Transactions aborted by PostgreSQL as a deadlock or serialization failure (SQLSTATE
  /// 40P01, 40001) are run again, up to this many attempts in all, before the call throws
  /// dlq::conflict_error. Default 5.
  int max_attempts = 5;
};

}  // namespace postgres
}  // namespace dlq
