// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/cluster.hpp
/// Redis Cluster routing on blocking connections: dlq::redis::Router sends each request to
/// the master that owns its key's slot (dlq::redis::key_slot: CRC16-XMODEM of the key or of
/// its hash tag, 16384 slots) and follows MOVED, ASK, TRYAGAIN and CLUSTERDOWN answers. It is
/// the I/O around the I/O-free decisions of redis/detail/cluster_fsm.hpp (what each answer or
/// failure leads to, which nodes the map is read from) and redis/detail/slot_map.hpp (the
/// map, and whether a CLUSTER SLOTS answer is applied), which dlq::asio::RedisClusterRouter
/// shares; their rules are written there.
///
/// Detection, at no cost for a plain server: on first use the Router asks the URL's node
/// `CLUSTER SLOTS`. An error reply ("ERR This instance has cluster support disabled", or any
/// other refusal) means plain mode: every request then goes to the URL's server through one
/// ConnectionPool, exactly as without a Router (one atomic load per request more). A reply
/// with slot ranges means cluster mode: the Router keeps slot -> master and one
/// ConnectionPool per master (the URL's ConnectionOptions with that node's host and port).
///
/// Every redirection answer means the command was not executed, so re-sending it is safe —
/// even a write. Past a bound (5 MOVED, a second ASK, 10 retries) the request fails with
/// dlq::reply_error of that code. A request whose answer was lost (timeout, dropped
/// connection) is never re-sent: the Connection reports it with outcome_unknown() as
/// without a cluster; the map is read again before the error reaches the caller unchanged.
/// The back-off of TRYAGAIN / CLUSTERDOWN sleeps in the calling thread. A map read asks each
/// node on a connection of its own, opened for it (one try, no pooled connection: the
/// caller may still hold its lease); a thread that finds a read under way goes on without
/// it, except pool_for for a slot of no master, which waits for its end (woken by it).
///
/// Not supported: reads from replicas (every request goes to the slot's master), and
/// commands whose keys are in different slots (the caller keeps one request on one slot).
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/detail/cluster_fsm.hpp"
#include "dlq/redis/detail/slot_map.hpp"
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"

namespace dlq::redis {

namespace detail {

/// How parse_cluster_slots reads a hiredis reply.
struct hiredis_reply_access {
  static bool is_error(const redisReply& r) { return r.type == REDIS_REPLY_ERROR; }
  static bool is_array(const redisReply& r) { return r.type == REDIS_REPLY_ARRAY; }
  static bool is_integer(const redisReply& r) { return r.type == REDIS_REPLY_INTEGER; }
  static std::size_t size(const redisReply& r) { return r.elements; }
  static const redisReply& at(const redisReply& r, std::size_t i) { return *r.element[i]; }
  static long long integer(const redisReply& r) { return r.integer; }
  static std::string_view text(const redisReply& r) { return view(r); }
};

/// parse_redirect of a hiredis reply: kind none unless it is an error reply.
inline Redirect parse_redirect(const redisReply& r, std::string_view answered_by = {}) {
  if (r.type != REDIS_REPLY_ERROR || r.str == nullptr) return Redirect{};
  return parse_redirect(view(r), answered_by);
}

/// True for an error reply that means "not executed here, send it elsewhere or later".
inline bool is_redirect(const redisReply& r) {
  return parse_redirect(r).kind != Redirect::none;
}

}  // namespace detail

/// Sends requests to the right node of a Redis Cluster, or to the one server of a plain
/// deployment (see the file comment). Thread-safe.
class Router {
 public:
  /// How many redirections a Router followed and slot maps it applied.
  using Stats = ClusterStats;

  /// Keeps the seed node's options; connects on first use. Does not throw except
  /// std::bad_alloc.
  explicit Router(ConnectionOptions seed, PoolOptions pool = {})
      : pool_options_(pool),
        seed_(std::move(seed), pool),
        map_(seed_.options().unix_socket.empty() ? seed_.options().host : std::string(),
             seed_.options().port) {}
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;
  ~Router() = default;

  /// The pool of the URL's server (the only one in plain mode).
  ConnectionPool& seed() noexcept { return seed_; }

  /// Whether the server is a Redis Cluster node. Asks `CLUSTER SLOTS` on the first call (one
  /// round trip, once per Router); later calls cost one atomic load.
  /// @throws the dlq::storage_error subclasses of Connection::run when the server cannot be
  ///         reached, dlq::protocol_error when its answer is not CLUSTER SLOTS's (the next
  ///         call asks again).
  bool clustered() {
    if (seed_.options().sentinel.enabled()) return false;  // a Sentinel master: plain mode
    const int m = mode_.load(std::memory_order_acquire);
    if (m != unknown) return m == cluster;
    std::lock_guard<std::mutex> detect(detect_mutex_);
    if (mode_.load(std::memory_order_acquire) != unknown) return mode_.load() == cluster;
    auto lease = seed_.acquire();
    const detail::ClusterSlots answer = ask_slots(*lease, 0);
    std::lock_guard<std::mutex> lock(mutex_);
    switch (map_.apply(answer)) {
      case detail::SlotMap::Applied::plain:  // "cluster support disabled" (or CLUSTER refused)
        mode_.store(plain, std::memory_order_release);
        return false;
      case detail::SlotMap::Applied::yes:
        mode_.store(cluster, std::memory_order_release);
        return true;
      default:
        throw dlq::protocol_error(
            dlq::detail::message("redis", lease->endpoint(),
                                 "CLUSTER SLOTS: unexpected answer (" + answer.error + ")",
                                 "is this a Redis server of version 6 or later?"),
            false);
    }
  }

  /// The pool of the master that owns `key`'s slot (the seed's pool in plain mode). A slot
  /// the map gives no master makes the Router read the map again first (cluster_fsm.hpp);
  /// when another thread's read is under way, it waits for that read and uses its map.
  /// @throws dlq::reply_error (code CLUSTERDOWN) when no master serves the slot even after
  ///         reading the map again; the errors of clustered().
  ConnectionPool& pool_for(std::string_view key) {
    if (!clustered()) return seed_;
    const std::uint16_t slot = key_slot(key);
    if (ConnectionPool* p = owner(slot)) return *p;
    detail::MapRead read = read_elsewhere(-1);
    if (read.node() >= 0) {
      read_map(std::move(read));
    } else {
      map_.wait_read();  // another thread's read is under way: its map serves this call too
    }
    if (ConnectionPool* p = owner(slot)) return *p;
    throw dlq::reply_error(dlq::detail::message("redis", seed_.endpoint(),
                                                detail::no_master_serves(slot) + " (key '" +
                                                    std::string(key.substr(0, 64)) + "')",
                                                detail::no_master_hint),
                           "CLUSTERDOWN");
  }

  /// A connection to the master of `key`'s slot (the seed server in plain mode).
  ConnectionPool::Lease acquire(std::string_view key) { return pool_for(key).acquire(); }

  /// Every master's pool (cluster mode; the slot map is read again first — the seed, else
  /// another master, see cluster_fsm.hpp — unless a read is under way), or the seed's alone
  /// (plain mode).
  /// @throws the errors of clustered().
  std::vector<ConnectionPool*> masters() {
    if (!clustered()) return {&seed_};
    read_map(read_elsewhere(-1));
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ConnectionPool*> out;
    for (const int n : map_.masters())
      out.push_back(&pool_locked(n));
    return out;
  }

  /// Runs the pipeline `build(sha)` for one slot (the slot of `key`) and follows
  /// redirections (see the file comment). `lease` holds the connection to use first; it is
  /// replaced by a lease of the node each redirection names, and on return (or on a thrown
  /// I/O failure) holds the connection that sent the last request. `build` is called once per
  /// attempt with the script's SHA1 (empty when `script` is null) and must return commands
  /// whose keys are all in `key`'s slot. The answer at `check_at` decides: a redirection
  /// there means nothing of the pipeline ran. A NOSCRIPT answer there loads the script and
  /// re-sends the pipeline once (see Script::run_pipeline). `client_before`, when given,
  /// receives the CLIENT ID of the connection right before the last send (0 = unknown).
  /// @throws the errors of Connection::run; dlq::reply_error (MOVED, ASK, TRYAGAIN,
  ///         CLUSTERDOWN; outcome known: not executed) when the bound of redirections or
  ///         retries is reached.
  std::vector<Reply> run(std::optional<ConnectionPool::Lease>& lease, std::string_view key,
                         Effect effect, Script::Build build, Script* script = nullptr,
                         std::size_t check_at = 0, long long* client_before = nullptr) {
    const bool routed = clustered();
    if (!lease) lease.emplace(acquire(key));
    if (!routed) {  // plain: exactly as before
      if (client_before != nullptr) *client_before = (*lease)->client_id();
      if (script != nullptr) return script->run_pipeline(**lease, check_at, build, effect);
      return (*lease)->run(build(std::string()), effect);
    }
    detail::Redirections route;  // decides what each answer leads to (cluster_fsm.hpp)
    for (;;) {
      if (client_before != nullptr) *client_before = (*lease)->client_id();
      std::vector<Reply> replies;
      try {
        replies = send(**lease, build, script, check_at, effect, route.asking());
      } catch (const dlq::connection_error&) {  // never re-sent; the caller keeps its lease
        failed_on((*lease)->options());
        throw;
      } catch (const dlq::timeout_error&) {
        failed_on((*lease)->options());
        throw;
      }
      const redisReply& answer = *replies.at(check_at);
      const detail::Redirect rd = detail::parse_redirect(answer, (*lease)->options().host);
      if (rd.kind == detail::Redirect::none) return replies;
      detail::Next next;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        next = route.on_answer(map_, rd, node_of((*lease)->options()));
      }
      if (next.kind == detail::Next::give_up) {
        detail::throw_reply_error(answer, (*lease)->endpoint(),
                                  "hash slot " + std::to_string(key_slot(key)) + " (key '" +
                                      std::string(key.substr(0, 64)) + "')",
                                  false, next.why);
      }
      lease.reset();  // never hold two leases at once (the map read, the next node's pool)
      if (next.delay.count() > 0) std::this_thread::sleep_for(next.delay);
      read_map(std::move(next.read));
      lease.emplace(next.node >= 0 ? pool(next.node).acquire() : acquire(key));
    }
  }

  /// One command that ran (or was answered with an error) and the node that answered it.
  struct Answer {
    Reply reply;           ///< the reply; an error reply is returned, not thrown
    std::string endpoint;  ///< "host:port" of the node that answered, for messages
    /// The reply of the WAIT that followed the command when `ack` asked for one (see
    /// ConnectionPool::run_shared); null when none was asked or its reply was not read.
    std::shared_ptr<const Reply> wait;
  };

  /// Runs the single command `make()` for `key`'s slot through the pool's
  /// ConnectionPool::run_shared (written together with other threads' concurrent commands to
  /// that node). A redirection (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: nothing was executed) is
  /// followed as run() follows it, with the command built again by `make`.
  /// `ack` (plain mode only; ignored in cluster mode) makes the command's batch end with a
  /// WAIT, whose reply the Answer carries.
  /// @throws as run() and ConnectionPool::run_shared.
  template <class Make>
  Answer run_shared(std::string_view key, Effect effect, Make make,
                    const ConnectionPool::ReplicaAck& ack = {}) {
    ConnectionPool& pool = pool_for(key);
    const Command first = make();
    if (!clustered()) {  // plain: exactly as before
      std::shared_ptr<const Reply> wait;
      Reply r = pool.run_shared(first, effect, ack, wait);
      return Answer{std::move(r), pool.endpoint(), std::move(wait)};
    }
    Reply r;
    try {
      r = pool.run_shared(first, effect);
    } catch (const dlq::connection_error&) {  // never re-sent
      failed_on(pool.options());
      throw;
    } catch (const dlq::timeout_error&) {
      failed_on(pool.options());
      throw;
    }
    if (detail::parse_redirect(*r).kind == detail::Redirect::none) {
      return Answer{std::move(r), pool.endpoint(), nullptr};
    }
    std::optional<ConnectionPool::Lease> lease;
    std::vector<Reply> replies = run(lease, key, effect, [&](const std::string&) {
      std::vector<Command> v;
      v.push_back(make());
      return v;
    });
    return Answer{std::move(replies.front()), (*lease)->endpoint(), nullptr};
  }

  /// Redirections followed and maps applied so far.
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.stats();
  }

  /// How many masters the Router has a ConnectionPool for (cluster mode: one per node it has
  /// sent a request to; 0 in plain mode and before the first use). The seed's own pool is not
  /// counted.
  std::size_t pools() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const auto& p : pools_)
      n += p ? 1 : 0;
    return n;
  }

 private:
  enum Mode : int { unknown = 0, plain = 1, cluster = 2 };

  std::vector<Reply> send(Connection& conn, Script::Build build, Script* script,
                          std::size_t check_at, Effect effect, bool asking) {
    for (int pass = 0;; ++pass) {
      std::vector<Command> cmds = build(script != nullptr ? script->sha(conn) : std::string());
      std::vector<Reply> replies;
      if (!asking) {
        replies = conn.run(cmds, effect);
      } else {  // ASKING holds for the next command only: one before each
        std::vector<Command> asked;
        asked.reserve(2 * cmds.size());
        for (auto& c : cmds) {
          asked.emplace_back("ASKING");
          asked.push_back(std::move(c));
        }
        auto all = conn.run(asked, effect);
        replies.reserve(cmds.size());
        for (std::size_t i = 1; i < all.size(); i += 2)
          replies.push_back(std::move(all[i]));
      }
      const redisReply& r = *replies.at(check_at);
      if (script != nullptr && pass == 0 && r.type == REDIS_REPLY_ERROR &&
          detail::reply_code(view(r)) == "NOSCRIPT") {
        script->load(conn);  // SCRIPT LOAD has no key: any node runs it
        continue;
      }
      return replies;
    }
  }

  // The pool of `slot`'s master; null when the map names none.
  ConnectionPool* owner(std::uint16_t slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = map_.owner(slot);
    return n < 0 ? nullptr : &pool_locked(n);
  }

  ConnectionPool& pool(int n) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pool_locked(n);
  }

  // The pool of node `n`, created on first use (pools_ never shrinks: pools live as long as
  // the Router).
  ConnectionPool& pool_locked(int n) {
    const auto i = static_cast<std::size_t>(n);
    if (pools_.size() <= i) pools_.resize(i + 1);
    if (!pools_[i]) pools_[i] = std::make_unique<ConnectionPool>(options_locked(n), pool_options_);
    return *pools_[i];
  }

  // The options of node `n`: the seed's (node 0: the seed itself), with its host and port.
  ConnectionOptions options_locked(int n) const {
    ConnectionOptions o = seed_.options();
    if (n == 0) return o;
    const detail::SlotMap::Node& node = map_.node(n);
    o.host = node.host;
    o.port = node.port;
    o.unix_socket.clear();
    return o;
  }

  // The node a connection of these options reaches; -1 when the map does not know it.
  int node_of(const ConnectionOptions& o) const {
    return map_.find(o.unix_socket.empty() ? o.host : std::string(), o.port);
  }

  // CLUSTER SLOTS on `conn`, node `n`'s connection, read into a value (parse_cluster_slots).
  // @throws the errors of Connection::run.
  detail::ClusterSlots ask_slots(Connection& conn, int n) {
    Command c("CLUSTER");
    c.arg("SLOTS").label("CLUSTER SLOTS");
    Reply r = conn.run(c, Effect::read);
    std::string host;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      host = map_.node(n).host;
    }
    return detail::parse_cluster_slots<detail::hiredis_reply_access>(*r, host);
  }

  detail::MapRead read_elsewhere(int failed) {
    std::lock_guard<std::mutex> lock(mutex_);
    return detail::MapRead::elsewhere(map_, failed);
  }

  // A request failed on its connection (options `o`): never re-sent, the map read again
  // elsewhere (cluster_fsm.hpp) before the caller's error is rethrown unchanged.
  void failed_on(const ConnectionOptions& o) noexcept {
    try {
      detail::Next next;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        next = detail::Redirections::on_failure(map_, node_of(o));
      }
      read_map(std::move(next.read));
    } catch (const std::exception&) {  // std::bad_alloc: the map as it is
    }
  }

  // Does a map read (cluster_fsm.hpp's MapRead decides which nodes, and when it is over):
  // each node is asked on a connection opened for this read alone — no lease: the caller may
  // hold one, and two at once could deadlock two pools — one try each. Never throws: a node
  // that does not answer is the read's business (the next one is asked), and a failure of
  // the read leaves the map as it is.
  void read_map(detail::MapRead read) noexcept {
    try {
      for (int n = read.node(); n >= 0;) {
        ConnectionOptions o;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          o = options_locked(n);
        }
        o.reconnect_attempts = 0;
        std::optional<detail::ClusterSlots> answer;
        try {
          Connection conn(std::move(o));
          answer = ask_slots(conn, n);
        } catch (const dlq::storage_error&) {  // no answer: the next node
        }
        std::lock_guard<std::mutex> lock(mutex_);
        n = answer ? read.on_answer(*answer) : read.on_failure();
      }
    } catch (const std::exception&) {  // std::bad_alloc: the map as it is
    }
  }  // `read` ends here unless over already: its gate freed, its waiters woken (wait_read)

  PoolOptions pool_options_;
  ConnectionPool seed_;
  std::atomic<int> mode_{unknown};
  std::mutex detect_mutex_;
  mutable std::mutex mutex_;  // map_ (but its read gate), pools_
  detail::SlotMap map_;       // the nodes, the slot map, the counters, the read gate
  std::vector<std::unique_ptr<ConnectionPool>> pools_;  // node index -> its pool (or null)
};

}  // namespace dlq::redis
