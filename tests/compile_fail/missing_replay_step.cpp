// Compile-fail check: a storage without replay_step() is rejected with a message naming it.
#include <dlq/dead_letter_queue.hpp>

struct NoReplayStorage {
  struct replay_cursor {};
  void push(const dlq::Record&) {}
  void push_many(const std::vector<dlq::Record>&) {}
  std::size_t size(std::string_view, dlq::ListKind) { return 0; }
  std::vector<std::string> range(std::string_view, dlq::ListKind, std::size_t, std::size_t) {
    return {};
  }
  bool remove(std::string_view, dlq::ListKind, std::string_view, std::string_view) { return false; }
  std::size_t purge(std::string_view, dlq::ListKind) { return 0; }
  std::vector<std::string> queues() { return {}; }
  std::vector<std::size_t> sizes(const std::vector<std::string>&) { return {}; }
};

int main() {
  dlq::DeadLetterQueue<NoReplayStorage> q;
  return static_cast<int>(q.size("orders"));
}
