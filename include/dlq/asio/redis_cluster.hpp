// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_cluster.hpp
/// dlq::asio::RedisClusterRouter: Redis Cluster routing for the asynchronous path — the
/// rules of the blocking dlq::redis::Router (redis/cluster.hpp) on non-blocking
/// dlq::asio::RedisConnection s. dlq::asio::RedisListStorage owns one; it is not needed
/// directly. CMake: dlq::asio and dlq::redis.
///
/// - Detection at no extra round trip: the handshake of every RedisConnection asks CLUSTER
///   SLOTS; the router hooks the URL's connection (the seed). An error reply means a plain
///   server: plain() becomes true and the storage sends everything straight to the seed, as
///   before. Slot ranges mean a cluster: the map slot -> master is kept, and the handshake of
///   every connection the router opens reads it again.
/// - One RedisConnection per master, opened on demand with the seed's ConnectionOptions
///   (host and port of the node; timeouts, AUTH, SELECT, reconnect rules unchanged). Each
///   command goes to the master of its key's slot (dlq::redis::key_slot); commands to one
///   node are pipelined on its connection, any number in flight over all nodes.
/// - Until the seed's handshake has answered, commands go to the seed (with the redirection
///   rules below: a command for another master is answered MOVED and followed).
/// - Redirections (dlq::redis::detail::parse_redirect), each meaning "not executed", so a
///   re-send cannot store anything twice: MOVED — the map entry is set at once, the map is
///   read again from that node (one CLUSTER SLOTS at a time), and the command is re-sent
///   there, at most 5 times; ASK — re-sent to the named node preceded by ASKING, once (an
///   ASK from that node fails); TRYAGAIN and CLUSTERDOWN — re-sent after 10 ms doubling to
///   200 ms, at most 10 times (after CLUSTERDOWN the map is read again from the seed, else —
///   its map of no slot — from another connected node). A MOVED or ASK naming no host (":<port>",
///   or "?:<port>") means the host of the node that answered. Past a bound the command completes
///   with dlq::reply_error (code MOVED, ASK, TRYAGAIN or CLUSTERDOWN; not outcome unknown). The
///   back-off is a timer on the executor: the loop never blocks.
/// - A command whose connection was lost, or that timed out, is never re-sent (the
///   connection reports it, outcome_unknown() for a write), as without a cluster; the map is
///   then read again from another node (the seed, else one connected), so a master that went
///   down is not used for its slots once the cluster has given them to another. A map of no
///   slot read so (a node that forgot the cluster: CLUSTER RESET, or restarted without its
///   nodes.conf) is not applied: the next such node is asked, else the map is kept. Nor is
///   one read after CLUSTERDOWN, MOVED, for a slot of no master or by a reconnection's
///   handshake: once a map is known, a map of no slot is never applied.
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

#include <algorithm>
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
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"

namespace dlq::asio {

namespace detail {
// How dlq::redis::detail::parse_slot_ranges reads a RedisReply.
struct async_reply_access {
  static bool is_array(const RedisReply& r) { return r.type == REDIS_REPLY_ARRAY; }
  static bool is_integer(const RedisReply& r) { return r.type == REDIS_REPLY_INTEGER; }
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

  /// Redirections followed so far (for tests and monitoring).
  struct Stats {
    std::size_t moved = 0;      ///< MOVED answers followed
    std::size_t ask = 0;        ///< ASK answers followed
    std::size_t retries = 0;    ///< TRYAGAIN / CLUSTERDOWN back-offs
    std::size_t refreshes = 0;  ///< slot maps read (handshakes and CLUSTER SLOTS)
  };

  /// A router whose seed is `seed` (the URL's connection); hooks its handshake.
  static std::shared_ptr<RedisClusterRouter> make(std::shared_ptr<RedisConnection> seed) {
    auto r = std::shared_ptr<RedisClusterRouter>(new RedisClusterRouter(seed));
    r->hook(*seed, seed->options().unix_socket.empty() ? seed->options().host : std::string());
    return r;
  }
  RedisClusterRouter(const RedisClusterRouter&) = delete;
  RedisClusterRouter& operator=(const RedisClusterRouter&) = delete;
  ~RedisClusterRouter() = default;

  /// True once the seed answered its handshake as a plain server (not a cluster node).
  bool plain() const noexcept { return mode_ == mode::plain; }
  /// True once a slot map was read: the server is a Redis Cluster.
  bool clustered() const noexcept { return mode_ == mode::cluster; }
  /// Redirections followed so far.
  Stats stats() const noexcept { return stats_; }
  /// Connections to cluster nodes the router has opened (the seed included).
  std::size_t connections() const noexcept {
    std::size_t n = 0;
    for (const auto& nd : nodes_)
      n += nd.conn ? 1 : 0;
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
      for (auto& nd : nodes_)
        if (nd.conn) nd.conn->close();
    } catch (...) {  // NOLINT(bugprone-empty-catch): close must not throw
    }
  }

 private:
  enum class mode : unsigned char { unknown, plain, cluster };
  static constexpr int max_moved = 5;
  static constexpr int max_retries = 10;

  struct command {
    std::string resp;  // the formatted command, kept for a re-send
    std::uint16_t slot = 0;
    bool write = false;
    bool asking = false;   // sent after ASKING (an ASK from there fails)
    bool counted = false;  // in inflight_
    int moved = 0;
    int retries = 0;
    const char* label_prefix = "";
    std::string label;
    inline_callback done;
  };
  using command_ptr = std::unique_ptr<command>;

  struct node {
    std::string host;
    int port = 0;
    std::shared_ptr<RedisConnection> conn;  // opened on demand
  };

  explicit RedisClusterRouter(const std::shared_ptr<RedisConnection>& seed)
      : executor_(seed->get_executor()), options_(seed->options()), seed_(seed.get()) {
    nodes_.push_back(node{seed->options().unix_socket.empty() ? seed->options().host : "",
                          seed->options().port, seed});
  }

  void hook(RedisConnection& conn, std::string host) {
    conn.on_cluster_slots([w = weak_from_this(), host = std::move(host)](const RedisReply& r) {
      if (auto self = w.lock()) self->on_slots(r, host);
    });
  }

  // A handshake's (or a refresh's) answer to CLUSTER SLOTS from a node known as `host`. A
  // map of no slot at all (a node that knows no cluster: reset, or restarted without its
  // nodes.conf) is applied only by the first answer (the one that decides cluster mode);
  // once a map is known it is never applied, whatever the read (CLUSTERDOWN, MOVED, a slot
  // of no master, a connection failure, a reconnection's handshake) — else every key would
  // fail from then on, route reading the same empty seed again.
  // @returns whether a map was applied.
  bool on_slots(const RedisReply& r, const std::string& host) {
    if (r.type == REDIS_REPLY_ERROR) {  // cluster support disabled: a plain server
      if (mode_ == mode::unknown) mode_ = mode::plain;
      return false;
    }
    if (mode_ == mode::plain) return false;
    std::vector<redis::detail::SlotRange> ranges;
    if (redis::detail::parse_slot_ranges<RedisReply, detail::async_reply_access>(r, host, ranges)) {
      return false;  // an unreadable map: the one known is kept (MOVED still routes)
    }
    if (ranges.empty() && mode_ == mode::cluster) return false;  // the map known is kept
    ++stats_.refreshes;
    mode_ = mode::cluster;
    // A master of no address (noaddr) keeps its slots' known owners (slot_owners).
    owner_ = redis::detail::slot_owners(
        ranges, owner_, [this](const std::string& h, int port) { return node_index(h, port); });
    return true;
  }

  int node_index(const std::string& host, int port) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].port == port && nodes_[i].host == host) return static_cast<int>(i);
    nodes_.push_back(node{host, port, nullptr});
    return static_cast<int>(nodes_.size() - 1);
  }

  RedisConnection& connection(int n) {
    node& nd = nodes_[static_cast<std::size_t>(n)];
    if (!nd.conn) {
      redis::ConnectionOptions o = options_;
      o.host = nd.host;
      o.port = nd.port;
      o.unix_socket.clear();
      nd.conn = std::make_shared<RedisConnection>(executor_, std::move(o));
      hook(*nd.conn, nd.host);
    }
    return *nd.conn;
  }

  // The node a new command for `slot` goes to: its master, or the seed until the map is
  // known; -1 when the map names none.
  int target(std::uint16_t slot) const {
    if (mode_ != mode::cluster) return 0;
    return owner_[slot];
  }

  void route(command_ptr c) {
    const std::uint16_t s = c->slot;
    const int to = target(s);
    if (to < 0) {
      refresh(0);
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
    c->asking = asking;
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

  void on_reply(command_ptr c, int from, std::exception_ptr e, RedisReply&& r) {
    if (e) {  // lost, timed out or not reached: never re-sent
      // The node may be down (a failover gives its slots to another master, which no MOVED
      // will tell): the map is read again from another node for the next commands.
      if (mode_ == mode::cluster) refresh_elsewhere(from);
      return finish(std::move(c), e, RedisReply{});
    }
    if (r.type != REDIS_REPLY_ERROR) return finish(std::move(c), nullptr, std::move(r));
    redisReply view{};
    view.type = REDIS_REPLY_ERROR;
    view.str = r.str.data();
    view.len = r.str.size();
    const std::string& endpoint = connection(from).endpoint();
    const redis::detail::Redirect rd =
        mode_ == mode::plain
            ? redis::detail::Redirect{}
            : redis::detail::parse_redirect(view, nodes_[static_cast<std::size_t>(from)].host);
    const auto fail = [&](const std::string& what) {
      auto error = std::make_exception_ptr(redis::detail::reply_error_of(
          view, endpoint,
          c->label_prefix + c->label + " (hash slot " + std::to_string(c->slot) + ")", false,
          what + "; nothing was executed — retry later, or check the cluster (CLUSTER SLOTS, "
                 "CLUSTER NODES)"));
      finish(std::move(c), std::move(error), RedisReply{});
    };
    const std::uint16_t s = c->slot;
    switch (rd.kind) {
      case redis::detail::Redirect::none: {
        auto error = std::make_exception_ptr(
            redis::detail::reply_error_of(view, endpoint, c->label_prefix + c->label, false));
        return finish(std::move(c), std::move(error), RedisReply{});
      }
      case redis::detail::Redirect::moved: {
        if (++c->moved > max_moved)
          return fail("still redirected after " + std::to_string(max_moved) + " MOVED answers");
        ++stats_.moved;
        blocked_[s] = true;
        const int to = node_index(rd.host, rd.port);
        if (mode_ == mode::cluster) owner_[static_cast<std::size_t>(rd.slot)] = to;
        refresh(to);
        return send(std::move(c), to, false);
      }
      case redis::detail::Redirect::ask: {
        if (c->asking) return fail("the node named by ASK redirected again");
        ++stats_.ask;
        blocked_[s] = true;
        return send(std::move(c), node_index(rd.host, rd.port), true);
      }
      default: {  // TRYAGAIN, CLUSTERDOWN
        if (++c->retries > max_retries)
          return fail("still refused after " + std::to_string(max_retries) +
                      " retries over ~1.5 s");
        ++stats_.retries;
        blocked_[s] = true;
        // The map read again: the seed, else (its map of no slot: a reset seed, which may be
        // the owner kept for its slots and answer CLUSTERDOWN for them forever) another node.
        if (rd.kind == redis::detail::Redirect::clusterdown) refresh(0, from);
        const auto wait = std::chrono::milliseconds(std::min(200, 10 << (c->retries - 1)));
        auto timer = std::make_shared<::asio::steady_timer>(executor_, wait);
        timer->async_wait(
            [self = shared_from_this(), timer, c = std::move(c)](const std::error_code&) mutable {
              if (self->closed_) return self->finish(std::move(c), self->closed_error(), {});
              const int to = self->target(c->slot);
              if (to < 0) {
                auto error = self->no_master(*c);
                return self->finish(std::move(c), error, {});
              }
              self->send(std::move(c), to, false);
            });
        return;
      }
    }
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

  // Reads the map again from node `n` (one CLUSTER SLOTS at a time). `failed` >= 0: a read
  // after a connection failure to that node (refresh_elsewhere), or after its CLUSTERDOWN —
  // a map of no slot, or one not read, is passed by and the next source (not `failed`)
  // asked.
  void refresh(int n, int failed = -1) {
    if (refreshing_ || closed_) return;
    refreshing_ = true;
    connection(n).execute_inline_raw(
        [](std::string& out) {
          detail::resp_command(out, 2);
          detail::resp_arg(out, "CLUSTER");
          detail::resp_arg(out, "SLOTS");
        },
        false, "CLUSTER SLOTS", std::string(),
        [self = shared_from_this(), n, failed](std::exception_ptr e, RedisReply&& r) {
          self->refreshing_ = false;
          if (e || r.type != REDIS_REPLY_ARRAY) return;
          const bool applied = self->on_slots(r, self->nodes_[static_cast<std::size_t>(n)].host);
          if (!applied && failed >= 0) self->refresh_elsewhere(failed, n + 1);
        });
  }

  // Reads the map again from a node other than `failed`: the seed, else a connected one
  // (from index `from` on: one whose map named no slot asks the next).
  void refresh_elsewhere(int failed, int from = 0) {
    for (std::size_t i = static_cast<std::size_t>(from); i < nodes_.size(); ++i) {
      if (static_cast<int>(i) != failed && (i == 0 || nodes_[i].conn))
        return refresh(static_cast<int>(i), failed);
    }
  }

  void fail_posted(command_ptr c, std::exception_ptr e) {
    ::asio::post(executor_, [self = shared_from_this(), c = std::move(c), e]() mutable {
      self->finish(std::move(c), e, RedisReply{});
    });
  }

  std::exception_ptr closed_error() const {
    return std::make_exception_ptr(
        dlq::connection_error(dlq::detail::message("redis", nodes_.front().conn->endpoint(),
                                                   "the storage was closed", "nothing was sent"),
                              false));
  }

  std::exception_ptr no_master(const command& c) const {
    return std::make_exception_ptr(dlq::reply_error(
        dlq::detail::message(
            "redis", nodes_.front().conn->endpoint(),
            c.label_prefix + c.label + ": no master serves hash slot " + std::to_string(c.slot),
            "the cluster is down or resharding; nothing was sent — check "
            "CLUSTER SLOTS"),
        "CLUSTERDOWN"));
  }

  ::asio::any_io_executor executor_;
  redis::ConnectionOptions options_;
  RedisConnection* seed_;  // nodes_[0]'s connection
  mode mode_ = mode::unknown;
  bool closed_ = false;
  bool refreshing_ = false;
  std::vector<node> nodes_;              // [0] = the seed
  std::vector<int> owner_;               // slot -> index in nodes_; -1 = none (cluster mode)
  std::vector<std::uint32_t> inflight_;  // slot -> commands sent and not completed
  std::vector<int> sent_to_;             // slot -> the node of its last send
  std::vector<bool> blocked_;            // slot -> new commands wait (held_)
  std::unordered_map<std::uint16_t, std::deque<command_ptr>> held_;
  Stats stats_;
};

}  // namespace dlq::asio
