// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_storage.hpp
/// dlq::RedisListStorage: dead letters in Redis lists, on one server or a Redis Cluster,
/// readable and writable by the Python seed service. CMake: dlq::redis.
///
///     dlq::DeadLetterQueue<dlq::RedisListStorage> dlq(
///         dlq::RedisListStorage("redis://127.0.0.1:6379/0"));
///     dlq.send_to_dlq("orders", payload, "payment timeout", 3, "worker-7");
///
/// Keys. Every key is a pattern with `*` standing for the queue name (RedisListOptions). The
/// default layout puts all keys of a queue in one hash slot through the tag `{queue}`: dead
/// list `dlq:{orders}`, source list `queue:{orders}`, corrupt list `dlq:{orders}:corrupt`,
/// and, while a replay runs, its last step's receipt `dlq:{orders}:receipt:<step>` and the
/// snapshot bounds of the replays and discards in progress, the hash `dlq:{orders}:runs`. The
/// Python seed's layout is `dlq:*`, `queue:*`, `dlq:*:corrupt` (single server only). The
/// patterns double as SCAN MATCH patterns for queues(); a key that matches both the dead and
/// the corrupt pattern (`dlq:a:corrupt` in the seed's layout) is taken as a corrupt list.
/// Redis Cluster is detected on first use (one `CLUSTER SLOTS`; a plain server works exactly
/// as without cluster support). Each operation concerns one queue, so one slot: it is sent to
/// that slot's master and redirections are followed (dlq/redis/cluster.hpp). In cluster mode
/// the three patterns must share one hash tag (holding the queue, or one fixed tag such as
/// `{dlq}:*`), else the first operation (or cluster_mode()) throws dlq::invalid_argument;
/// a replay to a queue on another slot is refused before anything moves; a queue name that
/// starts with `}` cannot be replayed. No reads from replicas, no databases other than 0.
///
/// Costs, in round trips: push 1 (RPUSH); push_bounded, push_capped 1 (a script); bump_count 1
/// (MULTI/EXEC); push_many 1 (pipelined; in a cluster one per master); size, range, remove 1;
/// range_bytes, purge 1 (a script); sizes 1 (pipelined); queues: SCAN MATCH … TYPE list;
/// replay_step 1 per batch (the next window is read in the same round trip as the script);
/// replay_fast 1 per batch (a script; the entries' bytes stay on the server).
///
/// Fast path (replay_fast; dlq/redis/list_storage_fast-inl.hpp says what it moves): for an
/// unfiltered replay the front end first moves the entries at the head whose frame proves
/// their payload span, with one script per batch; the first item it cannot prove ends the
/// fast step, and replay_step decides it as below. The invariants below hold for both.
/// Definitions: list_storage-inl.hpp (connection, pushes, reads, purge, listing, audit), the
/// replay step, snapshot and recover in list_storage_replay-inl.hpp, list_storage_fast-inl.hpp.
///
/// Snapshot (replay_snapshot; dlq/redis/scripts/snapshot.hpp has the reasoning): a replay or
/// discard examines exactly the entries present when it started. Its bound — how many items
/// at the head of the dead list were there at its start — lives in `<dead key>:runs`, and
/// every dlq operation that removes items from a dead list (replay steps, fast steps,
/// remove, purge, the capped push, recover) lowers the bounds below which it removed items, in
/// the same script; pushes leave them alone (they land behind). Exact for any mix of dlq
/// clients, byte-identical items included; a removal by another program (the Python seed's
/// LPOP) is not counted — each one lets a run in progress take one item more at its end.
///
/// Replay invariants (compare-and-move; dlq/redis/scripts/replay_step.hpp is the script,
/// docs/design.md the reasoning, docs/benchmarks.md the measurements):
/// - An item is at every instant in exactly one place: the dead list, a destination list,
///   or the corrupt list. A replayer killed at any point leaves nothing to recover: there is
///   no staging list, lease or lock.
/// - A step applies all its decisions or none: the script re-reads the window and checks
///   every decided item (its length and Decision::identity, or all its bytes) before it
///   writes; another client's change (LPOP, LREM, a trim, another replayer) makes the step
///   report a conflict, having changed nothing.
/// - Producers' RPUSHes never abort a replay and land behind its window: replay-all keeps
///   snapshot semantics. Items the replay keeps stay in place and in order.
/// - A step whose answer was lost is resolved by its receipt (the step kills its old
///   connection, then reads the receipt): applied, or not applied — never both. If the
///   server cannot be asked, the step throws with outcome_unknown() == true; nothing was lost.
/// - A failure inside the script can leave a copy in two places (a duplicate), never a loss;
///   recover() repairs what it can leave in the dead list.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/kept_prefix.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/detail/replica_ack.hpp"
#include "dlq/redis/key_pattern.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"
#include "dlq/redis/scripts/replay_step.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Key names and batch limits of a RedisListStorage. Every default is stated. A key pattern
/// must contain exactly one `*` (the queue name) and the three patterns must differ, else the
/// storage's constructor throws dlq::invalid_argument.
struct RedisListOptions {
  /// Dead-letter list of a queue; `*` is the queue name. Default "dlq:{*}" (cluster-safe).
  /// The Python seed's layout is "dlq:*".
  std::string dead_key = "dlq:{*}";
  /// Source queue replay pushes payloads to; `*` is the queue name. Default "queue:{*}".
  /// The Python seed's layout is "queue:*".
  std::string source_key = "queue:{*}";
  /// List of corrupt items set aside by replay. Default "dlq:{*}:corrupt".
  std::string corrupt_key = "dlq:{*}:corrupt";
  /// Most items one replay script moves. Default 1000; 0 = 1000; values above 4000 are
  /// lowered to 4000 (a script must stay short: it blocks the server while it runs).
  std::size_t max_batch_items = 1000;
  /// Most bytes one replay script handles. Each decided raw item counts twice (the script
  /// re-reads it, and either receives it back to compare or cuts a payload of up to its size
  /// out of it); a payload sent as bytes counts once. A step stops deciding items once the
  /// budget is reached (it always decides at least one). Bounds how long a script blocks the
  /// server (docs/benchmarks.md has the script durations). Default 512 KiB; 0 = 512 KiB.
  std::size_t max_batch_bytes = std::size_t{512} << 10;
  /// How long a replay receipt key lives at most. A receipt is deleted as soon as its step's
  /// answer has been read (with the next step's round trip, or when the replay's cursor is
  /// destroyed); it lives this long only when the replayer died, the server became
  /// unreachable, or the step's script failed midway. Also how long a replay's or discard's
  /// snapshot bound (replay_snapshot) outlives its last read or step: a run that makes no
  /// step for this long (a killed process; a `rate` slower than one entry per receipt_ttl)
  /// loses it and fails with DLQSNAPSHOT, having moved nothing more. Default 10 minutes;
  /// 0 = 10 minutes.
  std::chrono::milliseconds receipt_ttl{600000};
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
  /// How long the audit trail (the stream `<dead key>:audit`, see dlq/audit.hpp and
  /// dlq/redis/audit_stream.hpp) keeps its records. Default: 90 days, at most 1 000 000
  /// records per queue.
  AuditRetention audit_retention;
  /// Replica-acknowledged writes (docs/redis.md, "Replica-acknowledged writes"): how many
  /// replicas must confirm every write that stores, moves or removes entries (push and its
  /// variants, push_many, each replay or discard step — fast path included —, remove, purge)
  /// before it is reported done: `WAIT replicas_to_ack replica_ack_timeout` follows the write
  /// in the same pipeline. Fewer in time: dlq::replication_error (the write is on the master,
  /// not undone; it names the ids). Default 0 = off (no WAIT). Not supported yet on Redis
  /// Cluster (the first operation throws dlq::invalid_argument) nor by
  /// dlq::asio::RedisListStorage (its constructor throws); negative values are refused.
  int replicas_to_ack = 0;
  /// How long the master waits for the replicas (WAIT's timeout) when replicas_to_ack > 0: a
  /// write takes up to this long more while replicas lag or are down. Default 500 ms. Must be
  /// > 0 (WAIT 0 waits forever) and < the connection's command_timeout (else the socket times
  /// out first and the write's outcome is unknown); else the constructor throws
  /// dlq::invalid_argument.
  std::chrono::milliseconds replica_ack_timeout{500};
};

namespace detail {

/// Prefix of the tombstones replay writes with LSET right before removing them with LREM.
/// It starts with a NUL byte, so it is never a JSON envelope.
inline constexpr std::string_view tombstone_prefix{"\0dlq:tombstone:", 15};

}  // namespace detail

/// Dead-letter storage in Redis lists (see the file comment). Thread-safe: all members may
/// be called from many threads at once; they share a connection pool.
class RedisListStorage {
  struct Shared;  // what threads share; defined below

  // The receipts of a replay's applied steps whose answers were read: no longer needed, to
  // be deleted with the next step's round trip — or by drop() when the replay ends (the
  // cursor goes away). Move-only; drop() never throws (a receipt it cannot delete expires
  // after RedisListOptions::receipt_ttl).
  class receipt_jar {
   public:
    receipt_jar() = default;
    receipt_jar(receipt_jar&& other) noexcept
        : keys_(std::move(other.keys_)), owner_(std::move(other.owner_)) {
      other.keys_.clear();
    }
    receipt_jar& operator=(receipt_jar&& other) noexcept {
      if (this != &other) {
        drop();
        keys_ = std::move(other.keys_);
        other.keys_.clear();
        owner_ = std::move(other.owner_);
      }
      return *this;
    }
    receipt_jar(const receipt_jar&) = delete;
    receipt_jar& operator=(const receipt_jar&) = delete;
    ~receipt_jar() { drop(); }

    const std::vector<std::string>& keys() const noexcept { return keys_; }
    void add(std::string key, const std::shared_ptr<Shared>& owner) {
      keys_.push_back(std::move(key));
      owner_ = owner;
    }
    // The keys were deleted (or will expire): forget them.
    void forget() noexcept { keys_.clear(); }
    // Deletes the keys now: one DEL (all share the queue's hash tag), errors ignored.
    void drop() noexcept;

   private:
    std::vector<std::string> keys_;
    std::weak_ptr<Shared> owner_;
  };

  // A run's field in the dead list's runs hash (dlq/redis/scripts/snapshot.hpp): deleted by
  // drop() when the run ends (the cursor goes away) — one HDEL, errors ignored: the field
  // expires by itself. Move-only.
  class run_field {
   public:
    run_field() = default;
    run_field(run_field&& other) noexcept
        : key_(std::move(other.key_)), id_(std::move(other.id_)), owner_(std::move(other.owner_)) {
      other.id_.clear();
    }
    run_field& operator=(run_field&& other) noexcept {
      if (this != &other) {
        drop();
        key_ = std::move(other.key_);
        id_ = std::move(other.id_);
        other.id_.clear();
        owner_ = std::move(other.owner_);
      }
      return *this;
    }
    run_field(const run_field&) = delete;
    run_field& operator=(const run_field&) = delete;
    ~run_field() { drop(); }

    const std::string& id() const noexcept { return id_; }
    void set(std::string key, std::string id, const std::shared_ptr<Shared>& owner) {
      drop();
      key_ = std::move(key);
      id_ = std::move(id);
      owner_ = owner;
    }
    void drop() noexcept;

   private:
    std::string key_;
    std::string id_;
    std::weak_ptr<Shared> owner_;
  };

 public:
  /// Where a replay is: how many items it kept at the head of the dead list (the offset of
  /// its next window), which ones (to find its place again when another client removes some
  /// of them), and the next window when the previous step read it ahead. Default-constructed
  /// = at the head, nothing read. Only RedisListStorage::replay_step changes it. Move-only:
  /// it also holds the receipt of the last applied step, which it deletes when it is
  /// destroyed (one round trip; if that fails the receipt expires after
  /// RedisListOptions::receipt_ttl).
  class replay_cursor {
   public:
    /// Items of the dead list before the next window: the items this replay kept.
    std::size_t offset() const noexcept { return offset_; }
    /// The run's id in the dead list's runs hash (see replay_snapshot); "" = no bound.
    const std::string& run() const noexcept { return run_.id(); }
    /// Whether the next step can decide items read ahead by the previous one (no read of
    /// its own).
    bool has_read_ahead() const noexcept { return read_ahead() > 0; }
    /// How many items were read ahead and are not decided yet.
    std::size_t read_ahead() const noexcept {
      switch (state_) {
        case state::ready:
          return window_.size() - std::min(next_, window_.size());
        case state::anchored:
          return window_.empty() ? 0 : window_.size() - 1;
        case state::unread:
          break;
      }
      return 0;
    }

   private:
    friend class RedisListStorage;

    enum class state : unsigned char {
      unread,    ///< nothing usable read ahead: the next step reads its window at offset_
      ready,     ///< window_[next_..] are the items from offset_ on (checked)
      anchored,  ///< window_[0] should be the last kept item (unchecked); the rest follow it
    };

    /// True when the replay's kept items are exactly the items before offset_: windows are
    /// then read from the last of them, to see that none was removed meanwhile.
    bool reads_from_anchor() const noexcept { return offset_ > 0 && kept_.size() == offset_; }
    /// The list position of window_[0].
    std::size_t window_start() const noexcept {
      return reads_from_anchor() ? offset_ - 1 : offset_;
    }

    /// Forgets what was read ahead; the next step reads at `offset` (kept items stay known).
    void restart_at(std::size_t offset);
    /// A read-ahead that starts with the anchor: usable when the anchor is still the last
    /// kept item, else the kept items were touched and the window is read afresh.
    void check_anchor();
    /// A window freshly read from window_start(). False when it should start with the last
    /// kept item and does not: kept items were removed, and the place must be found again.
    bool read(std::vector<std::string> window);
    /// The step takes the window: until it advances, nothing read ahead is usable.
    void take() { state_ = state::unread; }
    /// The step only kept items: it wrote nothing, the rest of the window stays usable.
    void passed(std::size_t examined, const detail::kept_prefix& kept);
    /// The step applied: its kept items stay before the next window, which was read ahead
    /// (in the same round trip) or not.
    void applied(const detail::kept_prefix& kept, std::optional<std::vector<std::string>> ahead);

    std::size_t offset_ = 0;
    std::vector<std::string> window_;
    std::size_t next_ = 0;  // first undecided item of window_ (state ready)
    state state_ = state::unread;
    detail::kept_prefix kept_{};
    receipt_jar receipts_;  // applied steps' receipts, answers read: delete them
    run_field run_;         // the snapshot bound (replay_snapshot), deleted with the cursor
  };

  /// Connects to `connection` (lazily: the first operation connects, and finds out whether
  /// the server is a Redis Cluster — see the file comment).
  /// @throws dlq::invalid_argument when a key pattern does not have exactly one `*` or two
  ///         patterns are equal. (A layout a cluster cannot hold is reported by the first
  ///         operation, or by cluster_mode(), once the server is known.)
  explicit RedisListStorage(redis::ConnectionOptions connection, RedisListOptions options = {});

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL or bad key patterns.
  explicit RedisListStorage(std::string_view url, RedisListOptions options = {});

  RedisListStorage(const RedisListStorage&) = delete;
  RedisListStorage& operator=(const RedisListStorage&) = delete;
  /// Moves the connection pool along; the moved-from storage must not be used any more.
  RedisListStorage(RedisListStorage&&) noexcept = default;
  /// Moves the connection pool along; the moved-from storage must not be used any more.
  RedisListStorage& operator=(RedisListStorage&&) noexcept = default;
  ~RedisListStorage() = default;

  /// The options in force (after defaults were applied).
  const RedisListOptions& options() const noexcept { return options_; }
  /// The connection pool of the URL's server (for tools and tests that need raw commands).
  /// In Redis Cluster mode it reaches that one node only: for raw commands on a queue's keys
  /// use `router().acquire(key)`, a connection to the master that owns the key's slot (the
  /// URL's server in plain mode; raw commands are not redirected).
  redis::ConnectionPool& pool() noexcept { return shared_->router.seed(); }
  /// The router that sends each queue's commands to the node owning its hash slot (see
  /// dlq/redis/cluster.hpp).
  redis::Router& router() noexcept { return shared_->router; }
  /// Whether the server is a Redis Cluster (asks it on the first call; see the file comment).
  /// Calling it once after construction validates the key layout early.
  /// @throws dlq::invalid_argument in cluster mode when a key pattern does not put the queue
  ///         in a hash tag; the dlq::storage_error subclasses when the server is unreachable.
  bool cluster_mode() { return routed().clustered(); }

  /// The Redis key of a queue's dead or corrupt list.
  std::string key(std::string_view queue, ListKind kind) const;
  /// The Redis key of a queue's source list (where replay pushes payloads).
  std::string source_key(std::string_view queue) const { return source_.key(queue); }

  /// Appends an envelope to the queue's dead list: one RPUSH.
  /// @return the dead list's length after the push.
  /// @throws dlq::invalid_argument (empty queue name), dlq::storage_error subclasses; a
  ///         timeout after sending has outcome_unknown() == true (never re-sent).
  std::size_t push(const Record& record);

  /// Appends an envelope only while the dead list has fewer than `max_length` items,
  /// atomically (one script: LLEN, then RPUSH). One round trip.
  /// @return false (and nothing stored) when the list is full.
  /// @throws as push().
  bool push_bounded(const Record& record, std::size_t max_length);

  /// Appends `records` (all of one queue) only if the dead list then holds at most
  /// `max_length` items, atomically (one script: LLEN, then RPUSH): all of them or none. One
  /// round trip. @return false (and nothing stored) when they do not fit. @throws as push().
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length);

  /// Appends `records` (all of one queue) and, in the same script, removes the oldest items
  /// of the dead list beyond `max_length` (at most 10000 per call). One round trip.
  /// @return the removed items, oldest first. @throws as push().
  std::vector<std::string> push_capped(const std::vector<Record>& records, std::size_t max_length);

  /// Adds one to the counter `key` of `queue` (the poison-loop guard's) and returns its new
  /// value; the counter expires `ttl` after its last bump. INCR + EXPIRE in one MULTI/EXEC,
  /// one round trip. The counter lives at `<dead key>:count:<key>` (same hash tag; a string,
  /// so queues() never lists it).
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl);

  /// Appends many envelopes in one pipelined round trip (one RPUSH per run of consecutive
  /// records of the same queue; each RPUSH is atomic, the batch as a whole is not). In a
  /// cluster: one pipeline per master, the runs of a redirected RPUSH re-sent alone.
  /// @throws as push(); on an error reply the records of the other commands were stored.
  void push_many(const std::vector<Record>& records);

  /// Number of items in a queue's dead or corrupt list: one LLEN.
  std::size_t size(std::string_view queue, ListKind kind);

  /// Up to `count` items from position `start` (0 = oldest): one LRANGE.
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count);
  /// range bounded by bytes on the server (dlq::BoundedRange): one script, list_range_bytes.hpp.
  BoundedRange range_bytes(std::string_view queue, ListKind kind, std::size_t start,
                           std::size_t count, std::size_t min_count, std::size_t max_bytes);

  /// Removes the first item equal to `raw` (`id` is not needed here): one LREM.
  /// @return true if an item was removed.
  bool remove(std::string_view queue, ListKind kind, std::string_view /*id*/, std::string_view raw);

  /// Deletes a queue's dead or corrupt list in one atomic step.
  /// @return the exact number of items deleted.
  std::size_t purge(std::string_view queue, ListKind kind);

  /// Queues that have a dead or a corrupt list, sorted: SCAN MATCH <pattern> TYPE list (in
  /// Redis Cluster mode on every master, merged).
  std::vector<std::string> queues();

  /// Dead-list lengths of `queues`, in order: one pipelined round trip of LLENs (in a
  /// cluster one per master).
  std::vector<std::size_t> sizes(const std::vector<std::string>& queues);

  /// Lengths and end items of both lists of each queue, in order (the storage member behind
  /// DeadLetterQueue::stats): per queue LLEN + LINDEX 0 / -1 of both lists in one MULTI/EXEC,
  /// every queue in one pipelined round trip (one per master in a cluster). See
  /// dlq/redis/stats.hpp. @throws dlq::invalid_argument (empty queue name), the
  /// dlq::storage_error subclasses.
  std::vector<QueueEnds> stats(const std::vector<std::string>& queues);

  /// One replay step (see the file comment and dlq/storage.hpp): reads up to `max_items`
  /// (at most RedisListOptions::max_batch_items) at the cursor, decides them, and applies
  /// the decisions atomically with one script — or reports a conflict having changed nothing.
  /// @throws dlq::storage_error subclasses; after a lost answer that could not be resolved,
  ///         outcome_unknown() == true (nothing was lost: the batch moved completely or not
  ///         at all); dlq::invalid_argument in a Redis Cluster when a destination is on
  ///         another hash slot or the queue name empties the hash tag (nothing moved).
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide);

  /// Bounds the walk with `cursor` to the entries the queue's dead list holds now (see
  /// "Snapshot" in dlq/storage.hpp and the file comment) and returns their number: one
  /// script registers the run's bound (LLEN) in `<dead key>:runs`; the cursor deletes it when
  /// it goes away. Call it once, before the cursor's first step.
  /// @throws dlq::invalid_argument (empty queue name, a cluster layout it cannot use), the
  ///         dlq::storage_error subclasses.
  std::size_t replay_snapshot(std::string_view queue, replay_cursor& cursor);

  /// The fast step of an unfiltered replay (see dlq::FastStep and the file comment): moves
  /// the provable entries at the head of the dead list to the source list of `destination`
  /// (empty = `queue`) with the script dlq/redis/scripts/replay_fast.hpp — at most
  /// `max_items` of them; from 64 on, in four pipelined scripts of a quarter each, from 128
  /// on in eight of an eighth each; each
  /// script at most RedisListOptions::max_batch_items and RedisListOptions::max_batch_bytes
  /// of items plus payloads — and stops at the first item it cannot prove. One round trip; the
  /// items' bytes never travel to the client, only their ids when `want_ids` is true (36 bytes
  /// each), else their count. Declines (nothing sent) when the cursor has kept items before it (a
  /// parked entry left in place): the compare-and-move step then goes on alone. Same invariants as
  /// replay_step: an item is at every instant in exactly one place, nothing is left to recover
  /// after a kill, producers' RPUSHes land behind the head and never abort it.
  /// @throws dlq::invalid_argument as replay_step (destination on another cluster slot,
  ///         empty hash tag); the dlq::storage_error subclasses — when the answer was lost,
  ///         outcome_unknown() == true: the step moved its entries completely or not at all,
  ///         nothing was lost, run the replay again.
  FastStep replay_fast(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                       std::string_view destination, bool want_ids);

  /// The Redis key of a queue's audit stream: `<dead key>:audit` (see dlq/audit.hpp).
  std::string audit_key(std::string_view queue) const { return dead_.key(queue) + ":audit"; }

  /// Appends one audit record (dlq/audit.hpp) and applies the trail's retention
  /// (RedisListOptions::audit_retention) in one script (audit_stream.hpp); returns how many
  /// records younger than the max age the cap removed.
  std::size_t audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                           std::string_view record);

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit);

  /// Repairs what an interrupted replay can leave behind: stray tombstones, written only by
  /// a replay script that failed between its LSETs and its LREM (its payloads were pushed
  /// already). A tombstone is removed only when it names a step whose receipt carries the
  /// mark that step wrote before its first tombstone (the receipt lives
  /// RedisListOptions::receipt_ttl); any other item that starts with the tombstone bytes is
  /// someone else's and is moved to the corrupt list, never deleted. Reads the dead list in
  /// chunks of 1000, then one atomic script per distinct suspect item.
  /// @return the number of tombstones removed (items set aside are not counted).
  /// @throws the dlq::storage_error subclasses; dlq::reply_error WRONGTYPE when the corrupt
  ///         list holds another type (nothing moved).
  std::size_t recover(std::string_view queue);

 private:
  using Lease = std::optional<redis::ConnectionPool::Lease>;

  // EVALSHA of a push script over one list: KEYS[1] the list, ARGV[1] the limit, ARGV[2…]
  // the envelopes.
  // `key2` (the capped push's runs hash) goes in as KEYS[2] when given.
  static redis::Command push_script_call(const std::string& sha, const std::string& key,
                                         std::size_t limit, const std::vector<Record>& records,
                                         const std::string& label,
                                         const std::string* key2 = nullptr);

  static std::vector<redis::Command> one(redis::Command c);

  static long long integer_reply(const redis::Reply& r, const std::string& endpoint,
                                 const std::string& doing);

  // -- replica-acknowledged writes (replicas_to_ack; decisions in redis/detail/replica_ack.hpp)
  // What run_shared asks of the replicas: nothing when replicas_to_ack is 0.
  redis::ConnectionPool::ReplicaAck replica_ack() const noexcept {
    return {options_.replicas_to_ack, options_.replica_ack_timeout};
  }
  // Appends `WAIT replicas_to_ack replica_ack_timeout` to a write's pipeline (the same round
  // trip) when replicas_to_ack > 0; waited() returns `cmds` with it appended.
  void add_wait(std::vector<redis::Command>& cmds) const;
  std::vector<redis::Command> waited(std::vector<redis::Command> cmds) const;
  // The ids of `n` records (those that have one), for a replication_error.
  static std::vector<std::string> ids_of(const Record* records, std::size_t n);
  // Takes WAIT's reply (the last) off `replies` when replicas_to_ack > 0; null otherwise.
  redis::Reply take_wait(std::vector<redis::Reply>& replies) const;
  // When replicas_to_ack > 0: throws dlq::replication_error unless `wait` (WAIT's reply; null
  // = not read) confirms the write `what` (`kind`) of `entries` entries (`ids`) at `endpoint`.
  void confirm(const redisReply* wait, const std::string& endpoint, const std::string& what,
               std::vector<std::string> ids, std::size_t entries,
               redis::detail::AckedWrite kind = redis::detail::AckedWrite::store) const;

  // The router, once the key layout is known to suit the server: in Redis Cluster mode
  // every pattern must put the queue in a hash tag (one queue = one slot = one node), and
  // replica-acknowledged writes are not supported yet. @throws dlq::invalid_argument.
  redis::Router& routed();

  // One command per key (make(i) builds command i), pipelined: one pipeline in plain mode;
  // in cluster mode one per master, and a command answered with a redirection (it did not
  // run) is sent again on its own through the router. endpoints[i] = the node that answered.
  // `waits`, when given, receives the reply of a WAIT that ends each pipeline (add_wait),
  // with endpoints of their own in `wait_endpoints`.
  template <class Make>
  std::vector<redis::Reply> run_spread(const std::vector<std::string>& keys, redis::Effect effect,
                                       std::vector<std::string>& endpoints, Make make,
                                       std::vector<redis::Reply>* waits = nullptr,
                                       std::vector<std::string>* wait_endpoints = nullptr);

  // ---- replay_step: window, plan, encode + apply (the cursor advances in replay_step) ----

  // The queue a step works on, and where its keys live.
  struct StepTarget {
    std::string_view queue;
    std::string dead;
    redis::Router* router = nullptr;
    bool cluster = false;
    std::uint16_t slot = 0;
  };

  // What a step decided: the items the script moves, and the items it keeps.
  struct ReplayPlan {
    std::vector<redis::scripts::ReplayItem> items;
    std::vector<std::string> payloads;      // payloads that are not a span of their raw item
    std::vector<std::string> destinations;  // KEYS[4..] of the script
    detail::kept_prefix kept;               // the items kept in place, in list order
    std::size_t examined = 0;               // items decided (kept ones included)
    bool budget_reached = false;            // max_batch_bytes ended the step
  };

  // What applying a plan did: applied or not (a conflict), the next window when it was
  // read in the same round trip, and the receipt to delete later (the step applied, or its
  // answer was lost and resolved).
  struct Applied {
    bool done = false;
    std::optional<std::vector<std::string>> read_ahead;
    std::string receipt;
    redis::Reply wait;     // WAIT's reply (replicas_to_ack > 0); null when not read
    std::string endpoint;  // the node that ran the step
  };

  StepTarget step_target(std::string_view queue);

  // The ids (as the front end reports them) of the items `plan` moves; first_item = index 0.
  static std::vector<std::string> moved_ids(const replay_cursor& cursor, std::size_t first_item,
                                            const ReplayPlan& plan);

  // Makes the cursor's window usable: the read-ahead when it is still valid, else a fresh
  // read. False when the head kept changing (the step reports a conflict).
  bool window_at(const StepTarget& target, Lease& lease, replay_cursor& cursor, std::size_t max);

  // Calls the decider on the window's items, in order, until the item or byte budget is
  // used up. Pure: nothing is sent.
  ReplayPlan plan_step(const StepTarget& target, const replay_cursor& cursor, std::size_t max,
                       Decider& decide) const;

  // The script's KEYS index of the source list of `destination` (empty = the step's queue),
  // added to the plan on first use.
  std::uint32_t destination_index(const StepTarget& target, ReplayPlan& plan,
                                  std::string_view destination) const;

  // Sends the plan as one replay script, with the read of the next window and the deletion
  // of the receipts of earlier steps behind it in the same round trip, and says what
  // happened. A lost answer is resolved by the receipt. Changes only the cursor's receipts
  // (forgotten once the round trip's answers were read: they were deleted).
  // @throws as replay_step (the caller restarts the cursor).
  Applied apply(const StepTarget& target, Lease& lease, replay_cursor& cursor,
                const ReplayPlan& plan, std::size_t max);

  // The round trip of apply(): the replay script (`call`, its plan packed), then the read of
  // the next window [first, last] (with the run's bound when the cursor has one), then the
  // deletion of earlier steps' receipts.
  static std::vector<redis::Command> step_commands(
      const std::string& sha, const redis::scripts::ReplayCall& call, const std::string& packed,
      const std::string& label, const replay_cursor& cursor, std::size_t first, std::size_t last);

  // The next window apply()'s round trip read from list position `first` (clipped to the
  // run's bound when `bounded`), or nullopt when it did not answer with items.
  static std::optional<std::vector<std::string>> read_ahead_reply(
      const std::vector<redis::Reply>& replies, redis::Connection& conn, const std::string& dead,
      bool bounded, std::size_t first);

  // The fast step's scripts (see replay_fast), sent in one round trip.
  std::vector<redis::Reply> send_fast(const StepTarget& target, Lease& lease,
                                      const replay_cursor& cursor, const std::string& dest,
                                      std::size_t max_items, bool want_ids,
                                      const std::string& label);

  // A fast step whose answer was lost: the same error, saying that nothing was lost.
  [[noreturn]] static void throw_fast_lost(const dlq::storage_error& e, const std::string& label);

  // Adds what the fast step's scripts answered to `result` and gives the cursor the window
  // the last of them read.
  static void read_fast_answers(const std::vector<redis::Reply>& replies, redis::Connection& conn,
                                replay_cursor& cursor, const std::string& label, FastStep& result);

  // An error reply to the replay script. Errors raised before the script writes anything
  // (its checks, or the server refusing to run it) say nothing moved; any other may have
  // come after the pushes (never after a removal).
  [[noreturn]] static void throw_script_error(const redisReply& r, redis::Connection& conn,
                                              const std::string& label);

  // Reads up to `max` items at the cursor. When the replay kept items (the cursor's offset
  // is their count), the read starts one earlier, at the last kept item: if that is not
  // there, another client removed kept items (remove(), a trim, another replayer), the
  // offset points past items not examined yet, and the head is read to find the place
  // again. False when the head kept changing over three tries (the caller reports a
  // conflict and retries after backing off).
  bool read_window(redis::Router& router, Lease& lease, const std::string& dead,
                   replay_cursor& cursor, std::size_t max);

  static void check_queue(std::string_view queue, const char* where);

  // The step id a tombstone names (32 lowercase hex digits after the prefix, as
  // next_step_id() makes them), or "" when `item` does not have that shape.
  static std::string step_of_tombstone(std::string_view item);

  std::string next_step_id();

  // The runs hash of the dead list `dead` (dlq/redis/scripts/snapshot.hpp).
  static std::string runs_key(const std::string& dead) { return redis::scripts::runs_key(dead); }

  // The cursor's window read of items [from, to]: clipped to the run's bound by the read script
  // when the cursor has one (see replay_snapshot), else one LRANGE.
  std::vector<std::string> read_items(redis::Router& router, Lease& lease, const std::string& dead,
                                      const replay_cursor& cursor, std::size_t from,
                                      std::size_t to);

  // Calls on_key with every key matching `pattern` (SCAN MATCH … TYPE list on `conn`).
  template <class F>
  void scan(redis::Connection& conn, const redis::KeyPattern& pattern, F&& on_key);

  // After the answer to a replay script was lost: reconnect, make sure the old connection
  // can run nothing more, and read the receipt. true = applied, false = not applied.
  // Throws (outcome unknown, nothing lost) when the server cannot be asked.
  bool resolve_lost_answer(redis::Connection& conn, long long old_client,
                           const std::string& receipt, const std::string& label,
                           const dlq::storage_error& original, bool cluster);

  // What threads share; on the heap so that the storage can be moved (into a
  // DeadLetterQueue, for example). A moved-from storage must not be used.
  struct Shared {
    Shared(redis::ConnectionOptions connection, redis::PoolOptions pool_options);
    redis::Router router;
    redis::Script replay_script;
    redis::Script purge_script;
    redis::Script bounded_push_script;
    redis::Script bounded_batch_push_script;
    redis::Script capped_push_script;
    redis::Script recover_script;
    redis::Script fast_script;
    redis::Script snapshot_begin_script;
    redis::Script snapshot_read_script;
    redis::Script remove_script;
    redis::Script range_bytes_script;
    redis::Script audit_script;
    std::uint64_t step_base = 0;
    std::atomic<std::uint64_t> step_counter{0};
  };

  RedisListOptions options_;
  redis::KeyPattern dead_;
  redis::KeyPattern source_;
  redis::KeyPattern corrupt_;
  std::string untagged_;  // why the layout cannot be used on a Redis Cluster; empty = it can
  std::shared_ptr<Shared> shared_;  // shared with cursors' receipt jars (weakly)
};

}  // namespace dlq

#if defined(DLQ_REDIS_HEADER_ONLY)
#include "dlq/redis/list_storage-inl.hpp"
#include "dlq/redis/list_storage_fast-inl.hpp"
#include "dlq/redis/list_storage_replay-inl.hpp"
#endif