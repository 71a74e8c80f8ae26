// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::http::Console in-process: mounted on a loopback httplib::Server over
// dlq::MemoryStorage, driven through httplib::Client. The security rules, the JSON errors,
// the continuation token while the list moves, background replays (progress, cancel, the
// limit on concurrent ones) and the scan bound.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

#include "http/console_fixture.hpp"

namespace test_console {

using namespace console_test;

TEST_CASE("check_listen refuses a non-loopback bind without a token") {
  CHECK_NOTHROW(dlq::http::check_listen("127.0.0.1", ""));
  CHECK_NOTHROW(dlq::http::check_listen("::1", ""));
  CHECK_NOTHROW(dlq::http::check_listen("localhost", ""));
  CHECK_THROWS_AS(dlq::http::check_listen("0.0.0.0", ""), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::http::check_listen("10.1.2.3", ""), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::http::check_listen("127.0.0.1.evil.com", ""), dlq::invalid_argument);
  CHECK_NOTHROW(dlq::http::check_listen("0.0.0.0", "a-long-token-of-some-sort"));
}

TEST_CASE("redact_secrets masks URL passwords") {
  CHECK(dlq::http::redact_secrets("cannot reach redis://user:hunter2@10.0.0.1:6379/0 now") ==
        "cannot reach redis://***@10.0.0.1:6379/0 now");
  CHECK(dlq::http::redact_secrets("redis://:pw@h/0 and redis://h2/1") ==
        "redis://***@h/0 and redis://h2/1");
  CHECK(dlq::http::redact_secrets("no url here") == "no url here");
}

TEST_CASE("printable masks a URL's credentials before it cuts a long text") {
  using dlq::http::detail::printable;
  // The cut (200 bytes) falls inside the password: cutting first kept "hunter2" and dropped
  // the '@' the masking needs.
  const std::string long_text = std::string(180, 'q') + " redis://user:hunter2secret@h:6379/0";
  const std::string shown = printable(long_text);
  CHECK(shown.find("hunter") == std::string::npos);
  CHECK(shown.find("user") == std::string::npos);
  CHECK(dlq::http::redact_secrets(shown).find("hunter") == std::string::npos);
  CHECK(shown.size() <= 200 + std::string("…").size());
  CHECK(shown.rfind("…") == shown.size() - std::string("…").size());
  // The cut never splits a mask: "***" starts at byte 199 once masked.
  const std::string at_mask = std::string(194, 'q') + " r://u:p@h";
  const std::string cut_mask = printable(at_mask);
  CHECK(cut_mask.find("r://*") == std::string::npos);
  CHECK(cut_mask.substr(0, 195) == at_mask.substr(0, 195));
  // Short text is kept whole (masked), control characters shown as '?'.
  CHECK(printable("queue 'a\nb' redis://u:pw@h/0") == "queue 'a?b' redis://***@h/0");
  CHECK(printable(std::string(200, 'x')) == std::string(200, 'x'));
}

TEST_CASE("a line break or CR inside a URL's password never shows its tail") {
  // The masking ran before control characters became '?': a raw "\n" or "\r" ended the
  // password there, and the bytes after it ("ss2") were shown.
  for (const char* broken : {"redis://user:hunter\nss2@h:6379/0", "redis://user:hunter\rss2@h/0",
                             "redis://:hun\tter\nss2@h/0"}) {
    const std::string line = std::string("cannot reach ") + broken + " now";
    INFO(line);
    for (const std::string& shown :
         {dlq::http::detail::printable(line), dlq::http::detail::log_text(line)}) {
      CHECK(shown.find("ss2") == std::string::npos);
      CHECK(shown.find("hun") == std::string::npos);
      CHECK(shown.find("@h") != std::string::npos);  // the host is still shown
    }
  }
}

namespace {
// The exposition of ConsoleBackend (the default metrics_text, dlqctl serve's) over a queue.
struct DefaultMetricsBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::string metrics_text() override { return ConsoleBackend::metrics_text(); }
};
}  // namespace

TEST_CASE("indent_json changes only the whitespace between tokens") {
  using dlq::http::detail::indent_json;
  // keys in their stored order, numbers and escapes as stored
  CHECK(indent_json(R"({"z":1,"a":2.50,"m":"caf\u00e9","l":[3e2]})") ==
        "{\n  \"z\": 1,\n  \"a\": 2.50,\n  \"m\": \"caf\\u00e9\",\n  \"l\": [\n    3e2\n  ]\n}");
  // empty containers stay on one line; whitespace in the input is dropped between tokens
  CHECK(indent_json("{ \"e\" : { } ,\n \"f\":[ ] }") == "{\n  \"e\": {},\n  \"f\": []\n}");
  // structural characters and escaped quotes inside strings are copied as they are
  CHECK(indent_json(R"(["a,{b}:[c]", "q\"{,", "\\"])") ==
        "[\n  \"a,{b}:[c]\",\n  \"q\\\"{,\",\n  \"\\\\\"\n]");
  CHECK(indent_json("42") == "42");
  CHECK(indent_json("\"s p a c e\"") == "\"s p a c e\"");
  // a limit: the laid-out text stops soon after it (the caller cuts there), whatever the depth
  const std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  CHECK(indent_json(deep, 1000).size() < 1000 + 2 * deep.size());
  CHECK(indent_json(deep, 1000).substr(0, 1000) ==
        indent_json(deep.substr(0, 2000)).substr(0, 1000));
  // /api/entry's stored_text is the compact dump laid out: the text dump(2) makes
  const auto v = nlohmann::ordered_json::parse(
      R"({"q":"x","p":{"a":[1,[],{},[[2]],"s]{,:\"",null,true],"b":{"c":{}}},"e":[]})");
  CHECK(indent_json(v.dump()) == v.dump(2));
}

TEST_CASE("the console's default /metrics labels names that differ in non-UTF-8 bytes apart") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("a\xff", "{}", "boom");
  q.send_to_dlq("a\xfe", "{}", "boom");
  q.send_to_dlq("a\xfe", "{\"n\":2}", "boom");
  DefaultMetricsBackend backend(q);
  const std::string text = backend.metrics_text();
  INFO(text);
  // The library's escaping (dlq/metrics/prometheus.hpp, as `dlqctl metrics`): \xNN, not U+FFFD.
  CHECK(text.find("dlq_entries{queue=\"a\\\\xff\",list=\"dead\"} 1\n") != std::string::npos);
  CHECK(text.find("dlq_entries{queue=\"a\\\\xfe\",list=\"dead\"} 2\n") != std::string::npos);
  CHECK(text.find("\xEF\xBF\xBD") == std::string::npos);
}

TEST_CASE("a continuation token survives entries replayed from the head between pages") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 300; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "boom", 1, "w");
  dlq::http::QueueBackend<dlq::MemoryStorage> b(q);
  dlq::http::ScanLimits lim;
  lim.limit = 100;
  auto first = b.search("orders", {}, std::nullopt, lim);
  REQUIRE(first.entries.size() == 100);
  REQUIRE(first.next);
  // the token is opaque text and round-trips
  const auto token = first.next->encode();
  const auto cursor = dlq::http::Cursor::decode(token);
  CHECK(cursor.position == 100);
  q.replay("orders", dlq::ReplayOptions::first(40));  // the list moves left by 40
  auto second = b.search("orders", {}, cursor, lim);
  REQUIRE(second.entries.size() == 100);
  CHECK(second.entries.front().payload == "{\"n\":100}");
  CHECK(second.entries.back().payload == "{\"n\":199}");
  CHECK_FALSE(second.restarted);
  // a replay takes the head past the cursor (every entry seen last is gone): the place is
  // lost, the scan starts again at the head and says so; nothing is passed over
  const auto cursor2 = *second.next;                   // after n = 199
  q.replay("orders", dlq::ReplayOptions::first(200));  // n = 40 .. 239 go
  auto third = b.search("orders", {}, cursor2, lim);
  REQUIRE(!third.entries.empty());
  CHECK(third.restarted);
  CHECK(third.entries.front().payload == "{\"n\":240}");
  CHECK_THROWS_AS(dlq::http::Cursor::decode("!!!"), dlq::invalid_argument);
  CHECK_THROWS_AS(dlq::http::Cursor::decode("YWJj"), dlq::invalid_argument);  // "abc"
}

TEST_CASE("a filtered scan examines at most max_examined entries per call and resumes") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 5000; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                  i % 1000 == 999 ? "rare" : "common", 1, "w");
  dlq::http::QueueBackend<dlq::MemoryStorage> b(q);
  dlq::http::ScanLimits lim;
  lim.max_examined = 700;
  dlq::http::EntryQuery f;
  f.error = "RARE";
  std::optional<dlq::http::Cursor> at;
  std::vector<std::string> found;
  int calls = 0;
  do {
    auto page = b.search("orders", f, at, lim);
    CHECK(page.examined <= 700);
    for (const auto& e : page.entries)
      found.push_back(e.payload);
    at = page.next;
    ++calls;
  } while (at);
  CHECK(found == std::vector<std::string>{"{\"n\":999}", "{\"n\":1999}", "{\"n\":2999}",
                                          "{\"n\":3999}", "{\"n\":4999}"});
  CHECK(calls >= 8);
}

// A filter's text against a stored text of n bytes costs about n, however long the filter's
// text (m bytes): a search that compares at every position costs n x m where the stored text
// repeats the filter's start (the base64 of zeros, "AAAA…": 4000 'a' and a 'b' against 1 MiB
// of 'A' took 4.2 s at -O2, and a filter may hold 8 KiB in a request line, 1 MiB in a
// replay's or discard's body, so a page of /api/entries or a replay or discard by filter held
// a worker or an operation for minutes to hours).
TEST_CASE("a text condition costs the stored text's length and not times its own (round 12)") {
  const auto lower = [](std::string s) {
    for (char& c : s)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
  };
  std::uint32_t seed = 12;
  const auto next = [&] { return seed = seed * 1103515245u + 12345u; };
  for (int i = 0; i < 20000; ++i) {  // the same answers as a plain search of lower case
    std::string hay, needle;         // mostly 'a', some 'b'
    for (std::size_t n = next() >> 25; n > 0; --n)
      hay += "aAaAaAb"[(next() >> 16) % 7];
    if (i % 2 == 0 || hay.size() < 34) {  // short needles, 1 to 8 bytes
      for (std::size_t n = (next() >> 29) + 1; n > 0; --n)
        needle += "aAaAaAb"[(next() >> 16) % 7];
    } else {  // over 32 bytes: a piece of hay in the other case, half of them with a change
      const std::size_t len = 33 + (next() >> 16) % (hay.size() - 32);
      const std::size_t at = (next() >> 16) % (hay.size() - len + 1);
      for (std::size_t k = at; k < at + len; ++k)
        needle += hay[k] == 'a' ? 'A' : hay[k] == 'A' ? 'a' : 'B';
      if ((next() & 0x10000) != 0) {
        char& c = needle[(next() >> 16) % len];
        c = c == 'a' || c == 'A' ? 'b' : 'A';
      }
    }
    INFO(hay << " / " << needle);
    REQUIRE(dlq::http::EntryQuery::contains_nocase(hay, needle) ==
            (lower(hay).find(lower(needle)) != std::string::npos));
  }
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 2; ++i)
    q.send_to_dlq("blobs", std::string(128 << 10, 'A'), std::string(128 << 10, 'A'), 1, "w");
  dlq::http::QueueBackend<dlq::MemoryStorage> b(q);
  dlq::http::EntryQuery f;
  f.payload = std::string(2000, 'a') + "b";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(b.search("blobs", f, std::nullopt, {}).entries.empty());
  f.payload.clear();
  f.error = std::string(2000, 'a') + "b";
  CHECK(b.search("blobs", f, std::nullopt, {}).entries.empty());
  f.error = std::string(2000, 'a');
  CHECK(b.search("blobs", f, std::nullopt, {}).entries.size() == 2);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 1.0);  // 11-23 s in a Debug build (4 x 128 KiB x 2000 compares)
}

TEST_CASE("console API over memory: pages, entry, replay with progress, JSON errors") {
  Served s;
  for (int i = 0; i < 120; ++i)
    s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                        i % 2 ? "timeout" : "declined", 1, i % 3 ? "w1" : "w2");
  auto c = s.client();

  auto page = body_of(c.Get("/api/entries?queue=orders&limit=50&error=TIMEOUT"));
  CHECK(page["entries"].size() == 50);
  CHECK(page["filtered"] == true);
  REQUIRE(page["next"].is_string());
  const std::string id = page["entries"][0]["id"];
  auto entry = body_of(c.Get(("/api/entry?queue=orders&id=" + id).c_str()));
  CHECK(entry["payload_kind"] == "json");
  CHECK(entry["error"] == "timeout");

  auto op = body_of(post(c, "/api/replay", {{"queue", "orders"}, {"filter", {{"worker", "w2"}}}}));
  auto done = wait_op(c, op["id"]);
  CHECK(done["state"] == "done");
  CHECK(done["report"]["replayed"] == 40);
  CHECK(s.queue.size("orders") == 80);

  CHECK(error_code(c.Get("/api/entries?queue=missing")) == "unknown_queue");
  CHECK(error_code(c.Post("/api/replay", "{oops", "application/json")) == "bad_json");
  CHECK(error_code(c.Post("/api/replay", "queue=orders", "text/plain")) ==
        "unsupported_media_type");
  auto r = c.Post("/api/replay", std::string(2 << 20, ' '), "application/json");
  REQUIRE(r);
  CHECK(r->status == 413);
  CHECK(error_code(post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "ORDERS"}})) ==
        "confirmation_mismatch");
  CHECK(s.queue.size("orders") == 80);
  httplib::Headers evil{{"Host", "evil.example"}};
  CHECK(error_code(c.Get("/api/queues", evil)) == "forbidden_host");
  // its hint names the address to use; the redaction of the message left it "http://***/"
  // (round 7): a hint's example must not be credential-shaped
  const std::string hint = body_of(c.Get("/api/queues", evil))["error"]["message"];
  INFO(hint);
  CHECK(hint.find("***") == std::string::npos);
  CHECK(hint.find("127.0.0.1") != std::string::npos);
}

TEST_CASE("the console refuses queue names longer than 1024 bytes with a typed error") {
  Served s;
  const std::string longest(1024, 'q');
  const std::string too_long(1025, 'q');
  s.queue.send_to_dlq(longest, "{}", "e");
  s.queue.send_to_dlq("orders", "{}", "e");
  auto c = s.client();
  CHECK(body_of(c.Get(("/api/entries?queue=" + longest).c_str()))["entries"].size() == 1);
  const auto refused = [](const httplib::Result& r) {
    REQUIRE(r);
    INFO(r->body);
    CHECK(r->status == 400);
    CHECK(body_of(r)["error"]["message"].get<std::string>().find("longer than 1024 bytes") !=
          std::string::npos);
  };
  refused(c.Get(("/api/entries?queue=" + too_long).c_str()));
  refused(c.Get(("/api/corrupt?queue=" + too_long).c_str()));
  refused(post(c, "/api/replay", {{"queue", too_long}, {"all", true}}));
  refused(post(c, "/api/replay", {{"queue", "orders"}, {"all", true}, {"to", too_long}}));
  CHECK(s.queue.size("orders") == 1);
}

TEST_CASE("page_full: a page ends at limit entries or at the entry that reaches max_bytes") {
  dlq::http::ScanLimits l;
  l.limit = 3;
  l.max_bytes = 100;
  CHECK_FALSE(dlq::http::page_full(0, 0, l));
  CHECK_FALSE(dlq::http::page_full(2, 99, l));
  CHECK(dlq::http::page_full(3, 0, l));
  CHECK(dlq::http::page_full(1, 100, l));  // one entry may exceed the bound alone
  l.max_bytes = 0;                         // no byte bound
  CHECK_FALSE(dlq::http::page_full(2, std::size_t{1} << 40, l));
  l.limit = 0;  // at least one entry
  CHECK_FALSE(dlq::http::page_full(0, 0, l));
  CHECK(dlq::http::page_full(1, 0, l));
}

TEST_CASE("a page of /api/corrupt is bounded by bytes like /api/entries") {
  dlq::http::ConsoleOptions o;
  o.max_page_bytes = 100000;
  Served s(o);
  for (int i = 0; i < 10; ++i)  // unreadable: set aside as corrupt by the replay
    s.queue.storage().push({"orders", {}, {}, std::to_string(i) + std::string(40000, 'x')});
  s.queue.replay_all("orders");
  REQUIRE(s.queue.corrupt_size("orders") == 10);
  auto c = s.client();
  std::size_t start = 0;
  std::vector<std::size_t> pages;
  std::string seen;
  while (pages.size() < 10) {
    auto page = body_of(
        c.Get(("/api/corrupt?queue=orders&limit=100&start=" + std::to_string(start)).c_str()));
    CHECK(page["total"] == 10);
    pages.push_back(page["items"].size());
    for (const auto& it : page["items"])
      seen += it["raw_text"].get<std::string>().substr(0, 1);
    if (page["next"].is_null()) break;
    start = page["next"].get<std::size_t>();
  }
  // a page ends after the item that reaches 100000 stored bytes: 3 items of 40001
  CHECK(pages == std::vector<std::size_t>{3, 3, 3, 1});
  CHECK(seen == "0123456789");
}

TEST_CASE("a paced replay is cancelled between batches; the limit on running replays holds") {
  dlq::http::ConsoleOptions o;
  o.max_operations = 1;
  Served s(o);
  for (int i = 0; i < 400; ++i)
    s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "x", 1, "w");
  auto c = s.client();
  auto op = body_of(post(c, "/api/replay", {{"queue", "orders"}, {"all", true}, {"rate", 100}}));
  REQUIRE(op["state"] == "running");
  auto second = post(c, "/api/replay", {{"queue", "orders"}, {"all", true}});
  CHECK(second->status == 429);
  CHECK(error_code(second) == "too_many_operations");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(post(c, "/api/cancel", {{"id", op["id"]}})->status == 202);
  auto done = wait_op(c, op["id"]);
  CHECK(done["state"] == "cancelled");
  const std::size_t replayed = done["report"]["replayed"];
  CHECK(replayed > 0);
  CHECK(replayed < 400);
  CHECK(s.queue.size("orders") + replayed == 400);  // exactly what the report says moved
}

TEST_CASE("token and read-only are enforced on the server") {
  dlq::http::ConsoleOptions o;
  o.token = "tok-0123456789abcdef";
  o.read_only = true;
  Served s(o);
  s.queue.send_to_dlq("orders", "{}", "x", 1, "w");
  auto c = s.client();
  auto r = c.Get("/api/queues");
  CHECK(r->status == 401);
  CHECK(error_code(r) == "unauthorized");
  CHECK(c.Get("/metrics")->status == 401);
  CHECK(c.Get("/")->status == 200);  // the page itself holds no data
  httplib::Headers auth{{"Authorization", "Bearer tok-0123456789abcdef"}};
  CHECK(c.Get("/api/queues", auth)->status == 200);
  auto w = post(c, "/api/replay", {{"queue", "orders"}, {"all", true}}, auth);
  CHECK(w->status == 403);
  CHECK(error_code(w) == "read_only");
  CHECK(s.queue.size("orders") == 1);
  // a refused POST leaves a kept-alive connection usable (its body was dropped)
  httplib::Client kept("127.0.0.1", s.port);
  kept.set_keep_alive(true);
  CHECK(kept.Post("/api/replay", std::string(100000, ' '), "application/json")->status == 401);
  CHECK(kept.Post("/api/replay", auth, "x=1", "text/plain")->status == 403);
  auto after = kept.Get("/api/queues", auth);
  REQUIRE(after);
  CHECK(after->status == 200);
  CHECK(body_of(after)["read_only"] == true);
}

TEST_CASE("mounted under a prefix; a replay by ids names every id it moved") {
  dlq::http::ConsoleOptions o;
  o.prefix = "/ops/dlq/";
  Served s(o);
  const auto a = s.queue.send_to_dlq("orders", "{\"a\":1}", "x", 1, "w");
  s.queue.send_to_dlq("orders", "{\"b\":2}", "x", 1, "w");
  auto c = s.client();
  auto page = c.Get("/ops/dlq/");
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->get_header_value("Content-Security-Policy").find("script-src 'self'") !=
        std::string::npos);
  auto bare = c.Get("/ops/dlq");
  REQUIRE(bare);
  CHECK(bare->status == 302);
  CHECK(bare->get_header_value("Location") == "/ops/dlq/");
  CHECK(c.Get("/api/queues")->status == 404);  // nothing outside the prefix
  auto op =
      body_of(post(c, "/ops/dlq/api/replay",
                   {{"queue", "orders"}, {"ids", {a, "0190c000-0000-7000-8000-000000000000"}}}));
  const std::string path = "/ops/dlq/api/operation?id=" + op["id"].get<std::string>();
  auto done = body_of(c.Get(path.c_str()));
  for (int i = 0; i < 2000 && done["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    done = body_of(c.Get(path.c_str()));
  }
  CHECK(done["report"]["replayed_ids"] == json::array({a}));
  CHECK(done["report"]["skipped"][0]["reason"] == "not_found");
  CHECK(s.queue.storage().source_pop("orders") == std::optional<std::string>("{\"a\":1}"));
  dlq::http::ConsoleOptions bad;
  bad.prefix = "/a(b)";
  CHECK_THROWS_AS(dlq::http::Console(s.backend, bad), dlq::invalid_argument);
}

TEST_CASE("discard deletes exactly the entries matching the query; dry run and cancel") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 3000; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", i % 7 == 0 ? "gone" : "kept", 1,
                  "w");
  dlq::http::QueueBackend<dlq::MemoryStorage> b(q);
  dlq::http::EntryQuery query;
  query.error = "gone";
  auto dry = b.discard("orders", query, true, nullptr, {});
  CHECK(dry.matched == 429);
  CHECK(dry.deleted == 0);
  CHECK(q.size("orders") == 3000);
  std::atomic<bool> cancel{false};
  std::size_t calls = 0;
  auto done =
      b.discard("orders", query, false, &cancel, [&](const dlq::http::DiscardReport&) { ++calls; });
  CHECK(done.deleted == 429);
  CHECK(calls >= 1);
  CHECK(q.size("orders") == 3000 - 429);
  std::size_t expect = 0;  // the rest, in order, none of the matches
  for (const auto& e : q.peek("orders", 0, 3000)) {
    while (expect % 7 == 0)
      ++expect;
    CHECK(e.payload == "{\"n\":" + std::to_string(expect) + "}");
    ++expect;
  }
  cancel = true;
  query.error = "kept";
  CHECK(b.discard("orders", query, false, &cancel, {}).cancelled);
  CHECK(q.size("orders") == 3000 - 429);
  CHECK_THROWS_AS(b.discard("orders", {}, false, nullptr, {}), dlq::invalid_argument);
}

namespace {

// A console over `backend` on 127.0.0.1:<free port>; stopped and joined on destruction.
struct ServedBackend {
  explicit ServedBackend(dlq::http::ConsoleBackend& backend, dlq::http::ConsoleOptions o = {})
      : console(backend, std::move(o)) {
    console.mount(server);
    port = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ServedBackend() {
    server.stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(30, 0);
    return c;
  }
  dlq::http::Console console;
  httplib::Server server;
  int port = 0;
  std::thread thread;
};

// A backend that keeps ConsoleBackend's own discard (a scan that removes matches by id), as
// dlqctl serve's did, and lets a test act between the scan's pages.
struct ScanDiscardBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  dlq::http::DiscardReport discard(
      std::string_view queue, const dlq::http::EntryQuery& query, bool dry_run,
      const std::atomic<bool>* cancel,
      const std::function<void(const dlq::http::DiscardReport&)>& progress) override {
    return ConsoleBackend::discard(queue, query, dry_run, cancel, progress);  // NOLINT
  }
  dlq::http::SearchPage search(std::string_view queue, const dlq::http::EntryQuery& filter,
                               const std::optional<dlq::http::Cursor>& from,
                               const dlq::http::ScanLimits& limits) override {
    auto page = ConsoleBackend::search(queue, filter, from, limits);
    if (between_pages && pages++ == 0) between_pages();
    return page;
  }
  std::function<void()> between_pages;
  int pages = 0;
};

// 1500 entries that match are present when the delete starts; after it read its first
// entries, another client replays 1000 of them and 1700 new matching failures arrive (the
// issue's numbers). The delete must delete only entries present at its start: the 500 nobody
// took, reported as matched 500 — not the new ones.
template <class Backend>
void discard_under_churn(dlq::DeadLetterQueue<dlq::MemoryStorage>& q, Backend& backend,
                         std::function<void()>& hook) {
  std::vector<std::string> old_ids;
  for (int i = 0; i < 1500; ++i)
    old_ids.push_back(
        q.send_to_dlq("orders", "{\"old\":" + std::to_string(i) + "}", "timeout", 1, "w"));
  dlq::DeadLetterQueue<dlq::MemoryStorage&> other(q.storage());
  std::vector<std::string> new_ids;
  bool interfered = false;
  hook = [&] {
    if (interfered) return;
    interfered = true;
    std::vector<std::string> taken;
    for (std::size_t i = 500; i < 1500; ++i)  // the newest 1000, the tail entry too
      taken.push_back(old_ids[i]);
    REQUIRE(other.replay_ids("orders", taken).replayed == 1000);
    for (int k = 0; k < 1700; ++k)
      new_ids.push_back(
          other.send_to_dlq("orders", "{\"new\":" + std::to_string(k) + "}", "timeout", 1, "w"));
  };
  ServedBackend s(backend);
  auto c = s.client();
  auto r = post(c, "/api/discard", {{"queue", "orders"}, {"filter", {{"error", "timeout"}}}});
  REQUIRE(r);
  REQUIRE(r->status == 202);
  const json op = wait_op(c, body_of(r)["id"]);
  CHECK(interfered);
  CHECK(op["state"] == "done");
  CHECK(op["report"]["matched"] == 500);
  CHECK(op["report"]["deleted"] == 500);
  std::vector<std::string> left;
  for (const auto& e : q.peek("orders", 0, 10000))
    left.push_back(e.id);
  CHECK(left == new_ids);
}

}  // namespace

TEST_CASE("POST /api/discard deletes only entries present at its start (library discard)") {
  std::function<void()> hook;
  dlq::Options o;
  o.replay_batch_items = 100;
  o.on_event = [&hook](const dlq::Event& e) {
    if (e.kind == dlq::EventKind::discarded && hook) hook();
  };
  dlq::DeadLetterQueue<dlq::MemoryStorage> q(dlq::MemoryStorage{}, o);
  dlq::http::QueueBackend<dlq::MemoryStorage> backend(q);
  discard_under_churn(q, backend, hook);
}

TEST_CASE("POST /api/discard deletes only entries present at its start (ConsoleBackend's scan)") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  ScanDiscardBackend backend(q);
  discard_under_churn(q, backend, backend.between_pages);
}

TEST_CASE("the scan-based discard deletes every match of a dense filter") {
  // Runs of 40 matches: a page of 500 matches ends inside a run, so every entry the scan
  // examined last is one the discard deletes before it reads on.
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 3000; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", i % 50 < 40 ? "gone" : "kept", 1,
                  "w");
  ScanDiscardBackend b(q);
  dlq::http::EntryQuery query;
  query.error = "gone";
  const auto r = b.discard("orders", query, false, nullptr, {});
  CHECK(r.matched == 2400);
  CHECK(r.deleted == 2400);
  REQUIRE(q.size("orders") == 600);
  for (const auto& e : q.peek("orders", 0, 600))
    CHECK(e.error == "kept");
}

namespace {

// A store whose metrics fail with an exception from outside dlq, its message spread over lines.
struct FailingMetricsBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::string metrics_text() override {
    throw std::runtime_error("scrape failed\n[dlq.http] forged: purge 'orders' done");
  }
};

}  // namespace

TEST_CASE("an unexpected error is logged on one line, its path and message cleaned") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  FailingMetricsBackend backend(q);
  std::mutex m;
  std::vector<std::string> lines;
  dlq::http::ConsoleOptions o;
  o.log = [&](dlq::LogLevel, std::string_view line) {
    std::lock_guard<std::mutex> lock(m);
    lines.emplace_back(line);
  };
  ServedBackend s(backend, std::move(o));
  auto c = s.client();
  auto r = c.Get("/metrics");
  REQUIRE(r);
  CHECK(r->status == 500);
  std::lock_guard<std::mutex> lock(m);
  REQUIRE(lines.size() == 1);
  INFO(lines[0]);
  CHECK(lines[0].find('\n') == std::string::npos);
  CHECK(lines[0].find('\r') == std::string::npos);
  CHECK(lines[0].find("/metrics: unexpected error: scrape failed") != std::string::npos);
}

// A memory backend that counts the listings (a SCAN of the whole database on Redis) and can
// be made unreachable.
struct CountingBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::atomic<int> listings{0};
  std::atomic<bool> down{false};
  std::vector<std::string> queues() override {
    ++listings;
    if (down) throw dlq::connection_error("store down");
    return QueueBackend::queues();
  }
  dlq::QueueNames list_queues() override {
    ++listings;
    if (down) throw dlq::connection_error("store down");
    return QueueBackend::list_queues();
  }
  std::size_t size(std::string_view queue) override {
    if (down) throw dlq::connection_error("store down");
    return QueueBackend::size(queue);
  }
};

TEST_CASE("/healthz checks reachability without listing the queues (issue 27)") {
  // The listing is a SCAN of the whole Redis database: with millions of keys, /healthz was
  // slow and heavy. It must not list at all.
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  for (int i = 0; i < 50; ++i)
    queue.send_to_dlq("q" + std::to_string(i), "{}", "e");
  CountingBackend backend(queue);
  dlq::http::Console console(backend, {});
  dlq::http::GuardedServer server;
  console.mount(server);
  const int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Get("/healthz");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  CHECK(backend.listings == 0);
  backend.down = true;  // unreachable: 503, still without a listing
  auto r = c.Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(body_of(r)["error"]["code"] == "store_unavailable");
  CHECK(backend.listings == 0);
  server.stop();
  t.join();
}

// Asks `path` of a console over `backend`, whose store calls hang 300 ms and fail, from 12
// clients at once: every answer is `expected`, within two such calls (at most the one
// running when it came, then one).
template <class Backend>
void ask_at_once(Backend& backend, const char* path, int expected) {
  dlq::http::Console console(backend, {});
  dlq::http::GuardedServer server;
  console.mount(server);
  const int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  constexpr int kAsking = 12;
  std::vector<int> status(kAsking, 0);
  std::vector<long long> took_ms(kAsking, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kAsking; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30, 0);
      const auto start = std::chrono::steady_clock::now();
      auto r = c.Get(path);
      took_ms[i] = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
      status[i] = r ? r->status : -1;
    });
  }
  for (auto& c : clients)
    c.join();
  for (int i = 0; i < kAsking; ++i) {
    INFO("request " << i << " took " << took_ms[i] << " ms");
    CHECK(status[i] == expected);
    CHECK(took_ms[i] < 2 * 300 + 250);
  }
  server.stop();
  t.join();
}

// A backend whose reachability check hangs for `delay` (a frozen Redis: SIGSTOP) and fails.
struct FrozenBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::atomic<int> probes{0};
  std::chrono::milliseconds delay{300};
  void check_reachable() override {
    ++probes;
    std::this_thread::sleep_for(delay);
    throw dlq::timeout_error("no answer within 300 ms");
  }
};

TEST_CASE("/healthz answers within one probe time however many ask at once (round 7)") {
  // dlqctl serve against a SIGSTOPped Redis (--timeout 5s): 16 /healthz at once were
  // answered after 5, 10, 15 and 20 s (four at a time), each holding a worker meanwhile.
  // Probes asked while one runs share its answer.
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  FrozenBackend backend(queue);
  ask_at_once(backend, "/healthz", 503);
  CHECK(backend.probes <= 3);
}

// A backend whose metrics_text hangs for `delay` (a frozen Redis: SIGSTOP) and fails.
struct FrozenMetricsBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::atomic<int> reads{0};
  std::chrono::milliseconds delay{300};
  std::string metrics_text() override {
    ++reads;
    std::this_thread::sleep_for(delay);
    throw dlq::timeout_error("no answer within 300 ms");
  }
};

TEST_CASE("/metrics answers within one read time however many ask at once (round 7)") {
  // dlqctl serve against a SIGSTOPped Redis: 8 /metrics at once queued behind each other's
  // read of the store, as /healthz did before its shared probe.
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  FrozenMetricsBackend backend(queue);
  ask_at_once(backend, "/metrics", 504);  // store_timeout
  CHECK(backend.reads <= 3);
}

// A memory backend that records the stored bytes of its largest corrupt() read.
struct CorruptReadBackend : dlq::http::QueueBackend<dlq::MemoryStorage> {
  using QueueBackend::QueueBackend;
  std::size_t most_bytes = 0;
  std::vector<dlq::Entry> corrupt(std::string_view queue, std::size_t start,
                                  std::size_t count) override {
    auto out = QueueBackend::corrupt(queue, start, count);
    std::size_t bytes = 0;
    for (const auto& e : out)
      bytes += e.raw.size();
    most_bytes = std::max(most_bytes, bytes);
    return out;
  }
};

TEST_CASE("/api/corrupt sizes its reads by the items' bytes like /api/entries (round 7)") {
  // dlqctl serve, 100 corrupt items of 4 MiB: a page read them 16 at a time, peak +99 to
  // +116 MiB a request (/api/entries: +16 MiB). 20 items of 1 MiB here: reads of 16 MiB.
  dlq::DeadLetterQueue<dlq::MemoryStorage> queue;
  for (int i = 0; i < 20; ++i)
    queue.storage().push({"orders", {}, {}, std::to_string(i % 10) + std::string(1 << 20, 'x')});
  queue.replay_all("orders");
  REQUIRE(queue.corrupt_size("orders") == 20);
  CorruptReadBackend backend(queue);
  dlq::http::ConsoleOptions o;
  o.max_page_bytes = std::size_t{64} << 20;
  dlq::http::Console console(backend, o);
  dlq::http::GuardedServer server;
  console.mount(server);
  const int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(30, 0);
  auto r = c.Get("/api/corrupt?queue=orders&limit=100");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(body_of(r)["items"].size() == 20);
  INFO("largest read: " << backend.most_bytes << " bytes");
  CHECK(backend.most_bytes <= (std::size_t{8} << 20) + (1 << 20));  // ScanLimits::read_bytes
  server.stop();
  t.join();
}


TEST_CASE("/api/queues and /metrics answer at most 1000 queues, the rest counted (round 10)") {
  // Round 10 of issue 27: the listings answered every queue found, whatever their number and
  // the length of their names (up to 1024 bytes): 20,000 foreign lists `dlq:{many00000-LLL…}`
  // of 900-byte names made `dlqctl serve` answer /api/queues with 20 MB and /metrics with
  // 38 MB, 4 of each at once 10-23 s and VmHWM 48 -> 745 MB (Release). Now each answers the
  // first ConsoleOptions::max_listed_queues (1000) queues in the order the store lists them,
  // within max_listed_name_bytes (1 MiB) of names, and counts the rest (`omitted_queues`,
  // gauge dlq_queues_omitted). Here 12,000 queues of 1000-byte names in a MemoryStorage.
  Served s;
  for (int i = 0; i < 12000; ++i)
    s.queue.storage().push({std::to_string(100000 + i) + std::string(994, 'L'), {}, {}, "x"});
  auto c = s.client();
  const auto queues = c.Get("/api/queues");
  REQUIRE(queues);
  CHECK(queues->status == 200);
  const auto metrics = c.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  INFO("/api/queues " << queues->body.size() << " bytes, /metrics " << metrics->body.size()
                      << " bytes; max_page_bytes " << s.console.options().max_page_bytes);
  CHECK(queues->body.size() <= s.console.options().max_page_bytes);
  CHECK(metrics->body.size() <= s.console.options().max_page_bytes);
  const auto j = nlohmann::json::parse(queues->body);
  REQUIRE(j["queues"].size() == 1000);
  CHECK(j["omitted_queues"] == 11000);
  CHECK(j["skipped_queues"] == 0);
  CHECK(j["limits"]["max_listed_queues"] == 1000);
  // the first ones in the store's order (sorted)
  CHECK(j["queues"][0]["name"] == "100000" + std::string(994, 'L'));
  CHECK(j["queues"][999]["name"] == "100999" + std::string(994, 'L'));
  CHECK(metrics->body.find("\ndlq_queues_omitted 11000\n") != std::string::npos);
  CHECK(metrics->body.find("100999" + std::string(994, 'L')) != std::string::npos);
  CHECK(metrics->body.find("101000" + std::string(994, 'L')) == std::string::npos);
}

TEST_CASE("the listings' bound by bytes of names and its setting (round 10)") {
  // 300 queues of 1000-byte names under a 100,000-byte bound: 100 answered, 200 counted;
  // a few short names: all answered, 0 omitted (the gauge is there, at 0, for an alert).
  dlq::http::ConsoleOptions o;
  o.max_listed_name_bytes = 100000;
  Served s(o);
  for (int i = 0; i < 300; ++i)
    s.queue.storage().push({std::to_string(100000 + i) + std::string(994, 'L'), {}, {}, "x"});
  auto c = s.client();
  const auto queues = c.Get("/api/queues");
  REQUIRE(queues);
  const auto j = nlohmann::json::parse(queues->body);
  CHECK(j["queues"].size() == 100);
  CHECK(j["omitted_queues"] == 200);
  const auto metrics = c.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("\ndlq_queues_omitted 200\n") != std::string::npos);

  Served few;
  few.queue.storage().push({"a", {}, {}, "x"});
  few.queue.storage().push({"b", {}, {}, "x"});
  auto fc = few.client();
  const auto small = nlohmann::json::parse(fc.Get("/api/queues")->body);
  CHECK(small["queues"].size() == 2);
  CHECK(small["omitted_queues"] == 0);
  CHECK(fc.Get("/metrics")->body.find("\ndlq_queues_omitted 0\n") != std::string::npos);
}
}  // namespace test_console
