// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/pool.hpp
/// dlq::redis::ConnectionPool: connections to one server shared by many threads, so that
/// many worker threads can use one DeadLetterQueue. Connections are opened lazily, up to
/// PoolOptions::size; a thread holds one for the duration of one storage operation.
///
/// Sends can share connections instead (run_shared): a thread that finds batches already on
/// the wire and no slot it may open (PoolOptions::send_batches at most, fewer while many
/// commands wait) queues its command, and the next batch takes every queued command in one
/// write and one read (flat combining: whichever thread holds a batch slot sends for all of
/// them, then hands each its own reply). Each command still gets its own reply, its own error reply
/// and, on an I/O failure, its own exception naming its own command; see run_shared for what a
/// failure means for the commands written together.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/detail/sentinel_link.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::redis {

/// A thread-safe pool of Connection objects to one server.
class ConnectionPool {
 public:
  /// Exclusive use of one pooled connection; returns it to the pool when destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_ != nullptr && conn_ != nullptr) pool_->give_back(std::move(conn_));
    }
    /// The leased connection.
    Connection& operator*() const noexcept { return *conn_; }
    /// The leased connection.
    Connection* operator->() const noexcept { return conn_.get(); }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  /// Creates an empty pool; no connection is opened until acquire() needs one. Does not throw
  /// except std::bad_alloc.
  explicit ConnectionPool(ConnectionOptions options, PoolOptions pool = {})
      : options_(std::move(options)), pool_(pool), endpoint_(options_.endpoint()) {
    if (pool_.size == 0) pool_.size = 1;
    if (options_.sentinel.enabled() && options_.sentinel.check_interval.count() > 0)
      sentinel_ = std::make_shared<detail::SentinelLink>(options_);
  }
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool() = default;

  /// Takes an idle connection, or creates one if fewer than PoolOptions::size exist, or
  /// waits for one to be given back. The connection itself connects on first use.
  /// @throws dlq::timeout_error when none became free within PoolOptions::wait_timeout.
  Lease acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto available = [this] { return !idle_.empty() || created_ < pool_.size; };
    if (!available()) {
      if (pool_.wait_timeout.count() > 0) {
        if (!cv_.wait_for(lock, pool_.wait_timeout, available)) {
          throw dlq::timeout_error(
              dlq::detail::message("redis", endpoint_,
                                   "no pooled connection became free within " +
                                       std::to_string(pool_.wait_timeout.count()) + " ms (all " +
                                       std::to_string(pool_.size) + " in use)",
                                   "raise PoolOptions::size or PoolOptions::wait_timeout"));
        }
      } else {
        cv_.wait(lock, available);
      }
    }
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    ++created_;
    lock.unlock();
    auto conn = std::make_unique<Connection>(options_);
    if (sentinel_) {  // one view of the sentinels for all the pool's connections
      conn->share_sentinel_check(
          [link = sentinel_](const std::string& host, int port,
                             std::chrono::steady_clock::time_point named_at) {
            return link->must_go(host, port, named_at);
          });
    }
    return Lease(this, std::move(conn));
  }

  /// Runs one command on a pooled connection and returns its reply (an error reply is
  /// returned, not thrown), written together with the commands other threads are running
  /// through run_shared() at the same moment: while PoolOptions::send_batches batches are
  /// on the wire, or some are and 4 or more commands wait, a caller waits, and the next batch
  /// carries every waiting command (at most 64, or about 4 MiB, a batch), in arrival order,
  /// in one write. A lone caller sends at once, as acquire()->run() would. A caller whose
  /// batch was answered may send up to 7 more batches of waiting commands before it returns.
  ///
  /// A failure is reported to every command of the batch whose answer had not been read,
  /// each naming its own command, under the rule of Connection::run applied to the batch: a
  /// batch none of whose bytes left this process is sent again once on a fresh connection;
  /// after that, a write fails with `outcome_unknown() == true` — the command may or may not
  /// have been applied, and it is never re-sent. (So one command's outcome can be unknown
  /// because a command written before it in the same batch had left the process when the
  /// connection broke.) The commands answered before the failure get their answers.
  ///
  /// `command` must be answered with exactly one reply and leave the connection as it found
  /// it: not empty, and none of MULTI/EXEC/WATCH, SELECT, CLIENT REPLY, SUBSCRIBE, blocking
  /// pops (they would hold up the whole batch) — use acquire() for those.
  /// @throws dlq::invalid_argument for an empty command; dlq::timeout_error,
  ///         dlq::connection_error, dlq::protocol_error as Connection::run; the errors of
  ///         acquire() and of connecting.
  Reply run_shared(const Command& command, Effect effect) {
    std::shared_ptr<const Reply> no_wait;
    return run_shared(command, effect, ReplicaAck{}, no_wait);
  }

  /// What a write sent through run_shared asks of the replicas
  /// (dlq::RedisListOptions::replicas_to_ack).
  struct ReplicaAck {
    int replicas = 0;                      ///< replicas that must confirm; 0 = no WAIT
    std::chrono::milliseconds timeout{0};  ///< how long the master waits for them
  };

  /// run_shared for a write that replicas must confirm: the batch that carries it ends with
  /// one `WAIT replicas timeout` (the most any command of the batch asks; one WAIT covers
  /// every write before it on the connection), in the same write. `wait` receives WAIT's
  /// reply, shared by the batch's commands, or stays null when it was not read (the
  /// connection failed after this command's own reply). Deciding what it means is the
  /// caller's (dlq/redis/detail/replica_ack.hpp). With ack.replicas == 0 exactly
  /// run_shared(command, effect). @throws as run_shared(command, effect).
  Reply run_shared(const Command& command, Effect effect, const ReplicaAck& ack,
                   std::shared_ptr<const Reply>& wait) {
    wait.reset();
    if (command.size() == 0) {  // no answer at all: every later answer would go to the wrong call
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", endpoint_, "run_shared: an empty command", "give the command a name"));
    }
    if (pool_.send_batches == 0) {
      if (ack.replicas <= 0) return acquire()->run(command, effect);
      const Command wait_for = wait_command(ack.replicas, ack.timeout);
      const std::array<const Command*, 2> both_ptrs{&command, &wait_for};  // no copy of it
      std::vector<Reply> replies;
      detail::IoFailure failure;
      // As a shared batch: when the connection fails after the command's own answer was read
      // (during WAIT), the command ran: its reply is returned and `wait` stays null (applied,
      // not confirmed), not an unknown outcome.
      const bool all = acquire()->try_run(both_ptrs.data(), 2, effect, replies, failure);
      if (replies.empty() || !replies[0]) {
        detail::throw_io_failure(failure, endpoint_, command.label(), effect == Effect::write,
                                 options_.command_timeout);
      }
      if (all && replies.size() > 1 && replies[1]) {
        wait = std::make_shared<const Reply>(std::move(replies[1]));
      }
      return std::move(replies[0]);
    }
    SharedCall me;
    me.command = &command;
    me.effect = effect;
    me.ack = ack;
    std::unique_lock<std::mutex> lock(share_mutex_);
    queued_.push_back(&me);
    for (;;) {
      bool turn = false;
      {  // a turn is used up here, under share_mutex_: a batch ending meanwhile sees it held
        std::lock_guard<std::mutex> mine(me.mutex);
        if (me.state == SharedCall::your_turn) {
          me.state = SharedCall::queued;
          turn = true;
        }
      }
      if (may_open_slot(turn)) {
        me.sending = true;
        send_batch(lock, me);  // returns with `lock` released
      } else {
        lock.unlock();
        std::unique_lock<std::mutex> mine(me.mutex);
        me.cv.wait(mine, [&] { return me.state != SharedCall::queued; });
      }
      {
        std::lock_guard<std::mutex> mine(me.mutex);
        if (me.state == SharedCall::done) break;
      }
      lock.lock();
    }
    wait = std::move(me.wait);
    if (me.error) rethrow_own(me.error);
    if (me.failure) {
      detail::throw_io_failure(*me.failure, endpoint_, command.label(), effect == Effect::write,
                               options_.command_timeout);
    }
    return std::move(me.reply);
  }

  /// What run_shared() has done so far (for monitoring and tests).
  struct SharedSendStats {
    std::size_t batches_on_wire = 0;       ///< batches being sent or answered now
    std::size_t most_batches_on_wire = 0;  ///< the most at once so far
    std::size_t batches = 0;               ///< batches sent (one write each)
    std::size_t commands = 0;              ///< commands those batches carried
  };
  /// A snapshot of SharedSendStats. Does not throw.
  SharedSendStats shared_send_stats() const noexcept {
    std::lock_guard<std::mutex> lock(share_mutex_);
    return stats_;
  }

  /// The options every pooled connection uses.
  const ConnectionOptions& options() const noexcept { return options_; }
  /// "host:port" of the server, for messages.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// The most connections this pool opens.
  std::size_t capacity() const noexcept { return pool_.size; }

 private:
  // A command waiting in run_shared; lives on its caller's stack until it is done. Its
  // state, reply and failure are handed over under its own mutex (so a sender wakes each
  // caller without holding share_mutex_, and a caller cannot leave before its sender has let
  // go of the call).
  struct SharedCall {
    enum State : unsigned char { queued, your_turn, done };
    const Command* command = nullptr;
    Effect effect = Effect::read;
    std::mutex mutex;
    std::condition_variable cv;
    State state = queued;
    Reply reply;
    // The exchange failed: how. One object shared by the batch, so that handing it over
    // copies a pointer and cannot fail to allocate.
    std::shared_ptr<const detail::IoFailure> failure;
    std::exception_ptr error;           // acquiring or connecting failed
    bool sending = false;               // its caller is sending a batch (guarded by share_mutex_)
    ReplicaAck ack;                     // replicas that must confirm it (a WAIT ends its batch)
    std::shared_ptr<const Reply> wait;  // that WAIT's reply, when it was read
  };

  static Command wait_command(int replicas, std::chrono::milliseconds timeout) {
    Command c("WAIT");
    c.arg(replicas).arg(static_cast<long long>(timeout.count())).label("WAIT");
    return c;
  }
  static constexpr std::size_t max_batch_commands = 64;
  static constexpr std::size_t max_batch_bytes = std::size_t{4} << 20;
  // A thread sends at most this many batches in a row (the first normally carrying its own
  // command) before it hands its slot over.
  static constexpr std::size_t max_batches_in_a_row = 8;
  // A newcomer opens one more batch slot (up to PoolOptions::send_batches) while fewer than
  // this many commands (its own included) wait: the next batch would be small anyway, so
  // sending now costs the server little and saves the newcomer a wait for a slot.
  static constexpr std::size_t open_slot_below = 4;
  // A sender gives up its slot when at least this many commands wait for one (see send_batch).
  static constexpr std::size_t close_slot_at = 8;

  // With share_mutex_ held: whether the calling (queued) caller may send the next batch now.
  // Never when min(send_batches, size) batches are out. Otherwise always when no batch is
  // out, or when a finished batch handed it the slot (`turn`) — so queued commands are never
  // left without a sender; and else when the waiting batch would be small.
  bool may_open_slot(bool turn) const noexcept {
    // More slots than connections would only make senders wait in acquire() holding a slot.
    if (senders_ >= std::min(pool_.send_batches, pool_.size) || queued_.empty()) return false;
    return senders_ == 0 || turn || queued_.size() < open_slot_below;
  }

  // With `lock` (share_mutex_) held: takes a batch slot and sends batches of the queued
  // commands (exchange) while commands wait — at most max_batches_in_a_row — then frees the
  // slot and tells the first still-queued caller without a turn that it may send the next
  // batch; or, when many commands wait and other batches are out, closes the slot without a
  // hand-over. `self` is the calling thread's own call. Returns with `lock` released.
  void send_batch(std::unique_lock<std::mutex>& lock, SharedCall& self) {
    ++senders_;
    stats_.batches_on_wire = senders_;
    stats_.most_batches_on_wire = std::max(stats_.most_batches_on_wire, senders_);
    for (std::size_t round = 1;; ++round) {
      const bool answered = exchange(lock);  // returns with `lock` held again
      if (queued_.empty()) break;
      // Many commands waiting while other batches are out and the server answers: it is the
      // bottleneck, and fewer, bigger batches cost it less. This slot closes (no turn handed
      // on) and another batch takes the queue next — unless a full batch waits, which keeps
      // the slot busy, or this batch failed (the others may be stuck on a frozen server too,
      // and the queue would wait a command timeout longer for them).
      if (answered && senders_ > 1 && queued_.size() >= close_slot_at &&
          queued_.size() < max_batch_commands) {
        stats_.batches_on_wire = --senders_;
        self.sending = false;
        lock.unlock();
        return;
      }
      // The slot stays with this thread while commands wait and the server answers: it is
      // awake, while handing the slot over would wake a sleeping caller first (the slot idle
      // until the scheduler runs it). Bounded, so that its own caller returns; and not after
      // a failed batch: on a frozen server each further batch would hold its caller another
      // command timeout past its own failure.
      if (!answered || round >= max_batches_in_a_row) break;
    }
    stats_.batches_on_wire = --senders_;
    self.sending = false;  // `self` is its caller's: alive while that caller is in here
    // The freed slot goes to the oldest queued caller that neither holds a turn already (two
    // batches ending together wake two callers, not the same one twice) nor is sending a
    // batch itself (it looks for a free slot again when that is done). Those skipped look
    // for a free slot anyway, so a slot is never left unseen.
    for (SharedCall* next : queued_) {
      if (next->sending) continue;
      std::lock_guard<std::mutex> hold(next->mutex);  // next is queued: its caller waits
      if (next->state != SharedCall::queued) continue;
      next->state = SharedCall::your_turn;
      next->cv.notify_one();
      break;
    }
    lock.unlock();
  }

  // With `lock` (share_mutex_) held and a slot counted in senders_: takes the queued commands
  // (up to the batch limits; at least one), sends them in one exchange with the lock
  // released, hands each call its reply (when it was read, even if a later one failed) or
  // failure and wakes its caller. Returns with `lock` held again; true when every command of
  // the batch was answered.
  bool exchange(std::unique_lock<std::mutex>& lock) {
    std::size_t n = 0;
    std::size_t bytes = 0;
    while (n < queued_.size() && n < max_batch_commands) {
      for (const std::string_view a : queued_[n]->command->args())
        bytes += a.size();
      if (n > 0 && bytes > max_batch_bytes) break;
      ++n;
    }
    // Fixed arrays, and a shared failure: nothing between dequeuing and handing back can fail
    // to allocate outside the try below.
    std::array<SharedCall*, max_batch_commands> batch;
    std::array<const Command*, max_batch_commands + 1> commands;  // + the batch's WAIT
    std::copy(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(n), batch.begin());
    queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(n));
    ++stats_.batches;
    stats_.commands += n;
    lock.unlock();
    Effect effect = Effect::read;
    ReplicaAck ack;  // the most any command of the batch asks
    for (std::size_t i = 0; i < n; ++i) {
      commands[i] = batch[i]->command;
      if (batch[i]->effect == Effect::write) effect = Effect::write;
      ack.replicas = std::max(ack.replicas, batch[i]->ack.replicas);
      ack.timeout = std::max(ack.timeout, batch[i]->ack.timeout);
    }
    std::vector<Reply> replies;
    std::shared_ptr<const detail::IoFailure> failure;
    std::exception_ptr error;
    std::shared_ptr<Reply> wait;  // the batch's WAIT reply, when it was read
    try {
      // The failure record is allocated before anything is written: failing to allocate it
      // after some answers were read would hand those callers std::bad_alloc instead.
      auto record = std::make_shared<detail::IoFailure>();
      std::optional<Command> waiting;
      if (ack.replicas > 0) {
        wait = std::make_shared<Reply>();
        waiting.emplace(wait_command(ack.replicas, ack.timeout));
        commands[n] = &*waiting;
      }
      auto lease = acquire();
      if (!lease->try_run(commands.data(), waiting ? n + 1 : n, effect, replies, *record)) {
        failure = std::move(record);
      }
      if (wait && replies.size() > n) *wait = std::move(replies[n]);
      if (wait && !*wait) wait.reset();
    } catch (...) {
      error = std::current_exception();
    }
    // From here to the end nothing may throw: every call of the batch must be handed its
    // outcome (its caller waits for it), and the slot given back.
    for (std::size_t i = 0; i < n; ++i) {
      SharedCall& c = *batch[i];
      std::lock_guard<std::mutex> hold(c.mutex);
      if (error) {
        c.error = error;
      } else if (failure && i >= replies.size()) {  // its answer was not read
        c.failure = failure;
      } else {
        c.reply = std::move(replies[i]);
        if (c.ack.replicas > 0) c.wait = wait;  // null when WAIT's reply was not read
      }
      c.state = SharedCall::done;
      c.cv.notify_one();  // under c.mutex: its caller cannot return (and destroy c) before
    }
    lock.lock();
    return !error && !failure;
  }

  // Throws a copy of the batch's shared exception (acquiring or connecting failed), so that
  // each caller — and its catch handler — has an object of its own; then lets go of the
  // shared one under share_mutex_, so that whichever thread frees it does so after every
  // caller's copy (ordered by that mutex, which ThreadSanitizer sees, unlike the exception's
  // reference count inside the C++ runtime). An exception of another type is rethrown shared.
  [[noreturn]] void rethrow_own(std::exception_ptr& shared) {
    std::exception_ptr own;
    try {
      std::rethrow_exception(shared);
    } catch (const dlq::timeout_error& e) {
      own = std::make_exception_ptr(e);
    } catch (const dlq::connection_error& e) {
      own = std::make_exception_ptr(e);
    } catch (const dlq::protocol_error& e) {
      own = std::make_exception_ptr(e);
    } catch (const dlq::reply_error& e) {
      own = std::make_exception_ptr(e);
    } catch (const std::bad_alloc&) {
      own = std::make_exception_ptr(std::bad_alloc());
    } catch (...) {
      own = shared;
    }
    {
      std::lock_guard<std::mutex> lock(share_mutex_);
      shared = nullptr;
    }
    std::rethrow_exception(own);
  }

  void give_back(std::unique_ptr<Connection> conn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(std::move(conn));
    }
    cv_.notify_one();
  }

  ConnectionOptions options_;
  std::shared_ptr<detail::SentinelLink> sentinel_;  // Sentinel with check_interval: shared
  PoolOptions pool_;
  std::string endpoint_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t created_ = 0;
  mutable std::mutex share_mutex_;   // guards queued_, senders_ and stats_
  std::vector<SharedCall*> queued_;  // run_shared callers waiting for a batch, oldest first
  std::size_t senders_ = 0;          // batches on the wire (slots in use)
  SharedSendStats stats_;
};

}  // namespace dlq::redis
