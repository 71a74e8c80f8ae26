// Throughput of RedisListStorage against baselines measured on the same server in the same
// run (tests/benchmarks/redis/run.sh adds redis-benchmark and prints the ratios).
//
//   bench_redis <url> [runs=5]
//   bench_redis <url> <runs> replay      issue 16: front-end replay_all (fast path), the
//                                        compare-and-move path alone and a mixed queue against
//                                        the LMOVE loop, interleaved per round
//   bench_redis <url> 1 threads          N threads (1, 8, 32) sending through one queue
//   bench_redis <url> 1 envelope_bytes   the size of dlq's envelope around a 300 B payload
//   bench_redis <url> 1 replica_ack      N threads (1, 8, 32) sending with replicas_to_ack = 0
//                                        and = 1 (the server needs a replica: run.sh starts one)
//
// Prints one line per measurement: `<name> <median entries/s>` (and `<name>_max_us` for the
// longest replay or trim script seen in SLOWLOG). Uses keys under "bench:" and deletes them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// CPU seconds this process used so far (user + system, all threads).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string payload(std::size_t n, std::size_t size) {
  std::string s = "{\"job\":" + std::to_string(n) + ",\"pad\":\"";
  s.resize(size > s.size() + 2 ? size - 2 : s.size(), 'x');
  s += "\"}";
  return s;
}

struct Bench {
  std::string url;
  dlq::redis::Connection raw;
  dlq::RedisListStorage storage;

  explicit Bench(const std::string& u)
      : url(u), raw(dlq::redis::parse_url(u)), storage(u, layout()) {}

  static dlq::RedisListOptions layout() {
    dlq::RedisListOptions o;
    o.dead_key = "bench:dlq:{*}";
    o.source_key = "bench:queue:{*}";
    o.corrupt_key = "bench:dlq:{*}:corrupt";
    return o;
  }

  long long cmd(std::vector<std::string> args) {
    dlq::redis::Command c;
    for (auto& a : args)
      c.arg_copy(a);
    auto r = raw.run(c, dlq::redis::Effect::write);
    dlq::redis::check(r, raw, c.label());
    return r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
  }
  void clear() { cmd({"DEL", "bench:dlq:{q}", "bench:queue:{q}", "bench:dlq:{q}:corrupt"}); }
  // Fills the dead list quickly (pipelined multi-value RPUSH).
  void fill(std::size_t n, std::size_t size) {
    std::vector<std::string> items;
    for (std::size_t i = 0; i < n; ++i)
      items.push_back(payload(i, size));
    std::vector<dlq::redis::Command> cmds;
    for (std::size_t i = 0; i < n; i += 1000) {
      dlq::redis::Command c("RPUSH");
      c.arg("bench:dlq:{q}");
      for (std::size_t j = i; j < n && j < i + 1000; ++j)
        c.arg(std::string_view(items[j]));
      cmds.push_back(std::move(c));
    }
    for (auto& r : raw.run(cmds, dlq::redis::Effect::write))
      dlq::redis::check(r, raw, "fill");
  }

  double single_send(std::size_t n) {
    clear();
    const std::string p = payload(0, 300);
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i)
      storage.push(dlq::Record{"q", "", "", p});
    return static_cast<double>(n) / seconds_since(t0);
  }

  double batch_send(std::size_t n, std::size_t batch) {
    clear();
    const std::string p = payload(0, 300);
    std::vector<dlq::Record> records(batch, dlq::Record{"q", "", "", p});
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; i += batch)
      storage.push_many(records);
    return static_cast<double>(n) / seconds_since(t0);
  }

  double replay_all(std::size_t n, std::size_t size) {
    clear();
    fill(n, size);
    dlq::RedisListStorage::replay_cursor cursor;
    auto decide = [](std::string_view r, dlq::Decision& d) {
      d.action = dlq::Action::replay;
      d.payload = r;  // the storage-level benchmark cuts nothing
    };
    std::size_t done = 0;
    const auto t0 = Clock::now();
    for (;;) {
      auto r = storage.replay_step("q", cursor, 1000, decide);
      if (r.conflict) continue;
      if (r.examined == 0) break;
      done += r.examined;
    }
    const double rate = static_cast<double>(done) / seconds_since(t0);
    if (done != n) {
      std::fprintf(stderr, "replay moved %zu of %zu\n", done, n);
      std::exit(1);
    }
    return rate;
  }

  // Through the front end: envelopes built, payloads cut out of them on replay.
  double dlq_send(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    const std::string p = payload(0, 300);
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i)
      q.send_to_dlq("q", p, "payment timeout", 3, "w-1");
    return static_cast<double>(n) / seconds_since(t0);
  }
  // dlq_send with Retention::max_length = n / 2 (evict_oldest): the second half of the sends
  // each evict one entry, in the capped push script.
  double dlq_send_max_length(std::size_t n) {
    clear();
    dlq::Options o;
    o.retention.max_length = n / 2;
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage, o);
    const std::string p = payload(0, 300);
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i)
      q.send_to_dlq("q", p, "payment timeout", 3, "w-1");
    const double rate = static_cast<double>(n) / seconds_since(t0);
    if (q.size("q") != n / 2) {
      std::fprintf(stderr, "max_length send kept %zu of %zu\n", q.size("q"), n / 2);
      std::exit(1);
    }
    return rate;
  }
  double dlq_send_batch(std::size_t n, std::size_t batch) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    std::vector<dlq::FailedJob> jobs;
    dlq::Failure f;
    f.error = "payment timeout";
    for (std::size_t i = 0; i < batch; ++i)
      jobs.push_back({"q", payload(i, 300), f});
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; i += batch)
      q.send_batch(jobs);
    return static_cast<double>(n) / seconds_since(t0);
  }
  double dlq_replay_all(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    send_envelopes(q, n, 300);
    const auto t0 = Clock::now();
    const auto report = q.replay_all("q");
    const double rate = static_cast<double>(report.replayed) / seconds_since(t0);
    if (report.replayed != n) {
      std::fprintf(stderr, "replay_all moved %zu of %zu\n", report.replayed, n);
      std::exit(1);
    }
    return rate;
  }

  // Issue 16: front-end replay_all (the fast path for the entries dlq wrote), the same with
  // an always-true filter (the compare-and-move path alone), and a queue where every 10th
  // entry comes from the Python service (json.dumps layout: the compare-and-move step moves
  // those). Each fills queue "q" with n entries around 300 B payloads; the LMOVE baseline
  // runs on the same entries (lmove_mixed for the mixed queue).
  double dlq_replay_all_filtered(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    send_envelopes(q, n, 300);
    dlq::ReplayOptions o;
    o.filter = [](const dlq::Entry&) { return true; };
    const auto t0 = Clock::now();
    const auto report = q.replay("q", o);
    const double rate = static_cast<double>(report.replayed) / seconds_since(t0);
    if (report.replayed != n) std::exit(1);
    return rate;
  }
  // Queue "q": n entries, every 10th as the Python service writes it, the others sent by dlq.
  void fill_mixed(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    std::vector<dlq::FailedJob> jobs;
    dlq::Failure f;
    f.error = "payment timeout";
    f.attempt = 3;
    f.worker = "worker-7";
    auto flush = [&] {
      if (!jobs.empty()) q.send_batch(jobs);
      jobs.clear();
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 10 != 9) {
        jobs.push_back({"q", payload(i, 300), f});
        continue;
      }
      flush();
      std::string p = payload(i, 300);
      std::string item = "{\"original_payload\": " + p +
                         ", \"queue\": \"q\", \"error\": \"payment timeout\", \"attempt\": 3, "
                         "\"worker\": \"worker-7\", \"dead_lettered_at\": "
                         "\"2026-12-01T05:00:00.000000+00:00\"}";
      cmd({"RPUSH", "bench:dlq:{q}", item});
    }
    flush();
  }
  double dlq_replay_all_mixed(std::size_t n) {
    fill_mixed(n);
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    const auto t0 = Clock::now();
    const auto report = q.replay_all("q");
    const double rate = static_cast<double>(report.replayed) / seconds_since(t0);
    if (report.replayed != n) {
      std::fprintf(stderr, "mixed replay_all moved %zu of %zu\n", report.replayed, n);
      std::exit(1);
    }
    return rate;
  }
  double lmove_mixed(std::size_t n) {
    fill_mixed(n);
    return lmove_filled();
  }

  // N threads sending through one DeadLetterQueue (a pool of N connections), 300 B payloads,
  // `per_thread` send_to_dlq calls each: entries/s over the wall time. `send_batches` as in
  // PoolOptions (0 = every send its own round trip on its own connection); `replicas_to_ack`
  // as in RedisListOptions.
  double threaded_send(std::size_t threads, std::size_t per_thread, std::size_t send_batches,
                       int replicas_to_ack = 0) {
    clear();
    dlq::RedisListOptions o = layout();
    o.pool.size = threads;
    o.pool.send_batches = send_batches;
    o.replicas_to_ack = replicas_to_ack;
    dlq::DeadLetterQueue<dlq::RedisListStorage> q(dlq::RedisListStorage(url, o));
    const std::string p = payload(0, 300);
    q.send_to_dlq("q", p, "payment timeout", 3, "w-1");  // connect and warm up
    std::vector<std::thread> pool;
    const auto t0 = Clock::now();
    for (std::size_t t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (std::size_t i = 0; i < per_thread; ++i)
          q.send_to_dlq("q", p, "payment timeout", 3, "w-1");
      });
    }
    for (auto& th : pool)
      th.join();
    const double rate = static_cast<double>(threads * per_thread) / seconds_since(t0);
    if (q.size("q") != threads * per_thread + 1) std::exit(1);
    return rate;
  }
  // The byte size of the envelope dlq writes around a 300 B payload (what redis-benchmark
  // -d should push for a like-for-like RPUSH).
  std::size_t envelope_bytes() {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    q.send_to_dlq("q", payload(0, 300), "payment timeout", 3, "w-1");
    const auto items = storage.range("q", dlq::ListKind::dead, 0, 1);
    clear();
    return items.at(0).size();
  }

  // The INFO commandstats lines (one per command: calls, usec), without resetting.
  std::string commandstats() {
    dlq::redis::Command c("INFO");
    c.arg("commandstats");
    auto r = raw.run(c, dlq::redis::Effect::read);
    dlq::redis::check(r, raw, "INFO");
    std::string out;
    const std::string text(dlq::redis::view(*r));
    for (std::size_t at = text.find("cmdstat_"); at != std::string::npos;
         at = text.find("cmdstat_", at + 1)) {
      const auto end = text.find(",usec_per_call", at);
      out += "  " + text.substr(at, end - at) + "\n";
    }
    return out;
  }

  // Server time (µs) spent in scripts (EVAL and EVALSHA, INFO commandstats) since the last
  // reset; resets the statistics.
  double script_usec_and_reset() {
    dlq::redis::Command c("INFO");
    c.arg("commandstats");
    auto r = raw.run(c, dlq::redis::Effect::read);
    dlq::redis::check(r, raw, "INFO");
    const std::string text(dlq::redis::view(*r));
    double usec = 0;
    for (const char* name : {"cmdstat_eval:", "cmdstat_evalsha:"}) {
      const auto at = text.find(name);
      if (at == std::string::npos) continue;
      const auto u = text.find("usec=", at);
      usec += std::atof(text.c_str() + u + 5);
    }
    cmd({"CONFIG", "RESETSTAT"});
    return usec;
  }

  // The LMOVE baseline on the front end's entries (envelopes around 300 B payloads).
  double lmove_lua_envelopes(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    send_envelopes(q, n, 300);
    return lmove_filled();
  }

  // The seed's algorithm: LPOP, then RPUSH, two round trips per item.
  double per_item_loop(std::size_t n) {
    clear();
    fill(n, 300);
    const auto t0 = Clock::now();
    std::size_t done = 0;
    for (;;) {
      dlq::redis::Command pop("LPOP");
      pop.arg("bench:dlq:{q}");
      auto r = raw.run(pop, dlq::redis::Effect::write);
      if (r->type != REDIS_REPLY_STRING) break;
      dlq::redis::Command push("RPUSH");
      push.arg("bench:queue:{q}").arg(dlq::redis::view(*r));
      dlq::redis::check(raw.run(push, dlq::redis::Effect::write), raw, "RPUSH");
      ++done;
    }
    return static_cast<double>(done) / seconds_since(t0);
  }

  // The bare move limit: one Lua script LMOVEs every item server-side.
  double lmove_lua(std::size_t n) {
    clear();
    fill(n, 300);
    return lmove_filled();
  }
  double lmove_filled() {
    dlq::redis::Command c("EVAL");
    c.arg(
         "local n = 0 while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do n = n + 1 "
         "end return n")
        .arg(2)
        .arg("bench:dlq:{q}")
        .arg("bench:queue:{q}");
    const auto t0 = Clock::now();
    auto r = raw.run(c, dlq::redis::Effect::write);
    const double s = seconds_since(t0);
    dlq::redis::check(r, raw, "EVAL lmove");
    return static_cast<double>(r->integer) / s;
  }

  // n jobs with `size`-byte payloads to queue "q" through the front end, 1000 per batch.
  static void send_envelopes(dlq::DeadLetterQueue<dlq::RedisListStorage&>& q, std::size_t n,
                             std::size_t size) {
    std::vector<dlq::FailedJob> jobs;
    dlq::Failure f;
    f.error = "payment timeout";
    for (std::size_t i = 0; i < n; ++i) {
      jobs.push_back({"q", payload(i, size), f});
      if (jobs.size() == 1000 || i + 1 == n) {
        q.send_batch(jobs);
        jobs.clear();
      }
    }
  }
  // SLOWLOG records every command from now on (0 µs threshold).
  void slowlog_start() {
    cmd({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    cmd({"CONFIG", "SET", "slowlog-max-len", "100000"});
    cmd({"SLOWLOG", "RESET"});
  }
  // Appends the duration (µs) of every script (EVALSHA) SLOWLOG recorded, then restores the
  // default threshold.
  void slowlog_scripts(std::vector<long long>& us) {
    dlq::redis::Command get("SLOWLOG");
    get.arg("GET").arg(-1);
    auto r = raw.run(get, dlq::redis::Effect::read);
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply& e = *r->element[i];
      const redisReply& args = *e.element[3];
      if (args.elements > 0 && dlq::redis::view(*args.element[0]) == "EVALSHA")
        us.push_back(e.element[2]->integer);
    }
    cmd({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
    cmd({"SLOWLOG", "RESET"});
  }

  // Durations (µs) of every replay script while replaying n entries of `size` bytes, from
  // SLOWLOG with a 0 µs threshold: storage-level items (no identity: full comparison) or,
  // with `front_end`, DeadLetterQueue envelopes around `size`-byte payloads (verified by id).
  std::vector<long long> script_us(std::size_t n, std::size_t size, bool front_end = false) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    if (front_end) {
      send_envelopes(q, n, size);
    } else {
      fill(n, size);
    }
    slowlog_start();
    if (front_end) {
      q.replay_all("q");
    } else {
      replay_all_no_fill();
    }
    std::vector<long long> us;
    slowlog_scripts(us);
    return us;
  }
  // An age trim (issue 6's retention) of n entries around 300 B payloads, all older than
  // max_age: returns evictions/s and fills `us` with every trim script's duration (SLOWLOG,
  // 0 µs threshold). The clock is the front end's injectable one: entries are written two
  // days in the past, the trim runs "now" with a one-day max_age.
  double trim_age(std::size_t n, std::vector<long long>& us) {
    clear();
    auto now = std::chrono::system_clock::now() - std::chrono::hours(48);
    dlq::Options o;
    o.clock = [&now] { return now; };
    o.retention.max_age = std::chrono::hours(24);
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage, o);
    send_envelopes(q, n, 300);
    now += std::chrono::hours(48);
    slowlog_start();
    const auto t0 = Clock::now();
    const auto report = q.trim("q");
    const double rate = static_cast<double>(report.evicted_for_age) / seconds_since(t0);
    if (report.evicted_for_age != n || q.size("q") != 0) {
      std::fprintf(stderr, "trim evicted %zu of %zu\n", report.evicted_for_age, n);
      std::exit(1);
    }
    slowlog_scripts(us);
    return rate;
  }

  // --- observability (issue 12): DeadLetterQueue::stats and ::errors ---------------------
  // Queue "q" filled with n front-end envelopes around 100 B payloads: 4 error texts, 2 error
  // types, 1000 per send_batch.
  void fill_errors(std::size_t n) {
    clear();
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    std::vector<dlq::FailedJob> jobs;
    static const char* const texts[] = {"payment timeout", "unknown sku 42", "card declined",
                                        "inventory service unavailable"};
    for (std::size_t i = 0; i < n; ++i) {
      dlq::Failure f;
      f.error = texts[i % 4];
      f.error_type = i % 2 ? "TimeoutError" : "ValueError";
      f.attempt = 3;
      f.worker = "worker-7";
      jobs.push_back({"q", payload(i, 100), std::move(f)});
      if (jobs.size() == 1000 || i + 1 == n) {
        q.send_batch(jobs);
        jobs.clear();
      }
    }
  }
  // Median µs of one stats({"q"}) call (one round trip: MULTI/EXEC of LLEN + LINDEX 0 / -1).
  double stats_us(int calls) {
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    std::vector<double> us;
    for (int i = 0; i < calls; ++i) {
      const auto t0 = Clock::now();
      const auto s = q.stats({"q"});
      us.push_back(seconds_since(t0) * 1e6);
      if (s[0].dead.depth == 0 || !s[0].dead.oldest) {
        std::fprintf(stderr, "stats found no oldest entry\n");
        std::exit(1);
      }
    }
    return median(us);
  }
  // Seconds of errors("q") over the whole list (checks that it counted every entry exactly).
  double errors_seconds(std::size_t n) {
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    const auto t0 = Clock::now();
    const auto r = q.errors("q");
    const double s = seconds_since(t0);
    if (r.examined != n || !r.exact || r.by_error.size() != 4) {
      std::fprintf(stderr, "errors examined %zu of %zu (exact %d)\n", r.examined, n, r.exact);
      std::exit(1);
    }
    return s;
  }
  // The baseline: read the whole list with plain LRANGE in pages of 1000 on one connection,
  // replies parsed by hiredis and nothing else done with them.
  double lrange_pages_seconds(std::size_t n) {
    std::size_t seen = 0;
    const auto t0 = Clock::now();
    for (std::size_t start = 0;; start += 1000) {
      dlq::redis::Command c("LRANGE");
      c.arg("bench:dlq:{q}").arg(start).arg(start + 999);
      auto r = raw.run(c, dlq::redis::Effect::read);
      seen += r->elements;
      if (r->elements < 1000) break;
    }
    const double s = seconds_since(t0);
    if (seen != n) std::exit(1);
    return s;
  }

  // The same pages through RedisListStorage::range (items copied out of the replies): what
  // errors() reads, without the grouping.
  double range_pages_seconds(std::size_t n) {
    std::size_t seen = 0;
    const auto t0 = Clock::now();
    for (std::size_t start = 0;; start += 1000) {
      const auto page = storage.range("q", dlq::ListKind::dead, start, 1000);
      seen += page.size();
      if (page.size() < 1000) break;
    }
    const double s = seconds_since(t0);
    if (seen != n) std::exit(1);
    return s;
  }

  // The observability rows: stats at 1k and 1M entries (must not grow); errors over 1M
  // entries against LRANGE pages of 1000 (raw, and through RedisListStorage::range).
  void observability_rows(int runs) {
    const std::size_t small = 1000, large = 1000000;
    std::vector<double> s_small, s_large, errors_s, lrange_s, range_s;
    fill_errors(small);
    for (int i = 0; i < runs; ++i)
      s_small.push_back(stats_us(200));
    fill_errors(large);
    std::vector<double> lrange_cpu, errors_cpu;  // client CPU: robust on a busy machine
    for (int i = 0; i < runs; ++i) {             // interleaved: noise hits all of them alike
      s_large.push_back(stats_us(200));
      double c0 = cpu_seconds();
      lrange_s.push_back(lrange_pages_seconds(large));
      lrange_cpu.push_back(cpu_seconds() - c0);
      range_s.push_back(range_pages_seconds(large));
      c0 = cpu_seconds();
      errors_s.push_back(errors_seconds(large));
      errors_cpu.push_back(cpu_seconds() - c0);
    }
    std::printf("stats_1k_us %.1f\n", median(s_small));
    std::printf("stats_1m_us %.1f\n", median(s_large));
    std::printf("lrange_pages_1m_s %.3f\n", median(lrange_s));
    std::printf("range_pages_1m_s %.3f\n", median(range_s));
    std::printf("errors_1m_s %.3f\n", median(errors_s));
    std::printf("lrange_pages_1m_cpu_s %.3f\n", median(lrange_cpu));
    std::printf("errors_1m_cpu_s %.3f\n", median(errors_cpu));
    std::fflush(stdout);
  }

  void replay_all_no_fill() {
    dlq::RedisListStorage::replay_cursor cursor;
    auto decide = [](std::string_view r, dlq::Decision& d) {
      d.action = dlq::Action::replay;
      d.payload = r;
    };
    for (int i = 0; i < 1000000; ++i) {
      auto r = storage.replay_step("q", cursor, 1000, decide);
      if (!r.conflict && r.examined == 0) break;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_redis URL [runs]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  try {
    Bench b(argv[1]);
    auto measure = [&](const char* name, const std::function<double()>& f) {
      std::vector<double> v;
      for (int i = 0; i < runs; ++i)
        v.push_back(f());
      std::printf("%s %.0f\n", name, median(v));
      std::fflush(stdout);
    };
    if (argc > 3 && std::string(argv[3]) == "observability") {  // issue 12 rows only
      b.observability_rows(runs);
      b.clear();
      return 0;
    }
    if (argc > 3 && std::string(argv[3]) == "replay_all") {
      // The first row of "replay" alone, for A/B runs: per round the LMOVE loop and
      // replay_all over 100k envelopes, their wall rates and server time per entry, and every
      // command replay_all sent (INFO commandstats: calls, µs).
      std::vector<double> ratio, wall_us, script_us;
      for (int i = 0; i < runs; ++i) {
        b.script_usec_and_reset();
        const double lmove = b.lmove_lua_envelopes(100000);
        const double lmove_us = b.script_usec_and_reset() / 100000;
        b.clear();
        dlq::DeadLetterQueue<dlq::RedisListStorage&> q(b.storage);
        Bench::send_envelopes(q, 100000, 300);
        b.cmd({"CONFIG", "RESETSTAT"});
        const auto t0 = Clock::now();
        const auto report = q.replay_all("q");
        const double seconds = seconds_since(t0);
        if (report.replayed != 100000) {
          std::fprintf(stderr, "replay_all moved %zu of 100000\n", report.replayed);
          return 1;
        }
        const std::string stats = b.commandstats();
        const double fast_us = b.script_usec_and_reset() / 100000;
        ratio.push_back(100000 / seconds / lmove);
        wall_us.push_back(seconds * 1e6 / 100000);
        script_us.push_back(fast_us);
        std::printf(
            "round %d: lmove %.0f/s (%.2f us/entry), replay_all %.0f/s = %.2fx (wall %.2f, "
            "scripts %.2f us/entry, %zu batches)\n%s",
            i + 1, lmove, lmove_us, 100000 / seconds, ratio.back(), wall_us.back(), fast_us,
            report.batches, stats.c_str());
        std::fflush(stdout);
      }
      std::printf("replay_all_wall_us_per_entry %.2f\n", median(wall_us));
      std::printf("replay_all_script_us_per_entry %.2f\n", median(script_us));
      std::printf("ratio_replay_all_lmove %.2f\n", median(ratio));
      b.clear();
      return 0;
    }
    if (argc > 3 && (std::string(argv[3]) == "replay" || std::string(argv[3]) == "prototype")) {
      // Issue 16, interleaved per round: the LMOVE loop, front-end replay_all (fast path),
      // the same with an always-true filter (compare-and-move only), the mixed queue and its
      // LMOVE loop; then N threads sending (run.sh adds redis-benchmark -c N -P 1).
      std::vector<double> lmove, fast, slow, mixed, lmove_mix;
      std::vector<double> fast_us, lmove_us;
      for (int i = 0; i < runs; ++i) {
        b.script_usec_and_reset();
        lmove.push_back(b.lmove_lua_envelopes(100000));
        lmove_us.push_back(b.script_usec_and_reset() / 100000);
        fast.push_back(b.dlq_replay_all(100000));
        fast_us.push_back(b.script_usec_and_reset() / 100000);
        slow.push_back(b.dlq_replay_all_filtered(100000));
        lmove_mix.push_back(b.lmove_mixed(100000));
        mixed.push_back(b.dlq_replay_all_mixed(100000));
        std::fprintf(stderr,
                     "round %d: lmove %.0f/s (scripts %.2f us/entry), replay_all %.0f/s = %.2fx "
                     "(%.2f us), compare-and-move only %.2fx, mixed %.2fx of its lmove\n",
                     i + 1, lmove.back(), lmove_us.back(), fast.back(), fast.back() / lmove.back(),
                     fast_us.back(), slow.back() / lmove.back(), mixed.back() / lmove_mix.back());
      }
      std::printf("lmove_lua_envelopes_100k %.0f\n", median(lmove));
      std::printf("dlq_replay_all_100k %.0f\n", median(fast));
      std::printf("dlq_replay_all_filtered_100k %.0f\n", median(slow));
      std::printf("lmove_lua_mixed_100k %.0f\n", median(lmove_mix));
      std::printf("dlq_replay_all_mixed_100k %.0f\n", median(mixed));
      std::printf("lmove_script_us_per_entry %.2f\n", median(lmove_us));
      std::printf("dlq_replay_all_script_us_per_entry %.2f\n", median(fast_us));
      std::vector<double> ratio, ratio_slow, ratio_mixed;
      for (int i = 0; i < runs; ++i) {
        ratio.push_back(fast[static_cast<std::size_t>(i)] / lmove[static_cast<std::size_t>(i)]);
        ratio_slow.push_back(slow[static_cast<std::size_t>(i)] /
                             lmove[static_cast<std::size_t>(i)]);
        ratio_mixed.push_back(mixed[static_cast<std::size_t>(i)] /
                              lmove_mix[static_cast<std::size_t>(i)]);
      }
      {  // every fast-path script's duration over 2 KB payloads (SLOWLOG, all rounds)
        std::vector<long long> us;
        for (int i = 0; i < runs; ++i) {
          const auto part = b.script_us(20000, 2048, true);
          us.insert(us.end(), part.begin(), part.end());
        }
        std::sort(us.begin(), us.end());
        std::printf("dlq_replay_script_2k_p50_us %lld\n", us[us.size() / 2]);
        std::printf("dlq_replay_script_2k_p99_us %lld\n", us[us.size() * 99 / 100]);
        std::printf("dlq_replay_script_2k_max_us %lld\n", us.back());
      }
      std::printf("ratio_replay_all_lmove %.2f\n", median(ratio));
      std::printf("ratio_replay_all_filtered_lmove %.2f\n", median(ratio_slow));
      std::printf("ratio_replay_all_mixed_lmove %.2f\n", median(ratio_mixed));
      std::fflush(stdout);
      b.clear();
      return 0;
    }
    if (argc > 3 && std::string(argv[3]) == "threads") {  // one round of N-thread sends
      // The default (concurrent sends batched, PoolOptions::send_batches) and, for
      // comparison, every send its own round trip (send_batches = 0), alternated.
      const char* env = std::getenv("DLQ_BENCH_SEND_BATCHES");  // to compare other settings
      const std::size_t batches =
          env != nullptr ? std::strtoul(env, nullptr, 10) : dlq::redis::PoolOptions{}.send_batches;
      // DLQ_BENCH_THREADS=N: that thread count alone (for perf stat / perf record of one row).
      const char* only = std::getenv("DLQ_BENCH_THREADS");
      for (const std::size_t n : {1, 8, 32}) {
        if (only != nullptr && std::strtoul(only, nullptr, 10) != n) continue;
        std::printf("dlq_send_threads_%zu %.0f\n", n, b.threaded_send(n, 32000 / n, batches));
        std::printf("dlq_send_threads_unbatched_%zu %.0f\n", n, b.threaded_send(n, 32000 / n, 0));
      }
      std::fflush(stdout);
      b.clear();
      return 0;
    }
    if (argc > 3 && std::string(argv[3]) == "replica_ack") {  // one round, issue 29 item 3
      const std::size_t batches = dlq::redis::PoolOptions{}.send_batches;
      for (const std::size_t n : {1, 8, 32}) {
        std::printf("dlq_send_ack0_threads_%zu %.0f\n", n, b.threaded_send(n, 16000 / n, batches));
        std::printf("dlq_send_ack1_threads_%zu %.0f\n", n,
                    b.threaded_send(n, 16000 / n, batches, 1));
      }
      std::fflush(stdout);
      b.clear();
      return 0;
    }
    if (argc > 3 && std::string(argv[3]) == "envelope_bytes") {
      std::printf("%zu\n", b.envelope_bytes());
      return 0;
    }
    measure("single_send", [&] { return b.single_send(20000); });
    measure("batch_send_64", [&] { return b.batch_send(200000, 64); });
    measure("replay_all_100k", [&] { return b.replay_all(100000, 300); });
    measure("dlq_send", [&] { return b.dlq_send(20000); });
    measure("dlq_send_batch_64", [&] { return b.dlq_send_batch(200000, 64); });
    {  // what exact retention costs a send: max_length (evicting) against none, alternated
      std::vector<double> with, without;
      for (int i = 0; i < runs; ++i) {
        without.push_back(b.dlq_send(20000));
        with.push_back(b.dlq_send_max_length(20000));
      }
      std::printf("dlq_send_no_max_length %.0f\n", median(without));
      std::printf("dlq_send_max_length_evicting %.0f\n", median(with));
      std::printf("dlq_send_max_length_ratio %.2f\n", median(with) / median(without));
      std::fflush(stdout);
    }
    measure("dlq_replay_all_100k", [&] { return b.dlq_replay_all(100000); });
    measure("lmove_lua_100k", [&] { return b.lmove_lua(100000); });
    measure("lmove_lua_envelopes_100k", [&] { return b.lmove_lua_envelopes(100000); });
    measure("per_item_loop", [&] { return b.per_item_loop(10000); });
    // Every replay script of every run: 2 KB storage-level items, and envelopes around 2 KB
    // payloads through the front end.
    for (const bool front_end : {false, true}) {
      std::vector<long long> us;
      for (int i = 0; i < runs; ++i) {
        const auto part = b.script_us(20000, 2048, front_end);
        us.insert(us.end(), part.begin(), part.end());
      }
      std::sort(us.begin(), us.end());
      const char* name = front_end ? "dlq_replay_script_2k" : "replay_script_2k";
      std::printf("%s_p50_us %lld\n", name, us[us.size() / 2]);
      std::printf("%s_p99_us %lld\n", name, us[us.size() * 99 / 100]);
      std::printf("%s_max_us %lld\n", name, us.back());
    }
    {  // age trim of 100k entries: rate and every script's duration over all runs
      std::vector<long long> us;
      measure("dlq_trim_age_100k", [&] { return b.trim_age(100000, us); });
      std::sort(us.begin(), us.end());
      std::printf("dlq_trim_script_p50_us %lld\n", us[us.size() / 2]);
      std::printf("dlq_trim_script_p99_us %lld\n", us[us.size() * 99 / 100]);
      std::printf("dlq_trim_script_max_us %lld\n", us.back());
    }
    b.observability_rows(runs);
    b.clear();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_redis: %s\n", e.what());
    return 1;
  }
  return 0;
}
