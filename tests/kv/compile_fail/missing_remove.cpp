// Compile-fail check: a key-value store without remove() is rejected by KeyValueStorage, and
// the compiler's message names the missing member. With -DDLQ_POSITIVE_CONTROL the store is
// complete and the file compiles (so the failure is caused by the missing member alone).
#include <dlq/kv/storage.hpp>

struct IncompleteStore {
  void save(const std::vector<dlq::kv::Write>&) {}
  std::optional<dlq::kv::Item> load(std::string_view, std::string_view) { return std::nullopt; }
  std::vector<dlq::kv::Item> list(std::string_view, const dlq::kv::Window&) { return {}; }
#ifdef DLQ_POSITIVE_CONTROL
  std::size_t remove(const std::vector<dlq::kv::Removal>&) {
    return 0;
  }
#endif
};

int main() {
  dlq::KeyValueStorage<IncompleteStore> storage{IncompleteStore{}};
  return static_cast<int>(storage.size("orders", dlq::ListKind::dead));
}
