// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/async_queue.hpp
/// Internal to dlq::asio: the state of an AsyncDeadLetterQueue on an asynchronous storage
/// (dlq/asio/storage.hpp) — the storage and the blocking front end's queue core — and the
/// declaration of its steps. Their definitions live by concern in async_reads.hpp,
/// async_sends.hpp and async_batches.hpp, included at the end. Not part of the API.
#pragma once

#include <asio/any_io_executor.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/send_steps.hpp"
#include "dlq/asio/storage.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"

namespace dlq::asio::detail {

// An AsyncDeadLetterQueue's state on an asynchronous storage. Shared by the operations in
// flight (each holds it); every step after the initiating call runs on `executor`, which
// must be single-threaded. The front end's steps are those of the blocking front end, from
// its queue core: ids, clock, wire format, policies, counters and events are the same.
template <class Storage>
class async_queue : public std::enable_shared_from_this<async_queue<Storage>> {
 public:
  async_queue(::asio::any_io_executor ex, Storage s, Options o)
      : executor(std::move(ex)), storage_(std::move(s)), core_(std::move(o)) {}

  ::asio::any_io_executor executor;

  Storage& storage() { return storage_; }
  const Options& options() const noexcept { return core_.options; }
  Counters counters() const noexcept { return core_.counters.snapshot(); }

  // --- the operations, from the initiating call (any thread) ------------------------------
  // async_sends.hpp: send_to_dlq's steps in the initiating call (validate, check_payload, the
  // clock, the id, the envelope), a refusal kept for the completion; then its push.
  one_send prepare_one(std::string_view queue, std::string_view payload, const Failure& f) const;
  template <class Handler>
  void send_one(one_send s, Handler handler);
  // async_batches.hpp: send_batch (and send_to_dlq of the inline path's shape).
  void send(std::vector<FailedJob> jobs, const char* where, send_done done);
  // async_reads.hpp
  void size(std::string queue, done_fn<std::size_t> done);
  void peek(std::string queue, std::size_t start, std::size_t count,
            done_fn<std::vector<Entry>> done);
  void get(std::string queue, std::string id, done_fn<std::optional<Entry>> done);

 private:
  // Counts a storage error by type (as the blocking front end's guarded()).
  void count_failure(const std::exception_ptr& e) noexcept {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const storage_error& s) {
      core_.count_failure(s);
    } catch (...) {  // NOLINT(bugprone-empty-catch): only storage errors are counted
    }
  }

  template <class T>
  done_fn<T> counted(done_fn<T> done) {
    auto self = this->shared_from_this();
    return [self, done = std::move(done)](std::exception_ptr e, T v) {
      self->count_failure(e);
      done(e, std::move(v));
    };
  }

  // --- async_reads.hpp ---------------------------------------------------------------------
  static constexpr std::size_t get_page_size = 512;
  struct get_scan;
  void get_page(std::shared_ptr<get_scan> scan);
  void get_reanchor(std::shared_ptr<get_scan> scan);

  // --- async_sends.hpp: one job, and the steps every push ends with ------------------------
  template <class Handler>
  struct one_pushed;
  template <class Handler>
  struct counting_one;
  template <class Go, class Refused>
  void admit_counted(const std::string& queue, Go go, Refused refused);
  template <class Handler>
  void push_one(one_send s, Handler handler);
  template <class Handler>
  void count_one(one_send s, Handler handler);
  template <class Handler>
  void bump_one(std::shared_ptr<counting_one<Handler>> c);
  template <class Handler>
  void push_built(one_send s, Handler handler, dlq::detail::poison_mark mark);
  std::exception_ptr settle_push(std::string_view queue, std::exception_ptr e,
                                 const PushResult& result);

  // --- async_batches.hpp -------------------------------------------------------------------
  struct send_join;
  void send_async(std::vector<FailedJob> jobs, const char* where, send_done done);
  void count_batch(std::shared_ptr<send_join> join);
  void push_batch(std::shared_ptr<send_join> join);
  void pushed(send_join& join, std::size_t part, std::exception_ptr e, PushResult result);

  Storage storage_;
  dlq::detail::queue_core core_;
};

}  // namespace dlq::asio::detail

#include "dlq/asio/detail/async_batches.hpp"
#include "dlq/asio/detail/async_reads.hpp"
#include "dlq/asio/detail/async_sends.hpp"
