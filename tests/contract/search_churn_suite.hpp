// The contract suite, search under churn (issue 27): a search paged with continuations — the
// library's DeadLetterQueue::search and the console's scan behind /api/entries
// (dlq::http::ConsoleBackend::search) — while a sender appends, a replayer replays and a
// discarder deletes, all removing before and after the search's place. Every match present
// when a run of pages starts and still present when it ends must have been returned, once
// (a second time only after a page that said it restarted). Included at the end of
// contract_suite.hpp; uses its fixtures and helpers.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/http/backend.hpp"

namespace contract_churn {

// The error text of entry `i`: the search looks for "match"; the replayer takes the
// "replay-me" entries and the discarder the "drop" ones; "keep" entries are never removed.
inline const char* kind(int i) {
  switch (i % 6) {
    case 0:
      return "match keep";
    case 1:
      return "other keep";
    case 2:
      return "match drop";
    case 3:
      return "other replay-me";
    case 4:
      return "match replay-me";
    default:
      return "other drop";
  }
}

// The kinds the sender appends during the run: only removable ones, so that the replayer and
// the discarder always have work before the search's place.
inline const char* removable_kind(int i) {
  static const char* const kinds[] = {"match drop", "other replay-me", "match replay-me",
                                      "other drop"};
  return kinds[i % 4];
}

inline bool is_match(const dlq::Entry& e) {
  return e.ok() && e.error.find("match") != std::string::npos;
}

// The ids of the matching entries in the list, read in one call.
template <class Q>
std::set<std::string> matching_now(Q& q) {
  std::set<std::string> out;
  for (const auto& e : q.peek("orders", 0, q.size("orders") + 100000))
    if (is_match(e)) out.insert(e.id);
  return out;
}

struct totals {
  std::size_t expected = 0;  // matches present at the start and at the end of a run
  std::size_t missed = 0;    // of those, never returned
  std::size_t repeated = 0;  // returned twice without a restart in between
  std::size_t wrong = 0;     // returned but not matching
  std::size_t restarts = 0;  // pages that said restarted
  std::size_t pages = 0;
  std::size_t returned = 0;
};

// Fills "orders", starts the sender, the replayer and the discarder, and runs `rounds` full
// searches through `pager` (reset() starts over; page(out, restarted) appends one page's
// entries and returns true when the search is done), checking each.
template <class Q, class Pager>
totals search_under_churn(Q& q, Pager& pager, int rounds) {
  constexpr int prefill = 6000;
  {
    std::vector<dlq::FailedJob> jobs;
    for (int i = 0; i < prefill; ++i)
      jobs.push_back({"orders", "{\"n\":" + std::to_string(i) + "}", contract::failure(kind(i))});
    q.send_batch(jobs);
  }
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> replayed{0}, discarded{0}, sent{0};
  std::thread sender([&] {
    int n = 0;
    while (!stop) {
      if (q.size("orders") >= static_cast<std::size_t>(prefill)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      std::vector<dlq::FailedJob> jobs;
      for (int k = 0; k < 16; ++k, ++n)
        jobs.push_back({"orders", "{\"late\":" + std::to_string(n) + "}",
                        contract::failure(removable_kind(n))});
      q.send_batch(jobs);
      sent += jobs.size();
    }
  });
  std::thread replayer([&] {
    dlq::ReplayOptions o;
    o.error_contains = "replay-me";
    o.limit = 16;
    while (!stop)
      replayed += q.replay("orders", o).replayed;
  });
  std::thread discarder([&] {
    dlq::DiscardOptions o;
    o.error_contains = "drop";
    o.limit = 16;
    while (!stop)
      discarded += q.discard("orders", o).discarded;
  });

  totals t;
  for (int round = 0; round < rounds; ++round) {
    const std::set<std::string> at_start = matching_now(q);
    pager.reset();
    std::map<std::string, std::size_t> restarts_when_returned;
    bool done = false;
    for (int pages = 0; !done; ++pages) {
      REQUIRE(pages < 100000);
      std::vector<dlq::Entry> entries;
      bool restarted = false;
      done = pager.page(entries, restarted);
      ++t.pages;
      if (restarted) ++t.restarts;
      for (const auto& e : entries) {
        ++t.returned;
        if (!is_match(e)) ++t.wrong;
        const auto seen = restarts_when_returned.find(e.id);
        if (seen != restarts_when_returned.end() && seen->second == t.restarts) ++t.repeated;
        restarts_when_returned[e.id] = t.restarts;
      }
    }
    const std::set<std::string> at_end = matching_now(q);
    for (const auto& id : at_start) {
      if (at_end.count(id) == 0) continue;  // removed meanwhile: may or may not be returned
      ++t.expected;
      if (restarts_when_returned.count(id) == 0) ++t.missed;
    }
  }
  stop = true;
  sender.join();
  replayer.join();
  discarder.join();
  INFO("sent " << sent << ", replayed " << replayed << ", discarded " << discarded);
  CHECK(replayed > 0);
  CHECK(discarded > 0);
  return t;
}

inline void check(const totals& t) {
  INFO("over " << t.pages << " pages (" << t.restarts << " restarted): " << t.missed << " of "
               << t.expected << " matches present throughout never returned, " << t.repeated
               << " returned twice without a restart, " << t.wrong << " not matching, "
               << t.returned << " returned");
  CHECK(t.expected > 2000);
  CHECK(t.missed == 0);
  CHECK(t.repeated == 0);
  CHECK(t.wrong == 0);
}

// Pages through DeadLetterQueue::search with page limits and call budgets that vary: pages
// that stop after a few matches and calls that read many chunks.
template <class Q>
struct library_pager {
  explicit library_pager(Q& queue) : q(queue) {}
  Q& q;
  std::string token;
  std::size_t call = 0;
  void reset() { token.clear(); }
  bool page(std::vector<dlq::Entry>& out, bool& restarted) {
    static const std::pair<std::size_t, std::size_t> shapes[] = {
        {7, 0}, {60, 0}, {700, 0}, {3000, 0}, {50, 400}};
    const auto& [limit, max_examined] = shapes[call++ % 5];
    dlq::Filter f;
    f.error_contains = "match";
    auto p = q.search("orders", f, token, limit, max_examined);
    restarted = p.restarted();
    for (auto& e : p.entries)
      out.push_back(std::move(e));
    token = p.continuation;
    return p.done();
  }
};

// Pages through the console's scan (ConsoleBackend::search, what /api/entries calls).
template <class Backend>
struct console_pager {
  explicit console_pager(Backend& b) : backend(b) {}
  Backend& backend;
  std::optional<dlq::http::Cursor> at;
  std::size_t call = 0;
  void reset() { at.reset(); }
  bool page(std::vector<dlq::Entry>& out, bool& restarted) {
    static const std::pair<std::size_t, std::size_t> shapes[] = {
        {7, 20000}, {60, 20000}, {700, 20000}, {50, 400}};
    dlq::http::ScanLimits limits;
    limits.limit = shapes[call % 4].first;
    limits.max_examined = shapes[call % 4].second;
    ++call;
    dlq::http::EntryQuery f;
    f.error = "match";
    auto p = backend.search("orders", f, at, limits);
    restarted = p.restarted;
    for (auto& e : p.entries)
      out.push_back(std::move(e));
    at = p.next;
    return !at;
  }
};

}  // namespace contract_churn

TEMPLATE_TEST_CASE(
    "search pages skip no match and repeat none while a sender, a replayer and a discarder run",
    "[contract][ops][search][concurrency]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 32;
  contract::queue_of<TestType> q(fx.storage(), options);
  contract_churn::library_pager<decltype(q)> pager(q);
  contract_churn::check(contract_churn::search_under_churn(q, pager, 3));
}

TEMPLATE_TEST_CASE(
    "the console's scan skips no match and repeats none while a sender, a replayer and a "
    "discarder run",
    "[contract][ops][search][concurrency][console]", DLQ_CONTRACT_FIXTURES) {
  TestType fx;
  dlq::Options options;
  options.replay_batch_items = 32;
  contract::queue_of<TestType> q(fx.storage(), options);
  dlq::http::QueueBackend<typename TestType::storage_type&> backend(q);
  contract_churn::console_pager<decltype(backend)> pager(backend);
  contract_churn::check(contract_churn::search_under_churn(q, pager, 3));
}
