// The replayer the SIGKILL test kills at random points: replays a whole queue with
// RedisListStorage::replay_step (payload = raw item), then exits 0.
//   redis_replayer_child <url> <key prefix> <queue> <batch>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "dlq/storage/redis_list.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: redis_replayer_child URL PREFIX QUEUE BATCH\n");
    return 2;
  }
  try {
    dlq::RedisListOptions o;
    const std::string prefix = argv[2];
    o.dead_key = prefix + "dlq:{*}";
    o.source_key = prefix + "queue:{*}";
    o.corrupt_key = prefix + "dlq:{*}:corrupt";
    dlq::RedisListStorage storage(argv[1], o);
    const std::size_t batch = std::strtoul(argv[4], nullptr, 10);
    dlq::RedisListStorage::replay_cursor cursor;
    auto decide = [](std::string_view raw, dlq::Decision& d) {
      d.action = dlq::Action::replay;
      d.payload = raw;
    };
    for (long steps = 0; steps < 10'000'000; ++steps) {
      const auto r = storage.replay_step(argv[3], cursor, batch, decide);
      if (!r.conflict && r.examined == 0) return 0;
    }
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redis_replayer_child: %s\n", e.what());
    return 1;
  }
}
