// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_cluster.hpp
/// dlq::asio::RedisClusterRouter: Redis Cluster routing for the asynchronous path, on
/// non-blocking dlq::asio::RedisConnection s. dlq::asio::RedisListStorage owns one; it is not
/// needed directly. CMake: dlq::asio and dlq::redis.
///
/// It is the I/O around the decisions the blocking dlq::redis::Router shares, written once
/// without I/O: redis/detail/cluster_fsm.hpp (what each answer or failure leads to — MOVED,
/// ASK, TRYAGAIN, CLUSTERDOWN, their bounds and back-off; which nodes the map is read from,
/// one read at a time) and redis/detail/slot_map.hpp (the map; whether a CLUSTER SLOTS answer
/// is applied). What is its own:
/// - Detection at no extra round trip: the handshake of every RedisConnection asks CLUSTER
///   SLOTS; the router hooks the URL's connection (the seed). An error reply means a plain
///   server: plain() becomes true and the storage sends everything straight to the seed, as
///   before. Slot ranges mean a cluster, and the handshake of every connection the router
///   opens reads the map again (applied as any read: SlotMap::apply).
/// - One RedisConnection per node, opened on demand with the seed's ConnectionOptions (host
///   and port of the node; timeouts, AUTH, SELECT, reconnect rules unchanged). Each command
///   goes to the master of its key's slot; commands to one node are pipelined on its
///   connection, any number in flight over all nodes. A map read asks its nodes on these
///   connections, one after another.
/// - Until the seed's handshake has answered, commands go to the seed (a command for another
///   master is answered MOVED and followed).
/// - A redirected command is formatted once and re-sent from its buffer; the back-off is a
///   timer on the executor: the loop never blocks. Past a bound the command completes with
///   dlq::reply_error (code MOVED, ASK, TRYAGAIN or CLUSTERDOWN; not outcome unknown). A
///   command whose connection was lost, or that timed out, is never re-sent (the connection
///   reports it, outcome_unknown() for a write), as without a cluster. A slot the map gives
///   no master fails its command at once (the map read it starts serves the next ones).
/// - Order per slot (so per queue: its keys share a hash tag): the commands of a slot are in
///   flight on one node at a time. A command for a slot whose commands are in flight on
///   another node, or while one of them is being redirected, waits until they all have
///   completed; redirected commands are re-sent in the order their answers arrived. So a
///   queue's sends are stored in the order they were issued, across a moved slot too.
///
/// Thread-safety: as RedisConnection (one single-threaded executor).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlq/asio/detail/resp.hpp"
#include "dlq/asio/redis_connection.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/detail/cluster_fsm.hpp"
#include "dlq/redis/detail/slot_map.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::asio {

namespace detail {
// How dlq::redis::detail::parse_cluster_slots reads a RedisReply.
struct async_reply_access {
  static bool is_error(const RedisReply& r) { return r.type == reply_type::error; }
  static bool is_array(const RedisReply& r) { return r.type == reply_type::array; }
  static bool is_integer(const RedisReply& r) { return r.type == reply_type::integer; }
  static std::size_t size(const RedisReply& r) { return r.elements.size(); }
  static const RedisReply& at(const RedisReply& r, std::size_t i) { return r.elements[i]; }
  static long long integer(const RedisReply& r) { return r.integer; }
  static std::string_view text(const RedisReply& r) { return r.str; }
};
}  // namespace detail

/// Routes commands to the masters of a Redis Cluster on non-blocking connections (see the
/// file comment). Made with make(); shared by copies of a RedisListStorage.
class RedisClusterRouter : public std::enable_shared_from_this<RedisClusterRouter> {
 public:
  /// Completion of a routed command (as RedisConnection::execute_inline).
  using inline_callback = RedisConnection::inline_callback;

  /// Redirections followed and slot maps applied so far (for tests and monitoring).
  using Stats = redis::ClusterStats;

  /// A router whose seed is `seed` (the URL's connection); hooks its handshake.
  static std::shared_ptr<RedisClusterRouter> make(std::shared_ptr<RedisConnection> seed) {
    auto r = std::shared_ptr<RedisClusterRouter>(new RedisClusterRouter(seed));
    r->hook(*seed, 0);
    return r;
  }
  RedisClusterRouter(const RedisClusterRouter&) = delete;
  RedisClusterRouter& operator=(const RedisClusterRouter&) = delete;
  ~RedisClusterRouter() = default;

  /// True once the seed answered its handshake as a plain server (not a cluster node).
  bool plain() const noexcept { return map_.mode() == Mode::plain; }
  /// True once a slot map was read: the server is a Redis Cluster.
  bool clustered() const noexcept { return map_.mode() == Mode::cluster; }
  /// Redirections followed and maps applied so far.
  Stats stats() const noexcept { return map_.stats(); }
  /// Connections to cluster nodes the router has opened (the seed included).
  std::size_t connections() const noexcept {
    std::size_t n = 0;
    for (const auto& conn : conns_)
      n += conn ? 1 : 0;
    return n;
  }

  /// RedisConnection::execute() for a command whose keys are all in `key`'s slot: to the
  /// URL's connection as it is on a single server (the callback posted), else routed as
  /// execute_inline() (the callback posted or run from the read handler).
  void execute(std::string_view key, std::vector<std::string> args, bool write, std::string label,
               RedisConnection::callback done) {
    if (plain()) return seed_->execute(std::move(args), write, std::move(label), std::move(done));
    execute_inline(
        key,
        [&args](std::string& out) {
          detail::resp_command(out, args.size());
          for (const auto& a : args)
            detail::resp_arg(out, a);
        },
        write, "", std::move(label),
        [done = std::move(done)](std::exception_ptr e, RedisReply&& r) { done(e, std::move(r)); });
  }

  /// RedisConnection::execute_inline() for a command whose keys are all in `key`'s slot:
  /// `format(std::string& out)` appends it (RESP, read during the call). On a single server
  /// it goes straight to the URL's connection. Else it is formatted into a buffer kept for
  /// a re-send and sent to the master of `key`'s slot, redirections followed (see the file
  /// comment). `done` runs on the executor, never inside this call (from a connection's
  /// read handler when the answer arrives, or posted). An error reply completes with
  /// dlq::reply_error, as RedisConnection::execute_inline.
  template <class Format>
  void execute_inline(std::string_view key, Format&& format, bool write, const char* label_prefix,
                      std::string label, inline_callback done) {
    if (plain()) {
      return seed_->execute_inline(std::forward<Format>(format), write, label_prefix,
                                   std::move(label), std::move(done));
    }
    auto c = std::make_unique<command>();
    format(c->resp);
    c->slot = redis::key_slot(key);
    c->write = write;
    c->label_prefix = label_prefix;
    c->label = std::move(label);
    c->done = std::move(done);
    if (closed_) return fail_posted(std::move(c), closed_error());
    if (inflight_.empty()) {  // the per-slot tables, once something is routed
      inflight_.assign(redis::cluster_slot_count, 0);
      sent_to_.assign(redis::cluster_slot_count, 0);
      blocked_.assign(redis::cluster_slot_count, false);
    }
    route(std::move(c));
  }

  /// Closes every connection the router opened (see RedisConnection::close); commands
  /// waiting for their slot complete with dlq::connection_error (not sent). Idempotent.
  void close() noexcept {
    closed_ = true;
    try {
      for (auto& [slot, q] : held_)
        for (auto& c : q)
          fail_posted(std::move(c), closed_error());
      held_.clear();
      for (auto& conn : conns_)
        if (conn) conn->close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): close must not throw
    }
  }

 private:
  using Mode = redis::detail::SlotMap::Mode;
  using Next = redis::detail::Next;

  struct command {
    std::string resp;  // the formatted command, kept for a re-send
    std::uint16_t slot = 0;
    bool write = false;
    bool counted = false;               // in inflight_
    redis::detail::Redirections route;  // its MOVED / retry counts, ASKING (cluster_fsm.hpp)
    const char* label_prefix = "";
    std::string label;
    inline_callback done;
  };
  using command_ptr = std::unique_ptr<command>;

  explicit RedisClusterRouter(const std::shared_ptr<RedisConnection>& seed)
      : executor_(seed->get_executor()),
        options_(seed->options()),
        seed_(seed.get()),
        map_(seed->options().unix_socket.empty() ? seed->options().host : std::string(),
             seed->options().port) {
    conns_.push_back(seed);
  }

  // The handshake's CLUSTER SLOTS of node `n`'s connection: applied as any read (the seed's
  // first answer decides cluster vs plain).
  void hook(RedisConnection& conn, int n) {
    conn.on_cluster_slots([w = weak_from_this(), n](const RedisReply& r) {
      if (auto self = w.lock()) self->map_.apply(self->slots_of(r, n));
    });
  }

  // A CLUSTER SLOTS answer of node `n`, read into the decision module's value.
  redis::detail::ClusterSlots slots_of(const RedisReply& r, int n) const {
    return redis::detail::parse_cluster_slots<detail::async_reply_access>(r, map_.node(n).host);
  }

  RedisConnection& connection(int n) {
    const auto i = static_cast<std::size_t>(n);
    if (conns_.size() <= i) conns_.resize(i + 1);
    if (!conns_[i]) {
      const redis::detail::SlotMap::Node& node = map_.node(n);
      redis::ConnectionOptions o = options_;
      o.host = node.host;
      o.port = node.port;
      o.unix_socket.clear();
      conns_[i] = std::make_shared<RedisConnection>(executor_, std::move(o));
      hook(*conns_[i], n);
    }
    return *conns_[i];
  }

  // The node a new command for `slot` goes to: its master, or the seed until the map is
  // known; -1 when the map names none (then the map is read again for the next commands).
  int target(std::uint16_t slot) {
    if (map_.mode() != Mode::cluster) return 0;
    const int n = map_.owner(slot);
    if (n < 0) read_map(redis::detail::MapRead::elsewhere(map_, -1));
    return n;
  }

  void route(command_ptr c) {
    const std::uint16_t s = c->slot;
    const int to = target(s);
    if (to < 0) {
      auto error = no_master(*c);
      return fail_posted(std::move(c), std::move(error));
    }
    if (blocked_[s] || (inflight_[s] > 0 && sent_to_[s] != to)) {
      blocked_[s] = true;  // released when the slot's commands in flight have completed
      held_[s].push_back(std::move(c));
      return;
    }
    send(std::move(c), to, false);
  }

  void send(command_ptr c, int to, bool asking) {
    const std::uint16_t s = c->slot;
    if (!c->counted) {
      c->counted = true;
      ++inflight_[s];
    }
    sent_to_[s] = to;
    RedisConnection& conn = connection(to);
    if (asking) {  // ASKING holds for the next command on the connection: this one
      conn.execute_inline_raw(
          [](std::string& out) {
            detail::resp_command(out, 1);
            detail::resp_arg(out, "ASKING");
          },
          false, "ASKING", std::string(), [](std::exception_ptr, RedisReply&&) {});
    }
    const command* raw = c.get();
    const bool write = c->write;
    const char* prefix = c->label_prefix;
    std::string label = c->label;
    inline_callback cb = [self = shared_from_this(), c = std::move(c), to](std::exception_ptr e,
                                                                           RedisReply&& r) mutable {
      self->on_reply(std::move(c), to, e, std::move(r));
    };
    conn.execute_inline_raw([raw](std::string& out) { out.append(raw->resp); }, write, prefix,
                            std::move(label), std::move(cb));
  }

  // The answer of node `from` to a command: the decision module says what comes next.
  void on_reply(command_ptr c, int from, std::exception_ptr e, RedisReply&& r) {
    if (e) {  // lost, timed out or not reached: never re-sent; the map read again elsewhere
      read_map(redis::detail::Redirections::on_failure(map_, from).read);
      return finish(std::move(c), e, RedisReply{});
    }
    if (r.type != reply_type::error) return finish(std::move(c), nullptr, std::move(r));
    const std::string& endpoint = connection(from).endpoint();
    const redis::detail::Redirect rd =
        plain() ? redis::detail::Redirect{}
                : redis::detail::parse_redirect(r.str, map_.node(from).host);
    if (rd.kind == redis::detail::Redirect::none) {
      auto error = std::make_exception_ptr(
          redis::detail::reply_error_of(r.str, endpoint, c->label_prefix + c->label, false));
      return finish(std::move(c), std::move(error), RedisReply{});
    }
    Next next = c->route.on_answer(map_, rd, from);
    if (next.kind == Next::give_up) {
      auto error = std::make_exception_ptr(redis::detail::reply_error_of(
          r.str, endpoint,
          c->label_prefix + c->label + " (hash slot " + std::to_string(c->slot) + ")", false,
          next.why));
      return finish(std::move(c), std::move(error), RedisReply{});
    }
    blocked_[c->slot] = true;  // the slot's new commands wait for this one
    read_map(std::move(next.read));
    if (next.delay.count() == 0) return send(std::move(c), next.node, next.asking);
    auto timer = std::make_shared<::asio::steady_timer>(executor_, next.delay);
    timer->async_wait([self = shared_from_this(), timer, c = std::move(c),
                       to = next.node](const std::error_code&) mutable {
      if (self->closed_) return self->finish(std::move(c), self->closed_error(), {});
      const int n = to >= 0 ? to : self->target(c->slot);
      if (n < 0) {
        auto error = self->no_master(*c);
        return self->finish(std::move(c), error, {});
      }
      const bool asking = c->route.asking();
      self->send(std::move(c), n, asking);
    });
  }

  // A command is done: the slot's waiting commands go out once none is in flight.
  void finish(command_ptr c, std::exception_ptr e, RedisReply&& r) {
    const std::uint16_t s = c->slot;
    if (c->counted && --inflight_[s] == 0 && blocked_[s]) release(s);
    c->done(e, std::move(r));
  }

  void release(std::uint16_t s) {
    blocked_[s] = false;
    const auto it = held_.find(s);
    if (it == held_.end()) return;
    std::deque<command_ptr> q = std::move(it->second);
    held_.erase(it);
    while (!q.empty()) {
      command_ptr c = std::move(q.front());
      q.pop_front();
      if (closed_) {
        fail_posted(std::move(c), closed_error());
      } else {
        route(std::move(c));
      }
    }
  }

  // Does a map read (the decision module's MapRead says which node to ask, and when the
  // read is over): CLUSTER SLOTS on that node's connection, its answer or failure reported,
  // the next node asked. Nothing once the router is closed (the read's gate is freed).
  void read_map(redis::detail::MapRead read) {
    const int n = read.node();
    if (n < 0 || closed_) return;
    connection(n).execute_inline_raw(
        [](std::string& out) {
          detail::resp_command(out, 2);
          detail::resp_arg(out, "CLUSTER");
          detail::resp_arg(out, "SLOTS");
        },
        false, "CLUSTER SLOTS", std::string(),
        [self = shared_from_this(), n, read = std::move(read)](std::exception_ptr e,
                                                               RedisReply&& r) mutable {
          if (e) {
            read.on_failure();
          } else {
            read.on_answer(self->slots_of(r, n));
          }
          self->read_map(std::move(read));
        });
  }

  void fail_posted(command_ptr c, std::exception_ptr e) {
    ::asio::post(executor_, [self = shared_from_this(), c = std::move(c), e]() mutable {
      self->finish(std::move(c), e, RedisReply{});
    });
  }

  std::exception_ptr closed_error() const {
    return std::make_exception_ptr(
        dlq::connection_error(dlq::detail::message("redis", conns_.front()->endpoint(),
                                                   "the storage was closed", "nothing was sent"),
                              false));
  }

  std::exception_ptr no_master(const command& c) const {
    return std::make_exception_ptr(dlq::reply_error(
        dlq::detail::message(
            "redis", conns_.front()->endpoint(),
            c.label_prefix + c.label + ": " + redis::detail::no_master_serves(c.slot),
            redis::detail::no_master_hint),
        "CLUSTERDOWN"));
  }

  ::asio::any_io_executor executor_;
  redis::ConnectionOptions options_;
  RedisConnection* seed_;  // conns_[0]
  bool closed_ = false;
  redis::detail::SlotMap map_;  // the nodes, the slot map, the counters, the read gate
  std::vector<std::shared_ptr<RedisConnection>> conns_;  // node index -> its connection
  std::vector<std::uint32_t> inflight_;                  // slot -> commands sent and not completed
  std::vector<int> sent_to_;                             // slot -> the node of its last send
  std::vector<bool> blocked_;                            // slot -> new commands wait (held_)
  std::unordered_map<std::uint16_t, std::deque<command_ptr>> held_;
};

}  // namespace dlq::asio
