// dlq::detail::search_place — the place of a resumable search (library search and console
// scan) in a list that other clients change — without a server: a list in a vector that an
// adversary changes before every read (removals anywhere, appends at the tail), and the
// library's search_page and the console's scan over a real MemoryStorage with a removal
// injected right before each of their reads.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/detail/search_place.hpp"
#include "dlq/http/backend.hpp"
#include "dlq/http/search.hpp"
#include "dlq/storage/memory.hpp"
#include "support/catch.hpp"

namespace test_search_place {

namespace {

using dlq::detail::search_place;
using dlq::detail::search_token;

// A list of unique items and a search over it through search_place, as search_page drives
// it: `want` new items per read, a call ends after `per_call` reads (then the place goes
// through its token and the list's length, as between two calls).
struct simulation {
  std::vector<std::string> list;
  int next_item = 0;
  std::vector<std::string> returned;
  std::vector<std::size_t> restarts_before;  // per returned item: restarts seen before it
  std::size_t restarts = 0;
  std::size_t false_restarts = 0;  // restarts while one of the last 16 returned was there

  std::string add() {
    list.push_back("item-" + std::to_string(next_item++));
    return list.back();
  }

  // Runs the search to its end; `change` is called before every read.
  void run(std::size_t want, std::size_t per_call, const std::function<void()>& change) {
    search_token token;
    for (int calls = 0;; ++calls) {
      REQUIRE(calls < 1000000);
      search_place place(token, list.size());
      bool end = false;
      for (std::size_t reads = 0; reads < per_call && !end; ++reads) {
        const search_place::read r = place.next_read(want);
        change();
        std::vector<std::string> items;
        for (std::size_t i = r.start; i < r.start + r.count && i < list.size(); ++i)
          items.push_back(list[i]);
        const auto key = [&](std::size_t i) { return dlq::detail::search_key(items[i]); };
        const bool had_restarted = place.restarted();
        const search_place::found f = place.accept(r, items.size(), key);
        if (place.restarted() && !had_restarted) {
          for (std::size_t k = returned.size() - std::min<std::size_t>(16, returned.size());
               k < returned.size(); ++k)
            if (std::find(list.begin(), list.end(), returned[k]) != list.end()) ++false_restarts;
        }
        if (place.searching()) continue;
        const std::size_t used = std::min(want, items.size() - f.first);
        for (std::size_t i = f.first; i < f.first + used; ++i) {
          returned.push_back(items[i]);
          restarts_before.push_back(restarts + (place.restarted() ? 1 : 0));
        }
        place.advance(f.first, used, key);
        end = f.end && f.first + used == items.size();
      }
      if (place.restarted()) ++restarts;
      if (end) return;
      token = search_token::decode(place.token().encode());
    }
  }
};

}  // namespace

TEST_CASE("search_place: a search of an unchanged list returns each item once, in order") {
  for (const std::size_t n : {0u, 1u, 15u, 16u, 17u, 499u, 1234u}) {
    for (const std::size_t want : {1u, 7u, 500u}) {
      for (const std::size_t per_call : {1u, 3u, 1000u}) {
        simulation s;
        for (std::size_t i = 0; i < n; ++i)
          s.add();
        const auto before = s.list;
        s.run(want, per_call, [] {});
        CHECK(s.returned == before);
        CHECK(s.restarts == 0);
      }
    }
  }
}

TEST_CASE("search_place: removals and appends before every read skip nothing, repeat nothing") {
  // The adversary removes items anywhere — before the place, among the last ones examined,
  // after it — and appends, before every read. Every item present at the start and never
  // removed is returned exactly once; an item is returned twice only after a restart, and a
  // restart happens only when each of the last 16 items returned was removed.
  std::mt19937 rng(27);
  std::size_t total_restarts = 0, total_checked = 0;
  for (int round = 0; round < 300; ++round) {
    simulation s;
    const std::size_t n = 50 + rng() % 1500;
    for (std::size_t i = 0; i < n; ++i)
      s.add();
    const std::set<std::string> at_start(s.list.begin(), s.list.end());
    std::set<std::string> removed;
    const std::size_t want = 1 + rng() % 600;
    const std::size_t per_call = 1 + rng() % 4;
    const int mode = round % 4;  // which removals dominate
    const auto change = [&] {
      if (s.list.empty()) return;
      // Where the search is: the items returned so far.
      std::size_t removals = rng() % (mode == 3 ? 40 : 6);
      for (std::size_t k = 0; k < removals && !s.list.empty(); ++k) {
        std::size_t at = rng() % s.list.size();
        if (mode == 0) at = 0;                   // a replay taking the head
        if (mode == 1 && !s.returned.empty()) {  // near the place: the anchors
          const auto it = std::find(s.list.begin(), s.list.end(), s.returned.back());
          if (it != s.list.end()) {
            const std::size_t p = static_cast<std::size_t>(it - s.list.begin());
            at = p - std::min<std::size_t>(p, rng() % 20);
          }
        }
        removed.insert(s.list[at]);
        s.list.erase(s.list.begin() + static_cast<std::ptrdiff_t>(at));
      }
      if (rng() % 3 == 0)
        for (std::size_t k = rng() % 5; k > 0; --k)
          s.add();
    };
    s.run(want, per_call, change);
    INFO("round " << round << ": " << n << " items, " << want << " per read, " << per_call
                  << " reads per call, mode " << mode << ", " << s.restarts << " restarts");
    std::map<std::string, std::size_t> last_restarts;
    for (std::size_t i = 0; i < s.returned.size(); ++i) {
      const auto seen = last_restarts.find(s.returned[i]);
      if (seen != last_restarts.end()) CHECK(seen->second < s.restarts_before[i]);  // repeat
      last_restarts[s.returned[i]] = s.restarts_before[i];
    }
    for (const auto& item : at_start) {
      if (removed.count(item) != 0) continue;
      ++total_checked;
      CHECK(last_restarts.count(item) == 1);  // never skipped
    }
    CHECK(s.false_restarts == 0);
    total_restarts += s.restarts;
  }
  CHECK(total_checked > 10000);
  CHECK(total_restarts > 0);  // the head mode overtakes the search sometimes
}

namespace {

// Reads `list` through `place` until the place is found (or lost): the last read's items and
// what accept() said about them.
std::pair<std::vector<std::string>, search_place::found> read_placed(
    search_place& place, const std::vector<std::string>& list, std::size_t want) {
  for (;;) {
    const auto r = place.next_read(want);
    std::vector<std::string> items;
    for (std::size_t i = r.start; i < r.start + r.count && i < list.size(); ++i)
      items.push_back(list[i]);
    const auto f = place.accept(r, items.size(),
                                [&](std::size_t i) { return dlq::detail::search_key(items[i]); });
    if (!place.searching()) return {items, f};
  }
}

}  // namespace

TEST_CASE("search_place: restarts exactly when each of the last 16 examined is gone") {
  for (const std::size_t back : {0u, 300u}) {  // the place at once, or 300 entries back
    for (const std::size_t gone : {15u, 16u}) {
      INFO(gone << " of the last 16 examined removed, " << back << " more before them");
      simulation s;
      for (int i = 0; i < 1000; ++i)
        s.add();
      const auto before = s.list;
      // One call examines 640 items; then the last `gone` of them go, and `back` before those.
      search_place first({}, s.list.size());
      const auto placed = read_placed(first, s.list, 640);
      const auto& items = placed.first;
      const auto& f = placed.second;
      first.advance(f.first, 640, [&](std::size_t i) { return dlq::detail::search_key(items[i]); });
      s.list.erase(s.list.begin() + static_cast<std::ptrdiff_t>(640 - gone), s.list.begin() + 640);
      s.list.erase(s.list.begin() + static_cast<std::ptrdiff_t>(600 - back), s.list.begin() + 600);
      search_place next(search_token::decode(first.token().encode()), s.list.size());
      auto [items2, f2] = read_placed(next, s.list, 1000);
      if (gone == 15) {  // the 625th is still there: go on right after it
        CHECK_FALSE(next.restarted());
        REQUIRE(f2.first < items2.size());
        CHECK(items2[f2.first] == before[640]);
        CHECK(next.position() == 640 - gone - back);
      } else {  // all 16 gone: start over at the head, from the read that found none
        CHECK(next.restarted());
        CHECK(f2.first == 0);
        CHECK(next.position() == 0);
        CHECK(items2.front() == before[0]);
      }
    }
  }
}

TEST_CASE("search_place: a forged position is bounded by the list's length") {
  search_token t;
  t.position = 999999999999999999ull;
  t.anchors = {1, 2, 3};
  std::vector<std::string> list;
  for (int i = 0; i < 10; ++i)
    list.push_back(std::to_string(i));
  search_place p(t, list.size());
  CHECK(p.position() == 10);
  const auto [items, f] = read_placed(p, list, 5);  // one read of [0, 15): no anchor
  CHECK(p.restarted());
  CHECK(f.first == 0);
  CHECK(items.size() == 10);
  CHECK(f.end);
  // An empty list at the start: every entry examined is gone, nothing can repeat.
  search_place empty(t, 0);
  CHECK(empty.position() == 0);
  const auto [none, f2] = read_placed(empty, {}, 5);
  CHECK(none.empty());
  CHECK(f2.end);
  CHECK_FALSE(empty.restarted());
}

TEST_CASE("search_token: text form round-trips, malformed text is refused") {
  search_token t{1234, {0x0123456789abcdefull, 42}};
  CHECK(search_token::decode(t.encode()).position == 1234);
  CHECK(search_token::decode(t.encode()).anchors == t.anchors);
  CHECK(search_token::decode("s1:0:").position == 0);
  for (const char* bad : {"", "s1:", "s1:5:", "s1:0:0123456789abcdef", "s2:1:0123456789abcdef",
                          "s1:1:0123456789abcdeg", "s1:1:0123456789abcdef,",
                          "s1:x:", "s1:1234567890123456789:0123456789abcdef"})
    CHECK_THROWS_AS(search_token::decode(bad), dlq::invalid_argument);
}

// --- the library search and the console scan, one removal right before each read ---------

namespace {

// A real MemoryStorage; the wrapper lets the test act as "another client" right before
// each range() (search_page only calls size and range).
struct Interleaved {
  dlq::MemoryStorage* inner = nullptr;
  std::function<void()> before_range;
  std::size_t size(std::string_view q, dlq::ListKind k) { return inner->size(q, k); }
  std::vector<std::string> range(std::string_view q, dlq::ListKind k, std::size_t start,
                                 std::size_t count) {
    if (before_range) before_range();
    return inner->range(q, k, start, count);
  }
};

// A console backend whose peek lets the test remove entries right before each read.
struct InterleavedBackend : dlq::http::QueueBackend<dlq::MemoryStorage&> {
  using QueueBackend::QueueBackend;
  std::function<void()> before_peek;
  std::vector<dlq::Entry> peek(std::string_view q, std::size_t s, std::size_t n) override {
    if (before_peek) before_peek();
    return QueueBackend::peek(q, s, n);
  }
  std::size_t capped = 0;  // bounded reads that stopped at their byte bound
  std::optional<dlq::PeekWindow> peek_bounded(dlq::ListKind k, std::string_view q, std::size_t s,
                                              std::size_t n, std::size_t least,
                                              std::size_t bytes) override {
    if (before_peek) before_peek();
    auto w = QueueBackend::peek_bounded(k, q, s, n, least, bytes);
    if (w && w->capped) ++capped;
    return w;
  }
};

}  // namespace

TEST_CASE("search and the console's scan skip nothing when entries go before every read") {
  // Each read is preceded by the removal of the oldest entries (as a replay takes them),
  // `per_read` at a time: before the fix the reads of one call and the read after the place
  // was found again were separate, and the entries that slid over the gap were skipped.
  for (const std::size_t per_read : {1u, 5u, 40u}) {
    // console scan: reads bounded by 8 MiB (never capped here), then by 4096 bytes (about 16
    // entries: most reads stop at the bound, and a capped read is not the end of the list).
    // Reads of 16 entries do not keep up with 40 removals before each: that scan restarts
    // (said so, skipping nothing), so it runs with 1 and 5.
    for (const std::size_t budget : {std::size_t{0}, std::size_t{8} << 20, std::size_t{4096}}) {
      if (budget == 4096 && per_read > 5) continue;
      const bool console = budget != 0;
      INFO((console ? "console scan, " : "library search, ")
           << per_read << " removed per read, " << budget << " bytes a read");
      dlq::MemoryStorage storage;
      dlq::DeadLetterQueue<dlq::MemoryStorage&> q(storage);
      std::vector<dlq::FailedJob> jobs;
      for (int i = 0; i < 3000; ++i)
        jobs.push_back({"orders", "{\"n\":" + std::to_string(i) + "}", {}});
      for (std::size_t i = 0; i < jobs.size(); ++i)
        jobs[i].failure.error = i % 3 == 0 ? "match" : "other";
      const std::vector<std::string> ids = q.send_batch(jobs);
      std::size_t victims = 0;  // the oldest 1000 go, per_read before each read
      const auto remove_some = [&] {
        for (std::size_t k = 0; k < per_read && victims < 1000; ++k)
          REQUIRE(q.remove("orders", ids[victims++]));
      };
      std::vector<std::string> returned;
      bool restarted = false;
      if (!console) {
        Interleaved wrapper{&storage, remove_some};
        dlq::Filter f;
        f.error_contains = "match";
        std::string token;
        do {
          const auto page = dlq::search_page(wrapper, "orders", f, token, 200,
                                             std::chrono::system_clock::now(), 1500);
          restarted = restarted || page.restarted();
          for (const auto& e : page.entries)
            returned.push_back(e.id);
          token = page.continuation;
        } while (!token.empty());
      } else {
        InterleavedBackend backend(q);
        backend.before_peek = remove_some;
        dlq::http::EntryQuery f;
        f.error = "match";
        dlq::http::ScanLimits limits;
        limits.limit = 200;
        limits.max_examined = 1500;
        limits.read_bytes = budget;
        std::optional<dlq::http::Cursor> at;
        do {
          const auto page = backend.search("orders", f, at, limits);
          restarted = restarted || page.restarted;
          for (const auto& e : page.entries)
            returned.push_back(e.id);
          at = page.next;
        } while (at);
        CHECK((backend.capped > 100) == (budget == 4096));
      }
      CHECK_FALSE(restarted);
      std::vector<std::string> expected;  // the matches never removed, in order
      for (std::size_t i = 1000; i < ids.size(); ++i)
        if (i % 3 == 0) expected.push_back(ids[i]);
      std::vector<std::string> tail(
          returned.end() - static_cast<std::ptrdiff_t>(std::min(returned.size(), expected.size())),
          returned.end());
      CHECK(tail == expected);
      CHECK(std::set<std::string>(returned.begin(), returned.end()).size() == returned.size());
    }
  }
}

TEST_CASE("the console's scan sizes each read by the bytes of the entries (issue 27)") {
  // 300 entries of 64 KiB with a read budget of 256 KiB: every peek asks for at most 4
  // entries (after the 1-entry sample), and a run of pages still returns every match once.
  std::vector<dlq::Entry> list(300);
  for (std::size_t i = 0; i < list.size(); ++i) {
    list[i].id = "e" + std::to_string(i);
    list[i].raw = std::string(64 << 10, static_cast<char>('a' + i % 26)) + list[i].id;
    list[i].error = i % 3 == 0 ? "match" : "other";
  }
  std::size_t most = 0, reads = 0;
  const auto peek = [&](std::string_view, std::size_t start, std::size_t count) {
    most = std::max(most, count);
    ++reads;
    std::vector<dlq::Entry> out;
    for (std::size_t i = start; i < list.size() && i < start + count; ++i)
      out.push_back(list[i]);
    return out;
  };
  dlq::http::EntryQuery f;
  f.error = "match";
  dlq::http::ScanLimits limits;
  limits.limit = 20;
  limits.read_bytes = 256 << 10;
  std::optional<dlq::http::Cursor> at;
  std::vector<std::string> returned;
  do {
    const auto page =
        dlq::http::scan(peek, list.size(), "q", f, at, limits, std::chrono::system_clock::now());
    CHECK_FALSE(page.restarted);
    for (const auto& e : page.entries)
      returned.push_back(e.id);
    at = page.next;
  } while (at);
  std::vector<std::string> expected;
  for (std::size_t i = 0; i < list.size(); i += 3)
    expected.push_back(list[i].id);
  CHECK(returned == expected);
  CHECK(most <= 4);
  CHECK(reads > 75);  // 300 entries, at most 4 a read
  // small entries: reads of a whole window again (500 + the 16 re-read)
  for (auto& e : list)
    e.raw = e.id;
  most = 0;
  (void)dlq::http::scan(peek, list.size(), "q", f, std::nullopt, limits,
                        std::chrono::system_clock::now());
  CHECK(most >= 300);
}

namespace {

// A MemoryStorage that records the stored bytes of its largest read: `range`, and
// `range_bytes` when MemoryStorage has it (the reads the front end then uses).
struct ReadMeter : dlq::MemoryStorage {
  std::size_t most = 0;
  void note(const std::vector<std::string>& items) {
    std::size_t bytes = 0;
    for (const auto& i : items)
      bytes += i.size();
    most = std::max(most, bytes);
  }
  std::vector<std::string> range(std::string_view q, dlq::ListKind k, std::size_t start,
                                 std::size_t count) {
    auto out = MemoryStorage::range(q, k, start, count);
    note(out);
    return out;
  }
  template <class S = dlq::MemoryStorage>
  auto range_bytes(std::string_view q, dlq::ListKind k, std::size_t start, std::size_t count,
                   std::size_t min_count, std::size_t max_bytes)
      -> decltype(std::declval<S&>().range_bytes(q, k, start, count, min_count, max_bytes)) {
    auto out = static_cast<S&>(*this).range_bytes(q, k, start, count, min_count, max_bytes);
    note(out.items);
    return out;
  }
};

// 600 small entries, then `big` entries of `bytes` payload bytes each; returns the ids.
std::vector<std::string> grow(dlq::DeadLetterQueue<ReadMeter&>& q, std::size_t big,
                              std::size_t bytes) {
  std::vector<dlq::FailedJob> jobs;
  for (std::size_t i = 0; i < 600 + big; ++i) {
    const std::string blob = i < 600 ? std::string("x") : std::string(bytes, 'a');
    jobs.push_back({"grow", "{\"blob\":\"" + blob + "\"}", {}});
    jobs.back().failure.error = "other";
  }
  return q.send_batch(jobs);
}

}  // namespace

// Issue 27, round 7: reads sized by the largest entry seen so far. After 600 small entries a
// read asked for 516 entries, and when large ones followed one read returned all of them
// (dlqctl serve: +806 MiB). The reads must be bounded by bytes before the data is read.
TEST_CASE("the console's scan bounds a read's bytes when entries grow mid-scan") {
  ReadMeter meter;
  dlq::DeadLetterQueue<ReadMeter&> q(meter);
  (void)grow(q, 100, 64 << 10);
  dlq::http::QueueBackend<ReadMeter&> backend(q);
  dlq::http::EntryQuery f;
  f.error = "match";  // nothing matches: the scan reads every entry
  dlq::http::ScanLimits limits;
  limits.read_bytes = 256 << 10;
  meter.most = 0;
  const auto page = backend.search("grow", f, std::nullopt, limits);
  CHECK(page.examined == 700);
  CHECK_FALSE(page.next);
  INFO("largest read: " << meter.most << " bytes, budget " << limits.read_bytes);
  CHECK(meter.most <= limits.read_bytes + (65 << 10));  // 100 x 64 KiB = 6.4 MiB before
}

TEST_CASE("a lookup by id bounds a read's bytes when entries grow mid-list") {
  ReadMeter meter;
  dlq::DeadLetterQueue<ReadMeter&> q(meter);
  const std::vector<std::string> ids = grow(q, 24, 1 << 20);
  meter.most = 0;
  const auto e = q.get("grow", ids.back());
  REQUIRE(e);
  CHECK(e->id == ids.back());
  INFO("largest read: " << meter.most << " bytes");
  CHECK(meter.most <= (std::size_t{9} << 20) + 4096);  // 8 MiB + one entry; 24 MiB before
}

// Round 12: the library's search (DeadLetterQueue::search, dlqctl search) read 500 entries
// and the 16 before its place with each `range`, whatever their size: a search of 300
// entries of 2 MiB that matched none held 1.65 GB in dlqctl (the console's scan and a lookup
// by id were bounded already). It reads as a lookup does: about 8 MiB a read.
TEST_CASE("the library's search bounds a read's bytes when entries grow mid-list") {
  ReadMeter meter;
  dlq::DeadLetterQueue<ReadMeter&> q(meter);
  (void)grow(q, 24, 1 << 20);
  dlq::Filter f;
  f.error_contains = "match";  // nothing matches: the search reads every entry
  meter.most = 0;
  const auto page = q.search("grow", f);
  CHECK(page.examined == 624);
  CHECK(page.done());
  INFO("largest read: " << meter.most << " bytes");
  CHECK(meter.most <= (std::size_t{9} << 20) + 4096);  // 8 MiB + one entry; 24 MiB before
}

// Round 12: errors() (dlqctl errors) read windows of ErrorsOptions::window (1000) entries,
// whatever their size, one more ahead on a helper thread: over 300 entries of 2 MiB dlqctl
// errors peaked at 1,652,712 KB. A read holds about 8 MiB, sized by the largest entry read
// so far (errors() reads through `range` only: an entry larger than all before it may take a
// read over the budget, as in the console's scan without range_bytes).
TEST_CASE("errors() bounds a read's bytes by the entries it has read") {
  ReadMeter meter;
  dlq::DeadLetterQueue<ReadMeter&> q(meter);
  std::vector<dlq::FailedJob> jobs;
  for (std::size_t i = 0; i < 24 + 600; ++i) {
    const std::string blob = i < 24 ? std::string(std::size_t{1} << 20, 'a') : "x";
    jobs.push_back({"large", "{\"blob\":\"" + blob + "\"}", {}});
    jobs.back().failure.error = i % 2 == 0 ? "even" : "odd";
  }
  (void)q.send_batch(jobs);
  meter.most = 0;
  const auto r = q.errors("large");
  CHECK(r.examined == 624);
  CHECK(r.exact);
  REQUIRE(r.by_error.size() == 2);
  CHECK(r.by_error[0].count == 312);
  INFO("largest read: " << meter.most << " bytes");
  CHECK(meter.most <= (std::size_t{9} << 20) + 4096);  // 8 MiB + one entry; 24 MiB before
}

}  // namespace test_search_place

namespace test_search_place {

// Round 8: a call that resumes from a cursor re-reads the entries before its place (the
// anchors) but had read none of them: it sized that re-read by the one entry at the place.
// 16 entries of 1 MiB examined by the previous call, a small entry at the place: the first
// read of the next call had to return all 16 (min_count 17), 16 MiB for a budget of 256 KiB.
TEST_CASE("a resumed scan does not re-read large anchors beyond its budget") {
  ReadMeter meter;
  dlq::DeadLetterQueue<ReadMeter&> q(meter);
  std::vector<dlq::FailedJob> jobs;
  for (std::size_t i = 0; i < 16 + 100; ++i) {
    const std::string blob = i < 16 ? std::string(std::size_t{1} << 20, 'a') : "x";
    jobs.push_back({"resume", "{\"blob\":\"" + blob + "\"}", {}});
    jobs.back().failure.error = "other";
  }
  (void)q.send_batch(jobs);
  dlq::http::QueueBackend<ReadMeter&> backend(q);
  dlq::http::EntryQuery f;
  f.error = "match";  // nothing matches: the scan reads every entry
  dlq::http::ScanLimits limits;
  limits.read_bytes = 256 << 10;
  limits.max_examined = 16;  // the first call ends right after the large entries
  const auto first = backend.search("resume", f, std::nullopt, limits);
  REQUIRE(first.examined == 16);
  REQUIRE(first.next);
  limits.max_examined = 1000;
  meter.most = 0;
  const auto second = backend.search("resume", f, first.next, limits);
  CHECK(second.examined == 100);
  CHECK_FALSE(second.next);
  INFO("largest read: " << meter.most << " bytes, budget " << limits.read_bytes);
  // one anchor re-read (1 MiB) and the budget at most; 16 MiB before
  CHECK(meter.most <= limits.read_bytes + (std::size_t{1} << 20) + 4096);
}

}  // namespace test_search_place
