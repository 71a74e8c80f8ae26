// 12 — the key-value backend on Redis: one record per job (plain keys with the queue's hash
// tag, plus a per-queue index), replayed onto the Redis list your workers read.
//
//   example_12_kv_redis_records [redis://127.0.0.1:6379/0]
//
// (Under ctest the URL comes from the test server's file, DLQ_TEST_REDIS_URL_FILE.)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "dlq/redis.hpp"

namespace {
std::string redis_url(int argc, char** argv) {
  if (argc > 1) return argv[1];
  if (const char* file = std::getenv("DLQ_TEST_REDIS_URL_FILE")) {
    std::ifstream in(file);
    std::string url;
    if (in >> url) return url;
  }
  return "redis://127.0.0.1:6379/0";
}
}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string url = redis_url(argc, argv);
    // Records: example12:dlq:{thumbnails}:dead:r:<job id>; replayed jobs go to the list
    // example12:queue:{thumbnails}.
    dlq::kv::RedisStoreOptions store_options;
    store_options.key_prefix = "example12:";
    dlq::kv::RedisListSinkOptions sink_options;
    sink_options.key = "example12:queue:{*}";
    dlq::KeyValueStorage storage(dlq::kv::RedisStore(url, store_options),
                                 dlq::kv::RedisListSink(url, sink_options));
    dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);
    dlq.purge("thumbnails");

    dlq::Failure f;
    f.job_id = "task-42";
    f.error = "upstream timeout";
    f.attempt = 3;
    dlq.send_to_dlq("thumbnails", R"({"image":"cat.png"})", f);
    f.attempt = 6;  // the same job fails again: its record is replaced, not duplicated
    dlq.send_to_dlq("thumbnails", R"({"image":"cat.png"})", f);
    const auto entry = dlq.get("thumbnails", "task-42");
    std::printf("records: %zu, task-42 at attempt %lld\n", dlq.size("thumbnails"),
                static_cast<long long>(entry ? entry->attempt : 0));

    const dlq::ReplayReport report = dlq.replay_all("thumbnails");
    std::printf("replayed %zu onto %s\n", report.replayed,
                storage.sink().key("thumbnails").c_str());
    return report.replayed == 1 && entry && entry->attempt == 6 ? 0 : 1;
  } catch (const dlq::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
