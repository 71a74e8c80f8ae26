// dlqctl's operator operations over dlq::MemoryStorage (issue 14): search with filters and a
// continuation, discard with --dry-run / --yes, the edited replay (--set-payload,
// --transform-cmd) and the audit trail (table and --json), with the actor.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "support/catch.hpp"

using nlohmann::json;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
std::vector<std::string> fill(CliFixture& f) {
  auto q = f.dlq();
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    dlq::Failure fail;
    fail.error = i % 3 == 0 ? "payment timeout" : "bad input";
    fail.worker = i % 2 == 0 ? "w-even" : "w-odd";
    fail.error_type = i % 3 == 0 ? "TimeoutError" : "ValueError";
    ids.push_back(q.send_to_dlq("orders", "{\"i\":" + std::to_string(i) + "}", fail));
  }
  return ids;
}
}  // namespace

TEST_CASE("search prints the matches of its filters and a continuation for more", "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  auto r =
      f.run({"search", "orders", "--error-type", "TimeoutError", "--worker", "w-even", "--json"});
  REQUIRE(r.code == 0);
  std::vector<std::string> found;
  for (const auto& line : r.lines())
    found.push_back(json::parse(line)["id"].get<std::string>());
  CHECK(found == std::vector<std::string>{ids[0], ids[6], ids[12], ids[18], ids[24]});

  r = f.run({"search", "orders", "--error-contains", "bad", "--limit", "3"});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, ids[1]));
  CHECK(contains(r.out, "(3 matches)"));
  REQUIRE(contains(r.err, "--continuation "));
  const std::string token = r.err.substr(
      r.err.find("--continuation ") + 15,
      r.err.find('\n', r.err.find("--continuation ")) - r.err.find("--continuation ") - 15);
  r = f.run({"search", "orders", "--error-contains", "bad", "--limit", "100", "--continuation",
             token, "--json"});
  REQUIRE(r.code == 0);
  CHECK(r.lines().size() == 20 - 3);
  CHECK(json::parse(r.lines()[0])["id"] == ids[5]);

  r = f.run({"search", "orders", "--payload-contains", "\"i\":17}"});
  CHECK(contains(r.out, ids[17]));
  CHECK(contains(r.out, "(1 match; end of the list)"));
  CHECK(f.run({"search", "orders", "--continuation", "nonsense"}).code == 1);
}

TEST_CASE("discard asks for --yes, lists with --dry-run, deletes and audits with --yes",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  auto r = f.run({"discard", "orders", "--error-type", "TimeoutError"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "10 of 30 entries examined match"));
  CHECK(contains(r.err, "--yes"));
  CHECK(f.dlq().size("orders") == 30);

  r = f.run({"discard", "orders", "--error-type", "TimeoutError", "--dry-run", "--json"});
  REQUIRE(r.code == 0);
  REQUIRE(r.lines().size() == 10);
  CHECK(json::parse(r.lines()[0]) == json{{"id", ids[0]}, {"would_discard", true}});
  CHECK(f.dlq().size("orders") == 30);

  r = f.run({"discard", "orders", "--error-type", "TimeoutError", "--yes", "--actor", "erin"});
  REQUIRE(r.code == 0);
  CHECK(r.lines() == std::vector<std::string>{"10"});
  CHECK(contains(r.err, "discarded " + ids[3]));
  CHECK(f.dlq().size("orders") == 20);

  CHECK(f.run({"discard", "orders", "--yes"}).code == 1);  // no filter: use purge

  r = f.run({"audit", "orders", "--json"});
  REQUIRE(r.code == 0);
  // The refused run and the dry run changed nothing: only the real one is in the trail.
  REQUIRE(r.lines().size() == 1);
  const auto rec = json::parse(r.lines()[0]);
  CHECK(rec["operation"] == "discard");
  CHECK(rec["actor"] == "erin");
  CHECK(rec["outcome"] == "ok");
  CHECK(rec["counts"]["discarded"] == 10);
  CHECK(rec["filter"] == json{{"error_type", "TimeoutError"}});
  CHECK(rec["ids"].size() == 10);
}

TEST_CASE("replay --id --set-payload replays one entry with the file's bytes", "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  const std::string path = "/tmp/dlqctl-test-payload-" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"i\":5,\"fixed\":true}";
  }
  auto r = f.run({"replay", "orders", "--id", ids[5], "--set-payload", path, "--actor", "fay"});
  std::remove(path.c_str());
  REQUIRE(r.code == 0);
  CHECK(r.lines() == std::vector<std::string>{"1"});
  CHECK(contains(r.err, "with an edited payload"));
  CHECK(f.storage.source_range("orders") == std::vector<std::string>{"{\"i\":5,\"fixed\":true}"});
  CHECK(f.dlq().size("orders") == 29);

  r = f.run({"replay", "orders", "--id", ids[6], "--set-payload", "-"}, "from stdin");
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "from stdin");

  r = f.run({"audit", "orders"});
  REQUIRE(r.code == 0);
  INFO(r.out);
  CHECK(contains(r.out, "replay_edited"));
  CHECK(contains(r.out, "fay"));
  CHECK(contains(r.out, ids[5]));
  CHECK(contains(r.out, "(2 records of 'orders')"));
  CHECK(r.err.empty());
  r = f.run({"audit", "orders", "--limit", "2"});  // as many as asked for: there may be more
  CHECK(contains(r.err, "the oldest 2 records; there may be more: narrow --since"));
  r = f.run({"audit", "orders", "--json"});
  const auto rec = json::parse(r.lines()[0]);
  CHECK(rec["detail"]["edits"][0]["old_sha256"] == dlq::detail::sha256_hex("{\"i\":5}"));
  CHECK(rec["detail"]["edits"][0]["new_sha256"] ==
        dlq::detail::sha256_hex("{\"i\":5,\"fixed\":true}"));
}

TEST_CASE("replay --id --transform-cmd replays one entry with what the command printed",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  auto r = f.run({"replay", "orders", "--id", ids[7], "--transform-cmd", "tr 'i' 'j'"});
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders") == std::vector<std::string>{"{\"j\":7}"});
  r = f.run({"replay", "orders", "--id", ids[8], "--transform-cmd", "exit 3"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "nothing was replayed"));
  CHECK(f.dlq().size("orders") == 29);
  CHECK(f.run({"replay", "orders", "--all", "--set-payload", "-"}).code == 1);
  CHECK(f.run({"replay", "orders", "--id", ids[1], "--id", ids[2], "--set-payload", "-"}).code ==
        1);
  r = f.run({"replay", "orders", "--id", "missing", "--set-payload", "-"}, "x");
  CHECK(r.code == 3);
}
