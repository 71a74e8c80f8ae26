// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/options.hpp
/// The options of dlq::kv::SqliteStore (dlq/sqlite/sqlite_store.hpp): durability, lock
/// waiting, file creation, the connection pool and the largest value.
#pragma once

#include <chrono>
#include <cstddef>

namespace dlq {
namespace kv {

/// The `synchronous` setting of a SqliteStore (see the file comment for what each means).
enum class SqliteSync : unsigned char {
  full,   ///< PRAGMA synchronous=FULL: fsync on every commit; survives power loss (default)
  normal  ///< PRAGMA synchronous=NORMAL: survives a process crash, not a power loss; faster
};

/// Options of dlq::kv::SqliteStore.
struct SqliteOptions {
  /// Durability of an acknowledged write. Default SqliteSync::full.
  SqliteSync synchronous = SqliteSync::full;
  /// How long one call waits, in total, for a lock another connection or process holds
  /// before it throws dlq::timeout_error. Default 30 s; 0 = do not wait (fail at once).
  std::chrono::milliseconds busy_timeout{30000};
  /// Create the file (and the schema) when it does not exist. Default true; false = a
  /// missing file is an error.
  bool create = true;
  /// Idle connections kept open for reuse (a call with none idle opens one). Default 4;
  /// 0 = close each connection after its call.
  std::size_t max_idle_connections = 4;
  /// Largest value (entry) the store accepts, in bytes; a larger one is refused with
  /// dlq::invalid_argument and nothing of its call is written. Default 0 = SQLite's limit
  /// (1,000,000,000 bytes unless SQLite was built otherwise).
  std::size_t max_value_bytes = 0;
};

}  // namespace kv
}  // namespace dlq
