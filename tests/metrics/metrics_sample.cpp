// Prints the Prometheus exposition of a DeadLetterQueue over dlq::MemoryStorage that has been
// through what production brings: queue names with `"`, `\`, a newline and a byte that is
// not UTF-8, a foreign queue name with a NUL byte, corrupt and foreign entries (no readable time),
// evictions of both reasons, a parked job and a storage error. check_metrics.sh lints the output
// with promtool.
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "dlq/dlq.hpp"
#include "dlq/metrics/prometheus.hpp"

namespace {

// A storage whose size() fails once: a storage error the counters see.
struct FlakyStorage : dlq::MemoryStorage {
  bool fail_next = false;
  std::size_t size(std::string_view queue, dlq::ListKind kind) {
    if (fail_next) {
      fail_next = false;
      throw dlq::timeout_error("[dlq.sample] size: timed out; try again");
    }
    return dlq::MemoryStorage::size(queue, kind);
  }
};

}  // namespace

int main() {
  using namespace std::chrono_literals;
  FlakyStorage storage;
  dlq::Options options;
  options.retention_for["evicting"].max_length = 2;
  options.retention_for["aging"].max_age = std::chrono::hours(1);
  options.poison_guard.park_after = 1;
  auto now = std::chrono::system_clock::now();
  options.clock = [&now] { return now; };
  dlq::DeadLetterQueue<FlakyStorage&> q(storage, options);

  const std::vector<std::string> names = {"orders",  "we\"ird", "back\\slash", "new\nline",
                                          "bad\xff", "bad\xfe", "ünïcode",     "evicting"};
  for (const auto& name : names)
    q.send_to_dlq(name, "{}", "failed");
  for (int i = 0; i < 3; ++i)
    q.send_to_dlq("evicting", "{\"n\":" + std::to_string(i) + "}", "failed");
  q.send_to_dlq("orders", "{}", "failed again");  // the same payload again: parked
  storage.push(dlq::Record{"foreign", {}, {}, R"({"original_payload":1,"error":"x"})"});
  // a foreign name dlq refuses (a NUL byte): left out, counted in dlq_skipped_queues
  storage.push(dlq::Record{std::string_view("nul\0byte", 8), {}, {}, "x"});
  storage.push(dlq::Record{"corrupt", {}, {}, "not json"});
  q.replay_all("corrupt");  // sets it aside: a corrupt list
  q.send_to_dlq("aging", "{}", "old");
  now += std::chrono::hours(2);
  q.trim("aging");  // evicted for age
  storage.fail_next = true;
  try {
    (void)q.size("orders");
  } catch (const dlq::timeout_error&) {
  }

  dlq::metrics::PrometheusOptions o;
  o.labels = {{"service", "sample \"svc\""}};
  std::cout << dlq::metrics::scrape(q, o);
  return 0;
}
