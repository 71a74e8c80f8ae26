// Entry ids: UUIDv7, strictly increasing in a process, unique after fork; derived ids.
#include "dlq/detail/id.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"

namespace test_id {

using namespace std::chrono;

TEST_CASE("new ids are UUIDv7 carrying the millisecond they were made", "[id]") {
  dlq::detail::id_generator gen;
  const auto now = system_clock::time_point(milliseconds(1796009539123));
  const std::string id = gen.next(now);
  CHECK(std::regex_match(
      id, std::regex("^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")));
  const auto ms = std::stoull(id.substr(0, 8) + id.substr(9, 4), nullptr, 16);
  CHECK(ms == 1796009539123ull);
}

TEST_CASE("ids increase strictly, also within one millisecond and across threads", "[id]") {
  dlq::detail::id_generator gen;
  const auto frozen = system_clock::time_point(milliseconds(1796009539123));
  std::vector<std::vector<std::string>> per_thread(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i)
        per_thread[t].push_back(gen.next(frozen));
    });
  for (auto& t : threads)
    t.join();
  std::set<std::string> all;
  for (const auto& ids : per_thread) {
    for (std::size_t i = 1; i < ids.size(); ++i)
      REQUIRE(ids[i - 1] < ids[i]);
    all.insert(ids.begin(), ids.end());
  }
  CHECK(all.size() == 20000);
  // A clock that goes backwards does not make ids go backwards.
  const std::string before = gen.next(frozen);
  CHECK(gen.next(frozen - hours(1)) > before);
}

TEST_CASE("a forked child does not repeat its parent's random bits", "[id]") {
  dlq::detail::id_generator gen;
  (void)gen.next(system_clock::now());  // seed the parent's state before forking
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const auto now = system_clock::time_point(milliseconds(1796009539123));
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string id = gen.next(now);
    (void)!write(fds[1], id.data(), id.size());
    _exit(0);
  }
  close(fds[1]);
  char buf[64] = {};
  const auto n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(n == 36);
  const std::string child(buf, 36);
  const std::string parent = gen.next(now);
  CHECK(child.substr(19) != parent.substr(19));
}

TEST_CASE("an id derived from bytes is stable and distinguishes different bytes", "[id]") {
  CHECK(dlq::detail::derived_id("abc") == dlq::detail::derived_id("abc"));
  CHECK(dlq::detail::derived_id("abc") != dlq::detail::derived_id("abd"));
  CHECK(dlq::detail::derived_id("").rfind("raw-", 0) == 0);
  CHECK(dlq::detail::derived_id("x").size() == 20);
  // FNV-1a 64 of "a" is af63dc4c8601ec8c.
  CHECK(dlq::detail::derived_id("a") == "raw-af63dc4c8601ec8c");
}

TEST_CASE("the operating system's random source gives different 64-bit values", "[id]") {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 64; ++i)
    seen.insert(dlq::detail::os_random64());
  CHECK(seen.size() == 64);
}

}  // namespace test_id
