// dlq::kv::PostgresStore beyond the suites: explicit, versioned schema creation and its
// errors, URLs, hostile names and bytes.
#include <libpq-fe.h>

#include <memory>
#include <string>
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

// take_oldest (JobQueue::take's SKIP LOCKED move): a row another transaction holds is
// skipped, not waited for; the others move oldest first with new versions, in order.
TEST_CASE("take_oldest skips rows another transaction holds and keeps the order",
          "[postgres][source]") {
  const dlq::postgres::Options o = pgtest::migrated();
  PostgresStore store(pgtest::url(), o);
  store.save({{"ready", "a", "1"}, {"ready", "b", "2"}, {"ready", "c", "3"}, {"ready", "d", "4"}});
  conn_ptr other = connect();
  run(other.get(), "BEGIN");
  run(other.get(), "SELECT id FROM " + quoted(o.schema) +
                       ".dlq_records WHERE collection = 'ready'::bytea AND id = 'a'::bytea "
                       "FOR UPDATE");
  const std::vector<dlq::kv::Item> got = store.take_oldest("ready", "held:w1", 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].id == "b");
  CHECK(got[1].id == "c");
  CHECK(got[0].version < got[1].version);
  const auto held = store.list("held:w1", dlq::kv::Window{});
  REQUIRE(held.size() == 2);
  CHECK(held[0].version == got[0].version);  // the versions returned are the stored ones
  run(other.get(), "ROLLBACK");
  const auto rest = store.take_oldest("ready", "held:w2", 0);  // 0 = 1
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].id == "a");
  CHECK(store.take_oldest("ready", "held:w2", 10).size() == 1);  // "d"
  CHECK(store.take_oldest("ready", "held:w2", 10).empty());
}

// collections(prefix): by bytes, with prefixes ending in 0xff bytes (no successor string).
TEST_CASE("collections lists the non-empty collections under a prefix", "[postgres]") {
  PostgresStore store(pgtest::url(), pgtest::migrated());
  const std::string ff = "a\xff";
  store.save({{"a", "1", "x"}, {ff, "1", "x"}, {ff + "\xff", "1", "x"}, {ff + "z", "1", "x"},
              {"b", "1", "x"}, {"ab", "1", "x"}});
  CHECK(store.collections(ff) == std::vector<std::string>{ff, ff + "z", ff + "\xff"});  // bytewise
  CHECK(store.collections(ff + "\xff") == std::vector<std::string>{ff + "\xff"});
  CHECK(store.collections("a") == std::vector<std::string>{"a", "ab", ff, ff + "z", ff + "\xff"});
  CHECK(store.collections("").size() == 6);
  CHECK(store.collections("c").empty());
  store.remove_all("ab");
  CHECK(store.collections("a").size() == 4);
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
