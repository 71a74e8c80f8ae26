// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The SIGKILL tests' kill: a replayer child killed at a random point of its replay.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "redis/redis_test_util.hpp"
#include "support/replay_kill.hpp"

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

// kill_mid_replay (tests/support/replay_kill.hpp) on a Redis replay: `source` is the list the
// child moves entries to; `left` how many it has still to move.
inline void kill_mid_replay(const std::vector<std::string>& child, RawClient& raw,
                            const std::string& source, long long left, std::mt19937& rng) {
  kill_mid_replay(
      child, [&] { return raw.integer({"LLEN", source}); }, left, replay_kill_margin, rng);
}

}  // namespace dlq::test
