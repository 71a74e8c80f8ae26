// 10 — the key-value backend: one record per job (the Rust seed's `dlq:{task_id}` records).
// A job dead-lettered again replaces its record instead of adding a second one; replay sends
// payloads to a destination you supply — here a lambda standing in for your job queue.
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include <dlq/kv.hpp>  // in production: <dlq/sqlite.hpp> (dlq::kv::SqliteStore)

int main() {
  std::deque<std::string> job_queue;  // your real queue (Redis list, SQS, an in-process queue…)

  // Replay pushes first, then removes the record (at-least-once): a crash in between means
  // the job is pushed again by the next replay, never lost.
  dlq::KeyValueStorage storage(dlq::kv::MemoryStore{},
                               [&](const std::vector<dlq::kv::Message>& batch) {
                                 for (const auto& m : batch)
                                   job_queue.emplace_back(m.payload);
                               });
  dlq::DeadLetterQueue<decltype(storage)&> dlq(storage);

  dlq::Failure f;
  f.job_id = "task-42";  // the record's key: dead-lettering task-42 again replaces it
  f.error = "upstream timeout";
  f.attempt = 3;
  dlq.send_to_dlq("thumbnails", R"({"image":"cat.png"})", f);
  f.error = "upstream timeout (again)";
  f.attempt = 6;
  dlq.send_to_dlq("thumbnails", R"({"image":"cat.png"})", f);

  const auto entry = dlq.get("thumbnails", "task-42");  // direct lookup by job id
  std::printf("records: %zu, task-42 attempt %lld: %s\n", dlq.size("thumbnails"),
              static_cast<long long>(entry ? entry->attempt : 0),
              entry ? entry->error.c_str() : "-");

  const dlq::ReplayReport report = dlq.replay_all("thumbnails");
  std::printf("replayed %zu; job queue now holds %zu job(s): %s\n", report.replayed,
              job_queue.size(), job_queue.empty() ? "-" : job_queue.front().c_str());
  return dlq.size("thumbnails") == 0 && job_queue.size() == 1 && entry && entry->attempt == 6 ? 0
                                                                                              : 1;
}
