// compile_time.sh: DeadLetterQueue<MemoryStorage>, one send_to_dlq and one replay_all.
#include <dlq/dlq.hpp>

int main() {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  return q.replay_all("orders").replayed == 1 ? 0 : 1;
}
