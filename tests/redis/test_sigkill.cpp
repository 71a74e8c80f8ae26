// A replayer process killed with SIGKILL at random points, 20 times, over 50k entries:
// after recover() every entry is exactly once in the dead list or the source queue.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlq/storage/redis_list.hpp"
#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

using namespace dlq;
using dlq::test::RawClient;

namespace {

pid_t spawn_child(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (auto& a : copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("a replayer killed with SIGKILL at random points loses and doubles nothing",
          "[redis][replay][sigkill]") {
  test::RedisProcess server;
  const std::string prefix = "k:";
  RedisListOptions o;
  o.dead_key = prefix + "dlq:{*}";
  o.source_key = prefix + "queue:{*}";
  o.corrupt_key = prefix + "dlq:{*}:corrupt";
  RedisListStorage storage(server.url(), o);
  RawClient raw(server.url());
  const std::string dead = storage.key("orders", ListKind::dead);
  const std::string source = storage.source_key("orders");

  std::vector<std::string> items;
  for (int i = 0; i < 50000; ++i) {
    items.push_back("{\"job\":" + std::to_string(i) + ",\"pad\":\"" + std::string(80, 'x') + "\"}");
  }
  raw.rpush(dead, items);
  std::vector<std::string> sorted = items;
  std::sort(sorted.begin(), sorted.end());

  const std::vector<std::string> child = {DLQ_REPLAYER_CHILD, server.url(), prefix, "orders",
                                          "1000"};
  auto move_back = [&] {  // put everything into the dead list again, order kept
    raw.cmd({"DEL", dead});
    raw.cmd({"RENAME", source, dead});
  };
  // Calibrate: how long does one full run take here (sanitizers make it slower)?
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = spawn_child(child);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const long long full_ms = std::max<long long>(test::elapsed_ms(t0), 20);
  REQUIRE(raw.integer({"LLEN", source}) == 50000);
  move_back();

  std::mt19937 rng(std::random_device{}());
  int partial = 0;
  for (int round = 0; round < 20; ++round) {
    const auto before = raw.integer({"LLEN", dead});
    if (before == 0) move_back();
    pid = spawn_child(child);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<long long>(1, full_ms)(rng)));
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const std::size_t fixed = storage.recover("orders");
    CHECK(fixed == 0);  // compare-and-move leaves nothing to repair
    auto in_dead = raw.list(dead);
    auto in_source = raw.list(source);
    if (!in_dead.empty() && !in_source.empty()) ++partial;
    // The dead list is a suffix of the original order, the source a prefix: no gaps.
    std::vector<std::string> all = in_source;
    all.insert(all.end(), in_dead.begin(), in_dead.end());
    INFO("round " << round << ": " << in_source.size() << " moved, " << in_dead.size() << " left");
    REQUIRE(all.size() == items.size());
    CHECK(all == items);
  }
  CHECK(partial >= 5);  // the kills really landed mid-replay
}
