// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/inline_queue.hpp
/// Internal to dlq::asio: AsyncDeadLetterQueue over a storage whose calls never block
/// (dlq::asio::runs_inline, e.g. dlq::MemoryStorage) — the blocking dlq::DeadLetterQueue
/// run inline, each result completed through the executor. Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/send_steps.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/entry.hpp"
#include "dlq/policies.hpp"

namespace dlq::asio::detail {

// The state of an AsyncDeadLetterQueue on an inline storage: its operations have finished
// when they are initiated; `done` posts the result (make_done, make_once).
template <class Storage>
class inline_queue {
 public:
  inline_queue(::asio::any_io_executor ex, Storage s, Options o)
      : executor(std::move(ex)), blocking_(std::move(s), std::move(o)) {}

  ::asio::any_io_executor executor;

  Storage& storage() { return blocking_.storage(); }
  const Options& options() const noexcept { return blocking_.options(); }
  Counters counters() const noexcept { return blocking_.counters(); }

  void send(std::vector<FailedJob> jobs, const char* where, send_done done) {
    run<std::vector<std::string>>(done, [&] {
      if (jobs.size() == 1 && std::string_view(where) == "send_to_dlq") {
        const FailedJob& j = jobs.front();
        return std::vector<std::string>{blocking_.send_to_dlq(j.queue, j.payload, j.failure)};
      }
      return blocking_.send_batch(jobs);
    });
  }
  void size(std::string queue, done_fn<std::size_t> done) {
    run<std::size_t>(done, [&] { return blocking_.size(queue); });
  }
  void peek(std::string queue, std::size_t start, std::size_t count,
            done_fn<std::vector<Entry>> done) {
    run<std::vector<Entry>>(done, [&] { return blocking_.peek(queue, start, count); });
  }
  void get(std::string queue, std::string id, done_fn<std::optional<Entry>> done) {
    run<std::optional<Entry>>(done, [&] { return blocking_.get(queue, id); });
  }

 private:
  template <class T, class Done, class F>
  static void run(Done& done, F&& f) {
    T value{};
    std::exception_ptr e;
    try {
      value = f();
    } catch (...) {
      e = std::current_exception();
    }
    done(e, std::move(value));
  }

  DeadLetterQueue<Storage> blocking_;
};

}  // namespace dlq::asio::detail
