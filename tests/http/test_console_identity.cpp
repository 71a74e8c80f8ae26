// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Console identity (issue 30, item 1): the token file, the role table, the constant-time
// lookup — I/O-free, tested without a server — and, in process over dlq::MemoryStorage, the
// roles enforced on every mutating route (403) and the token's name in the audit trail.
// tests/http/test_console_roles.py does the same through `dlqctl serve --tokens`.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http.hpp>
#include <nlohmann/json.hpp>

#include "http/console_fixture.hpp"

namespace test_console_identity {

using namespace console_test;
using dlq::http::Role;

namespace {
const std::string alice_hash = dlq::detail::sha256_hex("alice-secret-0123456789");
const std::string bob_hash = dlq::detail::sha256_hex("bob-secret-0123456789");
const std::string vic_hash = dlq::detail::sha256_hex("vic-secret-0123456789");

std::vector<dlq::http::NamedToken> three_tokens() {
  return dlq::http::parse_token_file("# name role hash\n\nalice admin " + alice_hash +
                                     "\n  bob\toperator " + bob_hash + "\r\nvic viewer " +
                                     vic_hash + "\n");
}
}  // namespace

TEST_CASE("parse_token_file reads NAME ROLE HASH lines and refuses the rest") {
  const auto t = three_tokens();
  REQUIRE(t.size() == 3);
  CHECK(t[0].name == "alice");
  CHECK(t[0].role == Role::admin);
  CHECK(t[1].name == "bob");
  CHECK(t[1].role == Role::operator_);
  CHECK(t[1].secret_hash == bob_hash);
  CHECK(t[2].role == Role::viewer);

  std::string upper = alice_hash;  // hex in upper case is read as lower case
  for (char& c : upper)
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  CHECK(dlq::http::parse_token_file("a admin " + upper)[0].secret_hash == alice_hash);

  const auto refused = [](const std::string& text) {
    try {
      dlq::http::parse_token_file(text);
    } catch (const dlq::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused(""), Catch::Contains("holds no token"));
  CHECK_THAT(refused("# only a comment\n"), Catch::Contains("holds no token"));
  CHECK_THAT(refused("alice admin\n"), Catch::Contains("line 1") && Catch::Contains("2 fields"));
  CHECK_THAT(refused("\nalice root " + alice_hash), Catch::Contains("line 2") &&
                                                         Catch::Contains("role"));
  CHECK_THAT(refused("alice admin 1234"), Catch::Contains("64 hex digits"));
  CHECK_THAT(refused("alice admin " + alice_hash.substr(0, 63) + "g"),
             Catch::Contains("64 hex digits"));
  CHECK_THAT(refused("al/ice admin " + alice_hash), Catch::Contains("name"));
  CHECK_THAT(refused("a admin " + alice_hash + "\na viewer " + bob_hash),
             Catch::Contains("given twice"));
  // a refusal never repeats the hash
  CHECK(refused("a admin " + alice_hash + " extra").find(alice_hash) == std::string::npos);
}

TEST_CASE("parse_token_file refuses one secret under two names") {
  // A hash line copied for a new token: one secret would be two callers. find_token takes
  // the first line, so a viewer's secret (a dashboard's) would act as the admin named
  // before it, and the audit would name the admin for the viewer's changes.
  std::string what = "accepted";
  try {
    dlq::http::parse_token_file("alice admin " + alice_hash + "\ngrafana viewer " + alice_hash);
  } catch (const dlq::invalid_argument& e) {
    what = e.what();
  }
  CHECK_THAT(what, Catch::Contains("line 2") && Catch::Contains("alice"));
  CHECK(what.find(alice_hash) == std::string::npos);  // never the hash
  // The same in another case of hex: the same secret.
  std::string upper = alice_hash;
  for (char& c : upper)
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  CHECK_THROWS_AS(dlq::http::parse_token_file("a viewer " + alice_hash + "\nb admin " + upper),
                  dlq::invalid_argument);
}

TEST_CASE("required_role is the one table of the console's permissions") {
  using dlq::http::required_role;
  for (const char* route : {"/api/queues", "/api/entries", "/api/purge", "/metrics", "/x"})
    CHECK(required_role(route, false) == Role::viewer);
  for (const char* route :
       {"/api/replay", "/api/discard", "/api/delete", "/api/cancel", "/api/recover"})
    CHECK(required_role(route, true) == Role::operator_);
  CHECK(required_role("/api/purge", true) == Role::admin);
  CHECK(required_role("/api/unknown", true) == Role::admin);  // not listed: the most
  CHECK(dlq::http::role_allows(Role::admin, Role::operator_));
  CHECK(dlq::http::role_allows(Role::operator_, Role::operator_));
  CHECK_FALSE(dlq::http::role_allows(Role::viewer, Role::operator_));
  CHECK_FALSE(dlq::http::role_allows(Role::operator_, Role::admin));
  CHECK(dlq::http::role_from_name("operator") == Role::operator_);
  CHECK_FALSE(dlq::http::role_from_name("Admin"));
  CHECK(std::string(dlq::http::role_name(Role::operator_)) == "operator");
}

TEST_CASE("find_token matches a secret by its SHA-256, nothing for a wrong or empty one") {
  const auto t = three_tokens();
  const auto* found = dlq::http::find_token(t, "bob-secret-0123456789");
  REQUIRE(found != nullptr);
  CHECK(found->name == "bob");
  CHECK(dlq::http::find_token(t, "bob-secret-012345678") == nullptr);
  CHECK(dlq::http::find_token(t, "") == nullptr);
  CHECK(dlq::http::find_token(t, bob_hash) == nullptr);  // the hash is not the secret
  CHECK(dlq::http::find_token({}, "anything") == nullptr);
}

TEST_CASE("check_listen counts named tokens as a token") {
  dlq::http::ConsoleOptions o;
  CHECK_THROWS_AS(dlq::http::check_listen("0.0.0.0", o), dlq::invalid_argument);
  CHECK_NOTHROW(dlq::http::check_listen("127.0.0.1", o));
  o.tokens = three_tokens();
  CHECK_NOTHROW(dlq::http::check_listen("0.0.0.0", o));
  CHECK_THROWS_AS(dlq::http::check_listen("0.0.0.0", ""), dlq::invalid_argument);
}

namespace {
httplib::Headers bearer(const std::string& secret) {
  return {{"Authorization", "Bearer " + secret}};
}
}  // namespace

TEST_CASE("each role gets 403 on every mutating route above it, and its name is audited") {
  dlq::http::ConsoleOptions o;
  o.tokens = three_tokens();
  Served s(o);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(s.queue.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "boom", 1, "w"));
  auto c = s.client();
  const json bodies[] = {
      {{"queue", "orders"}, {"ids", {ids[0]}}},                      // /api/replay
      {{"queue", "orders"}, {"filter", {{"worker", "nobody"}}}},     // /api/discard
      {{"id", "op-none"}},                                           // /api/cancel
      {{"queue", "orders"}, {"ids", {"made-up"}}},                   // /api/delete
      {{"queue", "orders"}},                                         // /api/recover
      {{"queue", "orders"}, {"confirm", "nope"}},                    // /api/purge
  };
  const std::vector<std::pair<std::string, Role>> mutating = {
      {"/api/replay", Role::operator_}, {"/api/discard", Role::operator_},
      {"/api/cancel", Role::operator_}, {"/api/delete", Role::operator_},
      {"/api/recover", Role::operator_}, {"/api/purge", Role::admin}};
  const std::vector<std::pair<std::string, Role>> callers = {
      {"vic-secret-0123456789", Role::viewer},
      {"bob-secret-0123456789", Role::operator_},
      {"alice-secret-0123456789", Role::admin}};
  for (std::size_t i = 0; i < mutating.size(); ++i) {
    for (const auto& [secret, role] : callers) {
      const auto& [route, need] = mutating[i];
      auto r = post(c, route, bodies[i], bearer(secret));
      REQUIRE(r);
      INFO(route << " as " << dlq::http::role_name(role) << ": " << r->status << " " << r->body);
      if (dlq::http::role_allows(role, need)) {
        CHECK(r->status != 403);
        CHECK(r->status != 401);
      } else {
        CHECK(r->status == 403);
        CHECK(error_code(r) == "forbidden_role");
      }
    }
  }
  // the operator's replay by ids moved ids[0]; the admin's found it gone (skipped)
  CHECK(s.queue.size("orders") == 3);
  // reads: every role
  for (const auto& [secret, role] : callers) {
    auto r = c.Get("/api/queues", bearer(secret));
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  // /api/info and /api/queues say who asks (the page hides its buttons for a viewer)
  const json info = body_of(c.Get("/api/info", bearer("vic-secret-0123456789")));
  CHECK(info["caller"] == json{{"name", "vic"}, {"role", "viewer"}});
  CHECK(info["auth"] == true);
  CHECK(body_of(c.Get("/api/queues", bearer("bob-secret-0123456789")))["caller"]["role"] ==
        "operator");
  auto none = c.Get("/api/queues");
  REQUIRE(none);
  CHECK(none->status == 401);

  // The audit names the token: bob deletes one entry by id, alice purges.
  auto del = post(c, "/api/delete", {{"queue", "orders"}, {"ids", {ids[1]}}},
                  bearer("bob-secret-0123456789"));
  REQUIRE(del);
  CHECK(del->status == 200);
  auto purge = post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "orders"}},
                    bearer("alice-secret-0123456789"));
  REQUIRE(purge);
  CHECK(purge->status == 200);
  const auto trail = s.queue.audit("orders");
  REQUIRE(trail.size() >= 2);
  bool bob_removed = false;
  for (const auto& rec : trail)
    if (rec.operation == "remove" && rec.ids == std::vector<std::string>{ids[1]})
      bob_removed = rec.actor == "bob";
  CHECK(bob_removed);
  REQUIRE(trail.back().operation == "purge");
  CHECK(trail.back().actor == "alice");
  for (const auto& rec : trail)
    CHECK(!rec.actor.empty());
}

TEST_CASE("roles are decided on the route after the prefix") {
  dlq::http::ConsoleOptions o;
  o.tokens = three_tokens();
  o.prefix = "/ops/dlq";
  Served s(o);
  const auto id = s.queue.send_to_dlq("orders", "{}", "boom", 1, "w");
  auto c = s.client();
  auto viewer = post(c, "/ops/dlq/api/delete", {{"queue", "orders"}, {"ids", {id}}},
                     bearer("vic-secret-0123456789"));
  REQUIRE(viewer);
  CHECK(viewer->status == 403);
  auto op = post(c, "/ops/dlq/api/delete", {{"queue", "orders"}, {"ids", {id}}},
                 bearer("bob-secret-0123456789"));
  REQUIRE(op);
  CHECK(op->status == 200);
  CHECK(body_of(op)["deleted"] == 1);
  auto purge = post(c, "/ops/dlq/api/purge", {{"queue", "orders"}, {"confirm", "orders"}},
                    bearer("bob-secret-0123456789"));
  REQUIRE(purge);
  CHECK(purge->status == 403);
}

TEST_CASE("a replay by filter with a named token is audited under its name, filter as given") {
  dlq::http::ConsoleOptions o;
  o.tokens = three_tokens();
  o.token = "the-single-token-0123456789";  // one more caller: admin, no name
  Served s(o);
  for (int i = 0; i < 5; ++i)
    s.queue.send_to_dlq("orders", "{}", i < 3 ? "currency GBP" : "other", 1, "w");
  auto c = s.client();
  auto op = body_of(post(c, "/api/replay",
                         {{"queue", "orders"}, {"filter", {{"error", "currency gbp"}}}},
                         bearer("bob-secret-0123456789")));
  CHECK(op["actor"] == "bob");
  for (int i = 0; i < 2000; ++i) {
    op = body_of(c.Get(("/api/operation?id=" + op["id"].get<std::string>()).c_str(),
                       bearer("vic-secret-0123456789")));
    if (op["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(op["report"]["replayed"] == 3);
  auto purge = post(c, "/api/purge", {{"queue", "orders"}, {"confirm", "orders"}},
                    bearer("the-single-token-0123456789"));
  REQUIRE(purge);
  CHECK(purge->status == 200);  // the single token is admin
  const auto trail = s.queue.audit("orders");
  REQUIRE(trail.size() == 2);
  CHECK(trail[0].actor == "bob");
  CHECK(trail[0].filter.dump() == R"({"error":"currency gbp"})");
  CHECK(trail[0].counts["replayed"] == 3);
  CHECK(trail[1].operation == "purge");
  CHECK(trail[1].actor == "unknown");  // no name, no Options::actor
}

}  // namespace test_console_identity
