// 01 — the whole story in twenty lines: a job fails its last retry, lands in the dead-letter
// queue with what went wrong, an operator looks at it and replays it back to its queue.
#include <cstdio>

#include <dlq/dlq.hpp>

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> dlq;  // swap in RedisListStorage for production

  // A worker gave up on a job after 3 attempts.
  const std::string id = dlq.send_to_dlq("orders", R"({"order_id":42,"amount":129900})",
                                         "payment gateway timeout", 3, "worker-7");

  // An operator inspects the dead letters…
  for (const dlq::Entry& e : dlq.peek("orders"))
    std::printf("%s  attempt %lld  %s  %s\n", e.id.c_str(), static_cast<long long>(e.attempt),
                e.error.c_str(), e.payload.c_str());

  // …fixes the cause, and replays them. The payload goes back byte for byte.
  const dlq::ReplayReport report = dlq.replay_all("orders");
  const auto job = dlq.storage().source_pop("orders");
  std::printf("replayed %zu; the worker now gets %s back (entry %s)\n", report.replayed,
              job ? job->c_str() : "nothing", id.c_str());
  return report.replayed == 1 ? 0 : 1;
}
