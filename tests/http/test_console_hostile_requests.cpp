// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::http::Console against hostile requests, in-process over dlq::MemoryStorage on a loopback
// httplib::Server: secrets in messages, numbers that overflow, bad field types, every
// mutating route under token / read-only / cross-site rules, garbled continuation tokens.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

#include "http/console_fixture.hpp"

namespace test_console_hostile_requests {

namespace {

using namespace console_test;

void fill(Served& s, int n) {
  for (int i = 0; i < n; ++i)
    s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "timeout", 1, "w1");
}

std::vector<dlq::Entry> q_peek_all(dlq::DeadLetterQueue<dlq::MemoryStorage>& q) {
  return q.peek("orders", 0, q.size("orders") + 10);
}

const std::vector<std::string> mutating = {"/api/replay", "/api/discard", "/api/cancel",
                                           "/api/delete", "/api/purge",   "/api/recover"};

}  // namespace

TEST_CASE("redact_secrets masks passwords the Redis URL parser accepts ('/', '@', ?password=)") {
  // dlq::RedisOptions::from_url takes everything before the last '@' as user-info, so a
  // password may hold '/' and '@'; it also reads ?password=.
  const std::string a = dlq::http::redact_secrets("cannot reach redis://:pa/ss@127.0.0.1:1/0");
  CHECK(a.find("pa/ss") == std::string::npos);
  CHECK(a.find("ss@") == std::string::npos);
  const std::string b = dlq::http::redact_secrets("cannot reach redis://u:p@ss@127.0.0.1:1/0 x");
  CHECK(b.find("p@ss") == std::string::npos);
  CHECK(b.find("ss@") == std::string::npos);
  CHECK(b.find("127.0.0.1:1/0 x") != std::string::npos);
  const std::string c =
      dlq::http::redact_secrets("cannot reach redis://127.0.0.1:1/0?password=hunter2 now");
  CHECK(c.find("hunter2") == std::string::npos);
  // a secret value runs to the end of its line (a password may hold a space: round 10)
  CHECK(c == "cannot reach redis://127.0.0.1:1/0?password=***");
  // what it did right stays right
  CHECK(dlq::http::redact_secrets("redis://:pw@h/0 and redis://h2/1") ==
        "redis://***@h/0 and redis://h2/1");
  CHECK(dlq::http::redact_secrets("no url here") == "no url here");
}

TEST_CASE("a numeric query parameter too large to represent is refused, not wrapped around") {
  Served s;
  fill(s, 3);
  auto c = s.client();
  // 2^64 * 10^45: wraps to 0 in 64-bit arithmetic
  const std::string huge = "18446744073709551616" + std::string(45, '0');
  auto r = c.Get(("/api/entries?queue=orders&limit=" + huge).c_str());
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(error_code(r) == "bad_parameter");
  auto k = c.Get(("/api/corrupt?queue=orders&start=" + huge).c_str());
  REQUIRE(k);
  CHECK(k->status == 400);
  for (const char* v : {"-1", "1e3", "0x10", " 5", "5 ", "abc"}) {
    auto b = c.Get("/api/entries", httplib::Params{{"queue", "orders"}, {"limit", v}},
                   httplib::Headers{});
    REQUIRE(b);
    CHECK(b->status == 400);
  }
}

TEST_CASE("an age filter too large to represent is refused, not overflowed") {
  Served s;
  fill(s, 3);
  auto c = s.client();
  for (const char* age : {"999999999999d", "999999999999h", "300000y"}) {
    auto r = c.Get("/api/entries", httplib::Params{{"queue", "orders"}, {"max_age", age}},
                   httplib::Headers{});
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(error_code(r) == "bad_parameter");
  }
  auto ok = body_of(c.Get("/api/entries?queue=orders&max_age=36500d"));
  CHECK(ok["entries"].size() == 3);
  auto op =
      post(c, "/api/replay", {{"queue", "orders"}, {"filter", {{"min_age", "571849066285s"}}}});
  REQUIRE(op);
  CHECK(op->status == 400);
  if (op->status == 202) {  // what it must then do: move nothing (no entry is that old)
    const std::string id = body_of(op)["id"];
    json done;
    for (int i = 0; i < 2000; ++i) {
      done = body_of(c.Get(("/api/operation?id=" + id).c_str()));
      if (done["state"] != "running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(done["report"]["replayed"] == 0);
  }
  CHECK(s.queue.size("orders") == 3);
}

TEST_CASE("fields of the wrong JSON type get 400 bad_field, never 500") {
  Served s;
  fill(s, 2);
  auto c = s.client();
  const std::vector<json> bodies = {
      {{"queue", "orders"}, {"all", 1}},
      {{"queue", "orders"}, {"all", "yes"}},
      {{"queue", "orders"}, {"all", true}, {"dry_run", "no"}},
      {{"queue", "orders"}, {"all", true}, {"rate", "fast"}},
      {{"queue", "orders"}, {"all", true}, {"limit", -1}},
      {{"queue", "orders"}, {"all", true}, {"to", 5}},
      {{"queue", 5}, {"all", true}},
      {{"queue", "orders"}, {"ids", "abc"}},
      {{"queue", "orders"}, {"ids", json::array({1, 2})}},
      {{"queue", "orders"}, {"filter", "timeout"}},
      {{"queue", "orders"}, {"filter", {{"error", 5}}}},
  };
  for (const auto& b : bodies) {
    INFO(b.dump());
    auto r = post(c, "/api/replay", b);
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("every mutating route needs the token, and POST only") {
  dlq::http::ConsoleOptions o;
  o.token = "tok-0123456789abcdef";
  Served s(o);
  fill(s, 2);
  auto c = s.client();
  const json body = {{"queue", "orders"},
                     {"all", true},
                     {"ids", json::array({"x"})},
                     {"confirm", "orders"},
                     {"id", "op-1"}};
  for (const auto& path : mutating) {
    INFO(path);
    for (const httplib::Headers& h :
         {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer tok-0123456789abcdeX"}},
          httplib::Headers{{"Authorization", "bearer tok-0123456789abcdef"}},
          httplib::Headers{{"Authorization", "Bearer tok-0123456789abcde"}},
          httplib::Headers{{"Authorization", "Bearer tok-0123456789abcdef0"}},
          httplib::Headers{{"X-DLQ-Token", ""}}, httplib::Headers{{"Host", "localhost"}}}) {
      auto r = post(c, path, body, h);
      REQUIRE(r);
      CHECK(r->status == 401);
    }
    // other methods and path spellings do not reach the handler
    auto g = c.Get(path.c_str());
    REQUIRE(g);
    CHECK(g->status != 200);
    for (const std::string& alt :
         {"/" + path, path + "/", std::string("/api/%72eplay"), path + "?x=1"}) {
      auto a = post(c, alt, body);
      REQUIRE(a);
      CHECK((a->status == 401 || a->status == 404));
    }
  }
  CHECK(s.queue.size("orders") == 2);
  for (const char* path :
       {"/api/queues", "/api/entries?queue=orders", "/api/operations",
        "/api/entry?queue=orders&id=x", "/api/corrupt?queue=orders", "/metrics"}) {
    INFO(path);
    CHECK(c.Get(path)->status == 401);
    CHECK(c.Head(path)->status == 401);
  }
}

TEST_CASE("read-only refuses every mutating route, whatever the body") {
  dlq::http::ConsoleOptions o;
  o.read_only = true;
  Served s(o);
  fill(s, 2);
  auto c = s.client();
  const json body = {{"queue", "orders"},
                     {"all", true},
                     {"ids", json::array({"x"})},
                     {"confirm", "orders"},
                     {"filter", {{"error", "timeout"}}}};
  for (const auto& path : mutating) {
    INFO(path);
    auto r = post(c, path, body);
    REQUIRE(r);
    CHECK(r->status == 403);
    CHECK(error_code(r) == "read_only");
  }
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("without a token, a Host header that is not exactly a loopback name is refused") {
  Served s;
  fill(s, 2);
  auto c = s.client();
  for (const char* host : {"evil.example", "evil.example:80", "127.0.0.1.evil.example",
                           "localhost.evil.example", "LOCALHOST.evil.example", "[::ffff:7f00:1]",
                           "[::1].evil.example", "[::1]evil.example", "[::1]:80x", "10.0.0.1",
                           "127.0.0.1@evil.example", "0.0.0.0", "127.0.0", "127.0.0.1.", ""}) {
    INFO(host);
    auto r = c.Get("/api/queues", httplib::Headers{{"Host", host}});
    REQUIRE(r);
    CHECK(r->status == 403);
    auto w = post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "orders"}},
                  httplib::Headers{{"Host", host}});
    REQUIRE(w);
    CHECK(w->status == 403);
    CHECK(s.queue.size("orders") == 2);
  }
  for (const char* host : {"127.0.0.1:8080", "localhost:1", "[::1]:8080", "[::1]", "127.9.9.9"}) {
    INFO(host);
    CHECK(c.Get("/api/queues", httplib::Headers{{"Host", host}})->status == 200);
  }
}

TEST_CASE("without a token, bodies a cross-site form can send are refused before any change") {
  Served s;
  fill(s, 2);
  auto c = s.client();
  const std::string body = "{\"queue\":\"orders\",\"confirm\":\"orders\"}";
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded",
                           "text/plain; application/json", "Application/JSON", ""}) {
    INFO(type);
    auto r = c.Post("/api/purge", body, type);
    REQUIRE(r);
    CHECK(r->status == 415);
    CHECK(s.queue.size("orders") == 2);
  }
  // a real multipart form (what <form enctype=multipart/form-data> sends)
  httplib::MultipartFormDataItems form = {{"queue", "orders", "", ""},
                                          {"confirm", "orders", "", ""}};
  auto m = c.Post("/api/purge", form);
  REQUIRE(m);
  CHECK(m->status >= 400);
  CHECK(m->status < 500);
  CHECK(!m->has_header("EXCEPTION_WHAT"));  // httplib's text of an escaped exception
  CHECK(m->get_header_value("Content-Type").find("application/json") == 0);
  // ... and its body is dropped so that a kept-alive connection stays usable
  httplib::Client kept("127.0.0.1", s.port);
  kept.set_keep_alive(true);
  REQUIRE(kept.Post("/api/purge", form));
  auto after = kept.Get("/api/queues");
  REQUIRE(after);
  CHECK(after->status == 200);
  CHECK(s.queue.size("orders") == 2);
  // a body-less POST
  auto e = c.Post("/api/purge");
  REQUIRE(e);
  CHECK(e->status == 415);
  CHECK(s.queue.size("orders") == 2);
  // a JSON type with parameters is fine
  auto ok = c.Post("/api/delete", "{\"queue\":\"orders\",\"ids\":[\"nope\"]}",
                   "application/json; charset=utf-8");
  REQUIRE(ok);
  CHECK(ok->status == 200);
}

TEST_CASE("garbled or forged continuation tokens get 400, never a crash") {
  Served s;
  fill(s, 5);
  auto c = s.client();
  const std::string anchor = "0123456789abcdef";
  // a token of another queue, from before a purge, or forged far past the end: none of its
  // entries is found, so the scan starts again at the head and says so
  const std::string other = dlq::detail::base64::encode("s1:999999999999999999:" + anchor);
  for (const std::string& cur :
       {std::string("!!!"), std::string("AAAA"), std::string(2000, 'A'),
        dlq::detail::base64::encode("0:0:someid"),  // the format before issue 27
        dlq::detail::base64::encode("s1:0:" + anchor), dlq::detail::base64::encode("s1:5:"),
        dlq::detail::base64::encode("s1:1:" + anchor + ","),
        dlq::detail::base64::encode("s1:1:" + std::string(16, 'g')),
        dlq::detail::base64::encode("s1:1234567890123456789012:" + anchor)}) {
    INFO(cur.substr(0, 40));
    auto r = c.Get("/api/entries", httplib::Params{{"queue", "orders"}, {"cursor", cur}},
                   httplib::Headers{});
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  auto o = c.Get("/api/entries", httplib::Params{{"queue", "orders"}, {"cursor", other}},
                 httplib::Headers{});
  REQUIRE(o);
  CHECK(o->status == 200);
  CHECK(body_of(o)["entries"].size() == 5);
  CHECK(body_of(o)["restarted"] == true);
  CHECK(body_of(o)["next"].is_null());
}

TEST_CASE("a deeply nested JSON body is refused or ignored without harm") {
  Served s;
  fill(s, 1);
  auto c = s.client();
  const std::size_t depth = 400000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  auto r = c.Post("/api/replay", deep, "application/json");
  REQUIRE(r);
  CHECK(r->status == 400);
  auto r2 = c.Post("/api/replay", "{\"queue\":\"orders\",\"x\":" + deep + "}", "application/json");
  REQUIRE(r2);
  CHECK(r2->status == 400);  // neither ids, filter nor all
  CHECK(s.queue.size("orders") == 1);
}

TEST_CASE("delete by ids reports unknown ids and counts a repeated id once") {
  Served s;
  fill(s, 3);
  auto c = s.client();
  auto page = body_of(c.Get("/api/entries?queue=orders"));
  const std::string id = page["entries"][0]["id"];
  auto d = body_of(
      post(c, "/api/delete", {{"queue", "orders"}, {"ids", json::array({id, id, "unknown-1"})}}));
  CHECK(d["deleted"] == 1);
  CHECK(d["missing"] == json::array({"unknown-1"}));
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("a replay by ids with a repeated id moves it once") {
  Served s;
  fill(s, 3);
  auto c = s.client();
  auto page = body_of(c.Get("/api/entries?queue=orders"));
  const std::string id = page["entries"][0]["id"];
  auto op = body_of(
      post(c, "/api/replay", {{"queue", "orders"}, {"ids", json::array({id, id, "unknown-1"})}}));
  json done;
  for (int i = 0; i < 2000; ++i) {
    done = body_of(c.Get(("/api/operation?id=" + op["id"].get<std::string>()).c_str()));
    if (done["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(done["state"] == "done");
  CHECK(done["report"]["replayed"] == 1);
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("purge needs the queue's name typed back exactly") {
  Served s;
  fill(s, 2);
  auto c = s.client();
  for (const json& confirm : {json("ORDERS"), json("orders "), json(""), json(nullptr)}) {
    auto r = post(c, "/api/purge", {{"queue", "orders"}, {"confirm", confirm}});
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  CHECK(post(c, "/api/purge", {{"queue", "orders"}})->status == 400);
  CHECK(s.queue.size("orders") == 2);
  auto ok = body_of(post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "orders"}}));
  CHECK(ok["deleted"] == 2);
}

TEST_CASE("EntryQuery compares ages beyond the clock's range without overflowing") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("orders", "{}", "x", 1, "w");
  const dlq::Entry e = q.peek("orders", 0, 1).at(0);
  const auto now = std::chrono::system_clock::now() + std::chrono::seconds(10);
  dlq::http::EntryQuery older;
  older.min_age = std::chrono::seconds(571849066285);  // 3.9 ms once in 64-bit nanoseconds
  CHECK_FALSE(older.matches(e, now));
  older.min_age = std::chrono::seconds(5);
  CHECK(older.matches(e, now));
  dlq::http::EntryQuery newer;
  newer.max_age = std::chrono::seconds(571849066285);
  CHECK(newer.matches(e, now));
  newer.max_age = std::chrono::seconds(-571849066285);
  CHECK_FALSE(newer.matches(e, now));
}

TEST_CASE(
    "a replay by filter while entries are added and deleted moves each match once, "
    "nothing else") {
  Served s;
  std::vector<std::string> ids;
  auto send = [&](int i) {
    const char* w = i % 2 ? "w2" : "w1";
    return s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "x", 1, w);
  };
  for (int i = 0; i < 3000; ++i)
    ids.push_back(send(i));
  auto c = s.client();
  auto op = body_of(post(c, "/api/replay", {{"queue", "orders"}, {"filter", {{"worker", "w2"}}}}));
  std::thread adder([&] {
    for (int i = 3000; i < 4000; ++i)
      send(i);
  });
  std::size_t deleted_w1 = 0;
  std::thread deleter([&] {
    for (int i = 0; i < 3000; i += 10)  // w1 entries only (even n)
      if (s.queue.remove("orders", ids[static_cast<std::size_t>(i)])) ++deleted_w1;
  });
  adder.join();
  deleter.join();
  json done;
  for (int i = 0; i < 4000; ++i) {
    done = body_of(c.Get(("/api/operation?id=" + op["id"].get<std::string>()).c_str()));
    if (done["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(done["state"] == "done");
  std::vector<int> seen(4000, 0);
  std::size_t moved = 0;
  while (auto p = s.queue.storage().source_pop("orders")) {
    const int n = json::parse(*p)["n"];
    CHECK(n % 2 == 1);  // only w2 entries were moved
    ++seen[static_cast<std::size_t>(n)];
    ++moved;
  }
  CHECK(moved == done["report"]["replayed"].get<std::size_t>());
  for (const auto& e : q_peek_all(s.queue)) {
    const int n = json::parse(e.payload)["n"];
    ++seen[static_cast<std::size_t>(n)];
  }
  std::size_t missing = 0;
  for (int n = 0; n < 4000; ++n) {
    INFO(n);
    CHECK(seen[static_cast<std::size_t>(n)] <= 1);  // never doubled
    if (seen[static_cast<std::size_t>(n)] == 0) {
      CHECK((n < 3000 && n % 10 == 0));  // gone only when deleted
      ++missing;
    }
  }
  CHECK(missing == deleted_w1);
  CHECK(moved >= 1500);  // every w2 entry present when it started
}

TEST_CASE(
    "input echoed in errors is JSON, never HTML; metrics stay valid UTF-8 and one line "
    "per sample whatever the queue names") {
  Served s;
  s.queue.send_to_dlq("q\"x\\y\nz", "{}", "x", 1, "w");
  s.queue.send_to_dlq(std::string("bad\xff\xfe", 5), "{}", "x", 1, "w");
  auto c = s.client();
  auto r = c.Get("/api/entries", httplib::Params{{"queue", "<img src=x onerror=alert(1)>"}},
                 httplib::Headers{});
  REQUIRE(r);
  CHECK(r->status == 404);
  CHECK(r->get_header_value("Content-Type").find("application/json") == 0);
  CHECK(r->get_header_value("X-Content-Type-Options") == "nosniff");
  CHECK(body_of(r)["error"]["message"].get<std::string>().find("<img") != std::string::npos);
  auto m = c.Get("/metrics");
  REQUIRE(m);
  CHECK(m->status == 200);
  CHECK(dlq::detail::json::is_valid_utf8(m->body));
  std::size_t from = 0;
  while (from < m->body.size()) {
    const auto end = m->body.find('\n', from);
    const std::string line = m->body.substr(from, end - from);
    INFO(line);
    if (!line.empty() && line[0] != '#') {
      // name{labels} value: the last space separates a number
      const auto sp = line.rfind(' ');
      REQUIRE(sp != std::string::npos);
      CHECK_NOTHROW(std::stod(line.substr(sp + 1)));
    }
    if (end == std::string::npos) break;
    from = end + 1;
  }
}

TEST_CASE("a slow replay stops soon after cancel, not after its next pause") {
  Served s;
  fill(s, 5);
  auto c = s.client();
  // 0.01 entries/s: one entry now, the next not before 100 s
  auto op = body_of(post(c, "/api/replay", {{"queue", "orders"}, {"all", true}, {"rate", 0.01}}));
  const std::string path = "/api/operation?id=" + op["id"].get<std::string>();
  json now = body_of(c.Get(path.c_str()));
  for (int i = 0; i < 2000 && now["progress"]["replayed"] == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    now = body_of(c.Get(path.c_str()));
  }
  REQUIRE(now["state"] == "running");
  CHECK(post(c, "/api/cancel", {{"id", op["id"]}})->status == 202);
  json done = now;
  for (int i = 0; i < 1000 && done["state"] == "running"; ++i) {  // up to 5 s of 100
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    done = body_of(c.Get(path.c_str()));
  }
  CHECK(done["state"] == "cancelled");
  if (done["state"] == "cancelled") {
    const std::size_t replayed = done["report"]["replayed"];
    CHECK(s.queue.size("orders") + replayed == 5);
  }
}

TEST_CASE("a replay rate outside what pacing can represent is refused") {
  Served s;
  fill(s, 2);
  auto c = s.client();
  for (const double rate : {1e-300, 1e-9, 1e308, 1e12}) {
    INFO(rate);
    auto r = post(c, "/api/replay", {{"queue", "orders"}, {"all", true}, {"rate", rate}});
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("request limits: ids per request, id length, page size; no CORS on OPTIONS") {
  dlq::http::ConsoleOptions o;
  o.max_ids = 10;
  Served s(o);
  fill(s, 2);
  auto c = s.client();
  json many = json::array();
  for (int i = 0; i < 11; ++i)
    many.push_back("id-" + std::to_string(i));
  auto r = post(c, "/api/delete", {{"queue", "orders"}, {"ids", many}});
  REQUIRE(r);
  CHECK(r->status == 413);
  CHECK(error_code(r) == "too_many_ids");
  auto longid = post(c, "/api/delete", {{"queue", "orders"}, {"ids", {std::string(201, 'a')}}});
  REQUIRE(longid);
  CHECK(error_code(longid) == "bad_id");
  CHECK(post(c, "/api/delete", {{"queue", "orders"}, {"ids", json::array()}})->status == 400);
  CHECK(c.Get("/api/entries?queue=orders&limit=501")->status == 400);
  CHECK(body_of(c.Get("/api/entries?queue=orders&limit=0"))["entries"].size() == 1);
  CHECK(post(c, "/api/cancel", {{"id", "op-999"}})->status == 404);
  auto opt =
      c.Options("/api/purge", httplib::Headers{{"Origin", "http://evil.example"},
                                               {"Access-Control-Request-Method", "POST"},
                                               {"Access-Control-Request-Headers", "content-type"}});
  REQUIRE(opt);
  CHECK_FALSE(opt->has_header("Access-Control-Allow-Origin"));
  CHECK(s.queue.size("orders") == 2);
}

TEST_CASE("/api/entry of a 40 MiB entry stays within the view limit in every field") {
  Served s;
  const std::size_t big = std::size_t{40} << 20;
  const std::string payload = "{\"blob\":\"" + std::string(big, 'a') + "\"}";
  const std::string id = s.queue.send_to_dlq("big", payload, std::string(1 << 20, 'e'), 1, "w");
  auto c = s.client();
  auto r = c.Get("/api/entry", httplib::Params{{"queue", "big"}, {"id", id}}, httplib::Headers{});
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const std::size_t view = s.console.options().max_payload_view;  // 256 KiB
  INFO("answer " << r->body.size() << " bytes");
  CHECK(r->body.size() < 8 * view);
  const json j = json::parse(r->body);
  CHECK(j["truncated"] == true);
  CHECK(j["size"] == payload.size());
  for (const char* field : {"stored_text", "payload_text", "error"}) {
    INFO(field);
    CHECK(j[field].get<std::string>().size() <= view + 200);
  }
  CHECK(j["payload_base64"].get<std::string>().size() <= (view + 2) / 3 * 4);
}

TEST_CASE("a filtered /api/entries page of large entries is bounded by bytes, not only count") {
  Served s;
  const std::size_t n = 30;
  for (std::size_t i = 0; i < n; ++i)
    s.queue.send_to_dlq("large",
                        "{\"i\":" + std::to_string(i) + ",\"blob\":\"" +
                            std::string(std::size_t{1} << 20, 'x') + "\"}",
                        "boom " + std::string(std::size_t{64} << 10, 'e'), 1, "w");
  auto c = s.client();
  std::vector<std::string> seen;
  std::string cursor;
  std::size_t pages = 0, largest_page = 0, largest_answer = 0;
  do {
    auto r = c.Get("/api/entries",
                   httplib::Params{
                       {"queue", "large"}, {"limit", "500"}, {"error", "boom"}, {"cursor", cursor}},
                   httplib::Headers{});
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const json page = json::parse(r->body);
    ++pages;
    largest_page = std::max(largest_page, page["entries"].size());
    largest_answer = std::max(largest_answer, r->body.size());
    for (const auto& e : page["entries"]) {
      seen.push_back(e["id"]);
      CHECK(e["error"].get<std::string>().size() <= 1100);  // cut in a list row
    }
    cursor = page["next"].is_null() ? "" : page["next"].get<std::string>();
    REQUIRE(pages < 100);
  } while (!cursor.empty());
  INFO("pages " << pages << ", most entries in a page " << largest_page << ", largest answer "
                << largest_answer << " bytes");
  CHECK(largest_page < n);   // 30 MiB of entries do not come back in one page
  CHECK(largest_page >= 1);  // but every page makes progress
  CHECK(seen.size() == n);   // and the walk returns every entry once
  std::sort(seen.begin(), seen.end());
  CHECK(std::unique(seen.begin(), seen.end()) == seen.end());
  CHECK(largest_answer < (std::size_t{1} << 20));
}

TEST_CASE("the Content-Type of a change must be exactly application/json, parameters allowed") {
  Served s;
  fill(s, 1);
  auto c = s.client();
  const std::string body = json{{"queue", "orders"}, {"ids", {"no-such-id"}}}.dump();
  for (const char* type :
       {"application/jsonfoo", "application/json-patch+json", "application/json2",
        "application/jsonp; charset=utf-8", "text/plain", "Application/JSON"}) {
    INFO(type);
    auto r = c.Post("/api/delete", body, type);
    REQUIRE(r);
    CHECK(r->status == 415);
  }
  for (const char* type :
       {"application/json", "application/json; charset=utf-8", "application/json ;charset=UTF-8"}) {
    INFO(type);
    auto r = c.Post("/api/delete", body, type);
    REQUIRE(r);
    CHECK(r->status == 200);
  }
}

TEST_CASE("is_json_content_type: the media type exactly, parameters allowed") {
  CHECK(dlq::http::is_json_content_type("application/json"));
  CHECK(dlq::http::is_json_content_type(" application/json ; charset=utf-8"));
  CHECK_FALSE(dlq::http::is_json_content_type("APPLICATION/JSON;charset=utf-8"));
  CHECK_FALSE(dlq::http::is_json_content_type("application/jsonfoo"));
  CHECK_FALSE(dlq::http::is_json_content_type("application/json-patch+json"));
  CHECK_FALSE(dlq::http::is_json_content_type("application/"));
  CHECK_FALSE(dlq::http::is_json_content_type(""));
}

}  // namespace test_console_hostile_requests
