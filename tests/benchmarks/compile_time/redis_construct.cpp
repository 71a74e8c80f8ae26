// compile_time.sh: DeadLetterQueue<RedisListStorage>, constructed only (it connects lazily).
//   redis_construct [URL]
#include <dlq/redis.hpp>

int main(int argc, char** argv) {
  dlq::DeadLetterQueue<dlq::RedisListStorage> q(
      dlq::RedisListStorage(argc > 1 ? argv[1] : "redis://127.0.0.1:6379/0"));
  return 0;
}
