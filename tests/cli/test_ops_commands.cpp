// dlqctl's operator operations over dlq::MemoryStorage (issue 14): search with filters and a
// continuation, discard with --dry-run / --yes, the edited replay (--set-payload,
// --transform-cmd) and the audit trail (table and --json), with the actor; an edit that
// yields an empty payload, a transform's timeout, interruption and output limit.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixture.hpp"
#include "support/catch.hpp"

namespace test_ops_commands {

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

  // The hint is the command to run for the next page: the same arguments, quoted for a
  // shell, the old --continuation replaced, a store URL's password masked.
  r = f.run({"search", "orders", "--error-contains", "bad", "--limit", "3", "--continuation", token,
             "--actor", "it's me"});
  REQUIRE(r.code == 0);
  INFO(r.err);
  CHECK_FALSE(contains(r.err, "\xE2\x80\xA6"));  // no literal "…" to fill in
  CHECK(contains(r.err,
                 "more: dlqctl search orders --error-contains bad --limit 3 --actor "
                 "'it'\\''s me' --continuation "));
  CHECK_FALSE(contains(r.err, token + " "));  // the old token is not repeated
  r = f.run({"--store=redis://:s3cret@db:6379", "search", "orders", "--error-contains", "bad",
             "--limit", "3", "--continuation=" + token});
  REQUIRE(r.code == 0);
  INFO(r.err);
  CHECK_FALSE(contains(r.err, "s3cret"));
  // redacted before quoting: the mask's '*' would be a glob to a shell, so it is quoted
  CHECK(contains(r.err, "more: dlqctl '--store=redis://***@db:6379' search"));
  CHECK(contains(r.err, " search orders --error-contains bad --limit 3 --continuation "));
  CHECK_FALSE(contains(r.err, "--continuation=" + token));
  // Round 11: a password given as a parameter masked the rest of the line, the token too
  // ("more: dlqctl --store='redis://db:6379/0?password=***" and nothing after: no next page);
  // a password holding a space and a "://" showed the part between them.
  for (const std::string store :
       {"--store=redis://db:6379/0?password=s3cret", "--store=redis://:pa s3cret://x@db:6379/0"}) {
    r = f.run({store, "search", "orders", "--error-contains", "bad", "--limit", "3"});
    REQUIRE(r.code == 0);
    INFO(r.err);
    CHECK_FALSE(contains(r.err, "s3cret"));
    CHECK(contains(r.err, " search orders --error-contains bad --limit 3 --continuation "));
  }

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

// A file saved by an editor, `echo`, or `jq -c` ends in a newline the job never had
// (48 -> 49 bytes): one final line ending is removed and said; --keep-newline keeps it.
TEST_CASE("an edited payload's final newline is removed and said; --keep-newline keeps it",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  auto r = f.run({"replay", "orders", "--id", ids[1], "--set-payload", "-"}, "{\"i\":1}\n");
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "{\"i\":1}");
  CHECK(contains(r.err, "removed the payload's final newline (8 -> 7 bytes)"));
  CHECK(contains(r.err, "--keep-newline"));
  r = f.run({"replay", "orders", "--id", ids[2], "--transform-cmd", "printf '{\"i\":2}\\r\\n'"});
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "{\"i\":2}");
  CHECK(contains(r.err, "(9 -> 7 bytes)"));
  r = f.run({"replay", "orders", "--id", ids[3], "--set-payload", "-", "--keep-newline"},
            "{\"i\":3}\n\n");
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "{\"i\":3}\n\n");
  CHECK_FALSE(contains(r.err, "newline"));
  r = f.run({"replay", "orders", "--id", ids[4], "--set-payload", "-"}, "{\"i\":4}\n\n");
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "{\"i\":4}\n");  // one line ending only
  r = f.run({"replay", "orders", "--id", ids[5], "--set-payload", "-"}, "{\"i\":5}");
  REQUIRE(r.code == 0);
  CHECK(f.storage.source_range("orders").back() == "{\"i\":5}");
  CHECK_FALSE(contains(r.err, "newline"));
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

TEST_CASE("replay FILTERS --transform-cmd edits each matching entry in its own step",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  // ten "payment timeout" entries (i = 0, 3, ..., 27), oldest first
  auto r = f.run({"replay", "orders", "--error-contains", "timeout", "--transform-cmd",
                  "tr 'i' 'k'", "--dry-run"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "10\n");
  CHECK(f.storage.source_range("orders").empty());  // a dry run moves nothing
  CHECK(f.dlq().size("orders") == 30);
  r = f.run({"replay", "orders", "--error-contains", "timeout", "--count", "2", "--transform-cmd",
             "tr 'i' 'k'"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "2\n");
  CHECK(f.storage.source_range("orders") == std::vector<std::string>{"{\"k\":0}", "{\"k\":3}"});
  r = f.run({"replay", "orders", "--error-contains", "timeout", "--transform-cmd", "tr 'i' 'k'"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "8\n");
  CHECK(f.storage.source_range("orders").size() == 10);
  CHECK(f.storage.source_range("orders").back() == "{\"k\":27}");
  CHECK(f.dlq().size("orders") == 20);
  const auto trail = f.dlq().audit("orders");
  REQUIRE(!trail.empty());
  CHECK(trail.back().operation == "replay_edited");

  // A transform that fails on one entry stops there: the ones before stay replayed, it and
  // the ones after stay in the dead letters with their payloads.
  // worker w-even and "bad input": i = 2, 4, 8, 10, 14, ...; the edit of i = 8 prints nothing
  r = f.run({"replay", "orders", "--worker", "w-even", "--error-type", "ValueError",
             "--transform-cmd", "grep -v '\"i\":8' | tr 'i' 'm'"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "replayed 2 edited entries before"));
  CHECK(f.storage.source_range("orders").size() == 12);
  CHECK(f.storage.source_range("orders").back() == "{\"m\":4}");
  const auto kept = f.dlq().get("orders", ids[8]);
  REQUIRE(kept);
  CHECK(kept->payload == "{\"i\":8}");
  CHECK(f.dlq().size("orders") == 18);

  // --set-payload would give every entry the same bytes: one --id only
  r = f.run({"replay", "orders", "--worker", "w-odd", "--set-payload", "-"}, "{}");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--transform-cmd"));
  CHECK(f.dlq().size("orders") == 18);
}

TEST_CASE("replay SELECTION --transform-cmd leaves parked entries, as replay does",
          "[cli][ops]") {
  CliFixture f;
  dlq::Options o = f.options();
  o.poison_guard.park_after = 1;
  dlq::DeadLetterQueue<dlq::MemoryStorage&> q(f.storage, o);
  dlq::Failure fail;
  fail.error = "payment timeout";
  fail.job_id = "job-7";
  q.send_to_dlq("orders", "{\"i\":1}", fail);                             // count 1
  const std::string parked = q.send_to_dlq("orders", "{\"i\":2}", fail);  // count 2: parked
  auto e = f.dlq().get("orders", parked);
  REQUIRE(e);
  REQUIRE(e->parked);
  // The poison-loop guard: a selection (--all, --count, filters) passes parked entries over;
  // only asking for one by id forces it through. The edited replay of a selection must not
  // turn each match into an ask by id.
  auto r = f.run({"replay", "orders", "--all", "--transform-cmd", "tr 'i' 'k'"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "1\n");
  CHECK(f.storage.source_range("orders") == std::vector<std::string>{"{\"k\":1}"});
  e = f.dlq().get("orders", parked);
  REQUIRE(e);
  CHECK(e->payload == "{\"i\":2}");
  r = f.run({"replay", "orders", "--error-contains", "timeout", "--transform-cmd", "tr 'i' 'k'"});
  REQUIRE(r.code == 0);
  CHECK(r.out == "0\n");
  CHECK(f.dlq().size("orders") == 1);
}

TEST_CASE("replay FILTERS --transform-cmd edits only the entries there at the start",
          "[cli][ops]") {
  CliFixture f;
  {
    auto q = f.dlq();  // more matches than one page of the search (50): the run reads on
    dlq::Failure fail;
    fail.error = "payment timeout";
    for (int i = 0; i < 60; ++i)
      q.send_to_dlq("orders", "{\"i\":" + std::to_string(i) + "}", fail);
  }
  char dir_template[] = "/tmp/dlq-edit-churn-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const auto exists = [](const std::string& path) { return access(path.c_str(), F_OK) == 0; };
  // A worker that fails each replayed job again at once: while the command edits an entry
  // (it writes e<n> and waits for a<n>), the job comes back as a new dead letter that
  // matches the same filter. replay's rule: an entry dead-lettered again during the run is
  // not replayed again by the same run (dlq/replay.hpp) — else the edit is applied twice
  // and a job that keeps failing loops for ever.
  std::atomic<bool> stop{false};
  int resent = 0;
  std::thread worker([&] {
    auto q = f.dlq();
    for (int n = 0; !stop.load();) {
      if (!exists(dir + "/e" + std::to_string(n))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (n < 100) {
        dlq::Failure fail;
        fail.error = "payment timeout again";
        q.send_to_dlq("orders", "{\"again\":" + std::to_string(n) + "}", fail);
        ++resent;
      }
      std::ofstream(dir + "/a" + std::to_string(n)).put('\n');
      ++n;
    }
  });
  const std::string cmd = "p=$(cat); n=0; while [ -e " + dir + "/e$n ]; do n=$((n+1)); done; " +
                          "touch " + dir + "/e$n; while [ ! -e " + dir +
                          "/a$n ]; do sleep 0.01; done; printf '%s' \"$p\" | tr 'i' 'k'";
  const auto r = f.run({"replay", "orders", "--error-contains", "timeout", "--transform-cmd", cmd});
  stop = true;
  worker.join();
  std::system(("rm -rf " + dir).c_str());
  REQUIRE(r.code == 0);
  CHECK(r.out == "60\n");
  CHECK(f.storage.source_range("orders").size() == 60);
  CHECK(resent == 60);
  CHECK(f.dlq().size("orders") == 60);  // the 60 new failures, unedited
}

namespace {
// The dead letter ids[4] of fill() is where it was, with its payload, and nothing moved.
void check_untouched(CliFixture& f, const std::vector<std::string>& ids) {
  CHECK(f.storage.source_range("orders").empty());
  CHECK(f.dlq().size("orders") == 30);
  const auto e = f.dlq().get("orders", ids[4]);
  REQUIRE(e);
  CHECK(e->payload == "{\"i\":4}");
}

// Waits (at most 10 s) until `path` holds a number, the process group a transform wrote.
pid_t wait_for_group(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    long pg = 0;
    if (in >> pg && pg > 0) return static_cast<pid_t>(pg);
    ::usleep(10000);
  }
  return 0;
}

// True when no process of group `pg` is left (waits at most 5 s: the killed members are
// reaped by init, not by us).
bool group_gone(pid_t pg) {
  for (int i = 0; i < 500; ++i) {
    if (::kill(-pg, 0) != 0 && errno == ESRCH) return true;
    ::usleep(10000);
  }
  return false;
}
}  // namespace

TEST_CASE("an edit that yields an empty or blank payload is refused and moves nothing",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  const std::string empty_file = "/tmp/dlqctl-test-empty-" + std::to_string(::getpid());
  { std::ofstream out(empty_file, std::ios::binary); }
  struct edit {
    std::vector<std::string> args;
    std::string in;
  };
  const std::vector<edit> edits = {
      {{"--transform-cmd", "true"}, ""},
      {{"--transform-cmd", "echo"}, ""},                 // a newline only
      {{"--transform-cmd", "printf ' \\t\\r\\n'"}, ""},  // blanks only
      {{"--transform-cmd", "cat >/dev/null"}, ""},
      {{"--set-payload", empty_file}, ""},
      {{"--set-payload", "-"}, ""},
      {{"--set-payload", "-"}, "\n"},
      {{"--set-payload", "-", "--dry-run"}, ""},
  };
  for (const auto& e : edits) {
    std::vector<std::string> args{"replay", "orders", "--id", ids[4]};
    args.insert(args.end(), e.args.begin(), e.args.end());
    INFO(e.args[0] << " " << e.args[1] << " with stdin of " << e.in.size() << " bytes");
    const auto r = f.run(args, e.in);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "empty"));
    CHECK(contains(r.err, "nothing was replayed"));
    CHECK(contains(r.err, e.args[0]));  // says which option gave the empty payload
    check_untouched(f, ids);
  }
  std::remove(empty_file.c_str());
  // What was read is said as it was: a lone newline is not "nothing"
  for (const char* in : {"\n", "\r\n"}) {
    const auto r = f.run({"replay", "orders", "--id", ids[4], "--set-payload", "-"}, in);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK_FALSE(contains(r.err, "read nothing"));
    CHECK(contains(r.err, "only a line ending"));
  }
  const auto r = f.run({"replay", "orders", "--id", ids[4], "--transform-cmd", "echo"});
  CHECK(contains(r.err, "printed only a line ending"));
}

TEST_CASE("a transform runs with pipefail: a failing stage of a pipeline fails the edit",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  // jq failed, the last stage printed anyway and exited 0
  auto r = f.run({"replay", "orders", "--id", ids[4], "--transform-cmd",
                  "false | echo '{\"i\":4,\"fixed\":true}'"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "failed (exit status 1)"));
  check_untouched(f, ids);
  // and its stdin is a pipe, not a file holding the payload
  r = f.run({"replay", "orders", "--id", ids[4], "--transform-cmd",
             "test -p /dev/stdin && cat || echo not-a-pipe"});
  CHECK(r.code == 0);
  CHECK(f.storage.source_range("orders") == std::vector<std::string>{"{\"i\":4}"});
}

TEST_CASE("a transform that outlives --transform-timeout is killed with its process group",
          "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  const std::string group_file = "/tmp/dlqctl-test-group-" + std::to_string(::getpid());
  std::remove(group_file.c_str());
  const auto started = std::chrono::steady_clock::now();
  // The shell's pid is its process group; `sleep` is another member, still running when the
  // shell would be killed alone.
  auto r = f.run({"replay", "orders", "--id", ids[4], "--transform-timeout", "1s",
                  "--transform-cmd", "echo $$ > " + group_file + "; sleep 30 | cat; echo '{}'"});
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(r.code == 1);
  CHECK(contains(r.err, "did not finish within 1s"));
  CHECK(contains(r.err, "--transform-timeout"));
  CHECK(contains(r.err, "nothing was replayed"));
  CHECK(took < std::chrono::seconds(10));
  check_untouched(f, ids);
  const pid_t pg = wait_for_group(group_file);
  REQUIRE(pg > 0);
  CHECK(group_gone(pg));
  std::remove(group_file.c_str());

  CHECK(contains(f.run({"replay", "--help"}).out, "--transform-timeout"));
  CHECK(f.run({"replay", "orders", "--id", ids[4], "--transform-timeout", "0s", "--transform-cmd",
               "cat"})
            .code == 1);
}

TEST_CASE("Ctrl-C during a transform kills it and replays nothing (exit 130)", "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  const std::string group_file = "/tmp/dlqctl-test-group-int-" + std::to_string(::getpid());
  std::remove(group_file.c_str());
  pid_t pg = 0;
  std::thread interrupter([&] {
    pg = wait_for_group(group_file);
    f.cancel = true;  // what the binary's SIGINT/SIGTERM handler does
  });
  const auto started = std::chrono::steady_clock::now();
  auto r = f.run({"replay", "orders", "--id", ids[4], "--transform-cmd",
                  "echo $$ > " + group_file + "; sleep 30; echo '{}'"});
  interrupter.join();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  CHECK(r.code == 130);
  CHECK(contains(r.err, "interrupted"));
  CHECK(contains(r.err, "nothing was replayed"));
  check_untouched(f, ids);
  REQUIRE(pg > 0);
  CHECK(group_gone(pg));
  CHECK(f.traps == std::vector<bool>{true, false});  // the handler was armed around it
  std::remove(group_file.c_str());
}

TEST_CASE("a transform that prints without end is stopped at the output limit", "[cli][ops]") {
  CliFixture f;
  const auto ids = fill(f);
  const auto r =
      f.run({"replay", "orders", "--id", ids[4], "--transform-cmd", "yes | head -c 80000000"});
  CHECK(r.code == 1);
  CHECK(contains(r.err, "more than 64 MiB"));
  check_untouched(f, ids);
}

}  // namespace test_ops_commands
