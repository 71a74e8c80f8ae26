// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/detail/schema.hpp
/// The schema of a dlq::kv::SqliteStore file: its tables, each migration from an older
/// version, and opening a file as a store — which files are refused, and how a new or older
/// file is brought to the current version in one transaction.
#pragma once

#include <sqlite3.h>

#include <cstdlib>
#include <string>

#include "dlq/errors.hpp"
#include "dlq/sqlite/detail/connection.hpp"

namespace dlq {
namespace kv {
namespace detail {

inline constexpr int sqlite_application_id = 0x444C5121;  // "DLQ!"
inline constexpr int sqlite_schema_version = 2;
/// Oldest SQLite library the store runs on: UPSERT (`INSERT … ON CONFLICT DO UPDATE`).
inline constexpr int sqlite_min_library_version = 3024000;
/// Expired counters one increment deletes, at most (keeps the counters table bounded: each
/// increment adds at most one counter and deletes up to this many expired ones).
inline constexpr int sqlite_expired_counters_per_increment = 16;

/// Schema version 1, exactly as this version of the library creates it. Kept verbatim:
/// later versions migrate from it.
inline constexpr const char* sqlite_schema_v1 =
    "CREATE TABLE dlq_records ("
    " version INTEGER PRIMARY KEY AUTOINCREMENT,"
    " collection TEXT NOT NULL,"
    " id TEXT NOT NULL,"
    " value BLOB NOT NULL,"
    " UNIQUE (collection, id));"
    "CREATE INDEX dlq_records_by_collection ON dlq_records (collection, version);";

/// Migration from schema version 1 to 2, exactly as this version of the library applies it
/// (in the transaction that opens the file; a new file is created at version 1 and migrated):
/// - dlq_counts: the number of records per collection, kept by triggers on dlq_records, so
///   that count() and the bounded save read one row instead of counting an index range. The
///   insert trigger runs BEFORE the insert and counts only a new (collection, id): a save is
///   `INSERT OR REPLACE`, whose implicit deletion of the replaced row fires no delete trigger
///   (SQLite fires them only with PRAGMA recursive_triggers on, which the store turns off on
///   its connections). Explicit deletions go through the delete trigger.
/// - dlq_counters: expiring counters (increment; the poison-loop guard's counts), expiry in
///   Unix milliseconds, indexed by expiry so that increments delete expired ones cheaply.
inline constexpr const char* sqlite_migration_v1_to_v2 =
    "CREATE TABLE dlq_counts ("
    " collection TEXT PRIMARY KEY,"
    " records INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO dlq_counts (collection, records)"
    " SELECT collection, count(*) FROM dlq_records GROUP BY collection;"
    "CREATE TRIGGER dlq_records_count_insert BEFORE INSERT ON dlq_records"
    " WHEN NOT EXISTS (SELECT 1 FROM dlq_records WHERE collection = NEW.collection"
    " AND id = NEW.id)"
    " BEGIN"
    " INSERT INTO dlq_counts (collection, records) VALUES (NEW.collection, 1)"
    " ON CONFLICT (collection) DO UPDATE SET records = records + 1;"
    " END;"
    "CREATE TRIGGER dlq_records_count_delete AFTER DELETE ON dlq_records"
    " BEGIN"
    " UPDATE dlq_counts SET records = records - 1 WHERE collection = OLD.collection;"
    " END;"
    "CREATE TRIGGER dlq_records_count_update AFTER UPDATE OF collection ON dlq_records"
    " WHEN NEW.collection IS NOT OLD.collection"
    " BEGIN"
    " UPDATE dlq_counts SET records = records - 1 WHERE collection = OLD.collection;"
    " INSERT INTO dlq_counts (collection, records) VALUES (NEW.collection, 1)"
    " ON CONFLICT (collection) DO UPDATE SET records = records + 1;"
    " END;"
    "CREATE TABLE dlq_counters ("
    " collection TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " value INTEGER NOT NULL,"
    " expires_at INTEGER NOT NULL,"
    " PRIMARY KEY (collection, key));"
    "CREATE INDEX dlq_counters_by_expiry ON dlq_counters (expires_at);";

/// What a file says about itself, read in the transaction that opens it.
struct sqlite_file_state {
  int application_id = 0;     ///< PRAGMA application_id
  int version = 0;            ///< PRAGMA user_version: the schema version; 0 = none yet
  bool has_records = false;   ///< a dlq_records table exists
  bool other_tables = false;  ///< tables other than dlq_records and sqlite_sequence exist
};

/// Refuses a file this library must not open as a dlq store: another application's
/// database (another application id, or a file with a schema and no dlq id), a file from a
/// newer dlq, or a dlq file without its records table. No I/O.
/// @throws dlq::storage_error naming `path` and the reason.
inline void sqlite_check_file(const sqlite_file_state& f, const std::string& path) {
  if (f.application_id != sqlite_application_id &&
      (f.application_id != 0 || f.version != 0 || f.has_records || f.other_tables))
    throw storage_error(dlq::detail::message(
        "sqlite", path,
        "the file is an SQLite database of another application (application_id " +
            std::to_string(f.application_id) + ", user_version " + std::to_string(f.version) +
            "), not a dlq store",
        "give SqliteStore a file of its own"));
  if (f.version > sqlite_schema_version)
    throw storage_error(dlq::detail::message(
        "sqlite", path,
        "the file was written by a newer dlq (schema version " + std::to_string(f.version) +
            "; this dlq reads versions up to " + std::to_string(sqlite_schema_version) + ")",
        "upgrade dlq, or open a different file"));
  if (f.version != 0 && !f.has_records)
    throw storage_error(
        dlq::detail::message("sqlite", path,
                             "the file says it is a dlq store (schema version " +
                                 std::to_string(f.version) + ") but has no dlq_records table",
                             "the file was altered by hand; restore it from a backup"));
}

/// The first column of a one-value query, as an integer (0 when there is no row).
inline int sqlite_query_int(sqlite_connection& c, const char* sql, const char* what) {
  return std::atoi(c.query_text(sql, what).c_str());
}

/// Refuses an SQLite library older than sqlite_min_library_version.
inline void sqlite_check_library(const std::string& path) {
  if (sqlite3_libversion_number() < sqlite_min_library_version)
    throw storage_error(dlq::detail::message(
        "sqlite", path,
        std::string("the SQLite library is version ") + sqlite3_libversion() +
            "; dlq's SQLite store needs 3.24 or newer (UPSERT)",
        "link a newer SQLite (Debian 11 and later, Ubuntu 20.04 and later ship one)"));
}

/// Switches the file to WAL mode, or refuses it when it cannot be (a network file system).
inline void sqlite_enable_wal(sqlite_connection& c, const std::string& path) {
  const std::string mode = c.query_text("PRAGMA journal_mode=WAL", "switching to WAL mode");
  if (mode != "wal")
    throw storage_error(dlq::detail::message(
        "sqlite", path, "cannot switch the database to WAL mode (journal_mode is '" + mode + "')",
        "use a file on a local file system (WAL does not work on network file systems or "
        "in-memory databases)"));
}

/// Reads what the file says about itself (see sqlite_file_state).
inline sqlite_file_state sqlite_read_file_state(sqlite_connection& c) {
  sqlite_file_state f;
  f.application_id = sqlite_query_int(c, "PRAGMA application_id", "reading the application id");
  f.version = sqlite_query_int(c, "PRAGMA user_version", "reading the schema version");
  f.has_records = sqlite_query_int(c,
                                   "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name = 'dlq_records'",
                                   "reading the schema") != 0;
  f.other_tables = sqlite_query_int(c,
                                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                    "name NOT IN ('dlq_records', 'sqlite_sequence')",
                                    "reading the schema") != 0;
  return f;
}

/// Creates schema version 1 in a new file, then applies the migrations from the file's
/// version to sqlite_schema_version, oldest first; a file already at the current version
/// is checked for its tables instead.
inline void sqlite_migrate(sqlite_connection& c, const sqlite_file_state& f,
                           const std::string& path) {
  if (f.version == 0) {  // a new file: create version 1, then migrate it like any other
    c.exec(sqlite_schema_v1, "creating the schema");
    c.exec(("PRAGMA application_id = " + std::to_string(sqlite_application_id)).c_str(),
           "creating the schema");
  }
  int at = f.version == 0 ? 1 : f.version;
  if (at == 1) {
    c.exec(sqlite_migration_v1_to_v2, "migrating the schema from version 1 to 2");
    at = 2;
  }
  if (at != f.version) {
    c.exec(("PRAGMA user_version = " + std::to_string(at)).c_str(), "writing the schema version");
    return;
  }
  const int v2_tables = sqlite_query_int(c,
                                         "SELECT count(*) FROM sqlite_master WHERE type = "
                                         "'table' AND name IN ('dlq_counts', 'dlq_counters')",
                                         "reading the schema");
  if (v2_tables != 2)
    throw storage_error(dlq::detail::message(
        "sqlite", path,
        "the file says it is a dlq store of schema version " + std::to_string(f.version) +
            " but lacks the dlq_counts or dlq_counters table",
        "the file was altered by hand; restore it from a backup"));
}

/// Opens the file as a dlq store on `c`: checks the library, switches to WAL, and in one
/// transaction checks (sqlite_check_file) and creates or migrates the schema — a crash
/// leaves the file as it was.
inline void sqlite_set_up(sqlite_connection& c, const std::string& path) {
  sqlite_check_library(path);
  sqlite_enable_wal(c, path);
  { sqlite_use(c, sqlite_stmt::begin_immediate).step("opening the database"); }
  const sqlite_file_state f = sqlite_read_file_state(c);
  sqlite_check_file(f, path);
  sqlite_migrate(c, f, path);
  { sqlite_use(c, sqlite_stmt::commit).step("creating the schema"); }
}

}  // namespace detail
}  // namespace kv
}  // namespace dlq
