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
/// (see detail::sqlite_migration_v1_to_v2 in dlq/sqlite/detail/schema.hpp for the
/// triggers). The counts are kept by triggers, so they stay exact whoever writes the file
/// (an older dlq during a rolling upgrade, the sqlite3 shell) as long as the connection
/// leaves PRAGMA recursive_triggers off (SQLite's default). Why, and what they cost: docs/kv.md.
///
/// Costs: count() reads one row; save_if_below (Overflow::reject) is one transaction that
/// reads the count, then saves; save_and_count adds that read to a save; increment (the
/// poison guard) is one transaction of its own — with the guard on, a send commits twice.
/// remove_and_save (a replay step into a JobQueue in the same file) is one transaction.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/sqlite/detail/engine.hpp"
#include "dlq/sqlite/options.hpp"

namespace dlq {
namespace kv {

/// A durable key-value store in one SQLite file (see the contract in
/// dlq/kv/store.hpp and the durability notes at the top of this file). A handle:
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

#if defined(DLQ_SQLITE_HEADER_ONLY)
#include "dlq/sqlite/sqlite_store-inl.hpp"
#endif
