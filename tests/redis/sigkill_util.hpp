// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The SIGKILL tests' kill: a replayer child killed at a random point of its replay.
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

#include "redis/redis_test_util.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace dlq::test {

// How many of the entries still to replay a kill point never falls in: two of the fast path's
// largest steps (8 batches of 1000). The child's move count is seen at the end of a step, up
// to one step past the kill point, and the child has sent its next step by the time the
// kill lands — a script the server completes anyway. With one step of margin (8000) the last
// step was often already sent: 7 of 20 kills landed mid-replay in a CI run (gcc-17, quiet
// machine), where the check wants 10.
inline constexpr long long replay_kill_margin = 16000;
// Tests refill their dead-letter list below this, so that kill points have room.
inline constexpr long long replay_kill_refill_below = replay_kill_margin + 8000;

// Spawns the replayer and kills it with SIGKILL at a random point of its replay: once it has
// moved a random number of the `left` entries still to replay (uniform over all but the last
// replay_kill_margin), and then 0-2 ms later (anywhere in a step). Kill points count moves, not
// time since the spawn: a child built with sanitizers spends a varying part of a short run starting
// up, and a run's speed varies with the machine's load, so kills timed from the spawn (as the
// SIGKILL tests did before) could land mostly before the first move or after the last — and
// their "kills landed mid-replay" check failed with nothing wrong. `source` is the list the
// child moves entries to; `left` how many it has still to move. A child that ends by itself
// before the kill must have finished (exit status 0): an error exit or a crash fails the
// round at once, rather than passing as a kill mid-replay after the 60 s wait.
inline void kill_mid_replay(const std::vector<std::string>& child, RawClient& raw,
                            const std::string& source, long long left, std::mt19937& rng) {
  const long long before = raw.integer({"LLEN", source});
  const long long moved = std::uniform_int_distribution<long long>(
      1, std::max<long long>(left - replay_kill_margin, 1))(rng);
  const pid_t pid = spawn_process(child);
  REQUIRE(pid > 0);
  int status = 0;
  bool reaped = false;  // the child ended by itself (then its pid must not be signalled)
  const auto t0 = std::chrono::steady_clock::now();
  while (raw.integer({"LLEN", source}) < before + moved &&
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
