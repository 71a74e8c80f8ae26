// Key-value backend benchmark: send, list and replay rates of dlq::KeyValueStorage over each
// store, each beside a baseline measured in the same program:
//   memory store  vs a bare std::map + mutex doing the same inserts / reads / erases;
//   Redis store   vs bare hiredis doing the same data work without scripts, atomicity or
//                 versions (SET per entry; ZRANGEBYSCORE + MGET per page; ZRANGE + MGET,
//                 then DEL + ZREM per batch);
//   SQLite store  vs bare SQLite on the same schema and PRAGMAs (the same INSERT per
//                 transaction or per batch transaction, one SELECT, one DELETE transaction).
//   policies      each store with its optional policy members (push returning the length,
//                 bounded save, counter) against the front end's fallbacks without them
//                 (size() after each push; size() then push; counts in the process), and
//                 the poison guard against no guard.
// Every figure is the median of --reps runs (fresh store each run; dlq and baseline runs
// alternate); the SQLite rows name the `synchronous` setting.
// Usage: bench_kv [--reps N] [--scale F] [--dir DIR] [--redis-url URL]
//   --scale multiplies the entry counts (default 1); --dir is where database files go
//   (default: the current directory, so the disk under test is the build's disk);
//   --redis-url: a server to use (it is FLUSHALLed!); default: a private redis-server.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/storage.hpp"
#if DLQ_BENCH_HAVE_REDIS
#include "dlq/redis/kv_store.hpp"
#include "support/redis_process.hpp"
#endif
#if DLQ_BENCH_HAVE_SQLITE
#include <sqlite3.h>

#include "dlq/sqlite/sqlite_store.hpp"
#endif

namespace {

/// Lists every dead letter of "orders" through the adapter, in pages of 100.
template <class Storage>
void list_in_pages(Storage& s) {
  dlq::kv::Window w;
  w.limit = 100;
  for (;;) {
    auto page = s.items("orders", dlq::ListKind::dead, w);
    if (page.empty()) break;
    w.after = page.back().version;
  }
}

using clock_type = std::chrono::steady_clock;

int reps = 5;
double scale = 1.0;
std::string base_dir = ".";
std::string redis_url;  // empty: start a private redis-server

std::size_t scaled(std::size_t n) {
  return std::max<std::size_t>(10, static_cast<std::size_t>(static_cast<double>(n) * scale));
}

const std::string envelope =
    "{\"original_payload\":{\"order_id\":12345,\"items\":[1,2,3],\"note\":\"" +
    std::string(150, 'x') +
    "\"},\"queue\":\"orders\",\"error\":\"payment timeout\",\"attempt\":3,\"worker\":\"w-7\","
    "\"dead_lettered_at\":\"2026-11-30T03:32:19.123456+00:00\"}";  // ~300 bytes

std::vector<std::string> make_ids(std::size_t n) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    ids.push_back("job-" + std::to_string(i));
  return ids;
}

/// One timed case: `setup` (untimed), `body` (timed, handles n entries), `teardown`.
struct timed {
  std::function<void()> setup, body, teardown;
};

double run_once(std::size_t n, const timed& t) {
  t.setup();
  const auto start = clock_type::now();
  t.body();
  const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  t.teardown();
  return static_cast<double>(n) / secs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Runs the dlq case and its baseline alternately `reps` times each (so that disk and CPU
/// noise hits both alike); returns their median rates in entries/s.
std::pair<double, double> compare(std::size_t n, const timed& dlq_case, const timed& baseline) {
  std::vector<double> a, b;
  for (int r = 0; r < reps; ++r) {
    a.push_back(run_once(n, dlq_case));
    b.push_back(run_once(n, baseline));
  }
  return {median(a), median(b)};
}

struct row {
  std::string store, op, setting, baseline;
  std::size_t n;
  double dlq, base;
};
std::vector<row> rows;

void add(row r) {
  std::printf("  %-8s %-34s %-16s %10.0f /s   baseline %10.0f /s  (%s)\n", r.store.c_str(),
              r.op.c_str(), r.setting.c_str(), r.dlq, r.base, r.baseline.c_str());
  std::fflush(stdout);
  rows.push_back(std::move(r));
}

// ---- memory --------------------------------------------------------------------------------

/// The baseline for the memory store: what it does, without versions or the adapter.
struct bare_map {
  std::mutex m;
  std::map<std::string, std::string, std::less<>> data;
};

void bench_memory() {
  const std::size_t n = scaled(50000);
  const auto ids = make_ids(n);
  std::vector<dlq::Record> records;
  for (auto& id : ids)
    records.push_back(dlq::Record{"orders", id, id, envelope});
  using storage_t = dlq::KeyValueStorage<dlq::kv::MemoryStore>;
  std::unique_ptr<storage_t> s;
  std::unique_ptr<bare_map> bare;
  dlq::kv::MemoryQueues q;
  auto fresh = [&] { s = std::make_unique<storage_t>(dlq::kv::MemoryStore{}); };
  auto filled = [&] {
    fresh();
    s->push_many(records);
  };
  auto bare_fresh = [&] { bare = std::make_unique<bare_map>(); };
  auto bare_filled = [&] {
    bare_fresh();
    for (auto& id : ids)
      bare->data.emplace(id, envelope);
  };
  auto done = [&] {
    s.reset();
    bare.reset();
    q.clear();
  };

  auto r = compare(n,
                   {fresh,
                    [&] {
                      for (auto& rec : records)
                        s->push(rec);
                    },
                    done},
                   {bare_fresh,
                    [&] {
                      for (auto& id : ids) {
                        std::lock_guard<std::mutex> l(bare->m);
                        bare->data.insert_or_assign(id, envelope);
                      }
                    },
                    done});
  add({"memory", "send (push, 1 per call)", "-", "std::map insert under a lock", n, r.first,
       r.second});

  r = compare(n, {filled, [&] { list_in_pages(*s); }, done},
              {bare_filled,
               [&] {
                 std::vector<std::string> page;
                 std::lock_guard<std::mutex> l(bare->m);
                 for (auto& kv : bare->data) {
                   page.push_back(kv.second);
                   if (page.size() == 100) page.clear();
                 }
               },
               done});
  add({"memory", "list (pages of 100)", "-", "std::map copy, one pass", n, r.first, r.second});

  r = compare(
      n,
      {filled,
       [&] {
         storage_t::replay_cursor c;
         while (s->replay_step("orders", c, 1000, [](std::string_view raw, dlq::Decision& d) {
                   d.action = dlq::Action::replay;
                   d.destination = "orders";
                   d.payload = raw;
                 }).examined != 0) {
         }
       },
       done},
      {bare_filled,
       [&] {
         std::lock_guard<std::mutex> l(bare->m);
         for (auto it = bare->data.begin(); it != bare->data.end();) {
           q.push("orders", it->second);
           it = bare->data.erase(it);
         }
       },
       done});
  add({"memory", "replay (steps of 1000)", "-", "map erase + queue push", n, r.first, r.second});
}

#if DLQ_BENCH_HAVE_REDIS
// ---- Redis ---------------------------------------------------------------------------------

/// Bare hiredis doing the same data work without atomicity or versions: the floor.
struct bare_redis {
  dlq::redis::Connection conn;
  explicit bare_redis(const dlq::redis::ConnectionOptions& o) : conn(o) {}
  void run(dlq::redis::Command c) {
    auto r = conn.run(c, dlq::redis::Effect::write);
    dlq::redis::check(r, conn, c.label());
  }
  std::vector<std::string> strings(dlq::redis::Command c) {
    return dlq::redis::strings(conn.run(c, dlq::redis::Effect::read), conn, c.label());
  }
};

void bench_redis(const std::string& url) {
  const std::string setting = "redis-server, no persistence";
  auto options = dlq::redis::parse_url(url);
  using storage_t = dlq::KeyValueStorage<dlq::kv::RedisStore>;
  using queue_t = dlq::DeadLetterQueue<storage_t&>;
  std::unique_ptr<storage_t> s;
  std::unique_ptr<queue_t> q;
  bare_redis bare(options);
  dlq::kv::MemoryQueues mq;
  auto flush = [&] { bare.run(dlq::redis::Command("FLUSHALL")); };
  auto fresh = [&] {
    q.reset();
    s.reset();
    flush();
    s = std::make_unique<storage_t>(dlq::kv::RedisStore(options), mq);
    q = std::make_unique<queue_t>(*s);
  };
  auto done = [&] {
    q.reset();
    s.reset();
    mq.clear();
  };
  const std::string payload =
      "{\"order_id\":12345,\"items\":[1,2,3],\"note\":\"" + std::string(150, 'x') + "\"}";
  const std::size_t n_single = scaled(5000);
  const auto ids = make_ids(scaled(20000));
  {  // send, one round trip per entry
    auto r =
        compare(n_single,
                {fresh,
                 [&] {
                   dlq::Failure f;
                   f.error = "payment timeout";
                   for (std::size_t i = 0; i < n_single; ++i) {
                     f.job_id = ids[i];
                     q->send_to_dlq("orders", payload, f);
                   }
                 },
                 done},
                {flush,
                 [&] {
                   for (std::size_t i = 0; i < n_single; ++i) {
                     dlq::redis::Command c("SET");
                     c.arg_copy("dlq:{orders}:dead:r:" + ids[i]).arg(std::string_view(envelope));
                     bare.run(std::move(c));
                   }
                 },
                 [] {}});
    add({"redis", "send_to_dlq, 1 round trip each", setting, "bare SET, 1 round trip each",
         n_single, r.first, r.second});
  }
  const std::size_t n = ids.size();
  std::vector<dlq::Record> records;
  for (auto& id : ids)
    records.push_back(dlq::Record{"orders", id, id, envelope});
  auto filled = [&] {
    fresh();
    for (std::size_t i = 0; i < n; i += 500)
      s->push_many(
          std::vector<dlq::Record>(records.begin() + static_cast<long>(i),
                                   records.begin() + static_cast<long>(std::min(n, i + 500))));
  };
  auto bare_filled = [&] {
    filled();
    q.reset();
    s.reset();
  };
  {  // list in pages of 100
    auto r = compare(n, {filled, [&] { list_in_pages(*s); }, done},
                     {bare_filled,
                      [&] {
                        std::string after = "0";
                        for (;;) {
                          dlq::redis::Command z("ZRANGEBYSCORE");
                          z.arg("dlq:{orders}:dead:i").arg_copy("(" + after).arg("+inf");
                          z.arg("WITHSCORES").arg("LIMIT").arg(0).arg(100);
                          auto page = bare.strings(std::move(z));
                          if (page.empty()) break;
                          dlq::redis::Command m("MGET");
                          for (std::size_t i = 0; i < page.size(); i += 2)
                            m.arg_copy("dlq:{orders}:dead:r:" + page[i]);
                          bare.strings(std::move(m));
                          after = page[page.size() - 1];
                        }
                      },
                      done});
    add({"redis", "list, pages of 100 (adapter)", setting, "bare ZRANGEBYSCORE + MGET", n, r.first,
         r.second});
  }
  {  // replay_all into an in-memory queue
    auto r = compare(n, {filled, [&] { q->replay_all("orders"); }, done},
                     {bare_filled,
                      [&] {
                        for (;;) {
                          dlq::redis::Command z("ZRANGE");
                          z.arg("dlq:{orders}:dead:i").arg(0).arg(999);
                          auto page = bare.strings(std::move(z));
                          if (page.empty()) break;
                          dlq::redis::Command m("MGET");
                          for (auto& id : page)
                            m.arg_copy("dlq:{orders}:dead:r:" + id);
                          auto values = bare.strings(std::move(m));
                          std::vector<dlq::kv::Message> msgs;
                          for (auto& v : values)
                            msgs.push_back(dlq::kv::Message{"orders", v});
                          mq.push_many(msgs);
                          std::vector<dlq::redis::Command> del;
                          del.emplace_back("DEL");
                          del.emplace_back("ZREM");
                          del[1].arg("dlq:{orders}:dead:i");
                          for (auto& id : page) {
                            del[0].arg_copy("dlq:{orders}:dead:r:" + id);
                            del[1].arg(std::string_view(id));
                          }
                          auto rs = bare.conn.run(del, dlq::redis::Effect::write);
                          for (auto& x : rs)
                            dlq::redis::check(x, bare.conn, "DEL/ZREM");
                        }
                      },
                      done});
    add({"redis", "replay_all (batches of 1000)", setting, "bare ZRANGE+MGET, DEL+ZREM", n, r.first,
         r.second});
  }
}
#endif

#if DLQ_BENCH_HAVE_SQLITE
// ---- SQLite --------------------------------------------------------------------------------

/// Bare SQLite with the store's schema and PRAGMAs: the floor the store is measured against.
class bare_sqlite {
 public:
  /// `counted`: also the schema version 2 tables and the triggers that keep record counts
  /// (what the store's schema adds to version 1), to measure what those triggers cost.
  bare_sqlite(const std::string& path, bool full, bool counted = false) {
    sqlite3_open(path.c_str(), &db_);
    sqlite3_busy_timeout(db_, 60000);  // what a careful user of bare SQLite sets
    exec("PRAGMA journal_mode=WAL");
    exec(full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    exec(
        "CREATE TABLE IF NOT EXISTS dlq_records (version INTEGER PRIMARY KEY AUTOINCREMENT, "
        "collection TEXT NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL, UNIQUE (collection, "
        "id)); CREATE INDEX IF NOT EXISTS dlq_records_by_collection ON dlq_records "
        "(collection, version);");
    if (counted) exec(dlq::kv::detail::sqlite_migration_v1_to_v2);
    sqlite3_prepare_v2(
        db_, "INSERT OR REPLACE INTO dlq_records (collection, id, value) VALUES (?1, ?2, ?3)", -1,
        &insert_, nullptr);
  }
  ~bare_sqlite() {
    sqlite3_finalize(insert_);
    sqlite3_close(db_);
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "bare sqlite: %s: %s\n", sql, sqlite3_errmsg(db_));
      std::exit(1);
    }
  }
  void insert(const std::string& id, const std::string& value) {
    sqlite3_bind_text(insert_, 1, "dlq:{orders}:dead", -1, SQLITE_STATIC);
    sqlite3_bind_text(insert_, 2, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
    sqlite3_bind_blob(insert_, 3, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
    sqlite3_step(insert_);
    sqlite3_reset(insert_);
  }
  /// Reads every row of the collection, `page` rows per query by version (0 = one query).
  std::size_t select_pages(std::size_t page) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_,
                       "SELECT id, value, version FROM dlq_records WHERE collection = "
                       "'dlq:{orders}:dead' AND version > ?1 ORDER BY version LIMIT ?2",
                       -1, &s, nullptr);
    std::size_t n = 0;
    sqlite3_int64 after = 0;
    for (;;) {
      sqlite3_bind_int64(s, 1, after);
      sqlite3_bind_int64(s, 2, page == 0 ? -1 : static_cast<sqlite3_int64>(page));
      std::size_t got = 0;
      std::vector<std::pair<std::string, std::string>> rows_read;
      while (sqlite3_step(s) == SQLITE_ROW) {
        rows_read.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                                           static_cast<std::size_t>(sqlite3_column_bytes(s, 0))),
                               std::string(static_cast<const char*>(sqlite3_column_blob(s, 1)),
                                           static_cast<std::size_t>(sqlite3_column_bytes(s, 1))));
        after = sqlite3_column_int64(s, 2);
        ++got;
      }
      sqlite3_reset(s);
      n += got;
      if (got == 0 || page == 0) break;
    }
    sqlite3_finalize(s);
    return n;
  }
  /// Takes rows 1000 at a time: SELECT them, DELETE them by version in one transaction.
  void drain(dlq::kv::MemoryQueues& q) {
    sqlite3_stmt* sel = nullptr;
    sqlite3_stmt* del = nullptr;
    sqlite3_prepare_v2(db_,
                       "SELECT version, value FROM dlq_records WHERE collection = "
                       "'dlq:{orders}:dead' ORDER BY version LIMIT 1000",
                       -1, &sel, nullptr);
    sqlite3_prepare_v2(db_, "DELETE FROM dlq_records WHERE version = ?1", -1, &del, nullptr);
    for (;;) {
      std::vector<sqlite3_int64> versions;
      std::vector<dlq::kv::Message> msgs;
      std::vector<std::string> values;
      while (sqlite3_step(sel) == SQLITE_ROW) {
        versions.push_back(sqlite3_column_int64(sel, 0));
        values.emplace_back(static_cast<const char*>(sqlite3_column_blob(sel, 1)),
                            static_cast<std::size_t>(sqlite3_column_bytes(sel, 1)));
      }
      sqlite3_reset(sel);
      if (versions.empty()) break;
      for (auto& v : values)
        msgs.push_back(dlq::kv::Message{"orders", v});
      q.push_many(msgs);
      exec("BEGIN IMMEDIATE");
      for (auto v : versions) {
        sqlite3_bind_int64(del, 1, v);
        sqlite3_step(del);
        sqlite3_reset(del);
      }
      exec("COMMIT");
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
};

void remove_db(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
}

void bench_sqlite(bool full) {
  const std::string setting = full ? "synchronous=FULL" : "synchronous=NORMAL";
  const std::string path = base_dir + "/bench-kv.db";
  const std::string bare_path = base_dir + "/bench-bare.db";
  dlq::kv::SqliteOptions o;
  o.synchronous = full ? dlq::kv::SqliteSync::full : dlq::kv::SqliteSync::normal;
  using storage_t = dlq::KeyValueStorage<dlq::kv::SqliteStore>;
  using queue_t = dlq::DeadLetterQueue<storage_t&>;
  std::unique_ptr<storage_t> s;
  std::unique_ptr<queue_t> q;
  std::unique_ptr<bare_sqlite> bare;
  auto fresh = [&] {
    q.reset();
    s.reset();
    remove_db(path);
    s = std::make_unique<storage_t>(dlq::kv::SqliteStore(path, o));
    q = std::make_unique<queue_t>(*s);
  };
  auto bare_fresh = [&] {
    bare.reset();
    remove_db(bare_path);
    bare = std::make_unique<bare_sqlite>(bare_path, full);
  };
  auto done = [&] {
    q.reset();
    s.reset();
    bare.reset();
  };
  const std::string payload =
      "{\"order_id\":12345,\"items\":[1,2,3],\"note\":\"" + std::string(150, 'x') + "\"}";
  auto failure = [](const std::string& job) {
    dlq::Failure f;
    f.error = "payment timeout";
    f.attempt = 3;
    f.worker = "w-7";
    f.job_id = job;
    return f;
  };

  {  // send, one transaction per entry
    const std::size_t n = scaled(full ? 1500 : 5000);
    const auto ids = make_ids(n);
    auto bare_loop = timed{bare_fresh,
                           [&] {
                             for (auto& id : ids) {
                               bare->exec("BEGIN IMMEDIATE");
                               bare->insert(id, envelope);
                               bare->exec("COMMIT");
                             }
                           },
                           done};
    auto r = compare(n,
                     {fresh,
                      [&] {
                        for (auto& id : ids)
                          s->push(dlq::Record{"orders", id, id, envelope});
                      },
                      done},
                     bare_loop);
    add({"sqlite", "adapter push, 1 tx per entry", setting, "bare INSERT, 1 tx each", n, r.first,
         r.second});
    r = compare(n,
                {fresh,
                 [&] {
                   for (auto& id : ids)
                     q->send_to_dlq("orders", payload, failure(id));
                 },
                 done},
                bare_loop);
    add({"sqlite", "send_to_dlq, 1 tx per entry", setting, "bare INSERT, 1 tx each", n, r.first,
         r.second});
  }
  {  // 4 threads sending at once: group commit vs 4 bare connections with a busy timeout
    constexpr int threads = 4;
    const std::size_t per_thread = scaled(full ? 500 : 1500);
    const std::size_t n = per_thread * threads;
    const auto ids = make_ids(n);
    auto r = compare(n,
                     {fresh,
                      [&] {
                        std::vector<std::thread> pool;
                        for (int t = 0; t < threads; ++t)
                          pool.emplace_back([&, t] {
                            for (std::size_t i = 0; i < per_thread; ++i)
                              q->send_to_dlq("orders", payload, failure(ids[t * per_thread + i]));
                          });
                        for (auto& th : pool)
                          th.join();
                      },
                      done},
                     {bare_fresh,
                      [&] {
                        std::vector<std::thread> pool;
                        for (int t = 0; t < threads; ++t)
                          pool.emplace_back([&, t] {
                            bare_sqlite own(bare_path, full);
                            for (std::size_t i = 0; i < per_thread; ++i) {
                              own.exec("BEGIN IMMEDIATE");
                              own.insert(ids[t * per_thread + i], envelope);
                              own.exec("COMMIT");
                            }
                          });
                        for (auto& th : pool)
                          th.join();
                      },
                      done});
    add({"sqlite", "send_to_dlq, 4 threads", setting, "bare INSERT, 4 conns, 1 tx each", n, r.first,
         r.second});
  }
  const std::size_t n = scaled(20000);
  const auto ids = make_ids(n);
  std::vector<dlq::Record> records;
  for (auto& id : ids)
    records.push_back(dlq::Record{"orders", id, id, envelope});
  {  // send in batches of 100
    std::vector<dlq::FailedJob> jobs;
    for (auto& id : ids)
      jobs.push_back({"orders", payload, failure(id)});
    auto r = compare(n,
                     {fresh,
                      [&] {
                        for (std::size_t i = 0; i < n; i += 100)
                          q->send_batch(std::vector<dlq::FailedJob>(
                              jobs.begin() + static_cast<long>(i),
                              jobs.begin() + static_cast<long>(std::min(n, i + 100))));
                      },
                      done},
                     {bare_fresh,
                      [&] {
                        for (std::size_t i = 0; i < n; i += 100) {
                          bare->exec("BEGIN IMMEDIATE");
                          for (std::size_t j = i; j < std::min(n, i + 100); ++j)
                            bare->insert(ids[j], envelope);
                          bare->exec("COMMIT");
                        }
                      },
                      done});
    add({"sqlite", "send_batch, 100 per tx", setting, "bare INSERT, 100 per tx", n, r.first,
         r.second});
  }
  auto filled = [&] {
    fresh();
    s->push_many(records);
  };
  auto bare_filled = [&] {
    bare_fresh();
    bare->exec("BEGIN");
    for (auto& id : ids)
      bare->insert(id, envelope);
    bare->exec("COMMIT");
  };
  {  // list in pages of 100
    auto r = compare(n, {filled, [&] { list_in_pages(*s); }, done},
                     {bare_filled, [&] { bare->select_pages(100); }, done});
    add({"sqlite", "list, pages of 100 (adapter)", setting, "bare SELECT, pages of 100", n, r.first,
         r.second});
  }
  {  // replay_all into an in-memory queue
    dlq::kv::MemoryQueues mq;
    auto done_q = [&] {
      mq.clear();
      done();
    };
    auto r = compare(n, {filled, [&] { q->replay_all("orders"); }, done_q},
                     {bare_filled, [&] { bare->drain(mq); }, done_q});
    add({"sqlite", "replay_all (batches of 1000)", setting, "bare SELECT + DELETE, 1000 per tx", n,
         r.first, r.second});
  }
  {  // what schema version 2's record-count triggers cost: bare SQL on both schemas
    std::unique_ptr<bare_sqlite> counted;
    const std::string counted_path = base_dir + "/bench-counted.db";
    auto counted_fresh = [&] {
      counted.reset();
      remove_db(counted_path);
      counted = std::make_unique<bare_sqlite>(counted_path, full, true);
    };
    auto insert_batches = [&](bare_sqlite& db) {
      for (std::size_t i = 0; i < n; i += 100) {
        db.exec("BEGIN IMMEDIATE");
        for (std::size_t j = i; j < std::min(n, i + 100); ++j)
          db.insert(ids[j], envelope);
        db.exec("COMMIT");
      }
    };
    auto counted_done = [&] {
      counted.reset();
      done();
    };
    auto r = compare(n, {counted_fresh, [&] { insert_batches(*counted); }, counted_done},
                     {bare_fresh, [&] { insert_batches(*bare); }, done});
    add({"sqlite", "bare INSERT 100/tx, count triggers", setting, "same, schema v1", n, r.first,
         r.second});
    dlq::kv::MemoryQueues mq;
    r = compare(n,
                {[&] {
                   counted_fresh();
                   insert_batches(*counted);
                 },
                 [&] { counted->drain(mq); },
                 [&] {
                   mq.clear();
                   counted_done();
                 }},
                {bare_filled, [&] { bare->drain(mq); },
                 [&] {
                   mq.clear();
                   done();
                 }});
    add({"sqlite", "bare drain 1000/tx, count triggers", setting, "same, schema v1", n, r.first,
         r.second});
    remove_db(counted_path);
  }
  remove_db(path);
  remove_db(bare_path);
}
#endif

// ---- policies: retention and the poison guard with the store's optional members ---------

/// `Store` with only the required members and count/remove_all/versions: KeyValueStorage
/// then has no push length, push_bounded or bump_count, and the front end falls back (a
/// size() call after each push; size() then push for reject; counts in the process).
template <class Store>
struct required_only {
  Store inner;
  void save(const std::vector<dlq::kv::Write>& w) { inner.save(w); }
  std::optional<dlq::kv::Item> load(std::string_view c, std::string_view id) {
    return inner.load(c, id);
  }
  std::vector<dlq::kv::Item> list(std::string_view c, const dlq::kv::Window& w) {
    return inner.list(c, w);
  }
  std::size_t remove(const std::vector<dlq::kv::Removal>& r) { return inner.remove(r); }
  std::size_t count(std::string_view c) { return inner.count(c); }
  std::size_t remove_all(std::string_view c) { return inner.remove_all(c); }
  std::vector<std::uint64_t> versions(std::string_view c, const dlq::kv::Window& w) {
    return inner.versions(c, w);
  }
};

/// A timed case: send_to_dlq of every id (one job each) through a fresh store of type S.
template <class S>
timed send_case(std::function<S()> make_store, const dlq::Options& options,
                const std::vector<std::string>& ids, const std::string& payload) {
  using storage_t = dlq::KeyValueStorage<S>;
  using queue_t = dlq::DeadLetterQueue<storage_t&>;
  struct state {
    std::unique_ptr<storage_t> storage;
    std::unique_ptr<queue_t> queue;
  };
  auto st = std::make_shared<state>();
  return timed{[st, make_store, options] {
                 st->queue.reset();
                 st->storage.reset();
                 st->storage = std::make_unique<storage_t>(make_store());
                 st->queue = std::make_unique<queue_t>(*st->storage, options);
               },
               [st, &ids, &payload] {
                 dlq::Failure f;
                 f.error = "payment timeout";
                 f.attempt = 3;
                 f.worker = "w-7";
                 for (const auto& id : ids) {
                   f.job_id = id;
                   st->queue->send_to_dlq("orders", payload, f);
                 }
               },
               [st] {
                 st->queue.reset();
                 st->storage.reset();
               }};
}

/// Four rows per store: each policy with the store's member against the front end's
/// fallback (or against no policy), same store, same process, alternating runs.
template <class Store>
void bench_policies(const std::string& store_name, const std::string& setting, std::size_t n,
                    std::function<Store()> make) {
  const auto ids = make_ids(n);
  const std::string payload =
      "{\"order_id\":12345,\"items\":[1,2,3],\"note\":\"" + std::string(150, 'x') + "\"}";
  std::function<required_only<Store>()> make_plain = [make] {
    return required_only<Store>{make()};
  };
  dlq::Options none;
  dlq::Options keep;  // a limit never reached: the cost of knowing the length
  keep.retention.max_length = 100000000;
  dlq::Options reject = keep;
  reject.retention.overflow = dlq::Overflow::reject;
  dlq::Options poison;
  poison.poison_guard.park_after = 5;
  dlq::Options evict;  // a limit reached half-way: each later send evicts one entry
  evict.retention.max_length = std::max<std::size_t>(1, n / 2);

  auto r =
      compare(n, send_case(make, keep, ids, payload), send_case(make_plain, keep, ids, payload));
  add({store_name, "send, max_length not reached (capped save)", setting, "same, size() after push",
       n, r.first, r.second});
  r = compare(n, send_case(make, evict, ids, payload), send_case(make, none, ids, payload));
  add({store_name, "send, max_length evicting (capped save)", setting, "send, no max_length", n,
       r.first, r.second});
  r = compare(n, send_case(make, reject, ids, payload),
              send_case(make_plain, reject, ids, payload));
  add({store_name, "send, reject (atomic bounded save)", setting, "size() then push (approx.)", n,
       r.first, r.second});
  r = compare(n, send_case(make, poison, ids, payload), send_case(make, none, ids, payload));
  add({store_name, "send, poison guard (count in store)", setting, "send, guard off", n, r.first,
       r.second});
  r = compare(n, send_case(make, poison, ids, payload),
              send_case(make_plain, poison, ids, payload));
  add({store_name, "send, poison guard (count in store)", setting, "count in process", n, r.first,
       r.second});
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--scale" && i + 1 < argc)
      scale = std::atof(argv[++i]);
    else if (a == "--redis-url" && i + 1 < argc)
      redis_url = argv[++i];
    else if (a == "--dir" && i + 1 < argc)
      base_dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--scale F] [--dir DIR] [--redis-url URL]\n",
                   argv[0]);
      return 2;
    }
  }
  std::printf("dlq key-value backend: medians of %d runs, ~%zu-byte envelopes, files in %s\n", reps,
              envelope.size(), base_dir.c_str());
  bench_memory();
#if DLQ_BENCH_HAVE_REDIS
  std::unique_ptr<dlq::test::RedisProcess> server;  // lives until the policy rows are done
  if (redis_url.empty()) {
    server = std::make_unique<dlq::test::RedisProcess>();
    redis_url = server->url();
  }
  bench_redis(redis_url);
#endif
#if DLQ_BENCH_HAVE_SQLITE
  bench_sqlite(true);
  bench_sqlite(false);
#endif
  std::printf("policies (each against the front end's fallback or no policy):\n");
  bench_policies<dlq::kv::MemoryStore>("memory", "-", scaled(20000),
                                       [] { return dlq::kv::MemoryStore{}; });
#if DLQ_BENCH_HAVE_SQLITE
  {
    const std::string path = base_dir + "/bench-policies.db";
    dlq::kv::SqliteOptions o;
    o.synchronous = dlq::kv::SqliteSync::normal;
    bench_policies<dlq::kv::SqliteStore>("sqlite", "synchronous=NORMAL", scaled(3000), [path, o] {
      remove_db(path);
      return dlq::kv::SqliteStore(path, o);
    });
    remove_db(path);
  }
#endif
#if DLQ_BENCH_HAVE_REDIS
  {
    const auto options = dlq::redis::parse_url(redis_url);
    auto flusher = std::make_shared<dlq::redis::Connection>(options);
    bench_policies<dlq::kv::RedisStore>(
        "redis", "redis-server, no persistence", scaled(3000), [options, flusher] {
          dlq::redis::Command c("FLUSHALL");
          dlq::redis::check(flusher->run(c, dlq::redis::Effect::write), *flusher, c.label());
          return dlq::kv::RedisStore(options);
        });
  }
#endif
  std::printf(
      "\n| store | operation | setting | dlq entries/s | baseline | baseline entries/s | "
      "dlq/baseline |\n");
  std::printf("| --- | --- | --- | ---: | --- | ---: | ---: |\n");
  for (const row& r : rows)
    std::printf("| %s | %s | %s | %.0f | %s | %.0f | %.2f |\n", r.store.c_str(), r.op.c_str(),
                r.setting.c_str(), r.dlq, r.baseline.c_str(), r.base, r.dlq / r.base);
  return 0;
}
