// Compile-fail check: a storage without push() is rejected, and the compiler's message names
// the missing member. Built with -DDLQ_POSITIVE_CONTROL it is a complete storage and compiles.
#include <dlq/dead_letter_queue.hpp>

struct IncompleteStorage {
  struct replay_cursor {};
#ifdef DLQ_POSITIVE_CONTROL
  void push(const dlq::Record&) {}
#endif
  void push_many(const std::vector<dlq::Record>&) {}
  std::size_t size(std::string_view, dlq::ListKind) {
    return 0;
  }
  std::vector<std::string> range(std::string_view, dlq::ListKind, std::size_t, std::size_t) {
    return {};
  }
  bool remove(std::string_view, dlq::ListKind, std::string_view, std::string_view) {
    return false;
  }
  std::size_t purge(std::string_view, dlq::ListKind) {
    return 0;
  }
  std::vector<std::string> queues() {
    return {};
  }
  std::vector<std::size_t> sizes(const std::vector<std::string>&) {
    return {};
  }
  dlq::StepResult replay_step(std::string_view, replay_cursor&, std::size_t, dlq::Decider) {
    return {};
  }
};

int main() {
  dlq::DeadLetterQueue<IncompleteStorage> q;
  return static_cast<int>(q.size("orders"));
}
