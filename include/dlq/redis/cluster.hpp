// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/cluster.hpp
/// Redis Cluster routing: dlq::redis::key_slot (CRC16-XMODEM of the key or of its hash tag,
/// 16384 slots) and dlq::redis::Router, which sends each request to the master that owns its
/// key's slot and follows MOVED, ASK, TRYAGAIN and CLUSTERDOWN answers.
///
/// Detection, at no cost for a plain server: on first use the Router asks the URL's node
/// `CLUSTER SLOTS`. An error reply ("ERR This instance has cluster support disabled", or any
/// other refusal) means plain mode: every request then goes to the URL's server through one
/// ConnectionPool, exactly as without a Router (one atomic load per request more). A reply
/// with slot ranges means cluster mode: the Router keeps slot -> master and one
/// ConnectionPool per master (the URL's ConnectionOptions with that node's host and port).
///
/// Redirections. Every error reply below means the command was not executed, so re-sending
/// it is safe — even a write:
/// - MOVED slot host:port — the slot has a new owner: the map entry is updated at once, the
///   whole map is read again from that node, and the request is re-sent there (at most 5
///   times, then dlq::reply_error with code MOVED naming the slot);
/// - ASK slot host:port — the slot is being migrated and the key is not here: the request is
///   re-sent once to the named node, each command preceded by ASKING (the map is unchanged);
/// - a MOVED or ASK naming no host (":<port>", or "?:<port>": cluster-preferred-endpoint-type
///   unknown-endpoint) means the host of the node that answered, as CLUSTER SLOTS's empty
///   host does;
/// - TRYAGAIN (a multi-key command or script during a slot migration) and CLUSTERDOWN:
///   re-sent after a back-off of 10 ms doubling to 200 ms, at most 10 times (~1.5 s), then
///   dlq::reply_error with that code. After CLUSTERDOWN the map is read again from the seed,
///   else (its map of no slot, or no answer) from another node, as after a connection
///   failure: a reset seed kept as its slots' owner answers CLUSTERDOWN for them forever.
/// A request whose answer was lost (timeout, dropped connection) is never re-sent: the
/// Connection reports it with outcome_unknown() as without a cluster. A request that failed
/// on its connection (lost, timed out, not reached: dlq::connection_error, dlq::timeout_error)
/// makes the Router read the map again from another node — the seed, else a known master —
/// before the error reaches the caller unchanged: a master that went down answers no MOVED,
/// so its slots would otherwise be sent to it forever after the cluster gave them to another
/// (failover, reassignment). That read uses a connection of its own, opened for it (one try,
/// no pooled connection: the caller may still hold its lease); its failure, or a map of no
/// slot (a node that forgot the cluster), is ignored and the next source tried; while
/// one thread reads the map so, another's failure does not read it again. Once a map is
/// known, a CLUSTER SLOTS answer that names no slot (a node that forgot the cluster) is
/// never applied, on any read (CLUSTERDOWN, MOVED, a slot of no master, a connection
/// failure): the map known is kept.
///
/// Not supported: reads from replicas (every request goes to the slot's master), and
/// commands whose keys are in different slots (the caller keeps one request on one slot).
#pragma once

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <charconv>
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
#include "dlq/redis/error_mapping.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"

namespace dlq::redis {

/// Number of hash slots of a Redis Cluster.
inline constexpr std::size_t cluster_slot_count = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys
/// with.
inline std::uint16_t crc16(std::string_view bytes) noexcept {
  unsigned crc = 0;
  for (const char ch : bytes) {
    crc ^= static_cast<unsigned>(static_cast<unsigned char>(ch)) << 8U;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000U) != 0 ? ((crc << 1U) ^ 0x1021U) & 0xFFFFU : (crc << 1U) & 0xFFFFU;
  }
  return static_cast<std::uint16_t>(crc);
}

/// The part of a key Redis Cluster hashes: the text between the first `{` and the first `}`
/// after it when that text is not empty (the hash tag), else the whole key.
inline std::string_view hashed_part(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

/// The hash slot (0..16383) of a key, as CLUSTER KEYSLOT computes it.
inline std::uint16_t key_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16(hashed_part(key)) & (cluster_slot_count - 1));
}

namespace detail {

/// A redirection or retry answer of a cluster node, parsed.
struct Redirect {
  enum Kind : unsigned char { none, moved, ask, tryagain, clusterdown } kind = none;
  int slot = -1;
  std::string host;
  int port = 0;
};

/// Parses "MOVED 3999 127.0.0.1:6381", "ASK …", "TRYAGAIN …", "CLUSTERDOWN …". A MOVED or
/// ASK naming no host (":<port>", or "?:<port>": cluster-preferred-endpoint-type
/// unknown-endpoint) means the node that answered, as CLUSTER SLOTS's empty host does: its
/// host is `answered_by` (empty when the caller only asks the kind).
inline Redirect parse_redirect(const redisReply& r, std::string_view answered_by = {}) {
  Redirect out;
  if (r.type != REDIS_REPLY_ERROR || r.str == nullptr) return out;
  const std::string_view text(r.str, r.len);
  const std::string code = reply_code(text);
  if (code == "TRYAGAIN") {
    out.kind = Redirect::tryagain;
    return out;
  }
  if (code == "CLUSTERDOWN") {
    out.kind = Redirect::clusterdown;
    return out;
  }
  if (code != "MOVED" && code != "ASK") return out;
  // "<code> <slot> <host>:<port>"; the host may be an IPv6 address (last ':' separates).
  const auto s1 = text.find(' ');
  const auto s2 = s1 == std::string_view::npos ? s1 : text.find(' ', s1 + 1);
  if (s2 == std::string_view::npos) return out;
  const std::string_view slot = text.substr(s1 + 1, s2 - s1 - 1);
  const std::string_view addr = text.substr(s2 + 1);
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return out;
  int s = -1;
  int p = 0;
  if (std::from_chars(slot.data(), slot.data() + slot.size(), s).ec != std::errc{} ||
      std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), p).ec != std::errc{} ||
      s < 0 || s >= static_cast<int>(cluster_slot_count) || p <= 0 || p > 65535) {
    return out;
  }
  out.kind = code == "MOVED" ? Redirect::moved : Redirect::ask;
  out.slot = s;
  out.host = std::string(addr.substr(0, colon));
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty() || out.host == "?") out.host = std::string(answered_by);
  out.port = p;
  return out;
}

/// True for an error reply that means "not executed here, send it elsewhere or later".
inline bool is_redirect(const redisReply& r) {
  return parse_redirect(r).kind != Redirect::none;
}

/// One range of a CLUSTER SLOTS answer: slots [start, end] served by the master host:port.
/// Port 0 (host ""): a master whose address the answering node does not know (Redis's
/// noaddr flag: a node that was CLUSTER RESET or restarted and is being met again).
struct SlotRange {
  long long start = 0;
  long long end = 0;
  std::string host;
  int port = 0;
};

/// The slot table for a map read as `ranges`: each slot's node index (`node_index(host,
/// port)`), -1 where no range names one. A range whose master has no address (port 0) keeps
/// the owners of `known` (the table so far; empty before the first map), else -1: the known
/// owner is either still right or answers MOVED / CLUSTERDOWN (a reset node) / fails its
/// connection, which all read the map again (CLUSTERDOWN and a failure from another node
/// when the seed's map names no slot), while -1 would fail every command for those slots at
/// once. Pure: no I/O.
template <class NodeIndex>
std::vector<int> slot_owners(const std::vector<SlotRange>& ranges, const std::vector<int>& known,
                             NodeIndex&& node_index) {
  std::vector<int> owners(cluster_slot_count, -1);
  for (const SlotRange& g : ranges) {
    const bool addressed = g.port != 0;
    const int n = addressed ? node_index(g.host, g.port) : -1;
    for (long long s = g.start; s <= g.end; ++s) {
      const auto i = static_cast<std::size_t>(s);
      owners[i] = addressed ? n : (i < known.size() ? known[i] : -1);
    }
  }
  return owners;
}

/// How parse_slot_ranges reads a hiredis reply (another reply type gives its own).
struct hiredis_reply_access {
  static bool is_array(const redisReply& r) { return r.type == REDIS_REPLY_ARRAY; }
  static bool is_integer(const redisReply& r) { return r.type == REDIS_REPLY_INTEGER; }
  static std::size_t size(const redisReply& r) { return r.elements; }
  static const redisReply& at(const redisReply& r, std::size_t i) { return *r.element[i]; }
  static long long integer(const redisReply& r) { return r.integer; }
  static std::string_view text(const redisReply& r) { return view(r); }
};

/// Reads a CLUSTER SLOTS answer — [[start, end, [host, port, id…], replicas…], …] — into
/// `out` (the masters only). A master with an empty host (or "?") and a port is the node
/// that was asked: `asked_host`. A master with port 0 has no known address (noaddr; see
/// SlotRange): its range is kept with host "" and port 0. Returns null, or the element that
/// is not of that form (the reply itself when it is not an array); `out` is then incomplete.
/// Pure: no I/O, no lock.
template <class Reply, class Access = hiredis_reply_access>
const Reply* parse_slot_ranges(const Reply& r, const std::string& asked_host,
                               std::vector<SlotRange>& out) {
  if (!Access::is_array(r)) return &r;
  for (std::size_t i = 0; i < Access::size(r); ++i) {
    const Reply& e = Access::at(r, i);
    if (!Access::is_array(e) || Access::size(e) < 3 || !Access::is_integer(Access::at(e, 0)) ||
        !Access::is_integer(Access::at(e, 1)) || !Access::is_array(Access::at(e, 2)) ||
        Access::size(Access::at(e, 2)) < 2 ||
        !Access::is_integer(Access::at(Access::at(e, 2), 1))) {
      return &e;
    }
    const Reply& master = Access::at(e, 2);
    std::string host(Access::text(Access::at(master, 0)));
    const long long start = Access::integer(Access::at(e, 0));
    const long long end = Access::integer(Access::at(e, 1));
    const long long port = Access::integer(Access::at(master, 1));
    if (start < 0 || end >= static_cast<long long>(cluster_slot_count) || start > end || port < 0 ||
        port > 65535) {
      return &e;
    }
    if (port == 0) {
      host.clear();  // no address known (noaddr): see slot_owners
    } else if (host.empty() || host == "?") {
      host = asked_host;  // "the node you asked" (it does not know its own address)
    }
    out.push_back(SlotRange{start, end, std::move(host), static_cast<int>(port)});
  }
  return nullptr;
}

}  // namespace detail

/// Sends requests to the right node of a Redis Cluster, or to the one server of a plain
/// deployment (see the file comment). Thread-safe.
class Router {
 public:
  /// How many redirections a Router followed (for tests and monitoring).
  struct Stats {
    std::size_t moved = 0;      ///< MOVED answers followed
    std::size_t ask = 0;        ///< ASK answers followed
    std::size_t retries = 0;    ///< TRYAGAIN / CLUSTERDOWN back-offs
    std::size_t refreshes = 0;  ///< times the slot map was read (CLUSTER SLOTS)
  };

  /// Keeps the seed node's options; connects on first use. Does not throw except
  /// std::bad_alloc.
  explicit Router(ConnectionOptions seed, PoolOptions pool = {})
      : pool_options_(pool), seed_(std::move(seed), pool) {}
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;
  ~Router() = default;

  /// The pool of the URL's server (the only one in plain mode).
  ConnectionPool& seed() noexcept { return seed_; }

  /// Whether the server is a Redis Cluster node. Asks `CLUSTER SLOTS` on the first call (one
  /// round trip, once per Router); later calls cost one atomic load.
  /// @throws the dlq::storage_error subclasses of Connection::run when the server cannot be
  ///         reached (the next call asks again).
  bool clustered() {
    const int m = mode_.load(std::memory_order_acquire);
    if (m != unknown) return m == cluster;
    std::lock_guard<std::mutex> detect(detect_mutex_);
    if (mode_.load(std::memory_order_acquire) != unknown) return mode_.load() == cluster;
    auto lease = seed_.acquire();
    Command c("CLUSTER");
    c.arg("SLOTS").label("CLUSTER SLOTS");
    Reply r = lease->run(c, Effect::read);
    if (r->type == REDIS_REPLY_ERROR) {  // "cluster support disabled" (or CLUSTER refused)
      mode_.store(plain, std::memory_order_release);
      return false;
    }
    apply_slots(*r, *lease);
    mode_.store(cluster, std::memory_order_release);
    return true;
  }

  /// The pool of the master that owns `key`'s slot (the seed's pool in plain mode).
  /// @throws dlq::reply_error (code CLUSTERDOWN) when no master serves the slot even after
  ///         reading the map again; the errors of clustered().
  ConnectionPool& pool_for(std::string_view key) {
    if (!clustered()) return seed_;
    const std::uint16_t slot = key_slot(key);
    if (ConnectionPool* p = owner(slot)) return *p;
    refresh(seed_);
    if (ConnectionPool* p = owner(slot)) return *p;
    throw dlq::reply_error(
        dlq::detail::message("redis", seed_.endpoint(),
                             "no master serves hash slot " + std::to_string(slot) + " (key '" +
                                 std::string(key.substr(0, 64)) + "')",
                             "the cluster is down or resharding; check CLUSTER SLOTS"),
        "CLUSTERDOWN");
  }

  /// A connection to the master of `key`'s slot (the seed server in plain mode).
  ConnectionPool::Lease acquire(std::string_view key) { return pool_for(key).acquire(); }

  /// Every master's pool (cluster mode; the slot map is read again first, from the seed or
  /// — when it does not answer — from a master already known), or the seed's alone (plain
  /// mode).
  /// @throws the errors of clustered().
  std::vector<ConnectionPool*> masters() {
    if (!clustered()) return {&seed_};
    std::vector<ConnectionPool*> sources = known_masters();
    sources.insert(sources.begin(), &seed_);
    for (ConnectionPool* p : sources) {
      try {
        refresh(*p);
        break;
      } catch (const dlq::storage_error&) {  // try the next one; else use the map as it is
      }
    }
    return known_masters();
  }

 private:
  std::vector<ConnectionPool*> known_masters() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ConnectionPool*> out;
    for (const int n : slots_) {
      if (n < 0) continue;
      ConnectionPool* p = nodes_[static_cast<std::size_t>(n)].pool.get();
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    return out;
  }

 public:
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
    bool asking = false;
    int moved = 0;
    int retries = 0;
    auto backoff = std::chrono::milliseconds(10);
    for (int attempt = 0; attempt < 64; ++attempt) {
      if (client_before != nullptr) *client_before = (*lease)->client_id();
      std::vector<Reply> replies;
      try {
        replies = send(**lease, build, script, check_at, effect, asking);
      } catch (const dlq::connection_error&) {  // never re-sent; the caller keeps its lease
        refresh_elsewhere((*lease)->endpoint());
        throw;
      } catch (const dlq::timeout_error&) {
        refresh_elsewhere((*lease)->endpoint());
        throw;
      }
      const detail::Redirect rd =
          detail::parse_redirect(*replies.at(check_at), (*lease)->options().host);
      if (rd.kind == detail::Redirect::none) return replies;
      const std::uint16_t slot = key_slot(key);
      auto fail = [&](const std::string& what) {
        detail::throw_reply_error(
            *replies[check_at], (*lease)->endpoint(),
            "hash slot " + std::to_string(slot) + " (key '" + std::string(key.substr(0, 64)) + "')",
            false,
            what +
                "; nothing was executed — retry later, or check the "
                "cluster (CLUSTER SLOTS, CLUSTER NODES)");
      };
      switch (rd.kind) {
        case detail::Redirect::moved: {
          if (++moved > max_moved)
            fail("still redirected after " + std::to_string(max_moved) + " MOVED answers");
          lease.reset();  // before on_moved reads the map: never hold two leases at once
          ConnectionPool& to = on_moved(rd);
          lease.emplace(to.acquire());
          asking = false;
          break;
        }
        case detail::Redirect::ask: {
          if (asking) fail("the node named by ASK redirected again");
          ConnectionPool& to = node(rd.host, rd.port);
          count(stats_.ask);
          lease.reset();
          lease.emplace(to.acquire());
          asking = true;
          break;
        }
        default: {  // TRYAGAIN, CLUSTERDOWN
          if (++retries > max_retries) {
            fail("still refused after " + std::to_string(max_retries) + " retries over ~1.5 s");
          }
          count(stats_.retries);
          const std::string answered = (*lease)->endpoint();
          lease.reset();
          std::this_thread::sleep_for(backoff);
          backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
          // The map read again as after a connection failure: the seed, else (its map of no
          // slot: a reset seed, which may be the owner kept for its slots and answer
          // CLUSTERDOWN for them forever; or no answer) another node, never the one that
          // answered. The seed is read once (it used to be read here, then again there).
          if (rd.kind == detail::Redirect::clusterdown) refresh_elsewhere(answered);
          lease.emplace(acquire(key));
          asking = false;
          break;
        }
      }
    }
    throw dlq::reply_error(dlq::detail::message("redis", (*lease)->endpoint(),
                                                "too many redirections for key '" +
                                                    std::string(key.substr(0, 64)) + "'",
                                                "check the cluster (CLUSTER SLOTS)"),
                           "MOVED");
  }

  /// One command that ran (or was answered with an error) and the node that answered it.
  struct Answer {
    Reply reply;           ///< the reply; an error reply is returned, not thrown
    std::string endpoint;  ///< "host:port" of the node that answered, for messages
  };

  /// Runs the single command `make()` for `key`'s slot through the pool's
  /// ConnectionPool::run_shared (written together with other threads' concurrent commands to
  /// that node). A redirection (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: nothing was executed) is
  /// followed as run() follows it, with the command built again by `make`.
  /// @throws as run() and ConnectionPool::run_shared.
  template <class Make>
  Answer run_shared(std::string_view key, Effect effect, Make make) {
    ConnectionPool& pool = pool_for(key);
    const Command first = make();
    if (!clustered()) {  // plain: exactly as before
      Reply r = pool.run_shared(first, effect);
      return Answer{std::move(r), pool.endpoint()};
    }
    Reply r;
    try {
      r = pool.run_shared(first, effect);
    } catch (const dlq::connection_error&) {  // never re-sent
      refresh_elsewhere(pool.endpoint());
      throw;
    } catch (const dlq::timeout_error&) {
      refresh_elsewhere(pool.endpoint());
      throw;
    }
    if (detail::parse_redirect(*r).kind == detail::Redirect::none) {
      return Answer{std::move(r), pool.endpoint()};
    }
    std::optional<ConnectionPool::Lease> lease;
    std::vector<Reply> replies = run(lease, key, effect, [&](const std::string&) {
      std::vector<Command> v;
      v.push_back(make());
      return v;
    });
    return Answer{std::move(replies.front()), (*lease)->endpoint()};
  }

  /// Reads the slot map again from `pool`'s node (CLUSTER SLOTS); a map of no slot is not
  /// applied once one is known (the map known is kept).
  /// @throws the errors of Connection::run; dlq::protocol_error for an unreadable map.
  void refresh(ConnectionPool& pool) {
    auto lease = pool.acquire();
    read_slots(*lease);
  }

  /// Redirections followed so far.
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  /// How many masters the Router has a ConnectionPool for (cluster mode: one per host:port
  /// named by the slot map or a redirection, never fewer; 0 in plain mode and before the
  /// first use). The seed's own pool is not counted.
  std::size_t pools() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return nodes_.size();
  }

 private:
  enum Mode : int { unknown = 0, plain = 1, cluster = 2 };
  static constexpr int max_moved = 5;
  static constexpr int max_retries = 10;

  struct Node {
    std::string host;
    int port = 0;
    std::unique_ptr<ConnectionPool> pool;
  };

  void count(std::size_t& counter) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counter;
  }

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

  ConnectionPool* owner(std::uint16_t slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int n = slots_.empty() ? -1 : slots_[slot];
    return n < 0 ? nullptr : nodes_[static_cast<std::size_t>(n)].pool.get();
  }

  // The pool of host:port, created on first use.
  ConnectionPool& node(const std::string& host, int port) {
    std::lock_guard<std::mutex> lock(mutex_);
    return *nodes_[node_index_locked(host, port)].pool;
  }

  std::size_t node_index_locked(const std::string& host, int port) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].port == port && nodes_[i].host == host) return i;
    }
    ConnectionOptions o = seed_.options();
    o.host = host;
    o.port = port;
    o.unix_socket.clear();
    nodes_.push_back(Node{host, port, std::make_unique<ConnectionPool>(o, pool_options_)});
    return nodes_.size() - 1;
  }

  // MOVED: the slot's new owner is known at once; the rest of the map is read again from it.
  ConnectionPool& on_moved(const detail::Redirect& rd) {
    ConnectionPool* to = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.moved;
      const std::size_t n = node_index_locked(rd.host, rd.port);
      if (slots_.empty()) slots_.assign(cluster_slot_count, -1);
      slots_[static_cast<std::size_t>(rd.slot)] = static_cast<int>(n);
      to = nodes_[n].pool.get();
    }
    try {
      refresh(*to);
    } catch (const dlq::storage_error&) {  // the entry from MOVED is enough to go on
    }
    return *to;
  }

  // CLUSTER SLOTS on `conn`, into the map (as apply_slots: a map of no slot is not applied
  // once one is known). @returns whether the map was applied.
  bool read_slots(Connection& conn) {
    Command c("CLUSTER");
    c.arg("SLOTS").label("CLUSTER SLOTS");
    Reply r = conn.run(c, Effect::read);
    check(r, conn, c.label());
    return apply_slots(*r, conn);
  }

  // A request failed on its connection to `failed` (an endpoint): that node may be down and
  // its slots given to another master, which it will never tell with MOVED. Reads the map
  // again from another node — the seed, else a known master — on a connection opened for
  // this read alone (no lease: the caller may hold one, and two at once could deadlock two
  // pools), one try each; a map of no slot (from a node that forgot the cluster) is passed
  // by, never applied. Never throws: its failure leaves the map as it is, and the
  // caller's error is rethrown unchanged. One such read at a time: a thread that finds one
  // under way goes on without.
  void refresh_elsewhere(const std::string& failed) noexcept {
    std::unique_lock<std::mutex> busy(refresh_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return;
    try {
      std::vector<const ConnectionPool*> sources;
      if (seed_.endpoint() != failed) sources.push_back(&seed_);
      for (const ConnectionPool* p : known_masters()) {
        if (sources.size() == 2) break;  // the seed and one master at most
        if (p->endpoint() != failed && p->endpoint() != seed_.endpoint()) sources.push_back(p);
      }
      for (const ConnectionPool* p : sources) {
        ConnectionOptions o = p->options();
        o.reconnect_attempts = 0;
        Connection conn(std::move(o));
        try {
          if (read_slots(conn)) return;        // an empty map: the next source
        } catch (const dlq::storage_error&) {  // the next source, else the map as it is
        }
      }
    } catch (const std::exception&) {  // std::bad_alloc: the map as it is
    }
  }

  // Reads a CLUSTER SLOTS reply (detail::parse_slot_ranges) into the map. A map of no slot
  // at all (a node that forgot the cluster: CLUSTER RESET, or restarted without its
  // nodes.conf) is applied only by the first read (clustered()); once a map is known it is
  // never applied, whatever the read (CLUSTERDOWN, MOVED, a slot of no master, a connection
  // failure) — else every key would fail from then on, pool_for reading the same empty node
  // again. @returns whether it was applied.
  bool apply_slots(const redisReply& r, const Connection& conn) {
    std::vector<detail::SlotRange> ranges;
    if (const redisReply* bad = detail::parse_slot_ranges(r, conn.options().host, ranges)) {
      detail::throw_unexpected_reply(*bad, conn.endpoint(), "CLUSTER SLOTS");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (ranges.empty() && !slots_.empty()) return false;
    ++stats_.refreshes;
    // A master of no address (noaddr) keeps its slots' known owners (detail::slot_owners).
    slots_ = detail::slot_owners(ranges, slots_, [this](const std::string& host, int port) {
      return static_cast<int>(node_index_locked(host, port));
    });
    return true;
  }

  PoolOptions pool_options_;
  ConnectionPool seed_;
  std::atomic<int> mode_{unknown};
  std::mutex detect_mutex_;
  std::mutex refresh_mutex_;  // one refresh_elsewhere at a time (try_lock; taken before mutex_)
  mutable std::mutex mutex_;  // slots_, nodes_, stats_
  std::vector<int> slots_;    // slot -> index in nodes_; -1 = no master known
  std::vector<Node> nodes_;   // never shrinks: pools live as long as the Router
  Stats stats_;
};

}  // namespace dlq::redis
