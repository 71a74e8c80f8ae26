// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/slot_map.hpp
/// Redis Cluster's slot map, without I/O: key hashing (dlq::redis::key_slot), the answers
/// that redirect a request (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) read from their text, CLUSTER
/// SLOTS read from any reply tree into a value (detail::ClusterSlots), and detail::SlotMap —
/// the nodes a router knows, each slot's master, and whether an answer is applied. The
/// decisions built on it (where a request goes next, which nodes the map is read from) are in
/// redis/detail/cluster_fsm.hpp. Standard library only: no hiredis, no Asio, no socket; the
/// two routers (redis/cluster.hpp, asio/redis_cluster.hpp) fill it from their own replies.
#pragma once

#include <charconv>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

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

/// What a cluster router did (dlq::redis::Router::stats, dlq::asio::RedisClusterRouter::stats):
/// for tests and monitoring.
struct ClusterStats {
  std::size_t moved = 0;      ///< MOVED answers followed
  std::size_t ask = 0;        ///< ASK answers followed
  std::size_t retries = 0;    ///< TRYAGAIN / CLUSTERDOWN back-offs
  std::size_t refreshes = 0;  ///< slot maps applied (CLUSTER SLOTS answers, handshakes' too)
};

namespace detail {

/// A redirection or retry answer of a cluster node, parsed.
struct Redirect {
  enum Kind : unsigned char { none, moved, ask, tryagain, clusterdown } kind = none;
  int slot = -1;
  std::string host;
  int port = 0;
};

/// Reads the text of an error reply: "MOVED 3999 127.0.0.1:6381", "ASK …", "TRYAGAIN …",
/// "CLUSTERDOWN …" (anything else: kind none). A MOVED or ASK naming no host (":<port>", or
/// "?:<port>": cluster-preferred-endpoint-type unknown-endpoint) means the node that
/// answered, as CLUSTER SLOTS's empty host does: its host is `answered_by`. A slot or port
/// out of range, or no "host:port", is not a redirection (kind none).
inline Redirect parse_redirect(std::string_view error, std::string_view answered_by = {}) {
  Redirect out;
  const std::string_view code = error.substr(0, error.find(' '));
  if (code == "TRYAGAIN" || code == "CLUSTERDOWN") {
    out.kind = code == "TRYAGAIN" ? Redirect::tryagain : Redirect::clusterdown;
    return out;
  }
  if (code != "MOVED" && code != "ASK") return out;
  // "<code> <slot> <host>:<port>"; the host may be an IPv6 address (the last ':' separates).
  const auto s1 = error.find(' ');
  const auto s2 = error.find(' ', s1 + 1);
  if (s2 == std::string_view::npos) return out;
  const std::string_view slot = error.substr(s1 + 1, s2 - s1 - 1);
  const std::string_view addr = error.substr(s2 + 1);
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return out;
  int s = -1;
  int p = 0;
  const auto sr = std::from_chars(slot.data(), slot.data() + slot.size(), s);
  const auto pr = std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), p);
  if (sr.ec != std::errc{} || sr.ptr != slot.data() + slot.size() || pr.ec != std::errc{} ||
      pr.ptr != addr.data() + addr.size() || s < 0 || s >= static_cast<int>(cluster_slot_count) ||
      p <= 0 || p > 65535) {
    return out;
  }
  out.kind = code == "MOVED" ? Redirect::moved : Redirect::ask;
  out.slot = s;
  std::string_view host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "?") host = answered_by;
  out.host = std::string(host);
  out.port = p;
  return out;
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

/// A CLUSTER SLOTS answer, read from a router's own reply type by parse_cluster_slots.
struct ClusterSlots {
  enum Kind : unsigned char {
    map,         ///< a slot map: `ranges` (none: a node that knows no cluster)
    refused,     ///< an error reply (`error`): a plain server, or a node that refused
    unreadable,  ///< not of CLUSTER SLOTS's form (`error` says how)
  } kind = map;
  std::vector<SlotRange> ranges;  ///< each range and its master, in the answer's order
  std::string error;              ///< refused: the reply's text; unreadable: what is wrong
};

/// Reads a CLUSTER SLOTS answer — [[start, end, [host, port, id…], replicas…], …] — into a
/// ClusterSlots (the masters only). `Access` reads the router's reply type `Reply`:
/// `is_error`, `is_array`, `is_integer`, `size`, `at(r, i)`, `integer`, `text` (static).
/// A master with an empty host (or "?") and a port is the node asked: `asked_host`. A master
/// with port 0 has no known address (noaddr, see SlotRange): its range is kept with host "".
/// A range out of 0..16383 (or reversed) or a port out of 0..65535 makes the answer
/// unreadable. Pure: no I/O.
template <class Access, class Reply>
ClusterSlots parse_cluster_slots(const Reply& r, std::string_view asked_host) {
  ClusterSlots out;
  const auto bad = [&out](std::string why) {
    out.kind = ClusterSlots::unreadable;
    out.ranges.clear();
    out.error = std::move(why);
    return std::move(out);
  };
  if (Access::is_error(r)) {
    out.kind = ClusterSlots::refused;
    out.error = std::string(Access::text(r));
    return out;
  }
  if (!Access::is_array(r)) return bad("not an array");
  for (std::size_t i = 0; i < Access::size(r); ++i) {
    const Reply& e = Access::at(r, i);
    const std::string which = "element " + std::to_string(i);
    if (!Access::is_array(e) || Access::size(e) < 3 || !Access::is_integer(Access::at(e, 0)) ||
        !Access::is_integer(Access::at(e, 1)) || !Access::is_array(Access::at(e, 2)) ||
        Access::size(Access::at(e, 2)) < 2 ||
        !Access::is_integer(Access::at(Access::at(e, 2), 1))) {
      return bad(which + " is not [start, end, [host, port, …], …]");
    }
    const Reply& master = Access::at(e, 2);
    const long long start = Access::integer(Access::at(e, 0));
    const long long end = Access::integer(Access::at(e, 1));
    const long long port = Access::integer(Access::at(master, 1));
    if (start < 0 || end >= static_cast<long long>(cluster_slot_count) || start > end)
      return bad(which + ": slots " + std::to_string(start) + "-" + std::to_string(end));
    if (port < 0 || port > 65535) return bad(which + ": port " + std::to_string(port));
    std::string host(Access::text(Access::at(master, 0)));
    if (port == 0) {
      host.clear();  // no address known (noaddr): see slot_owners
    } else if (host.empty() || host == "?") {
      host = std::string(asked_host);  // "the node you asked" (it does not know its address)
    }
    out.ranges.push_back(SlotRange{start, end, std::move(host), static_cast<int>(port)});
  }
  return out;
}

/// The slot table for a map read as `ranges`: each slot's node index (`node_index(host,
/// port)`), -1 where no range names one; a later range over the same slots wins. A range
/// whose master has no address (port 0) keeps the owners of `known` (the table so far; empty
/// before the first map), else -1: the known owner is either still right or answers MOVED /
/// CLUSTERDOWN (a reset node) / fails its connection, which all read the map again (from
/// another node, cluster_fsm.hpp), while -1 would fail every command for those slots at once.
/// Pure: no I/O.
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

/// The read gate of a SlotMap: held while a map read is under way (cluster_fsm.hpp's MapRead,
/// one at a time). Every release wakes every thread waiting for it, whatever ended the read —
/// a map applied, no node left, the MapRead destroyed unfinished — so no waiter polls.
/// Thread-safe.
class ReadGate {
 public:
  /// Takes the gate when it is free. @returns whether it was taken.
  bool enter() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (held_) return false;
    held_ = true;
    return true;
  }
  /// Frees the gate and wakes the waiters (wait()).
  void leave() noexcept {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
      ++reads_ended_;
    }
    ended_.notify_all();
  }
  /// Whether a read is under way.
  bool held() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return held_;
  }
  /// Blocks until the read under way ends; returns at once when none is. (A read that starts
  /// meanwhile is not waited for: the caller looks at the map the first one left.)
  void wait() const {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!held_) return;
    const std::uint64_t seen = reads_ended_;
    ended_.wait(lock, [&] { return reads_ended_ != seen; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable ended_;
  bool held_ = false;
  std::uint64_t reads_ended_ = 0;
};

/// One router's knowledge of the cluster: whether the seed is a cluster node at all (mode),
/// the nodes known (index -> host:port; 0 is the seed, added by the constructor; a node is
/// never removed, so an index stays valid), each slot's master, the counters, and whether a
/// map read is under way (cluster_fsm.hpp's MapRead, one at a time). The router keeps its I/O
/// handle of a node (pool, connection) at the node's index.
///
/// Not thread-safe: the blocking router calls it under its mutex, the asynchronous one on its
/// executor. Only the read gate (ReadGate) is thread-safe: a MapRead may end anywhere, even
/// after the map, and wait_read() is called without the router's mutex.
class SlotMap {
 public:
  /// unknown until the first answer to CLUSTER SLOTS; then plain (an error reply: cluster
  /// support disabled) or cluster (slot ranges, even none), for good.
  enum class Mode : unsigned char { unknown, plain, cluster };
  /// What apply() did with an answer.
  enum class Applied : unsigned char {
    yes,         ///< the map is the answer's now (the first answer: the mode is cluster)
    plain,       ///< the first answer was an error reply: the mode is plain
    refused,     ///< an error reply once the mode is known: the map known is kept
    no_slot,     ///< a map of no slot once a map is known: not applied (see apply)
    unreadable,  ///< not CLUSTER SLOTS's form: the map known is kept
    ignored,     ///< plain mode: maps are not read
  };
  /// A node's address. The seed's host is "" when it is reached through a Unix socket.
  struct Node {
    std::string host;
    int port = 0;
  };

  /// A map of one node, the seed (index 0).
  SlotMap(std::string seed_host, int seed_port) {
    nodes_.push_back(Node{std::move(seed_host), seed_port});
  }
  SlotMap(const SlotMap&) = delete;
  SlotMap& operator=(const SlotMap&) = delete;
  ~SlotMap() = default;

  Mode mode() const noexcept { return mode_; }
  /// The node index of `slot`'s master; -1 when no map names one (or no map is known).
  int owner(std::uint16_t slot) const noexcept { return owners_.empty() ? -1 : owners_[slot]; }
  /// The nodes known (at least the seed).
  std::size_t size() const noexcept { return nodes_.size(); }
  const Node& node(int n) const { return nodes_.at(static_cast<std::size_t>(n)); }
  /// The index of host:port; -1 when unknown.
  int find(std::string_view host, int port) const noexcept {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].port == port && nodes_[i].host == host) return static_cast<int>(i);
    return -1;
  }
  /// The index of host:port, added when unknown.
  int add(std::string_view host, int port) {
    const int n = find(host, port);
    if (n >= 0) return n;
    nodes_.push_back(Node{std::string(host), port});
    return static_cast<int>(nodes_.size() - 1);
  }
  /// The nodes the map names as a master, each once, in the order of their first slot.
  const std::vector<int>& masters() const noexcept { return masters_; }
  ClusterStats& stats() noexcept { return stats_; }
  const ClusterStats& stats() const noexcept { return stats_; }

  /// Decides whether an answer to CLUSTER SLOTS replaces the map, and applies it:
  /// - in plain mode, nothing is read (ignored);
  /// - the first answer decides the mode: an error reply means plain, slot ranges (even
  ///   none) mean cluster and are the map;
  /// - later, an error reply or an unreadable answer leaves the map known as it is;
  /// - a map of no slot at all (a node that forgot the cluster: CLUSTER RESET, or restarted
  ///   without its nodes.conf) is never applied once a map is known, whatever made the
  ///   router read it — else every key would fail from then on;
  /// - otherwise the map is the answer's (slot_owners: a master of no address keeps its
  ///   slots' known owner), and `stats().refreshes` counts it.
  Applied apply(const ClusterSlots& answer) {
    if (mode_ == Mode::plain) return Applied::ignored;
    if (answer.kind == ClusterSlots::refused) {
      if (mode_ != Mode::unknown) return Applied::refused;
      mode_ = Mode::plain;
      return Applied::plain;
    }
    if (answer.kind == ClusterSlots::unreadable) return Applied::unreadable;
    if (answer.ranges.empty() && mode_ == Mode::cluster) return Applied::no_slot;
    owners_ = slot_owners(answer.ranges, owners_,
                          [this](const std::string& host, int port) { return add(host, port); });
    find_masters();
    mode_ = Mode::cluster;
    ++stats_.refreshes;
    return Applied::yes;
  }

  /// MOVED: the slot's master is the node it names from now on (in cluster mode; before the
  /// first map, only the request follows it). @returns that node's index.
  int moved(const Redirect& rd) {
    const int n = add(rd.host, rd.port);
    if (mode_ != Mode::cluster) return n;
    int& owner = owners_[static_cast<std::size_t>(rd.slot)];  // cluster mode: a full table
    if (owner != n) {
      owner = n;
      find_masters();
    }
    return n;
  }

  /// The read gate (MapRead). Shared, so that a read may end (be destroyed) after the map.
  using Gate = std::shared_ptr<ReadGate>;
  /// Takes the read gate when it is free. @returns it, or null when a read is under way.
  Gate begin_read() { return reading_->enter() ? reading_ : Gate(); }
  /// Whether a map read is under way.
  bool reading() const { return reading_->held(); }
  /// Blocks until the map read under way ends (at once when none is) — woken by its end,
  /// whatever ended it. Call it without the lock that guards the rest of the map: the read
  /// needs that lock to end.
  void wait_read() const { reading_->wait(); }

 private:
  void find_masters() {
    std::vector<unsigned char> seen(nodes_.size(), 0);
    masters_.clear();
    for (const int n : owners_) {
      if (n < 0 || seen[static_cast<std::size_t>(n)] != 0) continue;
      seen[static_cast<std::size_t>(n)] = 1;
      masters_.push_back(n);
    }
  }

  Mode mode_ = Mode::unknown;
  std::vector<Node> nodes_;   // [0] = the seed
  std::vector<int> owners_;   // slot -> index in nodes_; -1 = none; empty before any map
  std::vector<int> masters_;  // the distinct owners, in slot order
  ClusterStats stats_;
  const Gate reading_ = std::make_shared<ReadGate>();
};

}  // namespace detail
}  // namespace dlq::redis
