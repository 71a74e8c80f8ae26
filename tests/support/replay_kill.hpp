// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The SIGKILL replay tests' kill, for every backend: a replayer child killed at a random
// point of its replay, measured by how many entries it has moved (tests/redis/test_sigkill,
// tests/postgres/test_postgres_replay_sigkill).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/redis_process.hpp"  // spawn_process (plain POSIX)

namespace dlq::test {

// Spawns the replayer `child` and kills it with SIGKILL at a random point of its replay: once
// it has moved a random number of the `left` entries still to replay (uniform over all but
// the last `margin`), and then 0-2 ms later (anywhere in a step). `moved()` is how many
// entries the destination holds now (the Redis source list's length, the job queue's size).
// Kill points count moves, not time since the spawn: a child built with sanitizers spends a
// varying part of a short run starting up, and a run's speed varies with the machine's load,
// so kills timed from the spawn could land mostly before the first move or after the last.
// `margin` must cover the steps the child may have sent, or finished, by the time a count
// is seen and the kill lands (one or more replay steps). A child that ends by itself before
// the kill must have finished (exit status 0): an error exit or a crash fails the round at
// once, rather than passing as a kill mid-replay after the 60 s wait.
template <class Moved>
void kill_mid_replay(const std::vector<std::string>& child, Moved moved, long long left,
                     long long margin, std::mt19937& rng) {
  const long long before = moved();
  const long long target = std::uniform_int_distribution<long long>(
      1, std::max<long long>(left - margin, 1))(rng);
  const pid_t pid = spawn_process(child);
  REQUIRE(pid > 0);
  int status = 0;
  bool reaped = false;  // the child ended by itself (then its pid must not be signalled)
  const auto t0 = std::chrono::steady_clock::now();
  while (moved() < before + target &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    REQUIRE(w >= 0);
    if (w == pid) {
      reaped = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!reaped) {
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 2000)(rng)));
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
  }
  // Killed by this SIGKILL, or done (exit 0: the replay finished first). A child that
  // failed, crashed or was killed otherwise is a failure, never a kill mid-replay.
  INFO("replayer " << child.front() << ": "
                   << (WIFEXITED(status)     ? "exit status " + std::to_string(WEXITSTATUS(status))
                       : WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                             : std::string("unknown end"))
                   << " (wanted SIGKILL, or exit status 0)");
  REQUIRE(((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
           (WIFEXITED(status) && WEXITSTATUS(status) == 0)));
}

}  // namespace dlq::test
