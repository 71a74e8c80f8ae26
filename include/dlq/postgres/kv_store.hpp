// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/kv_store.hpp
/// dlq::kv::PostgresStore — dead letters in the PostgreSQL database a service already runs,
/// as a key-value store for dlq::KeyValueStorage. Link `dlq::postgres` (Debian: libpq-dev).
///
///     dlq::postgres::migrate(url);                 // once, a deployment step (migrate.hpp)
///     dlq::kv::PostgresStore store(url);           // postgres://… or postgresql://…
///     dlq::KeyValueStorage<dlq::kv::PostgresStore> storage(store);
///     dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);
///
/// - The URL goes to libpq as it is: `sslmode`, `PGPASSFILE`, service files (`service=…`)
///   and the PG* environment variables work as with psql. A libpq key=value string works too.
/// - Tables (schema version 1, in the schema Options::schema, default "dlq"; created only by
///   dlq::postgres::migrate — a store on a database without them throws
///   dlq::postgres::schema_error naming that call):
///
///       dlq_records (version bigserial PRIMARY KEY, collection bytea, id bytea,
///                    value bytea,              -- the envelope's exact bytes
///                    stored_at timestamptz,    -- when this version was written
///                    UNIQUE (collection, id)); index (collection, version)
///       dlq_counters (collection bytea, key bytea, value bigint, expires_at bigint,
///                     PRIMARY KEY (collection, key)); index (expires_at)
///       dlq_schema (version integer)
///
/// - Durability: a write returns after its COMMIT, which with PostgreSQL's defaults
///   (fsync=on, synchronous_commit=on) is on disk. Each write is one READ COMMITTED
///   transaction (whatever default_transaction_isolation says); the writers of one
///   collection take its transaction-scoped advisory lock first, so versions follow commit
///   order (a window read `after` a version never misses a later commit) and
///   Overflow::reject and evict_oldest are exact across processes.
/// - Every value is a binary parameter and every identifier quoted: queue names, ids and
///   payloads are bytes (NUL bytes, invalid UTF-8) and never SQL.
/// - Thread-safe: each call leases a connection from a small pool. A handle: copies share it.
/// - Costs: count() and ends() count the collection's rows through the index (linear in
///   the collection); a save is one transaction of 3 + n statements.
#pragma once

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/postgres/detail/database.hpp"
#include "dlq/postgres/errors.hpp"
#include "dlq/postgres/options.hpp"

namespace dlq {
namespace kv {

/// A key-value store in PostgreSQL (the contract: dlq/kv/store.hpp; the notes at the top of
/// this file). A handle: copies share one connection pool. Thread-safe.
class PostgresStore {
 public:
  /// The schema version this library reads and writes (see dlq::postgres::migrate).
  static constexpr int schema_version = postgres::detail::schema_version;

  /// Connects to `url` and checks the schema.
  /// @throws dlq::invalid_argument for a URL libpq cannot read or an empty schema name;
  ///         dlq::connection_error when the server cannot be reached;
  ///         dlq::postgres::schema_error when the tables are missing (run
  ///         dlq::postgres::migrate first) or were written by a newer dlq.
  explicit PostgresStore(std::string url, postgres::Options options = {})
      : db_(std::make_shared<postgres::detail::pg_database>(std::move(url), std::move(options))) {
    db_->open();
  }

  /// A store on the application's own connection `conn`, used inside the transaction the
  /// application has open on it: writes become part of that transaction, and its COMMIT or
  /// ROLLBACK decides them with the application's own changes. The connection is not owned
  /// (it must outlive the store) and must not be used by another thread during a call. A
  /// failed statement aborts the application's transaction, as any would. Each call throws
  /// dlq::invalid_argument when no transaction is open, and the bounded saves
  /// (save_if_below, save_if_fits, save_capped: a queue with Retention::max_length) when it
  /// is REPEATABLE READ (a count read in it misses what others commit meanwhile; READ
  /// COMMITTED and SERIALIZABLE are exact). @throws as the URL constructor (the schema is
  /// checked on `conn`).
  static PostgresStore in_transaction(PGconn* conn, postgres::Options options = {}) {
    if (conn == nullptr)
      throw invalid_argument(dlq::detail::message("postgres", "in_transaction",
                                                  "the connection is null"));
    return PostgresStore(
        std::make_shared<postgres::detail::pg_database>(conn, std::move(options)));
  }

  /// The options the store was opened with.
  const postgres::Options& options() const noexcept { return db_->options(); }

  /// Inserts or replaces each record, in order, in one transaction; each gets a new version.
  /// @throws dlq::storage_error (outcome_unknown() when the COMMIT's answer was lost).
  void save(const std::vector<Write>& writes) {
    if (writes.empty()) return;
    db_->write("saving records", [&](postgres::detail::pg_connection& c) {
      lock_writes(c, writes);
      save_rows(c, writes);
      return 0;
    });
  }

  /// As save, and returns how many records the last write's collection then holds.
  std::size_t save_and_count(const std::vector<Write>& writes) {
    if (writes.empty()) return 0;
    return db_->write("saving records", [&](postgres::detail::pg_connection& c) {
      lock_writes(c, writes);
      save_rows(c, writes);
      return count_rows(c, writes.back().collection);
    });
  }

  /// Saves `write` only if its collection holds fewer than `max_records` records or already
  /// holds its id; exact across processes. @returns false (nothing written) when full.
  bool save_if_below(const Write& write, std::size_t max_records) {
    return db_->write("saving a record", [&](postgres::detail::pg_connection& c) {
      db_->check_bound_exact(c);
      db_->lock(c, {write.collection});
      bool admitted = count_rows(c, write.collection) < max_records ||
                      exists(c, write.collection, write.id, 0);
      if (admitted) save_rows(c, {write});
      return admitted;
    });
  }

  /// Saves every write (all of one collection) only if the collection then holds at most
  /// `max_records` records; exact across processes. @returns false (nothing written) when
  /// they do not fit.
  bool save_if_fits(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return true;
    const std::string_view coll = writes.front().collection;
    return db_->write("saving records", [&](postgres::detail::pg_connection& c) {
      db_->check_bound_exact(c);
      db_->lock(c, {coll});
      std::set<std::string_view> added;
      for (const Write& w : writes)
        if (added.count(w.id) == 0 && !exists(c, coll, w.id, 0)) added.insert(w.id);
      if (count_rows(c, coll) + added.size() > max_records) return false;
      save_rows(c, writes);
      return true;
    });
  }

  /// As save, and in the same transaction removes the oldest records of the last write's
  /// collection beyond `max_records`. @returns the removed records, oldest first.
  std::vector<Item> save_capped(const std::vector<Write>& writes, std::size_t max_records) {
    if (writes.empty()) return {};
    const std::string_view coll = writes.back().collection;
    return db_->write("saving records", [&](postgres::detail::pg_connection& c) {
      db_->check_bound_exact(c);
      lock_writes(c, writes);
      save_rows(c, writes);
      std::vector<Item> removed;
      const std::size_t n = count_rows(c, coll);
      if (n <= max_records) return removed;
      postgres::detail::pg_params p;
      p.bytes(coll).int8(clamp(n - max_records));
      postgres::detail::pg_result r = c.exec(db_->sql().evict, p, "evicting records");
      removed = items(r.get(), 0);
      std::sort(removed.begin(), removed.end(),
                [](const Item& a, const Item& b) { return a.version < b.version; });
      return removed;
    });
  }

  /// Adds one to the counter (collection, key) and returns its new value; the counter
  /// expires `ttl` (clamped to [1 s, 100 years]) after this increment, by the system clock.
  /// The same transaction deletes up to 16 expired counters.
  std::int64_t increment(std::string_view collection, std::string_view key,
                         std::chrono::seconds ttl) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    const auto life = std::chrono::duration_cast<std::chrono::milliseconds>(
        kv::detail::counter_ttl(ttl));
    return db_->write("incrementing a counter", [&](postgres::detail::pg_connection& c) {
      postgres::detail::pg_params e;
      e.int8(now.count()).int8(16);
      c.exec(db_->sql().expire_counters, e, "deleting expired counters");
      postgres::detail::pg_params p;
      p.bytes(collection).bytes(key).int8(now.count()).int8((now + life).count());
      postgres::detail::pg_result r = c.exec(db_->sql().increment, p, "incrementing a counter");
      return postgres::detail::column_int8(r.get(), 0, 0);
    });
  }

  /// The record `id` of `collection`, or std::nullopt.
  std::optional<Item> load(std::string_view collection, std::string_view id) {
    return db_->read([&](postgres::detail::pg_connection& c) -> std::optional<Item> {
      postgres::detail::pg_params p;
      p.bytes(collection).bytes(id);
      postgres::detail::pg_result r = c.exec(db_->sql().load, p, "loading a record");
      if (PQntuples(r.get()) == 0) return std::nullopt;
      return Item{std::string(id), postgres::detail::column_bytes(r.get(), 0, 0),
                  static_cast<std::uint64_t>(postgres::detail::column_int8(r.get(), 0, 1))};
    });
  }

  /// The records of `collection` in `window`, oldest first, in one statement.
  std::vector<Item> list(std::string_view collection, const Window& window) {
    return db_->read([&](postgres::detail::pg_connection& c) {
      postgres::detail::pg_params p = window_params(collection, window);
      postgres::detail::pg_result r = c.exec(db_->sql().list, p, "listing records");
      return items(r.get(), 0);
    });
  }

  /// The versions of the records of `collection` in `window`, oldest first (list without
  /// ids and values).
  std::vector<std::uint64_t> versions(std::string_view collection, const Window& window) {
    return db_->read([&](postgres::detail::pg_connection& c) {
      postgres::detail::pg_params p = window_params(collection, window);
      postgres::detail::pg_result r = c.exec(db_->sql().versions, p, "listing records");
      std::vector<std::uint64_t> out;
      for (int i = 0; i < PQntuples(r.get()); ++i)
        out.push_back(static_cast<std::uint64_t>(postgres::detail::column_int8(r.get(), i, 0)));
      return out;
    });
  }

  /// Applies every removal whose record exists with the expected version (any when 0), in
  /// one transaction. @returns how many were applied.
  std::size_t remove(const std::vector<Removal>& removals) {
    if (removals.empty()) return 0;
    return db_->write("removing records", [&](postgres::detail::pg_connection& c) {
      lock_removals(c, removals, {});
      return remove_rows(c, removals);
    });
  }

  /// Moves up to `max` (0 = 1) of the oldest records of `from` to `to`, in one transaction,
  /// skipping records another transaction is moving or removing right now (`FOR UPDATE SKIP
  /// LOCKED`): concurrent callers on one collection get disjoint records and never wait
  /// for each other's. The moved records get new versions, in their old order.
  /// dlq::kv::JobQueue::take uses it when the store has it (the optional member
  /// `take_oldest`, dlq/kv/store.hpp). @returns the moved records, oldest first; empty when
  /// `from` has none that no one else is taking.
  std::vector<Item> take_oldest(std::string_view from, std::string_view to, std::size_t max) {
    return db_->write("taking records", [&](postgres::detail::pg_connection& c) {
      db_->lock(c, {to});  // versions of `to` follow commit order, as for every writer
      postgres::detail::pg_params p;
      p.bytes(from).bytes(to).int8(static_cast<std::int64_t>(std::max<std::size_t>(max, 1)));
      postgres::detail::pg_result r = c.exec(db_->sql().take_oldest, p, "taking records");
      std::vector<Item> out = items(r.get(), 0);
      std::sort(out.begin(), out.end(),
                [](const Item& a, const Item& b) { return a.version < b.version; });
      return out;
    });
  }

  /// The collections whose names start with `prefix` and that hold records, sorted bytewise
  /// (one statement, an index range scan). dlq::kv::JobQueue::consumers uses it (the
  /// optional member `collections`, dlq/kv/store.hpp) to list the consumers holding jobs.
  std::vector<std::string> collections(std::string_view prefix) {
    std::string end(prefix);  // the first name after every name starting with prefix
    while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
    if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
    return db_->read([&](postgres::detail::pg_connection& c) {
      postgres::detail::pg_params p;
      p.bytes(prefix).bytes(end);
      postgres::detail::pg_result r = c.exec(db_->sql().collections, p, "listing collections");
      std::vector<std::string> out;
      for (int i = 0; i < PQntuples(r.get()); ++i)
        out.push_back(postgres::detail::column_bytes(r.get(), i, 0));
      return out;
    });
  }

  /// In one transaction: if every removal's record exists with the expected version (any
  /// when 0), applies them all and saves `writes`; otherwise writes nothing.
  /// @returns true when applied.
  bool remove_and_save(const std::vector<Removal>& removals, const std::vector<Write>& writes) {
    if (removals.empty() && writes.empty()) return true;
    return db_->write("replaying records", [&](postgres::detail::pg_connection& c) {
      lock_removals(c, removals, writes);
      for (const Removal& r : removals)
        if (!exists(c, r.collection, r.id, r.version)) return false;
      remove_rows(c, removals);
      save_rows(c, writes);
      return true;
    });
  }

  /// True when `other` reaches the same tables: a copy of this store, or a store on the same
  /// URL and schema.
  bool shares_data_with(const PostgresStore& other) const {
    if (db_ == other.db_) return true;
    return !db_->borrowed() && !other.db_->borrowed() && db_->url() == other.db_->url() &&
           db_->options().schema == other.db_->options().schema;
  }

  /// Number of records in `collection`.
  std::size_t count(std::string_view collection) {
    return db_->read(
        [&](postgres::detail::pg_connection& c) { return count_rows(c, collection); });
  }

  /// The record count and the oldest and newest record of `collection`, in one statement
  /// (one snapshot).
  Ends ends(std::string_view collection) {
    return db_->read([&](postgres::detail::pg_connection& c) {
      postgres::detail::pg_params p;
      p.bytes(collection);
      postgres::detail::pg_result r = c.exec(db_->sql().ends, p, "reading the ends");
      Ends out;
      const PGresult* res = r.get();
      out.count = static_cast<std::size_t>(postgres::detail::column_int8(res, 0, 0));
      if (!PQgetisnull(res, 0, 3)) out.first = item(res, 0, 1);
      if (!PQgetisnull(res, 0, 6)) out.last = item(res, 0, 4);
      return out;
    });
  }

  /// Removes every record of `collection` in one transaction. @returns how many.
  std::size_t remove_all(std::string_view collection) {
    return db_->write("removing records", [&](postgres::detail::pg_connection& c) {
      db_->lock(c, {collection});
      postgres::detail::pg_params p;
      p.bytes(collection);
      return postgres::detail::pg_connection::affected(
          c.exec(db_->sql().remove_all, p, "removing records"));
    });
  }

 private:
  explicit PostgresStore(std::shared_ptr<postgres::detail::pg_database> db) : db_(std::move(db)) {
    db_->open();
  }

  static std::int64_t clamp(std::uint64_t v) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(v, INT64_MAX));
  }

  static postgres::detail::pg_params window_params(std::string_view coll, const Window& w) {
    postgres::detail::pg_params p;
    p.bytes(coll).int8(clamp(w.after));
    if (w.limit == 0) p.null(); else p.int8(clamp(w.limit));
    p.int8(clamp(w.offset));
    return p;
  }

  /// The (id, value, version) at columns col, col+1, col+2 of row `row`.
  static Item item(const PGresult* r, int row, int col) {
    return Item{postgres::detail::column_bytes(r, row, col),
                postgres::detail::column_bytes(r, row, col + 1),
                static_cast<std::uint64_t>(postgres::detail::column_int8(r, row, col + 2))};
  }
  static std::vector<Item> items(const PGresult* r, int col) {
    std::vector<Item> out;
    out.reserve(static_cast<std::size_t>(PQntuples(r)));
    for (int i = 0; i < PQntuples(r); ++i) out.push_back(item(r, i, col));
    return out;
  }

  void lock_writes(postgres::detail::pg_connection& c, const std::vector<Write>& writes) const {
    std::vector<std::string_view> colls;
    for (const Write& w : writes) colls.push_back(w.collection);
    db_->lock(c, std::move(colls));
  }
  void lock_removals(postgres::detail::pg_connection& c, const std::vector<Removal>& removals,
                     const std::vector<Write>& writes) const {
    std::vector<std::string_view> colls;
    for (const Removal& r : removals) {
      colls.push_back(r.collection);
      if (!r.move_to.empty()) colls.push_back(r.move_to);
    }
    for (const Write& w : writes) colls.push_back(w.collection);
    db_->lock(c, std::move(colls));
  }

  void save_rows(postgres::detail::pg_connection& c, const std::vector<Write>& writes) const {
    for (const Write& w : writes) {
      postgres::detail::pg_params p;
      p.bytes(w.collection).bytes(w.id).bytes(w.value);
      c.exec(db_->sql().save, p, "saving a record");
    }
  }

  std::size_t count_rows(postgres::detail::pg_connection& c, std::string_view coll) const {
    postgres::detail::pg_params p;
    p.bytes(coll);
    postgres::detail::pg_result r = c.exec(db_->sql().count, p, "counting records");
    return static_cast<std::size_t>(postgres::detail::column_int8(r.get(), 0, 0));
  }

  bool exists(postgres::detail::pg_connection& c, std::string_view coll, std::string_view id,
              std::uint64_t version) const {
    postgres::detail::pg_params p;
    p.bytes(coll).bytes(id);
    postgres::detail::pg_result r = c.exec(db_->sql().load, p, "loading a record");
    if (PQntuples(r.get()) == 0) return false;
    return version == 0 ||
           static_cast<std::uint64_t>(postgres::detail::column_int8(r.get(), 0, 1)) == version;
  }

  std::size_t remove_rows(postgres::detail::pg_connection& c,
                          const std::vector<Removal>& removals) const {
    std::size_t applied = 0;
    for (const Removal& r : removals) {
      if (!r.move_to.empty() && r.move_to == r.collection) {
        if (exists(c, r.collection, r.id, r.version)) ++applied;
        continue;
      }
      postgres::detail::pg_params p;
      p.bytes(r.collection).bytes(r.id).int8(clamp(r.version));
      if (!r.move_to.empty()) p.bytes(r.move_to);
      const std::string& sql = r.move_to.empty() ? db_->sql().remove : db_->sql().move;
      applied += postgres::detail::pg_connection::affected(c.exec(sql, p, "removing a record"));
    }
    return applied;
  }

  std::shared_ptr<postgres::detail::pg_database> db_;
};

}  // namespace kv
}  // namespace dlq
