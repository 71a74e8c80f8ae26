// The edited replayer the SIGKILL test kills at random points: DeadLetterQueue::replay_all
// over a RedisListStorage with ReplayOptions::transform prepending "E" to every payload, in
// batches of BATCH entries, then exits 0.
//   redis_edit_replayer_child <url> <key prefix> <queue> <batch>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/redis/list_storage.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: redis_edit_replayer_child URL PREFIX QUEUE BATCH\n");
    return 2;
  }
  try {
    dlq::RedisListOptions o;
    const std::string prefix = argv[2];
    o.dead_key = prefix + "dlq:{*}";
    o.source_key = prefix + "queue:{*}";
    o.corrupt_key = prefix + "dlq:{*}:corrupt";
    dlq::Options options;
    options.replay_batch_items = std::strtoul(argv[4], nullptr, 10);
    options.actor = "sigkill-test";
    dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(dlq::RedisListStorage(argv[1], o), options);
    dlq::ReplayOptions r;
    r.transform = [](const dlq::Entry& e) -> std::optional<std::string> { return "E" + e.payload; };
    const auto report = dlq.replay(argv[3], r);
    std::printf("replayed %zu, edited %zu\n", report.replayed, report.edited);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redis_edit_replayer_child: %s\n", e.what());
    return 1;
  }
}
