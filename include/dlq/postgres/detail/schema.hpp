// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/detail/schema.hpp
/// The PostgreSQL backend's schema, its versions and its statements: the SQL of each
/// migration step, the check a store makes when it opens, and every statement the store runs
/// with the schema's quoted name in it (identifiers quoted once here; every value a
/// parameter).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dlq/postgres/detail/connection.hpp"
#include "dlq/postgres/detail/sql.hpp"
#include "dlq/postgres/errors.hpp"

namespace dlq {
namespace postgres {
namespace detail {

/// The schema version this library writes and reads (table dlq_schema).
constexpr int schema_version = 1;

/// The advisory lock migrate() holds while it runs, so that two migrations never interleave.
constexpr std::int64_t migration_lock = 0x444C512150470001;  // "DLQ!PG" 1

/// The statements of migration step `to` (from version to-1) in schema `s` (quoted).
inline std::vector<std::string> migration_step(const std::string& s, int to) {
  if (to != 1) return {};
  return {"CREATE TABLE " + s + ".dlq_records ("
          "  version bigserial PRIMARY KEY,"  // never reused; per collection, commit order
          "  collection bytea NOT NULL,"
          "  id bytea NOT NULL,"
          "  value bytea NOT NULL,"  // the envelope's exact bytes
          "  stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
          "  UNIQUE (collection, id))",
          "CREATE INDEX dlq_records_by_collection ON " + s + ".dlq_records (collection, version)",
          "CREATE TABLE " + s + ".dlq_counters ("
          "  collection bytea NOT NULL, key bytea NOT NULL,"
          "  value bigint NOT NULL,"
          "  expires_at bigint NOT NULL,"  // Unix time, milliseconds
          "  PRIMARY KEY (collection, key))",
          "CREATE INDEX dlq_counters_by_expiry ON " + s + ".dlq_counters (expires_at)"};
}

/// The statements of the store, in schema `s` (quoted).
struct statements {
  explicit statements(const std::string& s)
      : records(s + ".dlq_records"),
        save("INSERT INTO " + records + " (collection, id, value) VALUES ($1::bytea, $2::bytea, "
             "$3::bytea) ON CONFLICT (collection, id) DO UPDATE SET value = EXCLUDED.value, "
             "version = EXCLUDED.version, stored_at = EXCLUDED.stored_at"),
        load("SELECT value, version FROM " + records + " WHERE collection = $1::bytea AND "
             "id = $2::bytea"),
        list("SELECT id, value, version FROM " + records + " WHERE collection = $1::bytea AND "
             "version > $2::int8 ORDER BY version LIMIT $3::int8 OFFSET $4::int8"),
        versions("SELECT version FROM " + records + " WHERE collection = $1::bytea AND "
                 "version > $2::int8 ORDER BY version LIMIT $3::int8 OFFSET $4::int8"),
        remove("DELETE FROM " + records + " WHERE collection = $1::bytea AND id = $2::bytea "
               "AND ($3::int8 = 0 OR version = $3::int8)"),
        move("WITH moved AS (DELETE FROM " + records + " WHERE collection = $1::bytea AND "
             "id = $2::bytea AND ($3::int8 = 0 OR version = $3::int8) RETURNING id, value) "
             "INSERT INTO " + records + " (collection, id, value) SELECT $4::bytea, id, value "
             "FROM moved ON CONFLICT (collection, id) DO UPDATE SET value = EXCLUDED.value, "
             "version = EXCLUDED.version, stored_at = EXCLUDED.stored_at"),
        // take_oldest: the oldest $3 records of $1 that no other transaction holds (SKIP
        // LOCKED: concurrent takers never wait for, or retry on, each other's rows) move to
        // $2 with new versions, in their order.
        take_oldest("WITH taken AS (DELETE FROM " + records + " WHERE version IN (SELECT "
                    "version FROM " + records + " WHERE collection = $1::bytea ORDER BY version "
                    "LIMIT $3::int8 FOR UPDATE SKIP LOCKED) RETURNING id, value, version) "
                    "INSERT INTO " + records + " (collection, id, value) SELECT $2::bytea, id, "
                    "value FROM taken ORDER BY version ON CONFLICT (collection, id) DO UPDATE "
                    "SET value = EXCLUDED.value, version = EXCLUDED.version, stored_at = "
                    "EXCLUDED.stored_at RETURNING id, value, version"),
        // collections: those in [$1, $2) ($2 empty: no end) that hold records.
        collections("SELECT DISTINCT collection FROM " + records + " WHERE collection >= "
                    "$1::bytea AND ($2::bytea = ''::bytea OR collection < $2::bytea) "
                    "ORDER BY collection"),
        count("SELECT count(*) FROM " + records + " WHERE collection = $1::bytea"),
        remove_all("DELETE FROM " + records + " WHERE collection = $1::bytea"),
        evict("DELETE FROM " + records + " WHERE version IN (SELECT version FROM " + records +
              " WHERE collection = $1::bytea ORDER BY version LIMIT $2::int8) "
              "RETURNING id, value, version"),
        ends("SELECT (SELECT count(*) FROM " + records + " WHERE collection = $1::bytea), "
             "f.id, f.value, f.version, l.id, l.value, l.version FROM (SELECT 1) AS one "
             "LEFT JOIN LATERAL (SELECT id, value, version FROM " + records +
             " WHERE collection = $1::bytea ORDER BY version LIMIT 1) AS f ON true "
             "LEFT JOIN LATERAL (SELECT id, value, version FROM " + records +
             " WHERE collection = $1::bytea ORDER BY version DESC LIMIT 1) AS l ON true"),
        // SKIP LOCKED: counters another transaction is deleting (or bumping) are its own;
        // every sender picks the oldest expired ones, and waiting on them would hold up
        // senders of every queue until that transaction ends (an application's, maybe long)
        expire_counters("DELETE FROM " + s + ".dlq_counters WHERE (collection, key) IN "
                        "(SELECT collection, key FROM " + s + ".dlq_counters WHERE expires_at "
                        "<= $1::int8 ORDER BY expires_at LIMIT $2::int8 FOR UPDATE SKIP LOCKED)"),
        increment("INSERT INTO " + s + ".dlq_counters AS c (collection, key, value, expires_at) "
                  "VALUES ($1::bytea, $2::bytea, 1, $4::int8) ON CONFLICT (collection, key) DO "
                  "UPDATE SET value = CASE WHEN c.expires_at <= $3::int8 THEN 1 "
                  "ELSE c.value + 1 END, expires_at = $4::int8 RETURNING value"),
        version("SELECT max(version)::int8 FROM " + s + ".dlq_schema") {}

  std::string records, save, load, list, versions, remove, move, take_oldest, collections,
      count, remove_all, evict, ends, expire_counters, increment, version;
};

/// Checks that schema `s` holds dlq's tables at this library's version.
/// @throws dlq::postgres::schema_error naming migrate() when they are missing or older, and
///         saying so when they are newer.
inline void check_schema(pg_connection& c, const statements& st, const std::string& schema) {
  const std::string hint = "run dlq::postgres::migrate(url, options) once, with Options::schema "
                           "\"" + schema + "\" (a deployment step; the store never creates "
                           "tables itself)";
  pg_result r = [&] {
    try {
      return c.exec(st.version, "reading the dlq schema version");
    } catch (const schema_error&) {
      throw schema_error(dlq::detail::message(
          "postgres", c.where(), "no dlq tables in schema \"" + schema + "\"", hint));
    }
  }();
  const std::int64_t v = PQntuples(r.get()) == 1 ? column_int8(r.get(), 0, 0) : 0;
  if (v < schema_version)
    throw schema_error(dlq::detail::message(
        "postgres", c.where(),
        "the dlq tables in schema \"" + schema + "\" are at version " + std::to_string(v) +
            ", this dlq needs " + std::to_string(schema_version),
        hint));
  if (v > schema_version)
    throw schema_error(dlq::detail::message(
        "postgres", c.where(),
        "the dlq tables in schema \"" + schema + "\" are at version " + std::to_string(v) +
            ", written by a newer dlq (this one reads version " +
            std::to_string(schema_version) + ")",
        "upgrade dlq, or use another schema"));
}

/// Brings schema `schema` to this library's version in one transaction (see migrate()).
/// @returns the version it was at before (0: none).
inline int migrate_schema(pg_connection& c, const std::string& schema) {
  const std::string s = quote_identifier(schema);
  c.exec("BEGIN", "starting the migration");
  try {
    pg_params lock;
    lock.int8(migration_lock);
    c.exec("SELECT pg_advisory_xact_lock($1::int8)", lock, "locking the migration");
    c.exec("CREATE SCHEMA IF NOT EXISTS " + s, "creating the schema");
    c.exec("CREATE TABLE IF NOT EXISTS " + s + ".dlq_schema (version integer NOT NULL)",
           "creating dlq_schema");
    pg_result r = c.exec("SELECT coalesce(max(version), 0)::int8 FROM " + s + ".dlq_schema",
                         "reading the schema version");
    const auto before = static_cast<int>(column_int8(r.get(), 0, 0));
    if (before > schema_version)
      throw schema_error(dlq::detail::message(
          "postgres", c.where(),
          "schema \"" + schema + "\" is at version " + std::to_string(before) +
              ", newer than this dlq's " + std::to_string(schema_version),
          "upgrade dlq"));
    for (int to = before + 1; to <= schema_version; ++to) {
      for (const std::string& step : migration_step(s, to))
        c.exec(step, "migrating to version " + std::to_string(to));
      pg_params v;
      v.int8(to);
      c.exec("DELETE FROM " + s + ".dlq_schema", "recording the schema version");
      c.exec("INSERT INTO " + s + ".dlq_schema (version) VALUES ($1::int8)", v,
             "recording the schema version");
    }
    c.exec("COMMIT", "committing the migration", true);
    return before;
  } catch (...) {
    PQclear(PQexec(c.handle(), "ROLLBACK"));
    throw;
  }
}

}  // namespace detail
}  // namespace postgres
}  // namespace dlq
