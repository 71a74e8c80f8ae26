// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/sqlite_store.hpp
/// dlq::kv::SqliteStore — a durable, embedded key-value store on SQLite for
/// dlq::KeyValueStorage. Link `dlq::sqlite` (Debian: libsqlite3-dev).
///
///     dlq::kv::SqliteStore store("/var/lib/myservice/dlq.db");
///     dlq::KeyValueStorage storage(store, my_sink);
///
/// - One file (plus SQLite's `-wal` and `-shm` side files while it is open), in WAL mode.
/// - Durability: `PRAGMA synchronous=FULL` by default — SQLite fsyncs the WAL before a
///   commit returns, so every write that returned is on disk and survives a process crash
///   *and* a power loss or OS crash. SqliteSync::normal (synchronous=NORMAL) fsyncs only at
///   checkpoints: a write that returned survives a process crash (SIGKILL) but the last
///   transactions may roll back after a power loss; it is faster (figures: docs/kv.md).
/// - Safe for several threads (each call leases its own connection from a small pool) and
///   several processes on one host (SQLite file locks; not on network file systems, where
///   WAL is unsafe). Reads run in parallel with writes (WAL). Writes are `BEGIN IMMEDIATE`
///   transactions, so a writer waits for the lock up front instead of failing half-way.
///   Writers of one store (and its copies) use group commit: writes that arrive while a
///   transaction runs are committed together by the next one — one fsync for all of them —
///   and each call still returns only once its own write is durable. When another connection holds
///   the lock, a call waits and retries inside the store for up to SqliteOptions::busy_timeout;
///   only then it throws dlq::timeout_error — "database is locked" never reaches the caller before
///   that.
/// - The file carries `PRAGMA application_id` = 0x444C5121 ("DLQ!") and the schema version
///   in `PRAGMA user_version`. Opening a file written by an older dlq migrates it; a file
///   from a newer dlq, another application's database or a file that is not a database is
///   refused with a dlq::storage_error naming the path and the reason.
/// - Do not carry a store across fork(): open it in the child.
///
/// - Needs SQLite 3.24 or newer (UPSERT); an older library is refused when the store opens.
///
/// Schema (version 2; a version 1 file is migrated when it is opened, in one transaction):
///
///     CREATE TABLE dlq_records (                      -- version 1
///       version    INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
///       collection TEXT NOT NULL,
///       id         TEXT NOT NULL,
///       value      BLOB NOT NULL,
///       UNIQUE (collection, id));
///     CREATE INDEX dlq_records_by_collection ON dlq_records (collection, version);
///     CREATE TABLE dlq_counts (                       -- version 2: records per collection,
///       collection TEXT PRIMARY KEY,                   -- kept by triggers on dlq_records
///       records    INTEGER NOT NULL) WITHOUT ROWID;
///     CREATE TABLE dlq_counters (                     -- version 2: increment()'s counters
///       collection TEXT NOT NULL, key TEXT NOT NULL,
///       value      INTEGER NOT NULL,
///       expires_at INTEGER NOT NULL,                   -- Unix time, milliseconds
///       PRIMARY KEY (collection, key));
///     CREATE INDEX dlq_counters_by_expiry ON dlq_counters (expires_at);
///
/// (see detail::sqlite_migration_v1_to_v2 for the triggers). The counts are kept by triggers,
/// so they stay exact whoever writes the file (an older dlq during a rolling upgrade, the
/// sqlite3 shell) as long as the connection leaves PRAGMA recursive_triggers off (SQLite's
/// default). Why, and what they cost: docs/kv.md.
///
/// Costs: count() reads one row; save_if_below (Overflow::reject) is one transaction that
/// reads the count, then saves; save_and_count adds that read to a save; increment (the
/// poison guard) is one transaction of its own — with the guard on, a send commits twice.
/// remove_and_save (a replay step into a JobQueue in the same file) is one transaction.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/storage.hpp"

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

/// The state a SqliteStore and its copies share: the path, the options and a pool of idle
/// connections.
class sqlite_database {
 public:
  sqlite_database(std::string path, SqliteOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}

  const std::string& path() const noexcept { return path_; }
  const SqliteOptions& options() const noexcept { return options_; }

  /// A connection for one call; returned to the pool when the lease ends.
  class lease {
   public:
    lease(sqlite_database& db, std::unique_ptr<sqlite_connection> c) : db_(db), c_(std::move(c)) {}
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease() {
      c_->rollback_quietly();
      db_.release(std::move(c_));
    }
    sqlite_connection& operator*() const noexcept { return *c_; }
    sqlite_connection* operator->() const noexcept { return c_.get(); }

   private:
    sqlite_database& db_;
    std::unique_ptr<sqlite_connection> c_;
  };

  lease acquire() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<sqlite_connection> c = std::move(idle_.back());
        idle_.pop_back();
        return lease(*this, std::move(c));
      }
    }
    return lease(*this, open_connection());
  }

  /// Runs `body(connection)` in a `BEGIN IMMEDIATE` transaction and commits it, retrying the
  /// whole transaction while another connection holds the lock, up to the busy timeout.
  ///
  /// Group commit: writers of one store that arrive while a transaction is running queue up;
  /// the next transaction runs all their bodies, in arrival order, and commits once — one
  /// fsync for all of them. Each caller returns only after the commit that holds its write.
  /// A body that throws is taken out of the group (its caller gets the error) and the others
  /// are run again without it; a failed commit fails every caller in the group.
  template <class Body>
  auto write(const char* what, Body&& body) {
    using result_type = decltype(body(std::declval<sqlite_connection&>()));
    std::optional<result_type> result;
    write_request request;
    request.what = what;
    request.body = [&](sqlite_connection& c) { result = body(c); };
    submit(request);
    if (request.error) std::rethrow_exception(request.error);
    return std::move(*result);
  }

  /// Runs `body(connection)` (reads, autocommit), retrying while the database is locked.
  template <class Body>
  auto read(const char* what, Body&& body) {
    return retrying(what, [&] {
      lease c = acquire();
      return body(*c);
    });
  }

  /// Opens the file, checks (or creates, or migrates) the schema. Called once per store.
  void initialize() {
    retrying("opening the database", [&] {
      lease c = acquire();
      set_up(*c);
      return 0;
    });
  }

 private:
  /// One caller's part of a group commit.
  struct write_request {
    const char* what = "";
    std::function<void(sqlite_connection&)> body;
    std::exception_ptr error;  // set when this request failed
    bool done = false;         // guarded by group_mutex_
  };
  /// Thrown inside a group transaction when one body failed: the group is run again without it.
  struct body_failed {};

  void submit(write_request& request) {
    std::unique_lock<std::mutex> lock(group_mutex_);
    pending_.push_back(&request);
    while (!request.done) {
      if (leader_active_) {
        group_done_.wait(lock);
        continue;
      }
      leader_active_ = true;  // this thread commits everything queued so far
      std::vector<write_request*> group;
      group.swap(pending_);
      lock.unlock();
      run_group(group);
      lock.lock();
      for (write_request* r : group)
        r->done = true;
      leader_active_ = false;
      group_done_.notify_all();
    }
  }

  void run_group(std::vector<write_request*> live) noexcept {
    while (!live.empty()) {
      write_request* failed = nullptr;
      try {
        retrying(live.front()->what, [&] {
          lease c = acquire();
          { sqlite_use(*c, sqlite_stmt::begin_immediate).step(live.front()->what); }
          for (write_request* r : live) {
            try {
              r->body(*c);
            } catch (const sqlite_busy&) {
              throw;  // the lock was lost: retry the whole group
            } catch (...) {
              r->error = std::current_exception();
              failed = r;
              throw body_failed{};
            }
          }
          {
            sqlite_use(*c, sqlite_stmt::commit).step(live.front()->what, /*outcome_unknown=*/true);
          }
          return 0;
        });
        return;  // committed: every live request succeeded
      } catch (const body_failed&) {
        live.erase(std::find(live.begin(), live.end(), failed));  // rolled back; run the rest
      } catch (...) {
        for (write_request* r : live)
          r->error = std::current_exception();
        return;
      }
    }
  }

  template <class Fn>
  auto retrying(const char* what, Fn&& fn) -> decltype(fn()) {
    const auto start = std::chrono::steady_clock::now();
    std::chrono::milliseconds pause{1};
    for (;;) {
      try {
        return fn();
      } catch (const sqlite_busy&) {
        // The lease rolled back. Another connection holds the lock; wait a little and retry.
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= options_.busy_timeout)
        throw timeout_error(dlq::detail::message(
            "sqlite", path_,
            std::string(what) + " failed: the database stayed locked by another connection for " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                " ms; nothing was written",
            "retry later, or raise SqliteOptions::busy_timeout; look for a process holding a "
            "long transaction on this file"));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds{50});
    }
  }

  std::unique_ptr<sqlite_connection> open_connection() {
    auto c = std::make_unique<sqlite_connection>(path_, options_);
    c->exec(options_.synchronous == SqliteSync::full ? "PRAGMA synchronous=FULL"
                                                     : "PRAGMA synchronous=NORMAL",
            "setting PRAGMA synchronous");
    // The record counts' triggers rely on it being off (see sqlite_migration_v1_to_v2).
    c->exec("PRAGMA recursive_triggers=OFF", "setting PRAGMA recursive_triggers");
    return c;
  }

  void release(std::unique_ptr<sqlite_connection> c) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(c));
  }

  void set_up(sqlite_connection& c) {
    if (sqlite3_libversion_number() < sqlite_min_library_version)
      throw storage_error(dlq::detail::message(
          "sqlite", path_,
          std::string("the SQLite library is version ") + sqlite3_libversion() +
              "; dlq's SQLite store needs 3.24 or newer (UPSERT)",
          "link a newer SQLite (Debian 11 and later, Ubuntu 20.04 and later ship one)"));
    const std::string mode = c.query_text("PRAGMA journal_mode=WAL", "switching to WAL mode");
    if (mode != "wal")
      throw storage_error(dlq::detail::message(
          "sqlite", path_,
          "cannot switch the database to WAL mode (journal_mode is '" + mode + "')",
          "use a file on a local file system (WAL does not work on network file systems or "
          "in-memory databases)"));
    { sqlite_use(c, sqlite_stmt::begin_immediate).step("opening the database"); }
    const int app_id =
        std::atoi(c.query_text("PRAGMA application_id", "reading the application id").c_str());
    const int version =
        std::atoi(c.query_text("PRAGMA user_version", "reading the schema version").c_str());
    const int has_table = std::atoi(
        c.query_text(
             "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dlq_records'",
             "reading the schema")
            .c_str());
    const int other_tables = std::atoi(
        c.query_text("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT IN "
                     "('dlq_records', 'sqlite_sequence')",
                     "reading the schema")
            .c_str());
    if (app_id != sqlite_application_id &&
        (app_id != 0 || version != 0 || has_table != 0 || other_tables != 0))
      throw storage_error(dlq::detail::message(
          "sqlite", path_,
          "the file is an SQLite database of another application (application_id " +
              std::to_string(app_id) + ", user_version " + std::to_string(version) +
              "), not a dlq store",
          "give SqliteStore a file of its own"));
    if (version > sqlite_schema_version)
      throw storage_error(dlq::detail::message(
          "sqlite", path_,
          "the file was written by a newer dlq (schema version " + std::to_string(version) +
              "; this dlq reads versions up to " + std::to_string(sqlite_schema_version) + ")",
          "upgrade dlq, or open a different file"));
    if (version == 0) {  // a new file: create version 1, then migrate it like any other
      c.exec(sqlite_schema_v1, "creating the schema");
      c.exec(("PRAGMA application_id = " + std::to_string(sqlite_application_id)).c_str(),
             "creating the schema");
    } else if (has_table == 0) {
      throw storage_error(
          dlq::detail::message("sqlite", path_,
                               "the file says it is a dlq store (schema version " +
                                   std::to_string(version) + ") but has no dlq_records table",
                               "the file was altered by hand; restore it from a backup"));
    }
    // Migrations, oldest first, in this transaction: a crash leaves the file as it was.
    int at = version == 0 ? 1 : version;
    if (at == 1) {
      c.exec(sqlite_migration_v1_to_v2, "migrating the schema from version 1 to 2");
      at = 2;
    }
    if (at != version) {
      c.exec(("PRAGMA user_version = " + std::to_string(at)).c_str(), "writing the schema version");
    } else {
      const int v2_tables = std::atoi(
          c.query_text("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                       "('dlq_counts', 'dlq_counters')",
                       "reading the schema")
              .c_str());
      if (v2_tables != 2)
        throw storage_error(dlq::detail::message(
            "sqlite", path_,
            "the file says it is a dlq store of schema version " + std::to_string(version) +
                " but lacks the dlq_counts or dlq_counters table",
            "the file was altered by hand; restore it from a backup"));
    }
    { sqlite_use(c, sqlite_stmt::commit).step("creating the schema"); }
  }

  std::string path_;
  SqliteOptions options_;
  std::mutex mutex_;  // guards idle_
  std::vector<std::unique_ptr<sqlite_connection>> idle_;
  std::mutex group_mutex_;  // guards pending_, leader_active_ and write_request::done
  std::condition_variable group_done_;
  std::vector<write_request*> pending_;
  bool leader_active_ = false;
};

}  // namespace detail

/// A durable key-value store in one SQLite file (see the contract in
/// dlq/kv/storage.hpp and the durability notes at the top of this file). A handle:
/// copies share the same connection pool. Thread-safe; several processes may open one file.
class SqliteStore {
 public:
  /// The schema version this library writes (PRAGMA user_version).
  static constexpr int schema_version = detail::sqlite_schema_version;

  /// Opens (creating it unless options.create is false) the dlq database at `path`.
  /// @throws dlq::invalid_argument for an empty path or ":memory:";
  ///         dlq::storage_error naming the path when the file cannot be opened or created,
  ///         is not a database, belongs to another application or to a newer dlq;
  ///         dlq::timeout_error when another process kept it locked for busy_timeout.
  explicit SqliteStore(std::string path, SqliteOptions options = {});

  /// The database file's path.
  const std::string& path() const noexcept { return db_->path(); }
  /// The options the store was opened with.
  const SqliteOptions& options() const noexcept { return db_->options(); }

  /// Inserts or replaces each record, in order, in one transaction. Each record gets a new
  /// version (a replaced record moves to the end). Durable when it returns (see
  /// SqliteOptions::synchronous).
  /// @throws dlq::storage_error (outcome_unknown() set if the commit itself failed);
  ///         dlq::timeout_error if the database stayed locked (nothing written).
  void save(const std::vector<Write>& writes) {
    if (writes.empty()) return;
    db_->write("saving records", [&](detail::sqlite_connection& c) {
      save_rows(c, writes);
      return 0;
    });
  }

  /// As save, in the same transaction, and returns how many records the collection of the
  /// last write holds after it (0 when `writes` is empty): one more read of dlq_counts.
  /// @throws as save.
  std::size_t save_and_count(const std::vector<Write>& writes) {
    if (writes.empty()) return 0;
    return db_->write("saving records", [&](detail::sqlite_connection& c) {
      save_rows(c, writes);
      return count_rows(c, writes.back().collection);
    });
  }

  /// Saves `write` (as save) only if its collection holds fewer than `max_records` records
  /// or already holds a record with its id — checked and written in one transaction, so
  /// exact across threads and processes. @returns false (nothing written) when full.
  /// @throws as save.
  bool save_if_below(const Write& write, std::size_t max_records) {
    return db_->write("saving a record", [&](detail::sqlite_connection& c) {
      bool admitted = count_rows(c, write.collection) < max_records;
      if (!admitted) {
        detail::sqlite_use e(c, detail::sqlite_stmt::exists);
        e.bind(1, write.collection);
        e.bind(2, write.id);
        admitted = e.step("saving a record");
      }
      if (admitted) save_rows(c, {write});
      return admitted;
    });
  }

  /// Saves every write (all of one collection; as save) only if the collection then holds at
  /// most `max_records` records (an id already there is a replacement, not growth) —
  /// checked and written in one transaction, so exact across threads and processes.
  /// @returns false (nothing written) when they do not fit. @throws as save.
  bool save_if_fits(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return true;
    const std::string_view coll = writes.front().collection;
    return db_->write("saving records", [&](detail::sqlite_connection& c) {
      std::set<std::string_view> added;
      for (const Write& w : writes) {
        if (added.count(w.id) != 0) continue;
        detail::sqlite_use e(c, detail::sqlite_stmt::exists);
        e.bind(1, coll);
        e.bind(2, w.id);
        if (!e.step("saving records")) added.insert(w.id);
      }
      if (count_rows(c, coll) + added.size() > max_records) return false;
      save_rows(c, writes);
      return true;
    });
  }

  /// As save, and in the same transaction removes the oldest records of the last write's
  /// collection beyond `max_records`. @returns the removed records, oldest first.
  /// @throws as save.
  std::vector<Item> save_capped(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return {};
    const std::string_view coll = writes.back().collection;
    return db_->write("saving records", [&](detail::sqlite_connection& c) {
      save_rows(c, writes);
      std::vector<Item> removed;
      const std::size_t n = count_rows(c, coll);
      if (n <= max_records) return removed;
      {
        detail::sqlite_use s(c, detail::sqlite_stmt::list);
        s.bind(1, coll);
        s.bind(2, sqlite3_int64{0});
        s.bind(3, detail::sqlite_clamp(n - max_records));
        s.bind(4, sqlite3_int64{0});
        while (s.step("evicting records"))
          removed.push_back(Item{s.text(0), s.text(1), static_cast<std::uint64_t>(s.integer(2))});
      }
      detail::sqlite_use d(c, detail::sqlite_stmt::remove);
      for (const Item& item : removed) {
        d.bind(1, coll);
        d.bind(2, item.id);
        d.bind(3, detail::sqlite_clamp(item.version));
        d.step("evicting a record");
        d.reset();
      }
      return removed;
    });
  }

  /// Adds one to the counter (collection, key) and returns its new value, in one
  /// transaction; the counter expires `ttl` (clamped to [1 s, 100 years]) after this increment, by
  /// the system clock (counters are shared by processes, and may outlive a reboot). Counters live
  /// in their own table (dlq_counters), apart from records. The same transaction deletes up to 16
  /// expired counters, oldest expiry first, so the table holds the counters alive within the last
  /// ttl plus a backlog that every increment shrinks.
  /// @throws as save.
  std::int64_t increment(std::string_view collection, std::string_view key,
                         std::chrono::seconds ttl) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    const auto life =
        std::chrono::duration_cast<std::chrono::milliseconds>(detail::counter_ttl(ttl));
    const auto now_ms = static_cast<sqlite3_int64>(now.count());
    const auto expires_ms = static_cast<sqlite3_int64>((now + life).count());
    return db_->write("incrementing a counter", [&](detail::sqlite_connection& c) {
      {
        detail::sqlite_use e(c, detail::sqlite_stmt::expire_counters);
        e.bind(1, now_ms);
        e.bind(2, sqlite3_int64{detail::sqlite_expired_counters_per_increment});
        e.step("deleting expired counters");
      }
      {
        detail::sqlite_use u(c, detail::sqlite_stmt::increment);
        u.bind(1, collection);
        u.bind(2, key);
        u.bind(3, now_ms);
        u.bind(4, expires_ms);
        u.step("incrementing a counter");
      }
      detail::sqlite_use v(c, detail::sqlite_stmt::counter_value);
      v.bind(1, collection);
      v.bind(2, key);
      if (!v.step("reading a counter"))
        throw storage_error(dlq::detail::message("sqlite", c.path(),
                                                 "a counter just incremented is missing",
                                                 "check the file with integrity_check()"));
      return static_cast<std::int64_t>(v.integer(0));
    });
  }

  /// The record `id` of `collection`, or std::nullopt. @throws dlq::storage_error.
  std::optional<Item> load(std::string_view collection, std::string_view id) {
    return db_->read("loading a record", [&](detail::sqlite_connection& c) -> std::optional<Item> {
      detail::sqlite_use s(c, detail::sqlite_stmt::load);
      s.bind(1, collection);
      s.bind(2, id);
      if (!s.step("loading a record")) return std::nullopt;
      return Item{std::string(id), s.text(0), static_cast<std::uint64_t>(s.integer(1))};
    });
  }

  /// The records of `collection` in `window`, oldest first, in one query.
  /// @throws dlq::storage_error.
  std::vector<Item> list(std::string_view collection, const Window& window) {
    return db_->read("listing records", [&](detail::sqlite_connection& c) {
      std::vector<Item> out;
      detail::sqlite_use s(c, detail::sqlite_stmt::list);
      s.bind(1, collection);
      s.bind(2, detail::sqlite_clamp(window.after));
      s.bind(3, window.limit == 0 ? sqlite3_int64{-1} : detail::sqlite_clamp(window.limit));
      s.bind(4, detail::sqlite_clamp(window.offset));
      if (window.limit != 0) out.reserve(std::min<std::size_t>(window.limit, 4096));
      while (s.step("listing records"))
        out.push_back(Item{s.text(0), s.text(1), static_cast<std::uint64_t>(s.integer(2))});
      return out;
    });
  }

  /// The versions of the records of `collection` in `window`, oldest first: list without
  /// ids and values, answered from the index alone. @throws dlq::storage_error.
  std::vector<std::uint64_t> versions(std::string_view collection, const Window& window) {
    return db_->read("listing records", [&](detail::sqlite_connection& c) {
      std::vector<std::uint64_t> out;
      detail::sqlite_use s(c, detail::sqlite_stmt::versions);
      s.bind(1, collection);
      s.bind(2, detail::sqlite_clamp(window.after));
      s.bind(3, window.limit == 0 ? sqlite3_int64{-1} : detail::sqlite_clamp(window.limit));
      s.bind(4, detail::sqlite_clamp(window.offset));
      while (s.step("listing records"))
        out.push_back(static_cast<std::uint64_t>(s.integer(0)));
      return out;
    });
  }

  /// Applies every removal whose record exists with the expected version (any when 0), in
  /// one transaction. @returns how many were applied. @throws dlq::storage_error.
  std::size_t remove(const std::vector<Removal>& removals) {
    if (removals.empty()) return 0;
    return db_->write("removing records",
                      [&](detail::sqlite_connection& c) { return remove_rows(c, removals); });
  }

  /// In one transaction: if every removal's record exists with the expected version (any
  /// when 0), applies all of them and saves `writes` (as save); otherwise writes nothing.
  /// A replay into a dlq::kv::JobQueue in the same file runs each step through this, so the
  /// jobs are pushed and the dead letters removed together (exactly-once, SIGKILL included).
  /// @returns true when applied. @throws as save.
  bool remove_and_save(const std::vector<Removal>& removals, const std::vector<Write>& writes) {
    if (removals.empty() && writes.empty()) return true;
    return db_->write("replaying records", [&](detail::sqlite_connection& c) {
      for (const Removal& r : removals) {
        detail::sqlite_use s(c, detail::sqlite_stmt::load);
        s.bind(1, r.collection);
        s.bind(2, r.id);
        if (!s.step("replaying records")) return false;
        if (r.version != 0 && s.integer(1) != detail::sqlite_clamp(r.version)) return false;
      }
      remove_rows(c, removals);
      if (!writes.empty()) save_rows(c, writes);
      return true;
    });
  }

  /// True when `other` reaches the same database: a copy of this store, or a store opened on
  /// the same file.
  bool shares_data_with(const SqliteStore& other) const {
    if (db_ == other.db_) return true;
    std::error_code ec;
    return std::filesystem::equivalent(db_->path(), other.db_->path(), ec) && !ec;
  }

 private:
  static std::size_t remove_rows(detail::sqlite_connection& c,
                                 const std::vector<Removal>& removals) {
    std::size_t applied = 0;
    for (const Removal& r : removals) {
      const sqlite3_int64 version = detail::sqlite_clamp(r.version);
      if (!r.move_to.empty()) {
        if (r.move_to == r.collection) {
          detail::sqlite_use s(c, detail::sqlite_stmt::load);
          s.bind(1, r.collection);
          s.bind(2, r.id);
          if (s.step("moving a record") && (version == 0 || s.integer(1) == version)) ++applied;
          continue;
        }
        detail::sqlite_use s(c, detail::sqlite_stmt::move_copy);
        s.bind(1, r.collection);
        s.bind(2, r.id);
        s.bind(3, version);
        s.bind(4, r.move_to);
        s.step("moving a record");
        if (sqlite3_changes(c.handle()) == 0) continue;
      }
      detail::sqlite_use s(c, detail::sqlite_stmt::remove);
      s.bind(1, r.collection);
      s.bind(2, r.id);
      s.bind(3, version);
      s.step("removing a record");
      if (sqlite3_changes(c.handle()) > 0) ++applied;
    }
    return applied;
  }

 public:
  /// Number of records in `collection`: one row of dlq_counts. @throws dlq::storage_error.
  std::size_t count(std::string_view collection) {
    return db_->read("counting records",
                     [&](detail::sqlite_connection& c) { return count_rows(c, collection); });
  }

  /// The record count and the oldest and newest record of `collection`, in one statement
  /// (one snapshot): the count from dlq_counts, each end one step of the (collection, version)
  /// index — the cost does not grow with the collection. @throws dlq::storage_error.
  Ends ends(std::string_view collection) {
    return db_->read("reading the ends of a collection", [&](detail::sqlite_connection& c) {
      Ends out;
      detail::sqlite_use s(c, detail::sqlite_stmt::ends);
      s.bind(1, collection);
      if (!s.step("reading the ends of a collection")) return out;
      out.count = static_cast<std::size_t>(s.integer(0));
      if (s.integer(3) != 0)
        out.first = Item{s.text(1), s.text(2), static_cast<std::uint64_t>(s.integer(3))};
      if (s.integer(6) != 0)
        out.last = Item{s.text(4), s.text(5), static_cast<std::uint64_t>(s.integer(6))};
      return out;
    });
  }

  /// Removes every record of `collection` in one transaction. @returns how many.
  /// @throws dlq::storage_error.
  std::size_t remove_all(std::string_view collection) {
    return db_->write("removing records", [&](detail::sqlite_connection& c) {
      detail::sqlite_use s(c, detail::sqlite_stmt::remove_all);
      s.bind(1, collection);
      s.step("removing records");
      return static_cast<std::size_t>(sqlite3_changes(c.handle()));
    });
  }

  /// Runs `PRAGMA integrity_check`: "ok" when the file is sound, else SQLite's findings.
  /// @throws dlq::storage_error.
  std::string integrity_check() {
    return db_->read("checking integrity", [&](detail::sqlite_connection& c) {
      return c.query_text("PRAGMA integrity_check", "checking integrity");
    });
  }

 private:
  static void save_rows(detail::sqlite_connection& c, const std::vector<Write>& writes) {
    detail::sqlite_use s(c, detail::sqlite_stmt::save);
    for (const Write& w : writes) {
      s.bind(1, w.collection);
      s.bind(2, w.id);
      s.bind_blob(3, w.value);
      s.step("saving a record");
      s.reset();
    }
  }

  static std::size_t count_rows(detail::sqlite_connection& c, std::string_view collection) {
    detail::sqlite_use s(c, detail::sqlite_stmt::count);
    s.bind(1, collection);
    s.step("counting records");
    return static_cast<std::size_t>(std::max<sqlite3_int64>(0, s.integer(0)));
  }

  std::shared_ptr<detail::sqlite_database> db_;
};

}  // namespace kv
}  // namespace dlq

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::sqlite defines DLQ_COMPILED_SQLITE): these
// instantiations are built once, in src/sqlite.cpp; a translation unit that includes this header
// instantiates none of them.
#if defined(DLQ_COMPILED_SQLITE)
#include "dlq/dead_letter_queue.hpp"
namespace dlq {
extern template class KeyValueStorage<kv::SqliteStore>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>&>;
}  // namespace dlq
#endif

#if defined(DLQ_SQLITE_HEADER_ONLY)
#include "dlq/sqlite/sqlite_store-inl.hpp"
#endif
