// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/detail/cluster_fsm.hpp
/// The routing decisions of a Redis Cluster router, without I/O: what a request does after
/// each answer (detail::Redirections: re-send where, with ASKING or not, after which back-off,
/// or give up) and which nodes the slot map is read from, in which order, and when that read
/// is over (detail::MapRead). Both routers — the blocking dlq::redis::Router
/// (redis/cluster.hpp) and dlq::asio::RedisClusterRouter (asio/redis_cluster.hpp) — do the
/// I/O these decide: they feed in what happened (an answer, a connection failure, a map read)
/// and do what comes out. Standard library only, as redis/detail/slot_map.hpp it builds on;
/// tested without a server (tests/redis/test_cluster_fsm.cpp), in the manner of Boost.Redis's
/// detail/*_fsm.
///
/// The rules, each decided once here:
/// - MOVED: the slot's master is the named node from now on (SlotMap::moved); the map is read
///   again from that node; the request is re-sent there, at most 5 MOVED per request.
/// - ASK: re-sent once to the named node, after ASKING; an ASK from there gives up.
/// - TRYAGAIN, CLUSTERDOWN: re-sent to the slot's master after 10 ms doubling to 200 ms, at
///   most 10 times (~1.5 s). After CLUSTERDOWN the map is read again elsewhere (below): a
///   reset node kept as its slots' owner answers CLUSTERDOWN for them forever.
/// - A connection failure (lost, timed out, not reached): never re-sent; the map is read
///   again elsewhere — a master that went down answers no MOVED.
/// - A slot the map gives no master: the map is read again elsewhere; the router then looks
///   once more (the blocking one waits for the read, the asynchronous one fails the request
///   at once and lets the read serve the next ones).
/// - "Elsewhere": the seed, then the masters of the map known in slot order — never the node
///   that failed or answered CLUSTERDOWN — at most 3 nodes, one after another, until one's
///   map is applied (SlotMap::apply: a map of no slot, an error reply or an unreadable answer
///   is passed by, as a node that does not answer).
/// - One map read at a time (SlotMap's gate): a read that finds one under way is not started;
///   the one under way serves everyone. Its end — a map applied, no node left, the MapRead
///   destroyed unfinished — wakes every thread waiting for it (SlotMap::wait_read).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlq/redis/detail/slot_map.hpp"

namespace dlq::redis::detail {

/// One read of the slot map: the nodes to ask, in order, until one's map is applied. Holds
/// the map's read gate from creation until the read is over (or the MapRead is destroyed,
/// which may be after the map). Move-only. The router asks node(), then reports on_answer() or
/// on_failure(), until node() is -1 — calling them as it calls SlotMap's members (the blocking
/// router under its mutex).
class MapRead {
 public:
  /// At most this many nodes are asked by one read.
  static constexpr std::size_t max_sources = 3;

  /// Nothing to read.
  MapRead() = default;
  MapRead(MapRead&& o) noexcept
      : map_(std::exchange(o.map_, nullptr)),
        gate_(std::move(o.gate_)),
        sources_(std::move(o.sources_)),
        at_(o.at_),
        applied_(o.applied_) {}
  MapRead& operator=(MapRead&& o) noexcept {
    if (this != &o) {
      release();
      map_ = std::exchange(o.map_, nullptr);
      gate_ = std::move(o.gate_);
      sources_ = std::move(o.sources_);
      at_ = o.at_;
      applied_ = o.applied_;
    }
    return *this;
  }
  MapRead(const MapRead&) = delete;
  MapRead& operator=(const MapRead&) = delete;
  ~MapRead() { release(); }

  /// A read from somewhere other than `failed` (a node index; -1: none): the seed, then the
  /// map's masters in slot order, never `failed`, at most max_sources. Nothing to read in
  /// plain mode or while another read is under way.
  static MapRead elsewhere(SlotMap& map, int failed) {
    std::vector<int> sources;
    if (failed != 0) sources.push_back(0);
    for (const int n : map.masters()) {
      if (sources.size() == max_sources) break;
      if (n != failed && n != 0) sources.push_back(n);
    }
    return MapRead(map, std::move(sources));
  }
  /// A read from `node` alone (after its MOVED). Nothing to read in plain mode or while
  /// another read is under way.
  static MapRead from(SlotMap& map, int node) { return MapRead(map, {node}); }

  /// The node to ask now; -1 when the read is over (or there was nothing to read).
  int node() const noexcept { return map_ != nullptr ? sources_[at_] : -1; }
  /// Whether a map was applied by this read.
  bool applied() const noexcept { return applied_; }
  /// The node asked answered (SlotMap::apply decides). @returns the next node to ask: -1 when
  /// the map was applied or no node is left.
  int on_answer(const ClusterSlots& answer) {
    if (map_ == nullptr) return -1;
    const SlotMap::Applied a = map_->apply(answer);
    applied_ = a == SlotMap::Applied::yes;
    if (applied_ || a == SlotMap::Applied::plain || a == SlotMap::Applied::ignored) {
      release();
      return -1;
    }
    return next();
  }
  /// The node asked did not answer (connection failure, timeout). @returns the next node to
  /// ask, -1 when none is left.
  int on_failure() { return map_ == nullptr ? -1 : next(); }

 private:
  MapRead(SlotMap& map, std::vector<int> sources) {
    if (sources.empty() || map.mode() == SlotMap::Mode::plain) return;
    gate_ = map.begin_read();
    if (!gate_) return;
    map_ = &map;
    sources_ = std::move(sources);
  }
  int next() {
    if (++at_ < sources_.size()) return sources_[at_];
    release();
    return -1;
  }
  void release() noexcept {
    if (gate_) gate_->leave();  // wakes SlotMap::wait_read, whatever ended the read
    gate_.reset();
    map_ = nullptr;
  }

  SlotMap* map_ = nullptr;  // non-null while the read is under way (the gate held)
  SlotMap::Gate gate_;
  std::vector<int> sources_;
  std::size_t at_ = 0;
  bool applied_ = false;
};

/// What a router does next with a request (Redirections).
struct Next {
  enum Kind : unsigned char {
    done,     ///< the answer is the request's (its result, or an error that is no redirection)
    resend,   ///< send it again: to `node`, after ASKING when `asking`, once `delay` passed
    give_up,  ///< fail it: the answer's error with `why` as its hint (a connection failure:
              ///< `why` is empty and the router's own error stands)
  } kind = done;
  /// resend: the node; -1 = the slot's master when the delay has passed (SlotMap::owner; the
  /// map may have been read meanwhile).
  int node = -1;
  bool asking = false;
  std::chrono::milliseconds delay{0};
  MapRead read;  ///< a map read to do as well (before the re-send, or alongside it)
  std::string why;
};

/// One request's way through redirections: its MOVED and retry counts and whether it is
/// sent after ASKING. Any sequence of answers ends (done or give_up) within 32 sends.
class Redirections {
 public:
  static constexpr int max_moved = 5;
  static constexpr int max_retries = 10;
  static constexpr std::chrono::milliseconds first_backoff{10};
  static constexpr std::chrono::milliseconds max_backoff{200};

  /// Whether the request is (to be) sent after ASKING.
  bool asking() const noexcept { return asking_; }

  /// The answer of node `answered_by` to the request, read as `rd`
  /// (parse_redirect(text, that node's host); kind none: not a redirection).
  Next on_answer(SlotMap& map, const Redirect& rd, int answered_by) {
    Next next;
    switch (rd.kind) {
      case Redirect::none:
        return next;
      case Redirect::moved: {
        if (++moved_ > max_moved)
          return give_up("still redirected after " + std::to_string(max_moved) + " MOVED answers");
        ++map.stats().moved;
        next.kind = Next::resend;
        next.node = map.moved(rd);
        next.read = MapRead::from(map, next.node);
        asking_ = false;
        return next;
      }
      case Redirect::ask: {
        if (asking_) return give_up("the node named by ASK redirected again");
        ++map.stats().ask;
        next.kind = Next::resend;
        next.node = map.add(rd.host, rd.port);
        next.asking = asking_ = true;
        return next;
      }
      case Redirect::tryagain:
      case Redirect::clusterdown:
        break;
    }
    if (++retries_ > max_retries)
      return give_up("still refused after " + std::to_string(max_retries) + " retries over ~1.5 s");
    ++map.stats().retries;
    next.kind = Next::resend;
    next.delay = std::min(max_backoff, first_backoff * (1 << std::min(retries_ - 1, 8)));
    if (rd.kind == Redirect::clusterdown) next.read = MapRead::elsewhere(map, answered_by);
    asking_ = false;
    return next;
  }

  /// The request failed on its connection to node `failed` (lost, timed out, not reached;
  /// -1: a node the map does not know): it is never re-sent, and the map is read again
  /// elsewhere (in cluster mode).
  static Next on_failure(SlotMap& map, int failed) {
    Next next;
    next.kind = Next::give_up;
    if (map.mode() == SlotMap::Mode::cluster) next.read = MapRead::elsewhere(map, failed);
    return next;
  }

 private:
  static Next give_up(const std::string& what) {
    Next next;
    next.kind = Next::give_up;
    next.why = what +
               "; nothing was executed — retry later, or check the cluster (CLUSTER SLOTS, "
               "CLUSTER NODES)";
    return next;
  }

  int moved_ = 0;
  int retries_ = 0;
  bool asking_ = false;
};

/// The error text of a request for a slot the map gives no master (after a map read).
inline std::string no_master_serves(std::uint16_t slot) {
  return "no master serves hash slot " + std::to_string(slot);
}
/// Its hint.
inline constexpr const char* no_master_hint =
    "the cluster is down or resharding; nothing was sent — check CLUSTER SLOTS";

}  // namespace dlq::redis::detail
