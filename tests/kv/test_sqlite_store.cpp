// SQLite store specifics: files, schema versions, bad files, locks held by other connections,
// several store instances and threads on one file.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dlq/kv/sinks.hpp"
#include "kv_fixtures.hpp"
#include "sqlite_v1_file.hpp"
#include "support/catch.hpp"

using Catch::Matchers::Contains;
using dlq::Record;
using dlq::kv::SqliteOptions;
using dlq::kv::SqliteStore;
using dlq::kv::Window;
using dlq::kv::Write;

namespace {

/// A raw SQLite connection for setting up and inspecting files behind the store's back.
class Raw {
 public:
  explicit Raw(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) FAIL("cannot open " << path);
    sqlite3_busy_timeout(db_, 5000);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  ~Raw() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    const std::string msg = err != nullptr ? err : "";
    sqlite3_free(err);
    if (rc != SQLITE_OK) FAIL("SQL failed: " << sql << ": " << msg);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

}  // namespace

TEST_CASE("records survive closing and reopening the file; versions keep growing", "[kv][sqlite]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  std::uint64_t last = 0;
  {
    SqliteStore store(path);
    store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}});
    last = store.load("c", "b")->version;
  }
  SqliteStore store(path);
  CHECK(store.list("c", Window{}).size() == 2);
  store.save({Write{"c", "a", "1 again"}});
  CHECK(store.load("c", "a")->version > last);
  CHECK(store.integrity_check() == "ok");
}

TEST_CASE("the file is in WAL mode and carries dlq's application id and schema version",
          "[kv][sqlite]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore store(path); }
  Raw raw(path);
  CHECK(raw.text("PRAGMA journal_mode") == "wal");
  CHECK(raw.text("PRAGMA application_id") == std::to_string(0x444C5121));
  CHECK(raw.text("PRAGMA user_version") == std::to_string(SqliteStore::schema_version));
}

TEST_CASE("a file written with schema version 1 is migrated to version 2 when opened",
          "[kv][sqlite][compat]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("v1.db");
  kvtest::write_sqlite_v1_file(path);
  {
    Raw raw(path);
    CHECK(raw.text("PRAGMA user_version") == "1");
  }
  dlq::KeyValueStorage s(SqliteStore(path), dlq::kv::MemoryQueues{});
  CHECK(s.range("orders", dlq::ListKind::dead, 0, 100) == std::vector<std::string>{"{}", "second"});
  CHECK(s.find("orders", dlq::ListKind::dead, "job-1") == std::optional<std::string>("second"));
  CHECK(s.queues() == std::vector<std::string>{"orders"});
  {
    Raw raw(path);
    CHECK(raw.text("PRAGMA user_version") == "2");
    CHECK(raw.text("SELECT records FROM dlq_counts WHERE collection = 'dlq:{orders}:dead'") == "2");
    CHECK(raw.text("SELECT records FROM dlq_counts WHERE collection = 'dlq:{orders}:corrupt'") ==
          "1");
    CHECK(raw.text("SELECT count(*) FROM dlq_counters") == "0");
  }
  // The migrated counts are the ones the new members use.
  CHECK(s.size("orders", dlq::ListKind::dead) == 2);
  CHECK(s.size("orders", dlq::ListKind::corrupt) == 1);
  CHECK(s.push(Record{"orders", "job-4", "job-4", "third"}) == 3);
  CHECK_FALSE(s.push_bounded(Record{"orders", "job-5", "job-5", "fourth"}, 3));
  CHECK(s.bump_count("orders", "job:job-4", std::chrono::seconds(60)) == 1);
  CHECK(s.bump_count("orders", "job:job-4", std::chrono::seconds(60)) == 2);
  SqliteStore again(path);  // reopening a version 2 file changes nothing
  CHECK(again.count("dlq:{orders}:dead") == 3);
  CHECK(again.integrity_check() == "ok");
  Raw raw(path);
  CHECK(raw.text("PRAGMA user_version") == "2");
}

TEST_CASE("record counts stay exact through every kind of write, including raw SQL",
          "[kv][sqlite][counts]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteStore store(path);
  store.save({Write{"c", "a", "1"}, Write{"c", "b", "2"}, Write{"c", "a", "1 again"}});
  CHECK(store.count("c") == 2);
  store.save({Write{"c", "b", "2 again"}, Write{"d", "x", ""}});
  CHECK(store.count("c") == 2);
  CHECK(store.count("d") == 1);
  const auto vb = store.load("c", "b")->version;
  CHECK(store.remove({dlq::kv::Removal{"c", "a", 0, "d"},              // move: -1 here, +1 there
                      dlq::kv::Removal{"c", "b", vb + 1, {}}}) == 1);  // stale: nothing
  CHECK(store.count("c") == 1);
  CHECK(store.count("d") == 2);
  store.save({Write{"c", "x", "moved onto an existing id"}});
  CHECK(store.remove({dlq::kv::Removal{"c", "x", 0, "d"}}) == 1);  // replaces d/x: no growth
  CHECK(store.count("c") == 1);
  CHECK(store.count("d") == 2);
  {  // writes by hand, as an operator in the sqlite3 shell would
    Raw raw(path);
    raw.exec(
        "INSERT OR REPLACE INTO dlq_records (collection, id, value) VALUES ('c', 'b', 'r'),"
        " ('c', 'n', 'new'), ('c', 'm', 'new');"
        "DELETE FROM dlq_records WHERE collection = 'd' AND id = 'x';"
        "UPDATE dlq_records SET collection = 'e' WHERE collection = 'd';");
  }
  CHECK(store.count("c") == 3);
  CHECK(store.count("d") == 0);
  CHECK(store.count("e") == 1);
  {  // dlq 0.1's own statements (schema version 1), as a not yet upgraded process runs them
    Raw raw(path);
    raw.exec(
        "INSERT OR REPLACE INTO dlq_records (collection, id, value) VALUES ('c', 'm', 'again');"
        "INSERT OR REPLACE INTO dlq_records (collection, id, value) SELECT 'e', id, value "
        "FROM dlq_records WHERE collection = 'c' AND id = 'n' AND (0 = 0 OR version = 0);"
        "DELETE FROM dlq_records WHERE collection = 'c' AND id = 'n' AND (0 = 0 OR version = 0);");
  }
  CHECK(store.count("c") == 2);
  CHECK(store.count("e") == 2);
  CHECK(store.remove_all("c") == 2);
  CHECK(store.count("c") == 0);
  for (const char* coll : {"c", "d", "e"})
    CHECK(store.count(coll) == store.list(coll, Window{}).size());
}

TEST_CASE("increments delete expired counters, so the counters table stays bounded",
          "[kv][sqlite][counts][expiry]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteOptions fast;  // no fsync per increment: the 40 below take far less than their ttl
  fast.synchronous = dlq::kv::SqliteSync::normal;
  SqliteStore store(path, fast);
  for (int i = 0; i < 40; ++i)
    CHECK(store.increment("c", "short-" + std::to_string(i), std::chrono::seconds(1)) == 1);
  CHECK(store.increment("c", "long", std::chrono::hours(1)) == 1);
  Raw raw(path);
  CHECK(raw.text("SELECT count(*) FROM dlq_counters") == "41");
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  CHECK(store.increment("c", "long", std::chrono::hours(1)) == 2);  // deletes 16 expired
  CHECK(raw.text("SELECT count(*) FROM dlq_counters") == "25");
  CHECK(store.increment("c", "other", std::chrono::hours(1)) == 1);  // +1, -16
  CHECK(raw.text("SELECT count(*) FROM dlq_counters") == "10");
  CHECK(store.increment("c", "long", std::chrono::hours(1)) == 3);
  CHECK(raw.text("SELECT count(*) FROM dlq_counters") == "2");  // only the live ones
  CHECK(raw.text("SELECT count(*) FROM dlq_counters WHERE key LIKE 'short-%'") == "0");
}

TEST_CASE("a version 2 file that lost a table is refused", "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore store(path); }
  { Raw(path).exec("DROP TABLE dlq_counters"); }
  CHECK_THROWS_WITH(SqliteStore(path), Contains(path) && Contains("lacks the dlq_counts or "
                                                                  "dlq_counters table"));
}

TEST_CASE("a file that is not a database is refused with a storage_error naming the path",
          "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("notes.txt");
  write_file(path, std::string(8192, 'x') + "this is not a database\n");
  try {
    SqliteStore store(path);
    FAIL("opened a file that is not a database");
  } catch (const dlq::storage_error& e) {
    CHECK_THAT(e.what(), Contains(path));
    CHECK_THAT(e.what(), Contains("not an SQLite database"));
    CHECK_THAT(e.what(), Contains("[dlq.sqlite]"));
  }
  std::ifstream f(path, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(after == std::string(8192, 'x') + "this is not a database\n");  // left untouched
}

TEST_CASE("another application's database is refused, not altered", "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("app.db");
  {
    Raw raw(path);
    raw.exec("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada');");
  }
  CHECK_THROWS_WITH(SqliteStore(path), Contains("another application") && Contains(path));
  Raw raw(path);
  CHECK(raw.text("SELECT count(*) FROM sqlite_master WHERE name = 'dlq_records'") == "0");
}

TEST_CASE("a file from a newer dlq is refused with both versions named",
          "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  { SqliteStore store(path); }
  { Raw(path).exec("PRAGMA user_version = 7"); }
  CHECK_THROWS_AS(SqliteStore(path), dlq::storage_error);
  CHECK_THROWS_WITH(SqliteStore(path),
                    Contains("newer dlq") && Contains("schema version 7") && Contains("up to 2"));
}

TEST_CASE("a damaged file gives a storage_error that says so", "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  {
    SqliteStore store(path);
    std::vector<std::string> values(200, std::string(1000, 'v'));
    std::vector<std::string> idv;
    for (int i = 0; i < 200; ++i)
      idv.push_back(std::to_string(i));
    std::vector<Write> writes;
    for (int i = 0; i < 200; ++i)
      writes.push_back(Write{"c", idv[i], values[i]});
    store.save(writes);
  }
  {  // overwrite pages 2.. with garbage, keep the header page
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(4096);
    const std::string junk(4096 * 8, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  bool reported = false;
  try {
    SqliteStore store(path);
    auto all = store.list("c", Window{});
    reported = store.integrity_check() != "ok";
  } catch (const dlq::storage_error& e) {
    CHECK_THAT(e.what(), Contains(path));
    reported = true;
  }
  CHECK(reported);
}

TEST_CASE("bad paths and missing files are clear errors", "[kv][sqlite][bad-input]") {
  kvtest::TempDir dir;
  CHECK_THROWS_AS(SqliteStore(":memory:"), dlq::invalid_argument);
  CHECK_THROWS_AS(SqliteStore(""), dlq::invalid_argument);
  const std::string missing_dir = dir.file("no/such/dir/dlq.db");
  CHECK_THROWS_WITH(SqliteStore(missing_dir), Contains(missing_dir) && Contains("cannot open"));
  SqliteOptions no_create;
  no_create.create = false;
  const std::string missing = dir.file("missing.db");
  CHECK_THROWS_WITH(SqliteStore(missing, no_create),
                    Contains(missing) && Contains("does not exist"));
}

TEST_CASE("a write waits for a lock another connection holds, then succeeds",
          "[kv][sqlite][locks]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteOptions o;
  o.busy_timeout = std::chrono::milliseconds(10000);
  SqliteStore store(path, o);
  Raw other(path);
  other.exec("BEGIN IMMEDIATE");
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    other.exec("COMMIT");
  });
  const auto start = std::chrono::steady_clock::now();
  store.save({Write{"c", "a", "1"}});
  const auto waited = std::chrono::steady_clock::now() - start;
  release.join();
  CHECK(waited >= std::chrono::milliseconds(250));
  CHECK(store.load("c", "a")->value == "1");
}

TEST_CASE("a lock held past busy_timeout is a timeout_error; nothing is written",
          "[kv][sqlite][locks]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteOptions o;
  o.busy_timeout = std::chrono::milliseconds(200);
  SqliteStore store(path, o);
  Raw other(path);
  other.exec("BEGIN IMMEDIATE");
  try {
    store.save({Write{"c", "a", "1"}});
    FAIL("saved while another connection held the write lock");
  } catch (const dlq::timeout_error& e) {
    CHECK_FALSE(e.outcome_unknown());
    CHECK_THAT(e.what(),
               Contains(path) && Contains("busy_timeout") && Contains("nothing was written"));
    CHECK_THAT(e.what(), !Contains("database is locked"));
  }
  CHECK_FALSE(store.load("c", "a"));  // reads go on while a writer holds the lock (WAL)
  other.exec("ROLLBACK");
  store.save({Write{"c", "a", "1"}});
  CHECK(store.load("c", "a"));
}

TEST_CASE("threads on two store instances of one file: nothing lost, no lock error",
          "[kv][sqlite][threads]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteStore first(path);
  SqliteStore second(path);  // its own connection pool: contends through file locks
  dlq::KeyValueStorage a(first, dlq::kv::MemoryQueues{});
  dlq::KeyValueStorage b(second, dlq::kv::MemoryQueues{});
  constexpr int threads = 4;
  constexpr int per_thread = 100;
  std::atomic<int> errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto& s = t % 2 == 0 ? a : b;
      for (int i = 0; i < per_thread; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        try {
          if (i % 10 == 0) {
            const std::string id2 = id + "b";
            s.push_many({dlq::Record{"q", id, "", id}, dlq::Record{"q", id2, "", id2}});
          } else {
            s.push(dlq::Record{"q", id, "", id});
          }
          (void)s.range("q", dlq::ListKind::dead, 0, 5);
        } catch (const std::exception& e) {
          ++errors;
          UNSCOPED_INFO(e.what());
        }
      }
    });
  }
  for (auto& th : pool)
    th.join();
  CHECK(errors == 0);
  CHECK(a.size("q", dlq::ListKind::dead) == threads * (per_thread + per_thread / 10));
  CHECK(first.integrity_check() == "ok");
}

TEST_CASE("concurrent writers share a commit; a failing one fails alone", "[kv][sqlite][group]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("dlq.db");
  SqliteOptions o;
  o.max_value_bytes = 1000;
  SqliteStore store(path, o);
  Raw other(path);
  other.exec("BEGIN IMMEDIATE");  // hold the lock so that the writers below queue up
  const std::string small(10, 's');
  const std::string huge(5000, 'h');
  std::vector<std::thread> writers;
  std::atomic<int> ok{0};
  std::atomic<int> refused{0};
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back("w" + std::to_string(i));
  for (int i = 0; i < 6; ++i) {
    writers.emplace_back([&, i] {
      try {
        store.save({Write{"c", ids[i], i == 3 ? huge : small}});
        ++ok;
      } catch (const dlq::invalid_argument& e) {
        CHECK_THAT(e.what(), Contains("too large"));
        ++refused;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  other.exec("COMMIT");
  for (auto& t : writers)
    t.join();
  CHECK(ok == 5);
  CHECK(refused == 1);
  CHECK(store.list("c", Window{}).size() == 5);
  CHECK_FALSE(store.load("c", "w3"));
}

TEST_CASE("an empty file becomes a dlq store", "[kv][sqlite][compat]") {
  kvtest::TempDir dir;
  const std::string path = dir.file("empty.db");
  write_file(path, "");
  SqliteStore store(path);
  store.save({Write{"c", "a", "1"}});
  CHECK(store.load("c", "a")->value == "1");
}
