// Operator operations on Redis (issue 14), against baselines measured on the same server in
// the same process:
//  - search: a resumable search of 1M envelopes for the 12 entries with one error text
//    (DeadLetterQueue::search, 10 000 entries examined per call) vs reading the same list
//    with plain LRANGE pages of 500 (the bytes alone, no parsing) — the ratio of their times,
//    and the longest single search call (each call is bounded);
//  - audit: replay-all of 100k envelopes with the audit trail (RedisListStorage) vs the same
//    replay through a storage without one — the ratio of their rates and the number of
//    XADDs the replay sent (INFO commandstats).
//
//   bench_redis_ops <url> [runs=3]      (tests/benchmarks/redis/run_ops.sh starts a server)
//
// Prints `<name> <value>` lines. Uses keys under "bops:" and deletes them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/list_storage.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

dlq::RedisListOptions layout() {
  dlq::RedisListOptions o;
  o.dead_key = "bops:dlq:{*}";
  o.source_key = "bops:queue:{*}";
  o.corrupt_key = "bops:dlq:{*}:corrupt";
  return o;
}

// The storage contract of a RedisListStorage without its audit members: the baseline.
struct NoAudit {
  dlq::RedisListStorage* s;
  using replay_cursor = dlq::RedisListStorage::replay_cursor;
  std::size_t push(const dlq::Record& r) { return s->push(r); }
  void push_many(const std::vector<dlq::Record>& r) { s->push_many(r); }
  std::size_t size(std::string_view q, dlq::ListKind k) { return s->size(q, k); }
  std::vector<std::string> range(std::string_view q, dlq::ListKind k, std::size_t a,
                                 std::size_t n) {
    return s->range(q, k, a, n);
  }
  bool remove(std::string_view q, dlq::ListKind k, std::string_view id, std::string_view raw) {
    return s->remove(q, k, id, raw);
  }
  std::size_t purge(std::string_view q, dlq::ListKind k) { return s->purge(q, k); }
  std::vector<std::string> queues() { return s->queues(); }
  std::vector<std::size_t> sizes(const std::vector<std::string>& q) { return s->sizes(q); }
  dlq::StepResult replay_step(std::string_view q, replay_cursor& c, std::size_t n, dlq::Decider d) {
    return s->replay_step(q, c, n, d);
  }
};

struct Bench {
  dlq::redis::Connection raw;
  dlq::RedisListStorage storage;

  explicit Bench(const std::string& url)
      : raw(dlq::redis::parse_url(url)), storage(url, layout()) {}

  dlq::redis::Reply cmd(std::vector<std::string> args) {
    dlq::redis::Command c;
    for (auto& a : args)
      c.arg_copy(a);
    auto r = raw.run(c, dlq::redis::Effect::write);
    dlq::redis::check(r, raw, c.label());
    return r;
  }
  void clear() {
    cmd({"DEL", "bops:dlq:{q}", "bops:queue:{q}", "bops:dlq:{q}:corrupt", "bops:dlq:{q}:audit"});
  }
  long long xadd_calls() {
    auto r = cmd({"INFO", "commandstats"});
    const std::string text(r->str, r->len);
    const auto at = text.find("cmdstat_xadd:calls=");
    return at == std::string::npos ? 0 : std::atoll(text.c_str() + at + 19);
  }
  // `n` envelopes of ~300 B payloads through send_batch; `needles` of them (spread evenly)
  // carry the error text the search looks for.
  void fill(std::size_t n, std::size_t needles) {
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    std::vector<dlq::FailedJob> jobs;
    for (std::size_t i = 0; i < n; ++i) {
      dlq::Failure f;
      f.error = needles != 0 && i % (n / needles) == n / needles / 2
                    ? "card declined: fraud rule 17"
                    : "payment timeout";
      f.worker = "worker-" + std::to_string(i % 8);
      jobs.push_back(
          {"q", "{\"job\":" + std::to_string(i) + ",\"pad\":\"" + std::string(280, 'x') + "\"}",
           f});
      if (jobs.size() == 10000) {
        q.send_batch(jobs);
        jobs.clear();
      }
    }
    if (!jobs.empty()) q.send_batch(jobs);
  }

  // Seconds to read the whole list with LRANGE pages of 500.
  double lrange_all() {
    const auto t0 = Clock::now();
    std::size_t total = 0;
    for (std::size_t start = 0;; start += 500) {
      const auto items = storage.range("q", dlq::ListKind::dead, start, 500);
      total += items.size();
      if (items.size() < 500) break;
    }
    if (total == 0) std::fprintf(stderr, "empty list\n");
    return seconds_since(t0);
  }

  // Seconds for a complete search; the longest call and the number of calls and matches.
  double search_all(double& longest, std::size_t& calls, std::size_t& found) {
    dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
    dlq::Filter f;
    f.error_contains = "fraud rule 17";
    std::string token;
    longest = 0;
    calls = 0;
    found = 0;
    const auto t0 = Clock::now();
    for (;;) {
      const auto c0 = Clock::now();
      const auto page = q.search("q", f, token, 100);
      longest = std::max(longest, seconds_since(c0));
      ++calls;
      found += page.entries.size();
      if (page.done()) break;
      token = page.continuation;
    }
    return seconds_since(t0);
  }

  // Entries/s of a replay-all of `n` envelopes, with (RedisListStorage) or without (NoAudit)
  // the audit trail; `xadds` = XADD calls the replay made.
  double replay(std::size_t n, bool audited, long long& xadds) {
    clear();
    fill(n, 0);
    const long long before = xadd_calls();
    const auto t0 = Clock::now();
    std::size_t replayed = 0;
    if (audited) {
      dlq::DeadLetterQueue<dlq::RedisListStorage&> q(storage);
      replayed = q.replay_all("q").replayed;
    } else {
      dlq::DeadLetterQueue<NoAudit> q(NoAudit{&storage});
      replayed = q.replay_all("q").replayed;
    }
    const double rate = static_cast<double>(replayed) / seconds_since(t0);
    xadds = xadd_calls() - before;
    return rate;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_redis_ops URL [runs]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  try {
    Bench b(argv[1]);
    b.clear();
    b.fill(1000000, 12);
    std::vector<double> lrange, search, longest;
    std::size_t calls = 0, found = 0;
    for (int i = 0; i < runs; ++i) {  // interleaved
      lrange.push_back(b.lrange_all());
      double l = 0;
      search.push_back(b.search_all(l, calls, found));
      longest.push_back(l);
    }
    std::printf("lrange_pages_1m_s %.3f\n", median(lrange));
    std::printf("search_1m_s %.3f\n", median(search));
    std::printf("search_vs_lrange %.2f\n", median(search) / median(lrange));
    std::printf("search_calls %zu\n", calls);
    std::printf("search_matches %zu\n", found);
    std::printf("search_longest_call_ms %.1f\n", 1000 * median(longest));

    std::vector<double> with, without;
    long long xadds = 0, none = 0;
    for (int i = 0; i < runs; ++i) {  // interleaved
      without.push_back(b.replay(100000, false, none));
      with.push_back(b.replay(100000, true, xadds));
    }
    std::printf("replay_all_100k_no_audit %.0f\n", median(without));
    std::printf("replay_all_100k_audited %.0f\n", median(with));
    std::printf("audited_vs_not %.3f\n", median(with) / median(without));
    std::printf("audit_xadds_per_replay %lld\n", xadds);
    std::printf("audit_xadds_without %lld\n", none);
    b.clear();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_redis_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}
