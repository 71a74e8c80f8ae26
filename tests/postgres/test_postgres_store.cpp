// dlq::kv::PostgresStore beyond the suites: explicit, versioned schema creation and its
// errors, URLs, hostile names and bytes.
#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <future>
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

/// The message of the dlq::error a store opened on `url` throws ("" when none).
std::string error_of(const std::string& url) {
  try {
    PostgresStore store(url, dlq::postgres::Options{});
  } catch (const dlq::error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("no error shows the password: libpq's token, `password = x` strings",
          "[postgres][secrets]") {
  // Nothing listens on port 1, or libpq cannot read the string: each throws before a
  // server is reached, and each message must leave the password out.
  const char* const urls[] = {
      // libpq quotes the token it cannot decode: here the password (an unencoded '%').
      "postgresql://u:hunter2%zz@127.0.0.1:1/db",
      "postgresql://u:hunter2%00@127.0.0.1:1/db",
      // libpq's key=value form allows spaces around '=' (psql takes these).
      "host=127.0.0.1 port=1 user=u password = hunter2 dbname=db",
      "host=127.0.0.1 port=1 password =hunter2",
      "host=127.0.0.1 port=1 password\t=\thunter2",
      "host=127.0.0.1 port=1 password = hunter2 bogus=1",
  };
  for (const char* u : urls) {
    const std::string what = error_of(u);
    INFO(u << " -> " << what);
    CHECK(!what.empty());
    CHECK(what.find("hunter2") == std::string::npos);
    try {
      dlq::postgres::migrate(u);
      FAIL("migrate: no error");
    } catch (const dlq::error& e) {
      CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
    }
  }
  // What stays readable: the host, a key=value string's other keys, libpq's quoted option.
  CHECK(error_of("host=127.0.0.1 port=1 password = hunter2 dbname=db").find("port=1") !=
        std::string::npos);
  CHECK(error_of("postgresql://u:pw@127.0.0.1:1/db?bad_param=1").find("\"bad_param\"") !=
        std::string::npos);
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

TEST_CASE("a 3000-byte job id is refused before PostgreSQL's index sees it", "[postgres]") {
  // PostgreSQL's UNIQUE (collection, id) btree takes at most 2704 bytes an entry: without
  // dlq::max_job_id_bytes a send failed with SQLSTATE 54000 ('index row size 3032 exceeds
  // btree version 4 maximum 2704'). The contract suite proves 1024 bytes are stored with a
  // 1024-byte queue name, on every backend. Incompressible bytes, as PostgreSQL compresses.
  std::string job_id;
  std::uint32_t x = 12345;
  for (int i = 0; i < 3000; ++i) {
    x = x * 1103515245u + 12345u;
    job_id += static_cast<char>('!' + (x >> 16) % 90);
  }
  const dlq::postgres::Options o = pgtest::migrated();
  dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
  dlq::DeadLetterQueue<decltype(storage)&> dlq_(storage);
  dlq::Failure f;
  f.error = "e";
  f.job_id = job_id;
  CHECK_THROWS_WITH(dlq_.send_to_dlq("orders", "payload", f),
                    Catch::Contains("the job id is 3000 bytes"));
  CHECK(dlq_.size("orders") == 0);
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

/// The SQL condition on pg_locks selecting the advisory lock of `collection` in `schema`
/// (a bigint key: its high half in classid, its low half in objid, objsubid 1): other
/// tests running on the server at the same time wait on other keys.
std::string lock_of(const std::string& schema, const std::string& collection) {
  const auto key = static_cast<std::uint64_t>(dlq::postgres::detail::lock_key(schema, collection));
  return "classid = " + std::to_string(key >> 32) + " AND objid = " +
         std::to_string(key & 0xffffffffu) + " AND objsubid = 1";
}

/// Waits (up to 30 s) until `n` requests for the advisory lock `which` (lock_of) wait.
void wait_for_lock_waiters(PGconn* c, int n, const std::string& which) {
  const std::string q = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT "
                        "granted AND " + which;
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
  wait_for_lock_waiters(holder.get(), 2, lock_of(o.schema, "c"));
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
  wait_for_lock_waiters(holder.get(), 2, lock_of(o.schema, "d"));
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
  if (out.first == 1) wait_for_lock_waiters(admin.get(), 1, lock_of(o.schema, "c"));
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
  // is written.
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

TEST_CASE("sends to a bounded queue in two repeatable read transactions",
          "[postgres][transaction][race]") {
  // The same through send_to_dlq: a queue bounded at 2 (Overflow::reject) holding 1 entry;
  // two applications' REPEATABLE READ transactions each send one, the second's snapshot
  // taken before the first commits. Both admitted would leave 3 entries.
  const dlq::postgres::Options o = pgtest::migrated();
  dlq::Options qo;
  qo.retention.max_length = 2;
  qo.retention.overflow = dlq::Overflow::reject;
  dlq::Failure f;
  f.error = "e";
  {
    dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
    dlq::DeadLetterQueue<decltype(storage)&> q(storage, qo);
    f.job_id = "0";
    q.send_to_dlq("orders", "p", f);
  }
  conn_ptr a = connect(), b = connect(), admin = connect();
  run(a.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ");
  run(b.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ");
  run(a.get(), "SELECT 1");
  run(b.get(), "SELECT 1");  // b's snapshot: before a's COMMIT
  // 1 sent, 2 refused with a dlq::error
  const auto send = [&](PGconn* c, const std::string& job) {
    dlq::Failure fj = f;
    fj.job_id = job;
    try {
      dlq::postgres::send_to_dlq(c, "orders", "p", fj, o, qo);
      return 1;
    } catch (const dlq::error&) {
      return 2;
    }
  };
  const int a_sent = send(a.get(), "1");
  std::future<int> b_sent = std::async(std::launch::async, [&] { return send(b.get(), "2"); });
  // b waits for the queue's lock, which a holds (unless b was refused at once)
  const std::string waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                              "NOT granted AND pid = " + std::to_string(PQbackendPID(b.get()));
  for (int i = 0; i < 3000 && run(admin.get(), waiting) != "1" &&
                  b_sent.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready;
       ++i) {
  }
  PQclear(PQexec(a.get(), "COMMIT"));
  const int b_result = b_sent.get();
  PQclear(PQexec(b.get(), "COMMIT"));
  INFO("a " << a_sent << ", b " << b_result);
  CHECK(dead_letters(o, "orders") <= 2);
  CHECK(b_result == 2);
}

TEST_CASE("a send refused inside the application's transaction aborts it, as documented",
          "[postgres][transaction]") {
  // docs/postgres.md: "A failure aborts your transaction, as any failed statement does." An
  // application may rely on it: BEGIN; mark the job failed; send (a failure is logged);
  // COMMIT — the COMMIT must not keep "failed" without its dead letter. A full queue with
  // Overflow::reject refuses the send without any failed statement.
  const dlq::postgres::Options o = pgtest::migrated();
  const std::string jobs = quoted(o.schema) + ".jobs";
  conn_ptr app = connect();
  run(app.get(), "CREATE TABLE " + jobs + " (id int PRIMARY KEY, state text NOT NULL)");
  run(app.get(), "INSERT INTO " + jobs + " VALUES (42, 'running')");
  dlq::Options full;
  full.retention.max_length = 1;
  full.retention.overflow = dlq::Overflow::reject;
  dlq::Failure f;
  f.error = "e";
  run(app.get(), "BEGIN");
  dlq::postgres::send_to_dlq(app.get(), "orders", "first", f, o, full);
  run(app.get(), "COMMIT");
  REQUIRE(dead_letters(o, "orders") == 1);

  run(app.get(), "BEGIN");
  run(app.get(), "UPDATE " + jobs + " SET state = 'failed' WHERE id = 42");
  CHECK_THROWS_AS(dlq::postgres::send_to_dlq(app.get(), "orders", "second", f, o, full),
                  dlq::queue_full_error);
  CHECK(PQtransactionStatus(app.get()) == PQTRANS_INERROR);
  PQclear(PQexec(app.get(), "COMMIT"));  // a failed transaction's COMMIT rolls it back
  CHECK(run(app.get(), "SELECT state FROM " + jobs + " WHERE id = 42") == "running");
  CHECK(dead_letters(o, "orders") == 1);
}

TEST_CASE("an open application transaction holds up no sender of another queue",
          "[postgres][transaction]") {
  // docs/postgres.md: "Writers of different queues do not wait for each other." With the
  // poison guard on, every send first deletes up to 16 expired counters, of any queue: the
  // oldest, the same rows for every sender. Deleted in the application's transaction, they
  // stay locked until its COMMIT.
  const dlq::postgres::Options o = pgtest::migrated();
  dlq::Options guard;
  guard.poison_guard.park_after = 3;
  guard.poison_guard.remember_for = std::chrono::seconds(1);
  dlq::Failure f;
  f.error = "e";
  {
    dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
    dlq::DeadLetterQueue<decltype(storage)&> q(storage, guard);
    for (int i = 0; i < 4; ++i) q.send_to_dlq("old", "p" + std::to_string(i), f);
  }
  // Another sender, queue "b" registered by it already (its next sends write no registry
  // entry: the registry's lock is test_postgres_store's next case).
  dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
  dlq::DeadLetterQueue<decltype(storage)&> other_q(storage, guard);
  other_q.send_to_dlq("b", "job-b0", f);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // the counters expire
  conn_ptr app = connect();
  run(app.get(), "BEGIN");
  dlq::postgres::send_to_dlq(app.get(), "a", "job-a", f, o, guard);
  auto other = std::async(std::launch::async, [&] { other_q.send_to_dlq("b", "job-b", f); });
  // 3 s: the other send is one transaction of a few statements on loopback (milliseconds).
  const bool sent_meanwhile = other.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  run(app.get(), "COMMIT");
  other.get();
  CHECK(sent_meanwhile);
  CHECK(dead_letters(o, "b") == 2);
}

TEST_CASE("two application transactions sending to two queues do not wait for each other",
          "[postgres][transaction]") {
  // "Writers of different queues do not wait for each other." A send on the application's
  // connection runs on a front end of its own, which knows no queue yet: it enters its
  // queue in the queue registry again — one collection for all queues, whose lock is then
  // held until that application's COMMIT.
  const dlq::postgres::Options o = pgtest::migrated();
  dlq::Failure f;
  f.error = "e";
  {
    dlq::KeyValueStorage<PostgresStore> storage(PostgresStore(pgtest::url(), o));
    dlq::DeadLetterQueue<decltype(storage)&> q(storage);
    q.send_to_dlq("a", "a0", f);  // both queues exist, and are registered
    q.send_to_dlq("b", "b0", f);
  }
  conn_ptr first = connect();
  conn_ptr second = connect();
  run(first.get(), "BEGIN");
  dlq::postgres::send_to_dlq(first.get(), "a", "a1", f, o);
  run(second.get(), "BEGIN");
  auto other = std::async(std::launch::async, [&] {
    dlq::postgres::send_to_dlq(second.get(), "b", "b1", f, o);
  });
  const bool sent_meanwhile = other.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  run(first.get(), "COMMIT");
  other.get();
  run(second.get(), "COMMIT");
  CHECK(sent_meanwhile);
  CHECK(dead_letters(o, "a") == 2);
  CHECK(dead_letters(o, "b") == 2);
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
