// compile_time.sh: DeadLetterQueue<KeyValueStorage<kv::MemoryStore>>, one send_to_dlq and
// one replay_all.
#include <dlq/kv.hpp>

int main() {
  dlq::DeadLetterQueue<dlq::KeyValueStorage<dlq::kv::MemoryStore>> q;
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  return q.replay_all("orders").replayed == 1 ? 0 : 1;
}
