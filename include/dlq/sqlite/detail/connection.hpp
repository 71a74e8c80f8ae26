// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/detail/connection.hpp
/// One SQLite connection of dlq::kv::SqliteStore: opening it, the prepared statements it
/// caches (the store's every query), binding and stepping them, and how an SQLite failure
/// becomes a dlq error (a lock held elsewhere becomes sqlite_busy, retried by the engine).
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "dlq/errors.hpp"
#include "dlq/sqlite/options.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// Thrown inside the store when SQLite reports a lock held elsewhere; retried, never escapes.
struct sqlite_busy {};

inline const char* sqlite_code_name(int rc) {
  const char* s = sqlite3_errstr(rc);
  return s != nullptr ? s : "unknown error";
}

/// Maps an SQLite failure to a dlq error: `[dlq.sqlite] <path>: <what> failed: <sqlite
/// message> (code N); <what to do>`.
[[noreturn]] inline void sqlite_fail(const std::string& path, const std::string& what, int rc,
                                     sqlite3* db, bool outcome_unknown = false) {
  const int primary = rc & 0xFF;
  std::string detail_msg = db != nullptr ? sqlite3_errmsg(db) : sqlite_code_name(rc);
  detail_msg += " (SQLite code " + std::to_string(rc) + ")";
  const std::string& where = path;
  switch (primary) {
    case SQLITE_NOTADB:
      throw storage_error(dlq::detail::message(
          "sqlite", where, what + " failed: the file is not an SQLite database: " + detail_msg,
          "point SqliteStore at a dlq database file or at a path that does not exist yet"));
    case SQLITE_CORRUPT:
      throw storage_error(dlq::detail::message(
          "sqlite", where, what + " failed: the database file is damaged: " + detail_msg,
          "restore it from a backup, or salvage it with `sqlite3 <file> .recover`"));
    case SQLITE_CANTOPEN:
      throw storage_error(dlq::detail::message(
          "sqlite", where, what + " failed: cannot open the file: " + detail_msg,
          "check that the directory exists and is writable by this process"));
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw storage_error(dlq::detail::message(
          "sqlite", where, what + " failed: the database is not writable: " + detail_msg,
          "check the permissions of the file, its -wal/-shm files and its directory"));
    case SQLITE_FULL:
      throw storage_error(dlq::detail::message("sqlite", where,
                                               what + " failed: the disk is full: " + detail_msg,
                                               "free disk space; nothing was written"));
    case SQLITE_TOOBIG:
      throw invalid_argument(dlq::detail::message(
          "sqlite", where, what + " failed: a value is too large: " + detail_msg,
          "store smaller entries (SQLite's default limit is 1 GB per value)"));
    case SQLITE_IOERR:
      throw storage_error(
          dlq::detail::message("sqlite", where, what + " failed: I/O error: " + detail_msg,
                               outcome_unknown
                                   ? "the write may or may not be on disk; check the disk"
                                   : "check the disk and the file system"),
          outcome_unknown);
    default:
      throw storage_error(dlq::detail::message("sqlite", where, what + " failed: " + detail_msg,
                                               "see the SQLite message"),
                          outcome_unknown);
  }
}

/// The prepared statements a connection caches.
enum class sqlite_stmt : unsigned char {
  begin_immediate,
  commit,
  rollback,
  save,
  load,
  list,
  count,
  remove,
  move_copy,
  remove_all,
  versions,
  exists,
  expire_counters,
  increment,
  counter_value,
  ends,
  count_  // number of statements
};

inline const char* sqlite_stmt_sql(sqlite_stmt s) {
  switch (s) {
    case sqlite_stmt::begin_immediate:
      return "BEGIN IMMEDIATE";
    case sqlite_stmt::commit:
      return "COMMIT";
    case sqlite_stmt::rollback:
      return "ROLLBACK";
    case sqlite_stmt::save:
      return "INSERT OR REPLACE INTO dlq_records (collection, id, value) VALUES (?1, ?2, ?3)";
    case sqlite_stmt::load:
      return "SELECT value, version FROM dlq_records WHERE collection = ?1 AND id = ?2";
    case sqlite_stmt::list:
      return "SELECT id, value, version FROM dlq_records WHERE collection = ?1 AND version > ?2 "
             "ORDER BY version LIMIT ?3 OFFSET ?4";
    case sqlite_stmt::count:
      return "SELECT coalesce((SELECT records FROM dlq_counts WHERE collection = ?1), 0)";
    case sqlite_stmt::remove:
      return "DELETE FROM dlq_records WHERE collection = ?1 AND id = ?2 AND "
             "(?3 = 0 OR version = ?3)";
    case sqlite_stmt::move_copy:
      return "INSERT OR REPLACE INTO dlq_records (collection, id, value) SELECT ?4, id, value "
             "FROM dlq_records WHERE collection = ?1 AND id = ?2 AND (?3 = 0 OR version = ?3)";
    case sqlite_stmt::remove_all:
      return "DELETE FROM dlq_records WHERE collection = ?1";
    case sqlite_stmt::versions:
      return "SELECT version FROM dlq_records WHERE collection = ?1 AND version > ?2 "
             "ORDER BY version LIMIT ?3 OFFSET ?4";
    case sqlite_stmt::exists:
      return "SELECT 1 FROM dlq_records WHERE collection = ?1 AND id = ?2";
    case sqlite_stmt::expire_counters:
      return "DELETE FROM dlq_counters WHERE rowid IN (SELECT rowid FROM dlq_counters WHERE "
             "expires_at <= ?1 LIMIT ?2)";
    case sqlite_stmt::increment:
      return "INSERT INTO dlq_counters (collection, key, value, expires_at) VALUES (?1, ?2, 1, ?4) "
             "ON CONFLICT (collection, key) DO UPDATE SET value = CASE WHEN expires_at <= ?3 "
             "THEN 1 ELSE value + 1 END, expires_at = excluded.expires_at";
    case sqlite_stmt::counter_value:
      return "SELECT value FROM dlq_counters WHERE collection = ?1 AND key = ?2";
    case sqlite_stmt::ends:  // one statement = one snapshot; both ends from the index
      return "SELECT coalesce((SELECT records FROM dlq_counts WHERE collection = ?1), 0), "
             "f.id, f.value, f.version, l.id, l.value, l.version FROM (SELECT 1) "
             "LEFT JOIN (SELECT id, value, version FROM dlq_records WHERE collection = ?1 "
             "ORDER BY version LIMIT 1) AS f ON 1 "
             "LEFT JOIN (SELECT id, value, version FROM dlq_records WHERE collection = ?1 "
             "ORDER BY version DESC LIMIT 1) AS l ON 1";
    case sqlite_stmt::count_:
      break;
  }
  return "";
}

inline sqlite3_int64 sqlite_clamp(std::uint64_t v) {
  return v > static_cast<std::uint64_t>(std::numeric_limits<sqlite3_int64>::max())
             ? std::numeric_limits<sqlite3_int64>::max()
             : static_cast<sqlite3_int64>(v);
}

/// One SQLite connection with its cached statements. Used by one thread at a time.
class sqlite_connection {
 public:
  sqlite_connection(const std::string& path, const SqliteOptions& options) : path_(path) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
    if (options.create) flags |= SQLITE_OPEN_CREATE;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite_code_name(rc);
      sqlite3_close_v2(db_);
      db_ = nullptr;
      if ((rc & 0xFF) == SQLITE_CANTOPEN && !options.create)
        throw storage_error(dlq::detail::message(
            "sqlite", path, "cannot open the database: " + msg,
            "the file does not exist or is not readable (SqliteOptions::create is false)"));
      sqlite_fail(path, "opening the database", rc, nullptr);
    }
    sqlite3_extended_result_codes(db_, 1);
    if (options.max_value_bytes != 0)
      sqlite3_limit(db_, SQLITE_LIMIT_LENGTH,
                    static_cast<int>(std::min<std::size_t>(options.max_value_bytes, 1u << 30)));
    const auto busy_ms = options.busy_timeout.count();
    sqlite3_busy_timeout(db_, static_cast<int>(std::clamp<decltype(busy_ms)>(busy_ms, 0, 1 << 30)));
  }

  sqlite_connection(const sqlite_connection&) = delete;
  sqlite_connection& operator=(const sqlite_connection&) = delete;

  ~sqlite_connection() {
    for (sqlite3_stmt* s : stmts_)
      sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }

  sqlite3* handle() const noexcept { return db_; }
  const std::string& path() const noexcept { return path_; }

  /// The cached statement `s`, prepared on first use.
  sqlite3_stmt* stmt(sqlite_stmt s) {
    sqlite3_stmt*& slot = stmts_[static_cast<std::size_t>(s)];
    if (slot == nullptr) {
      const int rc = sqlite3_prepare_v3(db_, sqlite_stmt_sql(s), -1, SQLITE_PREPARE_PERSISTENT,
                                        &slot, nullptr);
      if (rc != SQLITE_OK) {
        slot = nullptr;
        check(rc, "preparing a statement");
      }
    }
    return slot;
  }

  /// Throws sqlite_busy for a lock held elsewhere, a dlq error for any other failure.
  void check(int rc, const char* what, bool outcome_unknown = false) const {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
    const int primary = rc & 0xFF;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw sqlite_busy{};
    sqlite_fail(path_, what, rc, db_, outcome_unknown);
  }

  /// Runs SQL text without results (schema set-up, pragmas).
  void exec(const char* sql, const char* what) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    sqlite3_free(err);
    check(rc, what);
  }

  /// Runs a single-value query and returns its first column as text ("" when no row).
  std::string query_text(const char* sql, const char* what) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &s, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(s);
      check(rc, what);
    }
    rc = sqlite3_step(s);
    std::string out;
    if (rc == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(s, 0);
      if (t != nullptr)
        out.assign(reinterpret_cast<const char*>(t),
                   static_cast<std::size_t>(sqlite3_column_bytes(s, 0)));
    }
    sqlite3_finalize(s);
    check(rc, what);
    return out;
  }

  /// Rolls back an open transaction, if any (never throws).
  void rollback_quietly() noexcept {
    if (db_ != nullptr && sqlite3_get_autocommit(db_) == 0)
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::array<sqlite3_stmt*, static_cast<std::size_t>(sqlite_stmt::count_)> stmts_{};
};

/// Resets a statement and clears its bindings when a call is done with it.
class sqlite_use {
 public:
  sqlite_use(sqlite_connection& c, sqlite_stmt s) : c_(c), s_(c.stmt(s)) {}
  sqlite_use(const sqlite_use&) = delete;
  sqlite_use& operator=(const sqlite_use&) = delete;
  ~sqlite_use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  void bind(int i, std::string_view text) {
    const char* p = text.data() != nullptr ? text.data() : "";
    c_.check(sqlite3_bind_text64(s_, i, p, text.size(), SQLITE_STATIC, SQLITE_UTF8),
             "binding a value");
  }
  void bind_blob(int i, std::string_view bytes) {
    const char* p = bytes.data() != nullptr ? bytes.data() : "";
    c_.check(sqlite3_bind_blob64(s_, i, p, bytes.size(), SQLITE_STATIC), "binding a value");
  }
  void bind(int i, sqlite3_int64 v) { c_.check(sqlite3_bind_int64(s_, i, v), "binding a value"); }

  /// Steps once: true for a row, false when done.
  bool step(const char* what, bool outcome_unknown = false) {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3_reset(s_);
    c_.check(rc, what, outcome_unknown);
    return false;
  }

  /// Makes the statement ready to be bound and stepped again.
  void reset() { sqlite3_reset(s_); }

  std::string text(int col) const {
    const void* p = sqlite3_column_blob(s_, col);
    const int n = sqlite3_column_bytes(s_, col);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p), static_cast<std::size_t>(n));
  }
  sqlite3_int64 integer(int col) const { return sqlite3_column_int64(s_, col); }

 private:
  sqlite_connection& c_;
  sqlite3_stmt* s_;
};

}  // namespace detail
}  // namespace kv
}  // namespace dlq
