// dlqctl's command layer over dlq::MemoryStorage: every command, its output, --json parsed
// back, exit codes, usage errors, store errors, Ctrl-C during a replay.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "support/catch.hpp"

namespace test_commands {

using nlohmann::json;

namespace {
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
// A stderr that is exactly one line (errors are one line, never a stack of exceptions).
bool one_line(const std::string& err) {
  return !err.empty() && err.back() == '\n' && std::count(err.begin(), err.end(), '\n') == 1;
}
}  // namespace

TEST_CASE("send stores the payload from --payload and prints the new id", "[cli]") {
  CliFixture f;
  auto r = f.run({"send", "orders", "--error", "payment timeout", "--attempt", "3", "--worker",
                  "w-7", "--payload", R"({"order":42})", "--error-type", "Timeout", "--job-id",
                  "j-1", "--context", R"({"gateway":"adyen"})"});
  REQUIRE(r.code == 0);
  REQUIRE(r.lines().size() == 1);
  const std::string id = r.lines()[0];
  auto e = f.dlq().get("orders", id);
  REQUIRE(e);
  CHECK(e->payload == R"({"order":42})");
  CHECK(e->error == "payment timeout");
  CHECK(e->attempt == 3);
  CHECK(e->worker == "w-7");
  CHECK(e->error_type == "Timeout");
  CHECK(e->job_id == "j-1");
  CHECK(e->context == json{{"gateway", "adyen"}});
}

TEST_CASE("send reads any bytes from stdin when --payload is absent", "[cli]") {
  CliFixture f;
  const std::string bytes("bin\0ary\xff\n payload", 18);
  auto r = f.run({"send", "orders", "--error", "bad"}, bytes);
  REQUIRE(r.code == 0);
  auto e = f.dlq().get("orders", r.lines()[0]);
  REQUIRE(e);
  CHECK(e->payload == bytes);
  CHECK(e->payload_encoding == dlq::PayloadEncoding::base64);
  // And replay gives exactly those bytes back.
  REQUIRE(f.run({"replay", "orders", "--all"}).code == 0);
  CHECK(f.storage.source_pop("orders") == bytes);
}

TEST_CASE("send --lines stores one entry per line of stdin, in batches", "[cli]") {
  CliFixture f;
  std::string in;
  for (int i = 0; i < 2345; ++i)
    in += "{\"n\":" + std::to_string(i) + "}\n";
  in += "\nnot json, still a payload";  // empty lines are skipped; a last line needs no \n
  auto r = f.run({"send", "orders", "--error", "bulk", "--lines", "--attempt", "2"}, in);
  REQUIRE(r.code == 0);
  const auto ids = r.lines();
  REQUIRE(ids.size() == 2346);
  auto q = f.dlq();
  CHECK(q.size("orders") == 2346);
  CHECK(q.get("orders", ids[1234])->payload == R"({"n":1234})");
  CHECK(q.get("orders", ids[1234])->attempt == 2);
  CHECK(q.get("orders", ids.back())->payload == "not json, still a payload");
  CHECK(f.run({"send", "orders", "--error", "e", "--lines", "--payload", "x"}).code == 1);
  CHECK(f.run({"send", "orders", "--error", "e", "--lines"}, "", true).code == 1);
  CHECK(f.run({"send", "orders", "--error", "e", "--lines", "--job-id", "j"}, "{}\n").code == 1);
}

TEST_CASE("send refuses bad input with exit code 1 and one line", "[cli]") {
  CliFixture f;
  SECTION("no payload and stdin is a terminal") {
    auto r = f.run({"send", "orders", "--error", "e"}, "", /*stdin_tty=*/true);
    CHECK(r.code == 1);
    CHECK(one_line(r.err));
    CHECK(contains(r.err, "--payload"));
  }
  SECTION("no --error") {
    auto r = f.run({"send", "orders", "--payload", "{}"});
    CHECK(r.code == 1);
    CHECK(contains(r.err, "--error"));
  }
  SECTION("an empty --error") {
    auto r = f.run({"send", "orders", "--payload", "{}", "--error", ""});
    CHECK(r.code == 1);
  }
  SECTION("--context that is not a JSON object") {
    auto r = f.run({"send", "orders", "--payload", "{}", "--error", "e", "--context", "[1]"});
    CHECK(r.code == 1);
    CHECK(contains(r.err, "--context"));
  }
  SECTION("a negative attempt (refused by the library)") {
    auto r = f.run({"send", "orders", "--payload", "{}", "--error", "e", "--attempt", "-2"});
    CHECK(r.code == 1);
    CHECK(one_line(r.err));
    CHECK(contains(r.err, "attempt"));
  }
  SECTION("an empty queue name") {
    auto r = f.run({"send", "", "--payload", "{}", "--error", "e"});
    CHECK(r.code == 1);
    CHECK(contains(r.err, "queue name is empty"));
  }
  CHECK(f.storage.size("orders", dlq::ListKind::dead) == 0);
}

TEST_CASE("count prints the number of dead letters (or corrupt items)", "[cli]") {
  CliFixture f;
  CHECK(f.run({"count", "orders"}).out == "0\n");
  auto q = f.dlq();
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", "{}", "e");
  f.storage.push(dlq::Record{"orders", {}, {}, "not json"});
  auto r = f.run({"count", "orders"});
  CHECK(r.code == 0);
  CHECK(r.out == "4\n");
  f.run({"replay", "orders", "--all"});
  CHECK(f.run({"count", "orders"}).out == "0\n");
  CHECK(f.run({"count", "orders", "--corrupt"}).out == "1\n");
}

TEST_CASE("peek shows a table; --json gives one stored entry per line", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                                "error number " + std::to_string(i), i + 1, "w"));
  f.storage.push(dlq::Record{"orders", {}, {}, "garbage\nwith a newline"});

  auto table = f.run({"peek", "orders"});
  REQUIRE(table.code == 0);
  CHECK(contains(table.out, "ERROR"));
  CHECK(contains(table.out, "error number 3"));
  CHECK(contains(table.out, R"({"n":4})"));
  CHECK(contains(table.out, "unreadable: not valid JSON"));
  CHECK(contains(table.out, "garbage\\nwith a newline"));  // escaped: one row per entry
  CHECK(contains(table.out, "1-6 of 6"));
  CHECK(table.lines().size() == 1 + 6 + 1);

  auto page = f.run({"peek", "orders", "--start", "1", "--count", "2", "--json"});
  REQUIRE(page.code == 0);
  const auto lines = page.json_lines();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["id"] == ids[1]);
  CHECK(lines[0]["original_payload"] == json{{"n", 1}});
  CHECK(lines[0]["error"] == "error number 1");
  CHECK(lines[0]["attempt"] == 2);
  CHECK(lines[0]["queue"] == "orders");
  CHECK(lines[0]["worker"] == "w");
  CHECK(lines[0].contains("dead_lettered_at"));
  CHECK(lines[1]["id"] == ids[2]);

  auto all = f.run({"peek", "orders", "--count", "100", "--json"}).json_lines();
  REQUIRE(all.size() == 6);
  CHECK(all[5]["problem"] == "not valid JSON");
  CHECK(all[5]["raw"] == "garbage\nwith a newline");

  auto beyond = f.run({"peek", "orders", "--start", "50"});
  CHECK(beyond.code == 0);
  CHECK(contains(beyond.out, "no entries at 50"));
  CHECK(f.run({"peek", "empty-queue", "--json"}).out.empty());
}

TEST_CASE("show prints one entry in full; a missing id exits 3", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  dlq::Failure fl;
  fl.error = "payment timeout";
  fl.attempt = 3;
  fl.worker = "w-7";
  fl.job_id = "job-9";
  const auto id = q.send_to_dlq("orders", R"({"order":42})", fl);

  auto r = f.run({"show", "orders", id});
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "payment timeout"));
  CHECK(contains(r.out, "job-9"));
  CHECK(contains(r.out, R"({"order":42})"));
  CHECK(contains(r.out, "2026-"));

  auto j = f.run({"show", "orders", id, "--json"});
  REQUIRE(j.code == 0);
  REQUIRE(j.json_lines().size() == 1);
  CHECK(j.json_lines()[0] == f.run({"peek", "orders", "--json"}).json_lines()[0]);

  auto missing = f.run({"show", "orders", "no-such-id"});
  CHECK(missing.code == 3);
  CHECK(one_line(missing.err));
  CHECK(contains(missing.err, "no-such-id"));
  CHECK(contains(missing.err, "dlqctl peek orders"));
  CHECK(missing.out.empty());
}

TEST_CASE("replay --all moves everything back and prints the count last", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 2500; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "e");
  auto r = f.run({"replay", "orders", "--all"});
  REQUIRE(r.code == 0);
  CHECK(r.lines().back() == "2500");
  CHECK(contains(r.err, "replayed 2500 of 2500"));
  CHECK(f.storage.size("orders", dlq::ListKind::dead) == 0);
  REQUIRE(f.storage.source_size("orders") == 2500);
  CHECK(f.storage.source_range("orders", 0, 1)[0] == R"({"n":0})");
  CHECK(f.storage.source_range("orders", 2499, 1)[0] == R"({"n":2499})");
  CHECK(f.traps == std::vector<bool>{true, false});  // Ctrl-C armed only during the replay
}

TEST_CASE("replay selects with --count, --id, filters, --to and --dry-run", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back(q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}",
                                i % 2 ? "gateway timeout" : "bad currency", 1,
                                i < 5 ? "old-worker" : "new-worker"));

  SECTION("--count N takes the N oldest") {
    auto r = f.run({"replay", "orders", "--count", "3"});
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "3");
    CHECK(f.storage.source_range("orders") ==
          std::vector<std::string>{R"({"n":0})", R"({"n":1})", R"({"n":2})"});
  }
  SECTION("--id takes exactly those, one or more") {
    auto r = f.run({"replay", "orders", "--id", ids[7], ids[2]});
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "2");
    CHECK(f.storage.source_range("orders") == std::vector<std::string>{R"({"n":2})", R"({"n":7})"});
  }
  SECTION("--id with an unknown id replays the others and exits 3") {
    auto r = f.run({"replay", "orders", "--id", ids[1], "--id", "nope"});
    CHECK(r.code == 3);
    CHECK(r.lines().back() == "1");
    CHECK(contains(r.err, "'nope'"));
    CHECK(f.storage.source_size("orders") == 1);
  }
  SECTION("--error-contains") {
    auto r = f.run({"replay", "orders", "--all", "--error-contains", "timeout"});
    CHECK(r.lines().back() == "5");
    CHECK(contains(r.err, "5 left in place"));
    for (const auto& e : q.peek("orders", 0, 100))
      CHECK(e.error == "bad currency");
  }
  SECTION("--worker") {
    auto r = f.run({"replay", "orders", "--all", "--worker", "new-worker"});
    CHECK(r.lines().back() == "5");
    CHECK(f.storage.source_range("orders", 0, 1)[0] == R"({"n":5})");
  }
  SECTION("--older-than") {
    f.now += std::chrono::minutes(30);
    CHECK(f.run({"replay", "orders", "--all", "--older-than", "1h"}).lines().back() == "0");
    f.now += std::chrono::minutes(31);
    CHECK(f.run({"replay", "orders", "--all", "--older-than", "1h"}).lines().back() == "10");
  }
  SECTION("--to another queue") {
    auto r = f.run({"replay", "orders", "--count", "2", "--to", "orders-retry"});
    CHECK(r.lines().back() == "2");
    CHECK(contains(r.err, "to 'orders-retry'"));
    CHECK(f.storage.source_size("orders-retry") == 2);
    CHECK(f.storage.source_size("orders") == 0);
  }
  SECTION("--dry-run moves nothing") {
    auto r = f.run({"replay", "orders", "--all", "--dry-run"});
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "10");
    CHECK(contains(r.err, "dry run: would replay 10"));
    CHECK(q.size("orders") == 10);
    CHECK(f.storage.source_size("orders") == 0);
  }
  // One filter grammar (ops_commands.hpp's add_filter_options) for replay, search and
  // discard; a filter alone selects every entry it matches, as discard's does.
  SECTION("search's filters select a replay, alone or with --count") {
    auto r = f.run({"replay", "orders", "--error-type", "ValidationError", "--dry-run"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "0");  // no entry has that error type: nothing would move
    r = f.run({"replay", "orders", "--payload-contains", "\"n\":3"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "1");
    CHECK(f.storage.source_range("orders") == std::vector<std::string>{R"({"n":3})"});
    r = f.run({"replay", "orders", "--error-contains", "timeout", "--count", "2"});
    CHECK(r.lines().back() == "2");
    CHECK(f.storage.source_size("orders") == 3);  // n 1 and 5 after n 3
    r = f.run({"replay", "orders", "--newer-than", "1h", "--worker", "new-worker",
               "--error-contains", "currency"});
    CHECK(r.lines().back() == "2");  // n 6, 8 (n 4 is old-worker's)
    CHECK(q.size("orders") == 10 - 1 - 2 - 2);
    r = f.run({"replay", "orders", "--job-id", "nope"});
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "0");
  }
  SECTION("--rate paces the replay") {
    auto r = f.run({"replay", "orders", "--all", "--rate", "5"});
    CHECK(r.lines().back() == "10");
    CHECK(f.slept >= std::chrono::milliseconds(1500));  // 10 entries at 5/s: about 2 s
  }
}

TEST_CASE("replay needs exactly one of --all, --count, --id and sane options", "[cli]") {
  CliFixture f;
  f.dlq().send_to_dlq("orders", "{}", "e");
  const std::vector<std::vector<std::string>> bad = {
      {"replay", "orders"},
      {"replay", "orders", "--all", "--count", "2"},
      {"replay", "orders", "--all", "--id", "x"},
      {"replay", "orders", "--id", "x", "--error-contains", "e"},
      {"replay", "orders", "--id", "x", "--payload-contains", "e"},
      {"replay", "orders", "--dry-run"},  // no selection
      {"replay", "orders", "--all", "--older-than", "yesterday"},
      {"replay", "orders", "--all", "--older-than", "5 parsecs"},
      {"replay", "orders", "--all", "--older-than", "200000d"},  // past 64-bit nanoseconds
      {"replay", "orders", "--all", "--rate", "-1"},
      {"replay", "orders", "--all", "--rate", "fast"},
      {"replay", "orders", "--count", "-3"},
      {"replay", "--all"},
  };
  for (const auto& args : bad) {
    INFO(args.size());
    auto r = f.run(args);
    CHECK(r.code == 1);
    CHECK(one_line(r.err));
    CHECK(r.out.empty());
  }
  CHECK(f.dlq().size("orders") == 1);
}

TEST_CASE("Ctrl-C stops a replay between batches: nothing lost, exit 130", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 200; ++i)
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "e");

  SECTION("before the first batch") {
    f.cancel = true;
    auto r = f.run({"replay", "orders", "--all"});
    CHECK(r.code == 130);
    CHECK(r.lines().back() == "0");
    CHECK(contains(r.err, "interrupted"));
    CHECK(contains(r.err, "nothing was lost"));
    CHECK(q.size("orders") == 200);
  }
  SECTION("in the middle (the flag is set while the paced replay waits)") {
    int sleeps = 0;
    f.on_sleep = [&] {
      if (++sleeps == 3) f.cancel = true;
    };
    auto r = f.run({"replay", "orders", "--all", "--rate", "100"});
    CHECK(r.code == 130);
    const auto replayed = std::stoul(r.lines().back());
    CHECK(replayed > 0);
    CHECK(replayed < 200);
    CHECK(replayed + q.size("orders") == 200);           // count before = replayed + left
    CHECK(f.storage.source_size("orders") == replayed);  // and the replayed ones arrived
    CHECK(f.storage.source_range("orders", 0, 1)[0] == R"({"n":0})");
  }
  CHECK(f.traps == std::vector<bool>{true, false});
}

TEST_CASE("replay sets corrupt entries aside and says where to look", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  q.send_to_dlq("orders", "{}", "e");
  f.storage.push(dlq::Record{"orders", {}, {}, "{\"no\":\"payload\"}"});
  f.storage.push(dlq::Record{"orders", {}, {}, std::string("\x01\x02\xff", 3)});

  SECTION("default: moved to the corrupt list") {
    auto r = f.run({"replay", "orders", "--all"});
    CHECK(r.code == 0);
    CHECK(r.lines().back() == "1");
    CHECK(contains(r.err, "set aside 2 unreadable entries"));
    CHECK(contains(r.err, "dlqctl corrupt orders"));
    CHECK(q.corrupt_size("orders") == 2);

    auto list = f.run({"corrupt", "orders"});
    CHECK(list.code == 0);
    CHECK(contains(list.out, "no \"original_payload\" field"));
    CHECK(contains(list.out, "\\x01\\x02\\xff"));
    auto items = f.run({"corrupt", "orders", "--json"}).json_lines();
    REQUIRE(items.size() == 2);
    CHECK(items[0]["problem"] == "no \"original_payload\" field");
    CHECK(items[1]["raw_base64"] == "AQL/");

    CHECK(f.run({"purge", "orders", "--corrupt"}).code == 1);
    auto purged = f.run({"purge", "orders", "--corrupt", "--yes"});
    CHECK(purged.out == "2\n");
    CHECK(q.corrupt_size("orders") == 0);
  }
  SECTION("--keep-corrupt leaves them in place") {
    auto r = f.run({"replay", "orders", "--all", "--keep-corrupt"});
    CHECK(r.lines().back() == "1");
    CHECK(contains(r.err, "left 2 unreadable entries in place"));
    CHECK(q.size("orders") == 2);
    CHECK(q.corrupt_size("orders") == 0);
  }
}

TEST_CASE("delete removes by id; a missing id exits 3", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  const auto a = q.send_to_dlq("orders", "{}", "e");
  const auto b = q.send_to_dlq("orders", "{}", "e");
  const auto c = q.send_to_dlq("orders", "{}", "e");
  auto r = f.run({"delete", "orders", a, c, "--actor", "gus"});
  CHECK(r.code == 0);
  CHECK(r.out == "2\n");
  CHECK(q.size("orders") == 1);
  auto m = f.run({"delete", "orders", a, b, "made-up"});
  CHECK(m.code == 3);
  CHECK(m.out == "1\n");
  CHECK(contains(m.err, a));
  CHECK(contains(m.err, "made-up"));
  CHECK(q.size("orders") == 0);
  CHECK(f.run({"delete", "orders"}).code == 1);
  CHECK(f.run({"delete", "orders", "made-up"}).code == 3);

  // One audit record per command, naming the ids it removed; none for one that removed
  // nothing (issue 27: a record per id let a flood of made-up ids flush the trail).
  const auto trail = q.audit("orders");
  REQUIRE(trail.size() == 2);
  CHECK(trail[0].operation == "remove");
  CHECK(trail[0].actor == "gus");
  CHECK(trail[0].ids == std::vector<std::string>{a, c});
  CHECK(trail[0].counts["removed"] == 2);
  CHECK(trail[1].ids == std::vector<std::string>{b});
  CHECK(trail[1].counts["removed"] == 1);
  CHECK(trail[1].counts["not_found"] == 2);
}

TEST_CASE("purge needs --yes and prints the number removed", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 7; ++i)
    q.send_to_dlq("orders", "{}", "e");
  auto no = f.run({"purge", "orders"});
  CHECK(no.code == 1);
  CHECK(contains(no.err, "all 7 dead letters"));
  CHECK(contains(no.err, "--yes"));
  CHECK(q.size("orders") == 7);
  auto yes = f.run({"purge", "orders", "--yes"});
  CHECK(yes.code == 0);
  CHECK(yes.out == "7\n");
  CHECK(q.size("orders") == 0);
  CHECK(f.run({"purge", "orders", "--yes"}).out == "0\n");
}

TEST_CASE("queues lists names and depths; --json parses back", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("orders", "{}", "e");
  q.send_to_dlq("payments", "{}", "e");
  f.storage.push(dlq::Record{"payments", {}, {}, "junk"});
  f.storage.source_push("payments", "{\"waiting\":1}");
  f.run({"replay", "payments", "--all"});  // 1 replayed (2 waiting now), 1 set aside

  auto t = f.run({"queues"});
  CHECK(t.code == 0);
  REQUIRE(t.lines().size() == 3);
  CHECK(contains(t.lines()[0], "QUEUE"));
  CHECK(contains(t.lines()[1], "orders"));
  auto j = f.run({"queues", "--json"}).json_lines();
  REQUIRE(j.size() == 2);
  CHECK(j[0] == json{{"queue", "orders"}, {"dead", 3}, {"corrupt", 0}, {"waiting", 0}});
  CHECK(j[1] == json{{"queue", "payments"}, {"dead", 0}, {"corrupt", 1}, {"waiting", 2}});

  CliFixture empty;
  auto none = empty.run({"queues"});
  CHECK(none.code == 0);
  CHECK(contains(none.out, "no dead letters"));
}

TEST_CASE("recover prints the number of items fixed", "[cli]") {
  CliFixture f;
  auto r = f.run({"recover", "orders"});
  CHECK(r.code == 0);
  CHECK(r.out == "0\n");
}

TEST_CASE("trim deletes by age and length, with --yes only", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 10; ++i) {
    q.send_to_dlq("orders", "{\"n\":" + std::to_string(i) + "}", "e");
    f.now += std::chrono::hours(1);  // entry i is 10 - i hours old at the end
  }
  CHECK(f.run({"trim", "orders", "--max-age", "5h"}).code == 1);  // no --yes
  CHECK(f.run({"trim", "orders", "--yes"}).code == 1);            // nothing to keep by
  CHECK(f.run({"trim", "orders", "--max-age", "0s", "--yes"}).code == 1);
  auto too_long = f.run({"trim", "orders", "--max-age", "200000d", "--yes"});
  CHECK(too_long.code == 1);
  CHECK(contains(too_long.err, "100 years"));
  CHECK(q.size("orders") == 10);
  auto age = f.run({"trim", "orders", "--max-age", "5h30m", "--yes"});
  CHECK(age.code == 0);
  CHECK(age.out == "5\n");  // 10, 9, 8, 7 and 6 hours old
  CHECK(contains(age.err, "5 left"));
  auto len = f.run({"trim", "orders", "--max-length", "2", "--yes"});
  CHECK(len.out == "3\n");
  const auto left = q.peek("orders");
  REQUIRE(left.size() == 2);
  CHECK(left[0].payload == R"({"n":8})");  // the newest are kept
}

TEST_CASE("errors groups entries by error text, most frequent first", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 1203; ++i) {  // more than one page of 1000
    const char* e = i % 3 == 0 ? "unsupported currency: GBP" : i % 3 == 1 ? "unknown sku" : "x";
    if (i % 3 == 2 && i > 30) e = "unsupported currency: GBP";
    dlq::Failure fl;
    fl.error = e;
    fl.worker = i % 2 ? "w-1" : "w-2";
    fl.attempt = 1 + i % 4;
    q.send_to_dlq("orders", "{}", fl);
  }
  f.storage.push(dlq::Record{"orders", {}, {}, "junk"});

  auto t = f.run({"errors", "orders"});
  REQUIRE(t.code == 0);
  const auto lines = t.lines();
  REQUIRE(lines.size() == 1 + 4 + 1);
  CHECK(contains(lines[1], "unsupported currency: GBP"));
  CHECK(contains(lines[2], "unknown sku"));
  CHECK(contains(t.out, "(unreadable: not valid JSON)"));
  CHECK(contains(lines.back(), "1204 entries"));
  CHECK(contains(lines.back(), "4 groups"));

  auto j = f.run({"errors", "orders", "--json"}).json_lines();
  REQUIRE(j.size() == 4);
  std::size_t sum = 0;
  for (const auto& g : j)
    sum += g["count"].get<std::size_t>();
  CHECK(sum == 1204);
  CHECK(j[0]["error"] == "unsupported currency: GBP");
  CHECK(j[0]["count"] == 792);
  CHECK(j[0]["max_attempt"] == 4);
  CHECK(f.dlq().get("orders", j[0]["example_id"].get<std::string>()));

  auto w = f.run({"errors", "orders", "--by", "worker", "--json"}).json_lines();
  REQUIRE(w.size() == 3);
  CHECK(w[0]["count"] == 602);
  CHECK(f.run({"errors", "orders", "--by", "colour"}).code == 1);
}

TEST_CASE("usage errors exit 1 with one line; --help and --version exit 0", "[cli]") {
  CliFixture f;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"count"},
           {"count", "orders", "--no-such-option"},
           {"peek", "orders", "--count", "many"},
           {"show", "orders"},
           {"count", "orders", "--timeout", "soon"},
       }) {
    auto r = f.run(args);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(one_line(r.err));
    CHECK(r.out.empty());
    CHECK_FALSE(f.opened);  // bad usage never touches the store
  }
  auto unknown = f.run({"frobnicate"});
  CHECK(contains(unknown.err, "frobnicate"));

  auto help = f.run({"--help"});
  CHECK(help.code == 0);
  for (const char* cmd : {"send", "count", "peek", "show", "replay", "delete", "purge", "queues",
                          "recover", "trim", "errors", "corrupt"})
    CHECK(contains(help.out, cmd));
  for (const char* cmd : {"send", "count", "peek", "show", "replay", "delete", "purge", "queues",
                          "recover", "trim", "errors", "corrupt"}) {
    auto h = f.run({cmd, "--help"});
    CHECK(h.code == 0);
    CHECK(contains(h.out, std::string("dlqctl ") + cmd));
  }
  CHECK(contains(f.run({"replay", "--help"}).out, "--older-than"));
  auto v = f.run({"--version"});
  CHECK(v.code == 0);
  CHECK(contains(v.out, "dlq 0."));
}

TEST_CASE("store failures exit 2 with one line that says what to try", "[cli]") {
  CliFixture f;
  SECTION("unreachable") {
    f.on_open = [] {
      throw dlq::connection_error(
          "[dlq.redis] 127.0.0.1:1: connection refused; is redis-server running there?");
    };
    auto r = f.run({"count", "orders", "--store", "redis://user:secret@127.0.0.1:1/0"});
    CHECK(r.code == 2);
    CHECK(one_line(r.err));
    CHECK(contains(r.err, "connection refused"));
    CHECK(contains(r.err, "--store"));
    CHECK_FALSE(contains(r.err, "secret"));
  }
  SECTION("timed out") {
    f.on_open = [] { throw dlq::timeout_error("[dlq.redis] 127.0.0.1:1: no answer in 5 s"); };
    auto r = f.run({"peek", "orders"});
    CHECK(r.code == 2);
    CHECK(contains(r.err, "--timeout"));
  }
  SECTION("a bad URL is bad input") {
    f.on_open = [] { throw dlq::invalid_argument("[dlq.redis] --store: bad port"); };
    CHECK(f.run({"count", "orders"}).code == 1);
  }
}

namespace {
// A memory storage whose dead lists cannot be read while `down` is set.
struct DownMemory : dlq::MemoryStorage {
  bool down = false;
  std::size_t size(std::string_view queue, dlq::ListKind kind) {
    if (down) throw dlq::timeout_error("[dlq.test] store down: no answer in 5 s");
    return dlq::MemoryStorage::size(queue, kind);
  }
};
}  // namespace

TEST_CASE("a trim that meets a store error prints no result, only the error", "[cli]") {
  DownMemory storage;
  dlq::DeadLetterQueue<DownMemory&>(storage).send_to_dlq("orders", "1", "e");
  dlq::DeadLetterQueue<DownMemory&>(storage).send_to_dlq("orders", "2", "e");
  storage.down = true;
  std::istringstream in;
  std::ostringstream out, err;
  dlqctl::Io io(in, out, err);
  const dlqctl::Opener open = [&](const dlqctl::StoreSettings&) -> std::unique_ptr<dlqctl::Store> {
    return std::make_unique<dlqctl::DlqStore<DownMemory&>>("memory", storage);
  };
  const int code = dlqctl::run({"trim", "orders", "--max-length", "1", "--yes"}, io, open);
  CHECK(code == 2);
  CHECK(out.str().empty());
  CHECK_FALSE(contains(err.str(), "trimmed"));
  CHECK(one_line(err.str()));
  CHECK(contains(err.str(), "store down"));
}

TEST_CASE("global options: --store, env DLQ_STORE, key patterns, anywhere on the line", "[cli]") {
  CliFixture f;
  f.run({"--store", "redis://a:1/2", "count", "orders"});
  CHECK(f.last_settings.url == "redis://a:1/2");
  f.run({"count", "orders", "--store", "sqlite:///tmp/x.db", "--dlq-key", "dlq:*", "--queue-key",
         "queue:*", "--timeout", "250ms"});
  CHECK(f.last_settings.url == "sqlite:///tmp/x.db");
  CHECK(f.last_settings.dlq_key == "dlq:*");
  CHECK(f.last_settings.queue_key == "queue:*");
  CHECK(f.last_settings.timeout == std::chrono::milliseconds(250));
  ::setenv("DLQ_STORE", "redis://from-env:6379/0", 1);
  f.run({"count", "orders"});
  ::unsetenv("DLQ_STORE");
  CHECK(f.last_settings.url == "redis://from-env:6379/0");
  f.run({"count", "orders"});
  CHECK(f.last_settings.url == "redis://127.0.0.1:6379/0");
}

TEST_CASE("global options before the command work for every command", "[cli]") {
  CliFixture f;
  const std::vector<std::vector<std::string>> commands = {
      {"count", "orders"},
      {"peek", "orders"},
      {"queues"},
      {"stats"},
      {"metrics"},
      {"search", "orders"},
      {"audit", "orders"},
      {"errors", "orders"},
      {"corrupt", "orders"},
      {"recover", "orders"},
      {"replay", "orders", "--all"},
      {"discard", "orders", "--error-contains", "x", "--yes"}};
  for (const auto& command : commands) {
    for (const auto& globals : std::vector<std::vector<std::string>>{
             {"--actor", "alice", "--timeout", "250ms", "--store", "redis://a:1/2", "--dlq-key",
              "dlq:*", "--queue-key", "queue:*", "--corrupt-key", "dlq:*:bad"},
             {"--actor=alice", "--timeout=250ms", "--store=redis://a:1/2", "--dlq-key=dlq:*",
              "--queue-key=queue:*", "--corrupt-key=dlq:*:bad"}}) {
      std::vector<std::string> args = globals;
      args.insert(args.end(), command.begin(), command.end());
      const auto r = f.run(args);
      INFO(args[0] << " … " << command[0] << ": " << r.err);
      CHECK(r.code == 0);
      CHECK(f.last_settings.actor == "alice");
      CHECK(f.last_settings.timeout == std::chrono::milliseconds(250));
      CHECK(f.last_settings.url == "redis://a:1/2");
      CHECK(f.last_settings.dlq_key == "dlq:*");
      CHECK(f.last_settings.queue_key == "queue:*");
      CHECK(f.last_settings.corrupt_key == "dlq:*:bad");
    }
  }
}

TEST_CASE("is_serve finds `serve` after global options and their values", "[cli]") {
  using dlqctl::is_serve;
  CHECK(is_serve({"serve"}));
  CHECK(is_serve({"--actor", "alice", "serve"}));  // issue 27: --actor took no value here
  CHECK(is_serve({"--actor=alice", "serve", "--listen", "127.0.0.1:0"}));
  CHECK(is_serve({"--store", "redis://h/0", "--dlq-key", "k", "--queue-key", "q", "--corrupt-key",
                  "c", "--timeout", "1s", "--actor", "a", "serve"}));
  CHECK(is_serve({"--bogus", "serve"}));  // serve's own parser then says what is wrong
  CHECK_FALSE(is_serve({"--actor", "serve", "count", "orders"}));  // "serve" is the actor
  CHECK_FALSE(is_serve({"--store", "serve", "queues"}));
  CHECK_FALSE(is_serve({"count", "serve"}));
  CHECK_FALSE(is_serve({"--actor", "alice"}));
  CHECK_FALSE(is_serve({}));
}

TEST_CASE("--audit-max-age and --audit-max-records set the trail's retention", "[cli]") {
  CliFixture f;
  f.run({"count", "orders"});
  CHECK(f.last_settings.audit_retention.max_age == std::chrono::hours(24 * 90));
  CHECK(f.last_settings.audit_retention.max_records == 1000000);
  f.run({"--audit-max-age", "30d", "count", "orders", "--audit-max-records", "5000"});
  CHECK(f.last_settings.audit_retention.max_age == std::chrono::hours(24 * 30));
  CHECK(f.last_settings.audit_retention.max_records == 5000);
  ::setenv("DLQ_AUDIT_MAX_AGE", "0", 1);
  f.run({"count", "orders"});
  ::unsetenv("DLQ_AUDIT_MAX_AGE");
  CHECK(f.last_settings.audit_retention.max_age == std::chrono::seconds(0));  // forever
  auto bad = f.run({"--audit-max-age", "soon", "count", "orders"});
  CHECK(bad.code == 1);
  CHECK(contains(bad.err, "'soon' is not a duration"));
  CHECK(f.run({"--audit-max-records", "-1", "count", "orders"}).code == 1);
}

TEST_CASE("the progress bar is drawn on a terminal only", "[cli]") {
  CliFixture f;
  auto q = f.dlq();
  for (int i = 0; i < 3000; ++i)
    q.send_to_dlq("orders", "{}", "e");
  auto tty = f.run({"replay", "orders", "--count", "1500"}, "", false, /*stderr_tty=*/true);
  CHECK(tty.code == 0);
  CHECK(contains(tty.err, "\rreplay orders ["));
  CHECK(contains(tty.err, "\r\x1b[K"));  // erased at the end
  auto plain = f.run({"replay", "orders", "--all"});
  CHECK_FALSE(contains(plain.err, "\r"));
  CHECK(plain.lines().back() == "1500");
}

// Issue 11 item 6: an entry the Python seed wrote with NaN in its payload, or with a lone
// surrogate escape, is readable: peek --json and show --json show it as readable, payload
// included (as its raw text), never as {"problem":"unreadable"}.
TEST_CASE("peek and show --json show readable NaN and lone-surrogate entries as readable",
          "[cli]") {
  CliFixture f;
  f.storage.push(dlq::Record{
      "orders", {}, {}, R"({"original_payload": {"x": NaN}, "queue": "orders", "error": "e1"})"});
  f.storage.push(dlq::Record{
      "orders", {}, {}, R"({"original_payload": "\ude00", "queue": "orders", "error": "e2"})"});
  auto r = f.run({"peek", "orders", "--json"});
  REQUIRE(r.code == 0);
  const auto lines = r.json_lines();
  REQUIRE(lines.size() == 2);
  CHECK_FALSE(lines[0].contains("problem"));
  CHECK(lines[0]["original_payload"] == R"({"x": NaN})");
  CHECK(lines[0]["error"] == "e1");
  CHECK_FALSE(lines[1].contains("problem"));
  CHECK(lines[1]["original_payload"] == R"("\ude00")");
  const std::string id = lines[0]["id"];
  auto shown = f.run({"show", "orders", id, "--json"});
  REQUIRE(shown.code == 0);
  CHECK(shown.json_lines()[0] == lines[0]);
}

}  // namespace test_commands
