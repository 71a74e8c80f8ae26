// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/sqlite_store-inl.hpp
/// The definition of SqliteStore's constructor (see DLQ_SQLITE_INLINE in
/// dlq/detail/compiled.hpp): included by sqlite_store.hpp in header-only mode, compiled into
/// dlq::sqlite in compiled mode, so that a unit opening a store does not compile the database
/// set-up (schema, pragmas, the connection pool) again.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "dlq/sqlite/sqlite_store.hpp"

namespace dlq {
namespace kv {

DLQ_SQLITE_INLINE SqliteStore::SqliteStore(std::string path, SqliteOptions options) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0)
    throw invalid_argument(dlq::detail::message(
        "sqlite", "SqliteStore", "path '" + path + "' is not a file path",
        "give the path of a database file; for an in-memory store use dlq::kv::MemoryStore"));
  db_ = std::make_shared<detail::sqlite_database>(std::move(path), std::move(options));
  db_->initialize();
}

}  // namespace kv
}  // namespace dlq
