// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/source_take.hpp
/// Internal to dlq::asio: the waiting take of dlq::asio::AsyncSourceQueue — a non-blocking
/// poll (one reliable take, then a steady_timer back-off, again, until jobs come or the wait
/// is over) with per-operation cancellation that stops the polling at once. Not part of the
/// API; why a poll and not BLMOVE is argued in dlq/asio/source_queue.hpp.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/errors.hpp"
#include "dlq/errors.hpp"
#include "dlq/source_queue.hpp"

namespace dlq::asio::detail {

/// One try of a reliable take: (queue, consumer, max, done) — the backend's take, which
/// completes `done` on the executor, never inside the call.
using take_once_fn = std::function<void(const std::string&, const std::string&, std::size_t,
                                        done_fn<std::vector<SourceJob>>)>;

/// How long a waiting take sleeps between tries: `first` after the first empty try, doubled
/// after each further one up to `most`.
struct poll_delays {
  std::chrono::milliseconds first{5};
  std::chrono::milliseconds most{100};
};

// The state of one waiting take. Whichever comes first — jobs, an error, the end of the
// wait, terminal cancellation — completes the handler, once; after that no try is started,
// and a try already in flight has its answer dropped (the jobs it moved stay in the
// consumer's in-flight list, where its next take finds them: nothing lost, nothing handed
// out twice).
template <class Handler>
class take_op : public std::enable_shared_from_this<take_op<Handler>> {
 public:
  using clock = std::chrono::steady_clock;

  take_op(::asio::any_io_executor ex, Handler h, take_once_fn once, std::string queue,
          std::string consumer, std::size_t max, std::chrono::milliseconds wait, poll_delays delays)
      : ex_(ex),
        timer_(ex),
        handler_(std::move(h)),
        once_(std::move(once)),
        queue_(std::move(queue)),
        consumer_(std::move(consumer)),
        max_(max),
        deadline_(clock::now() + std::max(wait, std::chrono::milliseconds(0))),
        delay_(delays.first),
        most_(delays.most) {}

  // Runs on the executor: connects the cancellation slot, then the first try.
  void start() {
    slot_ = ::asio::get_associated_cancellation_slot(*handler_);
    if (slot_.is_connected()) {
      slot_.assign([w = std::weak_ptr<take_op>(this->shared_from_this())](
                       ::asio::cancellation_type type) {
        const auto self = w.lock();
        if (self && (type & ::asio::cancellation_type::terminal) != ::asio::cancellation_type::none)
          self->cancel();
      });
    }
    attempt();
  }

 private:
  void attempt() {
    in_flight_ = true;
    once_(queue_, consumer_, max_,
          [self = this->shared_from_this()](std::exception_ptr e, std::vector<SourceJob> jobs) {
            self->in_flight_ = false;
            self->answered(e, std::move(jobs));
          });
  }

  void answered(std::exception_ptr e, std::vector<SourceJob> jobs) {
    if (!handler_) return;  // cancelled meanwhile: the jobs stay in flight for the next take
    const clock::time_point now = clock::now();
    if (e || !jobs.empty() || now >= deadline_) return complete(e, std::move(jobs));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now);
    timer_.expires_after(std::min(delay_, left + std::chrono::milliseconds(1)));
    delay_ = std::min(delay_ * 2, most_);
    timer_.async_wait([self = this->shared_from_this()](std::error_code) {
      if (self->handler_) self->attempt();
    });
  }

  // Terminal cancellation, emitted on the executor: completes at once (posted), stops the
  // timer. outcome_unknown() when a try was in flight: it may have moved jobs in flight.
  void cancel() {
    if (!handler_) return;
    timer_.cancel();
    const bool unknown = in_flight_;
    auto e = std::make_exception_ptr(cancelled_error(
        dlq::detail::message("asio", "take", "the take was cancelled",
                             unknown ? "a try was in flight: jobs it moved stay in this consumer's "
                                       "in-flight list, and its next take returns them"
                                     : "nothing was taken"),
        unknown));
    // Not from inside the emit: the slot is cleared on a later turn, then the handler runs.
    ::asio::post(ex_, [self = this->shared_from_this(), h = std::move(*handler_), e]() mutable {
      self->slot_.clear();
      post_result(self->ex_, std::move(h), e, std::vector<SourceJob>{});
    });
    handler_.reset();
  }

  void complete(std::exception_ptr e, std::vector<SourceJob> jobs) {
    Handler h = std::move(*handler_);
    handler_.reset();
    if (slot_.is_connected()) slot_.clear();
    post_result(ex_, std::move(h), e, std::move(jobs));
  }

  ::asio::any_io_executor ex_;
  ::asio::steady_timer timer_;
  std::optional<Handler> handler_;
  ::asio::cancellation_slot slot_;
  take_once_fn once_;
  std::string queue_, consumer_;
  std::size_t max_;
  clock::time_point deadline_;
  std::chrono::milliseconds delay_, most_;
  bool in_flight_ = false;
};

}  // namespace dlq::asio::detail
