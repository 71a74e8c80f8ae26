// compile_time.sh: DeadLetterQueue<RedisListStorage>, one send_to_dlq and one replay_all.
//   redis_send_replay [URL]
#include <dlq/redis.hpp>

int main(int argc, char** argv) {
  dlq::DeadLetterQueue<dlq::RedisListStorage> q(
      dlq::RedisListStorage(argc > 1 ? argv[1] : "redis://127.0.0.1:6379/0"));
  q.purge("compile_time_orders");
  q.send_to_dlq("compile_time_orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  return q.replay_all("compile_time_orders").replayed == 1 ? 0 : 1;
}
