// compile_time.sh: DeadLetterQueue<KeyValueStorage<kv::SqliteStore>>, one send_to_dlq and
// one replay_all.
//   kv_sqlite_send_replay [FILE]      (default compile_time.db; removed first)
#include <cstdio>

#include <dlq/sqlite.hpp>

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "compile_time.db";
  std::remove(path);
  dlq::DeadLetterQueue<dlq::KeyValueStorage<dlq::kv::SqliteStore>> q{
      dlq::KeyValueStorage<dlq::kv::SqliteStore>{dlq::kv::SqliteStore{path}}};
  q.send_to_dlq("orders", R"({"order":42})", "payment timeout", 3, "worker-7");
  return q.replay_all("orders").replayed == 1 ? 0 : 1;
}
