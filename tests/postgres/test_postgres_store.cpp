// dlq::kv::PostgresStore beyond the suites: explicit, versioned schema creation and its
// errors, URLs, hostile names and bytes.
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/postgres.hpp"
#include "postgres_fixtures.hpp"
#include "support/catch.hpp"

namespace test_postgres_store {

using dlq::kv::PostgresStore;

struct conn_close {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using conn_ptr = std::unique_ptr<PGconn, conn_close>;

/// A plain libpq connection to the test server, as an application would have.
conn_ptr connect() {
  conn_ptr c(PQconnectdb(pgtest::url().c_str()));
  REQUIRE(PQstatus(c.get()) == CONNECTION_OK);
  return c;
}

/// Runs `sql` on `c`; fails the test when it fails. Returns the first value, if any.
std::string run(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType s = PQresultStatus(r);
  INFO(sql << ": " << PQresultErrorMessage(r));
  const bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  std::string v = ok && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  REQUIRE(ok);
  return v;
}

std::string quoted(const std::string& schema) {
  return dlq::postgres::detail::quote_identifier(schema);
}

TEST_CASE("a store on a database without the dlq tables names migrate()", "[postgres]") {
  dlq::postgres::Options o;
  o.schema = pgtest::unique_schema();
  try {
    PostgresStore store(pgtest::url(), o);
    FAIL("no schema_error");
  } catch (const dlq::postgres::schema_error& e) {
    const std::string what = e.what();
    CHECK(what.find("dlq::postgres::migrate") != std::string::npos);
    CHECK(what.find(o.schema) != std::string::npos);
  }
  // Nothing was created by trying.
  conn_ptr c = connect();
  CHECK(run(c.get(), "SELECT count(*) FROM pg_namespace WHERE nspname = '" + o.schema + "'") ==
        "0");
}

TEST_CASE("migrate creates the tables once and is safe to run again", "[postgres]") {
  dlq::postgres::Options o;
  o.schema = pgtest::unique_schema();
  const dlq::postgres::Migration first = dlq::postgres::migrate(pgtest::url(), o);
  CHECK(first.from == 0);
  CHECK(first.to == PostgresStore::schema_version);
  const dlq::postgres::Migration again = dlq::postgres::migrate(pgtest::url(), o);
  CHECK(again.from == PostgresStore::schema_version);
  CHECK(again.to == PostgresStore::schema_version);
  PostgresStore store(pgtest::url(), o);
  store.save({{"c", "a", "1"}});
  CHECK(store.count("c") == 1);
}

TEST_CASE("tables written by a newer dlq are refused", "[postgres]") {
  const dlq::postgres::Options o = pgtest::migrated();
  conn_ptr c = connect();
  run(c.get(), "UPDATE " + quoted(o.schema) + ".dlq_schema SET version = 99");
  CHECK_THROWS_AS(PostgresStore(pgtest::url(), o), dlq::postgres::schema_error);
  CHECK_THROWS_AS(dlq::postgres::migrate(pgtest::url(), o), dlq::postgres::schema_error);
}

TEST_CASE("the tables dropped under a running store: schema_error naming migrate",
          "[postgres]") {
  const dlq::postgres::Options o = pgtest::migrated();
  PostgresStore store(pgtest::url(), o);
  conn_ptr c = connect();
  run(c.get(), "DROP SCHEMA " + quoted(o.schema) + " CASCADE");
  try {
    store.save({{"c", "a", "1"}});
    FAIL("no schema_error");
  } catch (const dlq::postgres::schema_error& e) {
    CHECK(std::string(e.what()).find("dlq::postgres::migrate") != std::string::npos);
  }
}

TEST_CASE("a schema name PostgreSQL would truncate is refused, never shared",
          "[postgres]") {
  // PostgreSQL keeps the first 63 bytes of an identifier (NAMEDATALEN - 1), quoted or not:
  // two applications whose schema names differ only after them would share one set of
  // tables (each seeing, replaying and purging the other's dead letters) under two
  // different advisory-lock keys (bounds and version order no longer kept).
  const std::string base = pgtest::unique_schema();
  dlq::postgres::Options a, b;
  a.schema = base + std::string(64, 'x') + "-orders";
  b.schema = base + std::string(64, 'x') + "-billing";
  // What the store on `b` sees of a record saved on `a`; -1: a name was refused.
  const int seen = [&] {
    try {
      dlq::postgres::migrate(pgtest::url(), a);
      dlq::postgres::migrate(pgtest::url(), b);
      PostgresStore(pgtest::url(), a).save({{"c", "a", "1"}});
      return static_cast<int>(PostgresStore(pgtest::url(), b).count("c"));
    } catch (const dlq::invalid_argument&) {
      return -1;
    }
  }();
  CHECK(seen == -1);
  CHECK_THROWS_AS(dlq::postgres::migrate(pgtest::url(), b), dlq::invalid_argument);
  CHECK_THROWS_AS(PostgresStore(pgtest::url(), a), dlq::invalid_argument);
  // 63 bytes are kept as written.
  dlq::postgres::Options longest;
  longest.schema = base + std::string(63 - base.size(), 'y');
  REQUIRE(longest.schema.size() == 63);
  dlq::postgres::migrate(pgtest::url(), longest);
  PostgresStore store(pgtest::url(), longest);
  store.save({{"c", "a", "1"}});
  conn_ptr c = connect();
  const std::string table = test_postgres_store::quoted(longest.schema) + ".dlq_records";
  CHECK(run(c.get(), "SELECT count(*) FROM " + table) == "1");
}

TEST_CASE("URLs: postgres:// and postgresql:// reach libpq; bad ones are refused",
          "[postgres]") {
  const dlq::postgres::Options o = pgtest::migrated();
  std::string u = pgtest::url();
  REQUIRE(u.rfind("postgresql://", 0) == 0);
  PostgresStore a(u, o);
  PostgresStore b("postgres://" + u.substr(std::string("postgresql://").size()), o);
  a.save({{"c", "x", "1"}});
  CHECK(b.count("c") == 1);
  CHECK(a.shares_data_with(a));
  // libpq's own parameters pass through (here application_name).
  PostgresStore named(u + "?application_name=dlq-test", o);
  CHECK(named.count("c") == 1);
  CHECK_THROWS_AS(PostgresStore("postgresql://h/db?no_such_param=1", o), dlq::invalid_argument);
  // Nothing listens on port 1: a connection_error, whose message hides the password.
  try {
    PostgresStore("postgresql://u:secret@127.0.0.1:1/db", o);
    FAIL("no connection_error");
  } catch (const dlq::connection_error& e) {
    CHECK(std::string(e.what()).find("secret") == std::string::npos);
  }
}

TEST_CASE("SQL-looking queue names, NUL bytes and invalid UTF-8 are stored as bytes",
          "[postgres]") {
  const dlq::postgres::Options o = pgtest::migrated();
  dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  const std::string queue = "x'); DROP TABLE dlq_records; --";
  const std::string payload("\0\xff\xfe'\";--\x80", 9);
  dlq::Failure f;
  f.error = "boom'); DELETE FROM dlq_records; --";
  const std::string id = q.send_to_dlq(queue, payload, f);
  const std::vector<dlq::Entry> entries = q.peek(queue);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].id == id);
  CHECK(entries[0].payload == payload);
  CHECK(entries[0].error == f.error);
  conn_ptr c = connect();
  CHECK(run(c.get(), "SELECT count(*) FROM " + quoted(o.schema) + ".dlq_records") != "0");
}

TEST_CASE("pooled connections the server closed are replaced: the next calls succeed",
          "[postgres][faults]") {
  const dlq::postgres::Options o = pgtest::migrated();
  const std::string app = "dlq-test-terminated-" + std::to_string(::getpid());
  PostgresStore store(pgtest::url() + "?application_name=" + app, o);
  store.save({{"c", "a", "1"}});
  CHECK(store.count("c") == 1);  // a read and a write: the pool holds the connection
  conn_ptr admin = connect();
  // What a server restart, an idle timeout or a proxy does to an idle connection.
  CHECK(run(admin.get(), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE application_name = '" + app + "'") != "0");
  CHECK(store.count("c") == 1);
  run(admin.get(), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                   "WHERE application_name = '" + app + "'");
  store.save({{"c", "b", "2"}});
  CHECK(store.count("c") == 2);
}

/// Waits (up to 30 s) until `n` advisory-lock requests wait on the server.
void wait_for_lock_waiters(PGconn* c, int n) {
  const std::string q = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted";
  for (int i = 0; i < 3000 && run(c, q) != std::to_string(n); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(run(c, q) == std::to_string(n));
}

TEST_CASE("a bound is exact when the database's default isolation is repeatable read",
          "[postgres][race]") {
  // A database (or role, or URL) with default_transaction_isolation = 'repeatable read':
  // the store's write transactions would inherit it, and take their snapshot at their
  // first statement — the advisory lock they then wait for — so a count read under the
  // lock would miss the rows the previous holder committed.
  const dlq::postgres::Options o = pgtest::migrated();
  PostgresStore store(pgtest::url() + "?options=-c%20default_transaction_isolation%3D"
                                      "repeatable%5C%20read", o);
  conn_ptr holder = connect();
  const std::string key = std::to_string(dlq::postgres::detail::lock_key(o.schema, "c"));
  run(holder.get(), "SELECT pg_advisory_lock(" + key + ")");  // both writers wait on it
  std::vector<int> admitted(4, 0);
  std::vector<std::thread> writers;
  for (int i = 0; i < 2; ++i)
    writers.emplace_back([&, i] {
      admitted[i] = store.save_if_below({"c", "a" + std::to_string(i), "v"}, 1) ? 1 : 0;
    });
  wait_for_lock_waiters(holder.get(), 2);
  run(holder.get(), "SELECT pg_advisory_unlock(" + key + ")");
  for (std::thread& t : writers) t.join();
  CHECK(admitted[0] + admitted[1] == 1);
  CHECK(store.count("c") == 1);

  // save_capped: the second writer must see (and evict) the first one's record.
  const std::string key_d = std::to_string(dlq::postgres::detail::lock_key(o.schema, "d"));
  run(holder.get(), "SELECT pg_advisory_lock(" + key_d + ")");
  std::vector<std::thread> cappers;
  for (int i = 0; i < 2; ++i)
    cappers.emplace_back([&, i] { store.save_capped({{"d", "b" + std::to_string(i), "v"}}, 1); });
  wait_for_lock_waiters(holder.get(), 2);
  run(holder.get(), "SELECT pg_advisory_unlock(" + key_d + ")");
  for (std::thread& t : cappers) t.join();
  CHECK(store.count("d") == 1);
}

/// Dead letters of `queue` in the tables of `o`, read through a store of its own.
std::size_t dead_letters(const dlq::postgres::Options& o, std::string_view queue) {
  dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  return q.size(queue);
}

TEST_CASE("a dead letter sent in the application's transaction: ROLLBACK none, COMMIT one",
          "[postgres][transaction]") {
  const dlq::postgres::Options o = pgtest::migrated();
  const std::string jobs = quoted(o.schema) + ".jobs";
  conn_ptr app = connect();
  run(app.get(), "CREATE TABLE " + jobs + " (id int PRIMARY KEY, state text NOT NULL)");
  run(app.get(), "INSERT INTO " + jobs + " VALUES (42, 'running')");
  dlq::Failure f;
  f.error = "payment gateway timeout";
  f.job_id = "42";

  run(app.get(), "BEGIN");
  run(app.get(), "UPDATE " + jobs + " SET state = 'failed' WHERE id = 42");
  dlq::postgres::send_to_dlq(app.get(), "orders", "{\"order\":42}", f, o);
  CHECK(dead_letters(o, "orders") == 0);  // not committed: invisible to others
  run(app.get(), "ROLLBACK");
  CHECK(dead_letters(o, "orders") == 0);
  CHECK(run(app.get(), "SELECT state FROM " + jobs + " WHERE id = 42") == "running");

  run(app.get(), "BEGIN");
  run(app.get(), "UPDATE " + jobs + " SET state = 'failed' WHERE id = 42");
  const std::string id = dlq::postgres::send_to_dlq(app.get(), "orders", "{\"order\":42}", f, o);
  run(app.get(), "COMMIT");
  CHECK(dead_letters(o, "orders") == 1);
  CHECK(run(app.get(), "SELECT state FROM " + jobs + " WHERE id = 42") == "failed");
  dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
  dlq::DeadLetterQueue<decltype(storage)&> q(storage);
  const std::vector<dlq::Entry> entries = q.peek("orders");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].id == id);
  CHECK(entries[0].payload == "{\"order\":42}");
  CHECK(entries[0].error == f.error);

  // A batch, rolled back then committed (other jobs: an entry is keyed by its job id).
  dlq::Failure f43 = f, f44 = f;
  f43.job_id = "43";
  f44.job_id = "44";
  const std::vector<dlq::FailedJob> batch{{"orders", "a", f43}, {"orders", "b", f44}};
  run(app.get(), "BEGIN");
  CHECK(dlq::postgres::send_batch(app.get(), batch, o).size() == 2);
  run(app.get(), "ROLLBACK");
  CHECK(dead_letters(o, "orders") == 1);
  run(app.get(), "BEGIN");
  dlq::postgres::send_batch(app.get(), batch, o);
  run(app.get(), "COMMIT");
  CHECK(dead_letters(o, "orders") == 3);
}

/// How a save ended: 1 saved, 0 not admitted, 2 refused with a dlq::error.
int saved(PGconn* c, const dlq::postgres::Options& o, const std::string& id) {
  try {
    return PostgresStore::in_transaction(c, o).save_if_below({"c", id, "v"}, 1) ? 1 : 0;
  } catch (const dlq::error&) {
    return 2;
  }
}

struct two_savers {
  int first, second;       // as saved()
  bool second_committed;   // the second's COMMIT succeeded
};

/// Two applications' transactions at `isolation` each save one record under a bound of 1
/// (save_if_below: Overflow::reject); the second takes its snapshot before the first
/// commits, then waits for the collection's lock (when the first was admitted).
two_savers save_two(const dlq::postgres::Options& o, const std::string& isolation) {
  conn_ptr a = connect(), b = connect(), admin = connect();
  run(a.get(), "BEGIN ISOLATION LEVEL " + isolation);
  run(b.get(), "BEGIN ISOLATION LEVEL " + isolation);
  run(a.get(), "SELECT 1");
  run(b.get(), "SELECT 1");  // b's snapshot: before a's COMMIT
  two_savers out{saved(a.get(), o, "a"), -1, false};
  std::thread tb([&] { out.second = saved(b.get(), o, "b"); });
  if (out.first == 1) wait_for_lock_waiters(admin.get(), 1);
  run(a.get(), "COMMIT");
  tb.join();
  PGresult* r = PQexec(b.get(), "COMMIT");
  out.second_committed =
      PQresultStatus(r) == PGRES_COMMAND_OK && std::string(PQcmdStatus(r)) == "COMMIT";
  PQclear(r);
  return out;
}

TEST_CASE("a bound checked in the application's repeatable read transaction",
          "[postgres][transaction][race]") {
  // REPEATABLE READ: the count the second would read under the lock cannot see the first
  // one's record, and nothing detects it: a bounded save is refused there, before anything
  // is written. (Through DeadLetterQueue the queue's registry row, rewritten by every send,
  // happens to make the second fail with a serialization error.)
  const dlq::postgres::Options o = pgtest::migrated();
  const two_savers rr = save_two(o, "REPEATABLE READ");
  CHECK(rr.first == 2);
  CHECK(rr.second == 2);
  CHECK(PostgresStore(pgtest::url(), o).count("c") == 0);
  // SERIALIZABLE: PostgreSQL fails the second (at its save or its COMMIT); READ COMMITTED:
  // the second reads afresh under the lock and is not admitted.
  for (const char* isolation : {"SERIALIZABLE", "READ COMMITTED"}) {
    INFO(isolation);
    const dlq::postgres::Options fresh = pgtest::migrated();
    const two_savers out = save_two(fresh, isolation);
    CHECK(out.first == 1);
    CHECK(!(out.second == 1 && out.second_committed));
    CHECK(PostgresStore(pgtest::url(), fresh).count("c") == 1);
  }
}

TEST_CASE("sending on the application's connection needs its open transaction",
          "[postgres][transaction]") {
  const dlq::postgres::Options o = pgtest::migrated();
  conn_ptr app = connect();
  dlq::Failure f;
  f.error = "e";
  CHECK_THROWS_AS(dlq::postgres::send_to_dlq(app.get(), "orders", "p", f, o),
                  dlq::invalid_argument);
  CHECK(dead_letters(o, "orders") == 0);
  CHECK_THROWS_AS(dlq::postgres::send_to_dlq(nullptr, "orders", "p", f, o),
                  dlq::invalid_argument);
  // A schema without the tables: schema_error, inside the application's transaction.
  dlq::postgres::Options missing;
  missing.schema = pgtest::unique_schema();
  run(app.get(), "BEGIN");
  CHECK_THROWS_AS(dlq::postgres::send_to_dlq(app.get(), "orders", "p", f, missing),
                  dlq::postgres::schema_error);
  run(app.get(), "ROLLBACK");
}

}  // namespace test_postgres_store
