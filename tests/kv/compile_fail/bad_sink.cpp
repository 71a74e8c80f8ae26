// Compile-fail check: a replay destination that cannot take payloads is rejected by
// KeyValueStorage with a message listing the accepted shapes. With -DDLQ_POSITIVE_CONTROL the
// sink has push() and the file compiles.
#include <dlq/kv/memory_store.hpp>
#include <dlq/kv/storage.hpp>

struct NotASink {
#ifdef DLQ_POSITIVE_CONTROL
  void push(std::string_view, std::string_view) {}
#else
  void send(std::string_view) {}
#endif
};

int main() {
  dlq::KeyValueStorage<dlq::kv::MemoryStore, NotASink> storage{dlq::kv::MemoryStore{}, NotASink{}};
  return static_cast<int>(storage.size("orders", dlq::ListKind::dead));
}
