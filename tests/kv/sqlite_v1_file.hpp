// A dlq SQLite file of schema version 1, exactly as dlq 0.1 wrote it (frozen here: later
// versions must keep migrating it), for the migration tests.
#pragma once

#include <sqlite3.h>

#include <stdexcept>
#include <string>

namespace kvtest {

/// Writes a version 1 store at `path` holding the queue "orders" with two dead records
/// (job-2 "{}", then job-1 "second"), one corrupt record (job-3 "bad") and the queue
/// registry entry, plus `extra_dead` more dead records (extra-0 … in order).
inline void write_sqlite_v1_file(const std::string& path, int extra_dead = 0) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open " + path);
  }
  std::string sql =
      "PRAGMA journal_mode=WAL;"
      "BEGIN;"
      "CREATE TABLE dlq_records (version INTEGER PRIMARY KEY AUTOINCREMENT, collection TEXT "
      "NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL, UNIQUE (collection, id));"
      "CREATE INDEX dlq_records_by_collection ON dlq_records (collection, version);"
      "PRAGMA application_id = 1145852193; PRAGMA user_version = 1;"
      "INSERT INTO dlq_records (collection, id, value) VALUES "
      "('dlq:{orders}:dead', 'job-2', X'7B7D'), ('dlq:{orders}:dead', 'job-1', 'second'),"
      "('dlq:{orders}:corrupt', 'job-3', 'bad'), ('dlq:queues', 'orders', '');";
  for (int i = 0; i < extra_dead; ++i)
    sql += "INSERT INTO dlq_records (collection, id, value) VALUES ('dlq:{orders}:dead', 'extra-" +
           std::to_string(i) + "', 'x');";
  sql += "COMMIT;";
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("writing a version 1 file failed: " + msg);
}

}  // namespace kvtest
