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
/// and, while a replay runs, its last step's receipt `dlq:{orders}:receipt:<step>`. The
/// Python seed's layout is `dlq:*`, `queue:*`, `dlq:*:corrupt` (single server only). The
/// patterns double as SCAN MATCH patterns for queues(); a key that matches both the dead and
/// the corrupt pattern (`dlq:a:corrupt` in the seed's layout) is taken as a corrupt list.
///
/// Redis Cluster is detected on first use (one `CLUSTER SLOTS`; a plain server works exactly
/// as without cluster support). Each operation concerns one queue, so one slot: it is sent to
/// that slot's master and redirections are followed (dlq/redis/cluster.hpp). In cluster mode
/// the three patterns must share one hash tag (holding the queue, or one fixed tag such as
/// `{dlq}:*`), else the first operation (or cluster_mode()) throws dlq::invalid_argument;
/// a replay to a queue on another slot is refused before anything moves; a queue name that
/// starts with `}` cannot be replayed. Reads from replicas and databases other than 0 are not
/// supported.
///
/// Costs, in round trips: push 1 (RPUSH); push_bounded, push_capped 1 (a script); bump_count 1
/// (MULTI/EXEC); push_many 1 (pipelined; in a cluster one per master); size, range, remove 1;
/// purge 1 (a script); sizes 1 (pipelined); queues: SCAN MATCH … TYPE list (never KEYS);
/// replay_step 1 per batch (the next window is read in the same round trip as the script);
/// replay_fast 1 per batch (a script; the entries' bytes stay on the server).
///
/// Fast path (replay_fast, dlq/redis/scripts/replay_fast.hpp): for an unfiltered replay the
/// front end first moves the entries at the head whose frame proves their payload span —
/// what dlq writes for an unflagged entry, `{"payload_bytes":N,"original_payload":…,"id":…`
/// (dlq/entry.hpp) — with one script per batch, returning their ids only when something
/// reads them (ReplayOptions::record_ids, Options::on_event, the audit record's first
/// Options::audit_max_ids ids), else their count. The first item it cannot prove (a Python
/// or older envelope, a corrupt, parked, base64 or whitespace-kept entry, a wrong length
/// field) ends the fast step, and replay_step decides it as below. The invariants below hold
/// for both; the fast script writes nothing but the move itself (no receipt, no tombstone).
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
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/kept_prefix.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/audit_stream.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/key_pattern.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/pool.hpp"
#include "dlq/redis/script.hpp"
#include "dlq/redis/scripts/list_purge.hpp"
#include "dlq/redis/scripts/list_push_bounded.hpp"
#include "dlq/redis/scripts/list_push_capped.hpp"
#include "dlq/redis/scripts/recover_tombstone.hpp"
#include "dlq/redis/scripts/replay_fast.hpp"
#include "dlq/redis/scripts/replay_step.hpp"
#include "dlq/redis/stats.hpp"
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
  /// unreachable, or the step's script failed midway. Default 10 minutes; 0 = 10 minutes.
  std::chrono::milliseconds receipt_ttl{600000};
  /// Connection pool: how many connections all threads share, how long to wait for one.
  redis::PoolOptions pool;
  /// Audit records kept per queue (the stream `<dead key>:audit` is capped with XADD MAXLEN
  /// ~ this; see dlq/redis/audit_stream.hpp). Default 10 000; 0 = 10 000.
  std::size_t audit_max_records = 10000;
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
    void restart_at(std::size_t offset) {
      offset_ = offset;
      window_.clear();
      next_ = 0;
      state_ = state::unread;
    }
    /// A read-ahead that starts with the anchor: usable when the anchor is still the last
    /// kept item, else the kept items were touched and the window is read afresh.
    void check_anchor() {
      if (state_ != state::anchored) return;
      if (!window_.empty() && kept_.is_last(window_.front())) {
        next_ = 1;
        state_ = state::ready;
      } else {
        state_ = state::unread;
      }
    }
    /// A window freshly read from window_start(). False when it should start with the last
    /// kept item and does not: kept items were removed, and the place must be found again.
    bool read(std::vector<std::string> window) {
      window_ = std::move(window);
      next_ = 0;
      state_ = reads_from_anchor() ? state::anchored : state::ready;
      check_anchor();
      return state_ == state::ready;
    }
    /// The step takes the window: until it advances, nothing read ahead is usable.
    void take() { state_ = state::unread; }
    /// The step only kept items: it wrote nothing, the rest of the window stays usable.
    void passed(std::size_t examined, const detail::kept_prefix& kept) {
      kept_.append(kept);
      offset_ += kept.size();
      next_ += examined;
      state_ = state::ready;
    }
    /// The step applied: its kept items stay before the next window, which was read ahead
    /// (in the same round trip) or not.
    void applied(const detail::kept_prefix& kept, std::optional<std::vector<std::string>> ahead) {
      kept_.append(kept);
      offset_ += kept.size();
      next_ = 0;
      if (ahead) {
        window_ = std::move(*ahead);
        state_ = reads_from_anchor() ? state::anchored : state::ready;
      } else {
        window_.clear();
        state_ = state::unread;
      }
    }

    std::size_t offset_ = 0;
    std::vector<std::string> window_;
    std::size_t next_ = 0;  // first undecided item of window_ (state ready)
    state state_ = state::unread;
    detail::kept_prefix kept_{};
    receipt_jar receipts_;  // applied steps' receipts, answers read: delete them
  };

  /// Connects to `connection` (lazily: the first operation connects, and finds out whether
  /// the server is a Redis Cluster — see the file comment).
  /// @throws dlq::invalid_argument when a key pattern does not have exactly one `*` or two
  ///         patterns are equal. (A layout a cluster cannot hold is reported by the first
  ///         operation, or by cluster_mode(), once the server is known.)
  explicit RedisListStorage(redis::ConnectionOptions connection, RedisListOptions options = {})
      : options_(std::move(options)),
        dead_(redis::KeyPattern::parse(options_.dead_key, "RedisListOptions::dead_key")),
        source_(redis::KeyPattern::parse(options_.source_key, "RedisListOptions::source_key")),
        corrupt_(redis::KeyPattern::parse(options_.corrupt_key, "RedisListOptions::corrupt_key")),
        shared_(std::make_shared<Shared>(std::move(connection), options_.pool)) {
    if (options_.dead_key == options_.corrupt_key || options_.dead_key == options_.source_key ||
        options_.corrupt_key == options_.source_key) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListOptions", "dead_key, source_key and corrupt_key must differ",
          "give each list its own pattern"));
    }
    {  // Redis Cluster needs a queue's keys in one slot: one hash tag for all three patterns.
      const auto d = dead_.cluster_tag();
      const auto s = source_.cluster_tag();
      const auto c = corrupt_.cluster_tag();
      if (!d || !s || !c) {
        untagged_ = "key pattern '" +
                    (!d   ? options_.dead_key
                     : !s ? options_.source_key
                          : options_.corrupt_key) +
                    "' has no hash tag";
      } else if (*d != *s || *d != *c) {
        untagged_ = "key patterns '" + options_.dead_key + "', '" + options_.source_key +
                    "' and '" + options_.corrupt_key + "' do not share one hash tag";
      }
    }
    if (options_.max_batch_items == 0) options_.max_batch_items = 1000;
    options_.max_batch_items = std::min<std::size_t>(options_.max_batch_items, 4000);
    if (options_.max_batch_bytes == 0) options_.max_batch_bytes = std::size_t{512} << 10;
    if (options_.receipt_ttl.count() <= 0) options_.receipt_ttl = std::chrono::minutes(10);
    std::random_device rd;
    shared_->step_base =
        (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  /// Parses `url` (see dlq::redis::parse_url) and connects lazily.
  /// @throws dlq::invalid_argument for a bad URL or bad key patterns.
  explicit RedisListStorage(std::string_view url, RedisListOptions options = {})
      : RedisListStorage(redis::parse_url(url), std::move(options)) {}

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
  std::string key(std::string_view queue, ListKind kind) const {
    return kind == ListKind::dead ? dead_.key(queue) : corrupt_.key(queue);
  }
  /// The Redis key of a queue's source list (where replay pushes payloads).
  std::string source_key(std::string_view queue) const { return source_.key(queue); }

  /// Appends an envelope to the queue's dead list: one RPUSH.
  /// @return the dead list's length after the push.
  /// @throws dlq::invalid_argument (empty queue name), dlq::storage_error subclasses; a
  ///         timeout after sending has outcome_unknown() == true (never re-sent).
  std::size_t push(const Record& record) {
    check_queue(record.queue, "push");
    const std::string k = dead_.key(record.queue);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::write, [&](const std::string&) {
      return one(std::move(redis::Command("RPUSH").arg(std::string_view(k)).arg(record.envelope)));
    });
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "RPUSH " + k));
  }

  /// Appends an envelope only while the dead list has fewer than `max_length` items,
  /// atomically (one script: LLEN, then RPUSH). One round trip.
  /// @return false (and nothing stored) when the list is full.
  /// @throws as push().
  bool push_bounded(const Record& record, std::size_t max_length) {
    check_queue(record.queue, "push_bounded");
    const std::string k = dead_.key(record.queue);
    const std::string label = "bounded push script on " + k;
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg(std::string_view(k)).arg(max_length).arg(record.envelope);
          c.label(label);
          return one(std::move(c));
        },
        &shared_->bounded_push_script);
    return redis::integer(replies[0], **lease, label) > 0;
  }

  /// Appends `records` (all of one queue) only if the dead list then holds at most
  /// `max_length` items, atomically (one script: LLEN, then RPUSH): all of them or none. One
  /// round trip. @return false (and nothing stored) when they do not fit. @throws as push().
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return true;
    check_queue(records.front().queue, "push_bounded");
    const std::string k = dead_.key(records.front().queue);
    const std::string label = "bounded batch push script on " + k;
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          return one(push_script_call(sha, k, max_length, records, label));
        },
        &shared_->bounded_batch_push_script);
    return redis::integer(replies[0], **lease, label) > 0;
  }

  /// Appends `records` (all of one queue) and, in the same script, removes the oldest items
  /// of the dead list beyond `max_length` (at most 10000 per call). One round trip.
  /// @return the removed items, oldest first. @throws as push().
  std::vector<std::string> push_capped(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return {};
    check_queue(records.front().queue, "push_capped");
    const std::string k = dead_.key(records.front().queue);
    const std::string label = "capped push script on " + k;
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          return one(push_script_call(sha, k, max_length, records, label));
        },
        &shared_->capped_push_script);
    return redis::strings(replies[0], **lease, label);
  }

  /// Adds one to the counter `key` of `queue` (the poison-loop guard's) and returns its new
  /// value; the counter expires `ttl` after its last bump. INCR + EXPIRE in one MULTI/EXEC,
  /// one round trip. The counter lives at `<dead key>:count:<key>` (same hash tag; a string,
  /// so queues() never lists it).
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl) {
    check_queue(queue, "bump_count");
    std::string k = dead_.key(queue);
    k += ":count:";
    k += key;
    const long long seconds = std::max<long long>(1, static_cast<long long>(ttl.count()));
    Lease lease;
    // A redirected INCR (index 1) makes EXEC discard the transaction: nothing ran.
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string&) {
          std::vector<redis::Command> cmds;
          cmds.emplace_back("MULTI");
          cmds.push_back(std::move(redis::Command("INCR").arg(std::string_view(k))));
          cmds.push_back(std::move(redis::Command("EXPIRE").arg(std::string_view(k)).arg(seconds)));
          cmds.emplace_back("EXEC");
          return cmds;
        },
        nullptr, 1);
    const std::string label = "INCR " + k;
    for (std::size_t i = 0; i + 1 < replies.size(); ++i)
      redis::check(replies[i], **lease, label);
    const redisReply& exec = redis::check(replies.back(), **lease, label);
    if (exec.type != REDIS_REPLY_ARRAY || exec.elements != 2 ||
        exec.element[0]->type != REDIS_REPLY_INTEGER) {
      if (exec.type == REDIS_REPLY_ARRAY && exec.elements > 0 &&
          exec.element[0]->type == REDIS_REPLY_ERROR) {
        redis::detail::throw_reply_error(*exec.element[0], (*lease)->endpoint(), label);
      }
      redis::detail::throw_unexpected_reply(exec, (*lease)->endpoint(), label);
    }
    return exec.element[0]->integer;
  }

  /// Appends many envelopes in one pipelined round trip (one RPUSH per run of consecutive
  /// records of the same queue; each RPUSH is atomic, the batch as a whole is not). In a
  /// cluster: one pipeline per master, the runs of a redirected RPUSH re-sent alone.
  /// @throws as push(); on an error reply the records of the other commands were stored.
  void push_many(const std::vector<Record>& records) {
    if (records.empty()) return;
    for (const Record& r : records)
      check_queue(r.queue, "push_many");
    std::vector<std::string> keys;
    std::vector<std::pair<std::size_t, std::size_t>> runs;  // [first, last) of each RPUSH
    keys.reserve(records.size());
    for (std::size_t i = 0; i < records.size();) {
      std::size_t j = i;
      while (j < records.size() && records[j].queue == records[i].queue && j - i < 4096) {
        ++j;
      }
      keys.push_back(dead_.key(records[i].queue));
      runs.emplace_back(i, j);
      i = j;
    }
    // keys must not reallocate once views into them exist: built first, used second.
    std::vector<std::string> endpoints;
    auto replies = run_spread(keys, redis::Effect::write, endpoints, [&](std::size_t n) {
      redis::Command c("RPUSH");
      c.reserve(2 + runs[n].second - runs[n].first);
      c.arg(std::string_view(keys[n]));
      for (std::size_t i = runs[n].first; i < runs[n].second; ++i)
        c.arg(records[i].envelope);
      return c;
    });
    for (std::size_t n = 0; n < replies.size(); ++n) {
      integer_reply(replies[n], endpoints[n],
                    "RPUSH " + keys[n] + " (command " + std::to_string(n + 1) + " of " +
                        std::to_string(keys.size()) + " of a batch)");
    }
  }

  /// Number of items in a queue's dead or corrupt list: one LLEN.
  std::size_t size(std::string_view queue, ListKind kind) {
    check_queue(queue, "size");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LLEN").arg(std::string_view(k))));
    });
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "LLEN " + k));
  }

  /// Up to `count` items from position `start` (0 = oldest): one LRANGE.
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count) {
    check_queue(queue, "range");
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<long long>::max());
    if (count == 0 || start >= max) return {};
    const std::size_t last = count - 1 > max - start ? max : start + (count - 1);
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LRANGE").arg(std::string_view(k)).arg(start).arg(last)));
    });
    return redis::strings(replies[0], **lease, "LRANGE " + k);
  }

  /// Removes the first item equal to `raw` (`id` is not needed here): one LREM.
  /// @return true if an item was removed.
  bool remove(std::string_view queue, ListKind kind, std::string_view /*id*/,
              std::string_view raw) {
    check_queue(queue, "remove");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(lease, k, redis::Effect::write, [&](const std::string&) {
      return one(std::move(redis::Command("LREM").arg(std::string_view(k)).arg(1).arg(raw)));
    });
    return redis::integer(replies[0], **lease, "LREM " + k) > 0;
  }

  /// Deletes a queue's dead or corrupt list in one atomic step.
  /// @return the exact number of items deleted.
  std::size_t purge(std::string_view queue, ListKind kind) {
    check_queue(queue, "purge");
    const std::string k = key(queue, kind);
    Lease lease;
    auto replies = routed().run(
        lease, k, redis::Effect::write,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(1).arg(std::string_view(k)).label("purge script on " + k);
          return one(std::move(c));
        },
        &shared_->purge_script);
    return static_cast<std::size_t>(redis::integer(replies[0], **lease, "purge script on " + k));
  }

  /// Queues that have a dead or a corrupt list, sorted: SCAN MATCH <pattern> TYPE list (in
  /// Redis Cluster mode on every master, merged).
  std::vector<std::string> queues() {
    std::set<std::string> found;
    for (redis::ConnectionPool* node : routed().masters()) {
      auto lease = node->acquire();
      scan(*lease, corrupt_, [&](std::string_view k) {
        if (auto q = corrupt_.queue_of(k)) found.insert(std::move(*q));
      });
      scan(*lease, dead_, [&](std::string_view k) {
        if (corrupt_.queue_of(k)) return;  // ambiguous keys are corrupt lists
        if (auto q = dead_.queue_of(k)) found.insert(std::move(*q));
      });
    }
    return {found.begin(), found.end()};
  }

  /// Dead-list lengths of `queues`, in order: one pipelined round trip of LLENs (in a
  /// cluster one per master).
  std::vector<std::size_t> sizes(const std::vector<std::string>& queues) {
    if (queues.empty()) return {};
    std::vector<std::string> keys;
    keys.reserve(queues.size());
    for (const auto& q : queues) {
      check_queue(q, "sizes");
      keys.push_back(dead_.key(q));
    }
    std::vector<std::string> endpoints;
    auto replies = run_spread(keys, redis::Effect::read, endpoints, [&](std::size_t i) {
      redis::Command c("LLEN");
      c.arg(std::string_view(keys[i]));
      return c;
    });
    std::vector<std::size_t> out;
    out.reserve(replies.size());
    for (std::size_t i = 0; i < replies.size(); ++i) {
      out.push_back(
          static_cast<std::size_t>(integer_reply(replies[i], endpoints[i], "LLEN " + keys[i])));
    }
    return out;
  }

  /// Lengths and end items of both lists of each queue, in order (the storage member behind
  /// DeadLetterQueue::stats): per queue LLEN + LINDEX 0 / -1 of both lists in one MULTI/EXEC,
  /// every queue in one pipelined round trip (one per master in a cluster). See
  /// dlq/redis/stats.hpp. @throws dlq::invalid_argument (empty queue name), the
  /// dlq::storage_error subclasses.
  std::vector<QueueEnds> stats(const std::vector<std::string>& queues) {
    std::vector<redis::ListKeys> keys;
    keys.reserve(queues.size());
    for (const auto& q : queues) {
      check_queue(q, "stats");
      keys.push_back({dead_.key(q), corrupt_.key(q)});
    }
    return redis::read_list_ends(routed(), keys);
  }

  /// One replay step (see the file comment and dlq/storage.hpp): reads up to `max_items`
  /// (at most RedisListOptions::max_batch_items) at the cursor, decides them, and applies
  /// the decisions atomically with one script — or reports a conflict having changed nothing.
  /// @throws dlq::storage_error subclasses; after a lost answer that could not be resolved,
  ///         outcome_unknown() == true (nothing was lost: the batch moved completely or not
  ///         at all); dlq::invalid_argument in a Redis Cluster when a destination is on
  ///         another hash slot or the queue name empties the hash tag (nothing moved).
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide) {
    check_queue(queue, "replay_step");
    StepResult result;
    if (max_items == 0) return result;
    const std::size_t max = std::min(max_items, options_.max_batch_items);
    const StepTarget target = step_target(queue);
    Lease lease;
    if (!window_at(target, lease, cursor, max)) {
      result.conflict = true;  // the head kept changing: the caller backs off and retries
      return result;
    }
    cursor.take();
    const ReplayPlan plan = plan_step(target, cursor, max, decide);
    result.examined = plan.examined;
    if (plan.items.empty()) {
      cursor.passed(plan.examined, plan.kept);
      return result;
    }
    const std::size_t from = cursor.offset();
    Applied applied;
    try {
      applied = apply(target, lease, cursor, plan, max);
    } catch (const dlq::storage_error& e) {
      cursor.restart_at(from);
      // The server is out of reach: leave the receipts to expire rather than wait for it
      // again when the cursor goes away.
      if (dynamic_cast<const dlq::reply_error*>(&e) == nullptr) cursor.receipts_.forget();
      throw;
    } catch (...) {
      cursor.restart_at(from);
      throw;
    }
    if (!applied.receipt.empty()) cursor.receipts_.add(std::move(applied.receipt), shared_);
    if (!applied.done) {  // conflict: nothing applied; a read-ahead would be stale
      cursor.restart_at(from);
      result.conflict = true;
      return result;
    }
    cursor.applied(plan.kept, std::move(applied.read_ahead));
    return result;
  }

  /// The fast step of an unfiltered replay (see dlq::FastStep and the file comment): moves
  /// the provable entries at the head of the dead list to the source list of `destination`
  /// (empty = `queue`) with the script dlq/redis/scripts/replay_fast.hpp — at most
  /// `max_items` of them; from 64 on, in four pipelined scripts of a quarter each; each
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
                       std::string_view destination, bool want_ids) {
    check_queue(queue, "replay_fast");
    FastStep result;
    if (cursor.offset() != 0) {
      result.declined = true;
      return result;
    }
    if (max_items == 0) return result;
    const StepTarget target = step_target(queue);
    ReplayPlan plan;  // only for its destination check: the same slot rule as replay_step
    destination_index(target, plan, destination);
    const std::string& dest = plan.destinations.front();
    // From 64 items on, four scripts of a quarter each (at most max_batch_items) in one round
    // trip: each is atomic and reads the head itself, so each takes up where the previous one
    // stopped (one that follows a script ended by an unprovable item stops there too, moving
    // nothing).
    std::size_t scripts = max_items >= 64 ? 4 : 1;
    const std::size_t per = std::min((max_items + scripts - 1) / scripts, options_.max_batch_items);
    scripts = std::min<std::size_t>(4, (max_items + per - 1) / per);
    const std::string label = "fast replay script on " + target.dead;
    Lease lease;
    std::vector<redis::Reply> replies;
    try {
      replies = target.router->run(
          lease, target.dead, redis::Effect::write,
          [&](const std::string& sha) {
            std::vector<redis::Command> cmds;
            for (std::size_t k = 0; k < scripts; ++k) {
              const std::size_t n = std::min(per, max_items - k * per);
              redis::Command c("EVALSHA");
              c.arg_copy(sha).arg(2).arg(std::string_view(target.dead));
              c.arg(std::string_view(dest)).arg(n).arg(options_.max_batch_bytes);
              c.arg(want_ids ? "1" : "0").arg(std::min<std::size_t>(n, 256)).label(label);
              cmds.push_back(std::move(c));
            }
            return cmds;
          },
          &shared_->fast_script);
    } catch (const dlq::storage_error& e) {
      cursor.restart_at(0);
      if (!e.outcome_unknown()) throw;
      const std::string what = std::string(e.what()) + " — each " + label +
                               " moved its entries completely or not at all; nothing was lost; "
                               "run the replay again";
      if (dynamic_cast<const dlq::timeout_error*>(&e) != nullptr)
        throw dlq::timeout_error(what, true);
      if (dynamic_cast<const dlq::connection_error*>(&e) != nullptr)
        throw dlq::connection_error(what, true);
      throw dlq::storage_error(what, true);
    }
    cursor.restart_at(0);
    redis::Connection& conn = **lease;
    const redisReply* last = nullptr;  // the last script that answered: the head it left
    for (std::size_t k = 0; k < replies.size(); ++k) {
      const redisReply& r = *replies[k];
      // A later script's error (a slot that moved meanwhile, out of memory) is met again by
      // the next step; the scripts before it moved their entries, which are reported.
      if (r.type == REDIS_REPLY_ERROR && k > 0) break;
      if (r.type == REDIS_REPLY_ERROR) throw_script_error(r, conn, label);
      if (r.type != REDIS_REPLY_ARRAY || r.elements != 4 ||
          r.element[0]->type != REDIS_REPLY_INTEGER || r.element[1]->type != REDIS_REPLY_INTEGER ||
          r.element[2]->type != REDIS_REPLY_ARRAY || r.element[3]->type != REDIS_REPLY_ARRAY) {
        if (k > 0) break;
        redis::detail::throw_unexpected_reply(r, conn.endpoint(), label, true);
      }
      last = &r;
      result.moved += static_cast<std::size_t>(r.element[0]->integer);
      result.batches.push_back(static_cast<std::size_t>(r.element[0]->integer));
      const redisReply& ids = *r.element[2];
      for (std::size_t i = 0; i < ids.elements; ++i)
        result.ids.emplace_back(redis::view(*ids.element[i]));
    }
    // The unprovable items the last script met are the new head, read in the same atomic
    // step: the next replay_step decides them without reading them again (and re-checks them
    // when it applies).
    result.unprovable = static_cast<std::size_t>(last->element[1]->integer);
    const redisReply& rest = *last->element[3];
    std::vector<std::string> window;
    window.reserve(rest.elements);
    for (std::size_t i = 0; i < rest.elements; ++i)
      window.emplace_back(redis::view(*rest.element[i]));
    if (!window.empty()) cursor.read(std::move(window));
    return result;
  }

  /// The Redis key of a queue's audit stream: `<dead key>:audit` (see dlq/audit.hpp).
  std::string audit_key(std::string_view queue) const { return dead_.key(queue) + ":audit"; }

  /// Appends one audit record (dlq/audit.hpp): one XADD … MAXLEN ~ (audit_stream.hpp).
  void audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                    std::string_view record) {
    check_queue(queue, "audit_append");
    const std::size_t cap = options_.audit_max_records == 0 ? 10000 : options_.audit_max_records;
    redis::audit_stream::append(routed(), audit_key(queue), detail::audit_ms(at), record, cap);
  }

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) {
    check_queue(queue, "audit_read");
    return redis::audit_stream::read(routed(), audit_key(queue), detail::audit_ms(since), limit);
  }

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
  std::size_t recover(std::string_view queue) {
    check_queue(queue, "recover");
    const std::string k = dead_.key(queue);
    const std::string corrupt = corrupt_.key(queue);
    redis::Router& router = routed();
    Lease lease;
    std::set<std::string> suspects;
    constexpr std::size_t chunk = 1000;
    for (std::size_t start = 0;; start += chunk) {
      auto replies = router.run(lease, k, redis::Effect::read, [&](const std::string&) {
        return one(std::move(
            redis::Command("LRANGE").arg(std::string_view(k)).arg(start).arg(start + chunk - 1)));
      });
      const auto items = redis::strings(replies[0], **lease, "LRANGE " + k);
      for (const auto& it : items) {
        if (it.compare(0, detail::tombstone_prefix.size(), detail::tombstone_prefix) == 0) {
          suspects.insert(it);
        }
      }
      if (items.size() < chunk) break;
    }
    const std::string label = "recover script on " + k;
    std::size_t removed = 0;
    for (const auto& item : suspects) {
      const std::string step = step_of_tombstone(item);
      const std::string receipt = k + ":receipt:" + (step.empty() ? "-" : step);
      // The script's effect is the same when it runs twice (what it moved is gone from the
      // dead list), so a lost answer is harmless: a read, retried once after a lost connection.
      auto replies = router.run(
          lease, k, redis::Effect::read,
          [&](const std::string& sha) {
            redis::Command c("EVALSHA");
            c.arg_copy(sha).arg(3).arg(std::string_view(k)).arg(std::string_view(corrupt));
            c.arg(std::string_view(receipt)).arg(std::string_view(item));
            c.arg(step.empty() ? "0" : "1").arg(redis::scripts::replay_tombstones_mark);
            c.label(label);
            return one(std::move(c));
          },
          &shared_->recover_script);
      const redisReply& r = redis::check(replies[0], **lease, label);
      if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 ||
          r.element[0]->type != REDIS_REPLY_INTEGER) {
        redis::detail::throw_unexpected_reply(r, (*lease)->endpoint(), label);
      }
      removed += static_cast<std::size_t>(r.element[0]->integer);
    }
    return removed;
  }

 private:
  using Lease = std::optional<redis::ConnectionPool::Lease>;

  // EVALSHA of a push script over one list: KEYS[1] the list, ARGV[1] the limit, ARGV[2…]
  // the envelopes.
  static redis::Command push_script_call(const std::string& sha, const std::string& key,
                                         std::size_t limit, const std::vector<Record>& records,
                                         const std::string& label) {
    redis::Command c("EVALSHA");
    c.reserve(4 + records.size());
    c.arg_copy(sha).arg(1).arg(std::string_view(key)).arg(limit);
    for (const Record& r : records)
      c.arg(r.envelope);
    c.label(label);
    return c;
  }

  static std::vector<redis::Command> one(redis::Command c) {
    std::vector<redis::Command> v;
    v.push_back(std::move(c));
    return v;
  }

  static long long integer_reply(const redis::Reply& r, const std::string& endpoint,
                                 const std::string& doing) {
    if (r->type == REDIS_REPLY_ERROR) redis::detail::throw_reply_error(*r, endpoint, doing);
    if (r->type != REDIS_REPLY_INTEGER) redis::detail::throw_unexpected_reply(*r, endpoint, doing);
    return r->integer;
  }

  // The router, once the key layout is known to suit the server: in Redis Cluster mode
  // every pattern must put the queue in a hash tag (one queue = one slot = one node).
  redis::Router& routed() {
    redis::Router& r = shared_->router;
    if (!untagged_.empty() && r.clustered()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListOptions",
          "the server at " + r.seed().endpoint() + " is a Redis Cluster node, and " + untagged_ +
              ": a queue's lists would be in different hash slots",
          "in Redis Cluster every key pattern must put the queue in a hash tag, e.g. dlq:{*}, "
          "queue:{*} and dlq:{*}:corrupt (the default layout), or all share one fixed tag "
          "({dlq}:*: every queue on one node); the Python seed's layout dlq:* / queue:* works "
          "with a single Redis server only"));
    }
    return r;
  }

  // One command per key (make(i) builds command i), pipelined: one pipeline in plain mode;
  // in cluster mode one per master, and a command answered with a redirection (it did not
  // run) is sent again on its own through the router. endpoints[i] = the node that answered.
  template <class Make>
  std::vector<redis::Reply> run_spread(const std::vector<std::string>& keys, redis::Effect effect,
                                       std::vector<std::string>& endpoints, Make make) {
    redis::Router& router = routed();
    std::vector<redis::Reply> out(keys.size());
    endpoints.assign(keys.size(), std::string());
    std::vector<std::pair<redis::ConnectionPool*, std::vector<std::size_t>>> groups;
    const bool cluster = router.clustered();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      redis::ConnectionPool* p = cluster ? &router.pool_for(keys[i]) : &router.seed();
      auto g =
          std::find_if(groups.begin(), groups.end(), [p](const auto& e) { return e.first == p; });
      if (g == groups.end()) g = groups.insert(groups.end(), {p, {}});
      g->second.push_back(i);
    }
    for (auto& [pool, indexes] : groups) {
      std::vector<redis::Command> cmds;
      cmds.reserve(indexes.size());
      for (const std::size_t i : indexes)
        cmds.push_back(make(i));
      auto lease = pool->acquire();
      auto replies = lease->run(cmds, effect);
      for (std::size_t n = 0; n < indexes.size(); ++n) {
        out[indexes[n]] = std::move(replies[n]);
        endpoints[indexes[n]] = lease->endpoint();
      }
    }
    if (!cluster) return out;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (!redis::detail::is_redirect(*out[i])) continue;
      Lease lease;
      auto again =
          router.run(lease, keys[i], effect, [&](const std::string&) { return one(make(i)); });
      out[i] = std::move(again[0]);
      endpoints[i] = (*lease)->endpoint();
    }
    return out;
  }

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
  };

  StepTarget step_target(std::string_view queue) {
    StepTarget t;
    t.queue = queue;
    t.dead = dead_.key(queue);
    t.router = &routed();
    t.cluster = t.router->clustered();
    t.slot = redis::key_slot(t.dead);
    if (t.cluster && redis::hashed_part(t.dead).size() == t.dead.size()) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListStorage::replay_step",
          "queue name '" + std::string(queue) + "' gives key '" + t.dead +
              "' an empty hash tag, so its lists would be in different Redis Cluster slots",
          "in Redis Cluster a queue name must not start with '}'"));
    }
    return t;
  }

  // Makes the cursor's window usable: the read-ahead when it is still valid, else a fresh
  // read. False when the head kept changing (the step reports a conflict).
  bool window_at(const StepTarget& target, Lease& lease, replay_cursor& cursor, std::size_t max) {
    cursor.check_anchor();
    if (cursor.has_read_ahead()) return true;
    // Nothing read ahead (or an empty read-ahead: items may have arrived since).
    return read_window(*target.router, lease, target.dead, cursor, max);
  }

  // Calls the decider on the window's items, in order, until the item or byte budget is
  // used up. Pure: nothing is sent.
  ReplayPlan plan_step(const StepTarget& target, const replay_cursor& cursor, std::size_t max,
                       Decider& decide) const {
    ReplayPlan plan;
    const std::size_t available = std::min(cursor.window_.size() - cursor.next_, max);
    std::size_t bytes = 0;
    const std::less<const char*> before;
    auto inside = [&before](std::string_view part, const std::string& raw) {
      return part.data() != nullptr && !before(part.data(), raw.data()) &&
             !before(raw.data() + raw.size(), part.data() + part.size());
    };
    for (std::size_t i = 0; i < available; ++i) {
      const std::string& raw = cursor.window_[cursor.next_ + i];
      Decision d;
      decide(std::string_view(raw), d);
      ++plan.examined;
      if (d.action != Action::keep && d.action != Action::set_aside &&
          d.action != Action::discard && d.action != Action::replay) {
        d.action = Action::keep;  // an action this storage does not know: leave the item
      }
      if (d.action == Action::keep) {
        plan.kept.add(raw);
        continue;
      }
      redis::scripts::ReplayItem it;
      it.index = static_cast<std::uint32_t>(i);
      it.length = static_cast<std::uint32_t>(raw.size());
      it.check = raw;
      // The script compares the item at its index with `check`: the identity when there is
      // one (length + id bytes at their offset), else the whole raw item.
      if (!d.identity.empty() && inside(d.identity, raw)) {
        it.identity_first = static_cast<std::uint32_t>(d.identity.data() - raw.data()) + 1;
        it.check = d.identity;
      }
      // Twice the raw size either way: the script re-reads the item and either receives it
      // back or cuts a payload (up to its size) out of it.
      bytes += 2 * raw.size();
      if (d.action == Action::set_aside) {
        it.target = redis::scripts::replay_set_aside;
      } else if (d.action == Action::discard) {
        it.target = redis::scripts::replay_discard;
      } else {
        it.target = destination_index(target, plan, d.destination);
        if (inside(d.payload, raw)) {  // a span of the raw item: no bytes sent
          it.payload_first = static_cast<std::uint32_t>(d.payload.data() - raw.data()) + 1;
          it.payload_last = it.payload_first + static_cast<std::uint32_t>(d.payload.size()) - 1;
        } else {
          plan.payloads.emplace_back(d.payload);
          bytes += d.payload.size();
        }
      }
      plan.items.push_back(it);
      if (bytes >= options_.max_batch_bytes) {
        plan.budget_reached = true;
        break;
      }
    }
    return plan;
  }

  // The script's KEYS index of the source list of `destination` (empty = the step's queue),
  // added to the plan on first use.
  std::uint32_t destination_index(const StepTarget& target, ReplayPlan& plan,
                                  std::string_view destination) const {
    const std::string key = source_.key(destination.empty() ? target.queue : destination);
    std::size_t at = 0;
    while (at < plan.destinations.size() && plan.destinations[at] != key)
      ++at;
    if (at == plan.destinations.size()) {
      if (target.cluster && redis::key_slot(key) != target.slot) {
        throw dlq::invalid_argument(dlq::detail::message(
            "redis", "RedisListStorage::replay_step",
            "replay from queue '" + std::string(target.queue) + "' to queue '" +
                std::string(destination) + "': in Redis Cluster '" + key + "' (slot " +
                std::to_string(redis::key_slot(key)) + ") and '" + target.dead + "' (slot " +
                std::to_string(target.slot) +
                ") are on different hash slots, and a replay moves entries atomically "
                "within one slot only; nothing was moved",
            "replay to the entries' own queue, then move them on from there"));
      }
      plan.destinations.push_back(key);
    }
    return static_cast<std::uint32_t>(at) + redis::scripts::replay_first_destination;
  }

  // Sends the plan as one replay script, with the read of the next window and the deletion
  // of the receipts of earlier steps behind it in the same round trip, and says what
  // happened. A lost answer is resolved by the receipt. Changes only the cursor's receipts
  // (forgotten once the round trip's answers were read: they were deleted).
  // @throws as replay_step (the caller restarts the cursor).
  Applied apply(const StepTarget& target, Lease& lease, replay_cursor& cursor,
                const ReplayPlan& plan, std::size_t max) {
    const std::size_t from = cursor.offset();
    const std::size_t to = from + plan.kept.size();  // the next window's offset
    const bool anchored = to > 0 && cursor.kept_.size() + plan.kept.size() == to;
    bool head = from == 0;  // the decided items are the head of the list: one LTRIM
    for (std::size_t j = 0; head && j < plan.items.size(); ++j)
      head = plan.items[j].index == j;
    const std::string step = next_step_id();
    const std::string tombstone = std::string(detail::tombstone_prefix) + step;
    const std::string receipt = target.dead + ":receipt:" + step;
    const std::string corrupt = corrupt_.key(target.queue);
    const std::string label = "replay script on " + target.dead;
    const std::string ttl = std::to_string(options_.receipt_ttl.count());
    const std::string packed = redis::scripts::encode_replay_plan(plan.items);
    const redis::scripts::ReplayCall call{
        target.dead,        corrupt,       receipt,
        &plan.destinations, from,          plan.items.back().index + std::size_t{1},
        tombstone,          head,          ttl,
        &plan.items,        &plan.payloads};
    // Callers grow their batches (the front end by x4 a step), so read up to 4x this step's
    // size ahead — but when the byte budget ended this step, the next one will end near the
    // same count: read a quarter more rather than items that would be read again.
    std::size_t ahead = std::min(max * 4, options_.max_batch_items);
    if (plan.budget_reached) ahead = std::min(ahead, plan.examined + plan.examined / 4 + 1);
    auto build = [&](const std::string& sha) {
      std::vector<redis::Command> cmds;
      cmds.reserve(2);
      cmds.push_back(redis::scripts::replay_step_command(sha, call, packed));
      cmds.back().label(label);
      // The next window, from the last kept item if the replay keeps items at the head (the
      // next step checks that it is still there).
      redis::Command next("LRANGE");
      next.arg(std::string_view(target.dead)).arg(anchored ? to - 1 : to).arg(to + ahead - 1);
      cmds.push_back(std::move(next));
      // Earlier steps' receipts: their answers were read, nobody needs them any more.
      if (!cursor.receipts_.keys().empty()) {
        redis::Command del("DEL");
        for (const auto& k : cursor.receipts_.keys())
          del.arg(std::string_view(k));
        cmds.push_back(std::move(del));
      }
      return cmds;
    };

    long long old_client = 0;
    std::vector<redis::Reply> replies;
    try {
      replies = target.router->run(lease, target.dead, redis::Effect::write, build,
                                   &shared_->replay_script, 0, &old_client);
    } catch (const dlq::storage_error& e) {
      if (!e.outcome_unknown() || !lease) throw;
      Applied a;
      a.done = resolve_lost_answer(**lease, old_client, receipt, label, e, target.cluster);
      a.receipt = receipt;  // read now; absent when not applied (deleting it costs nothing)
      return a;
    }
    cursor.receipts_.forget();  // the DEL's answer was read with the others
    redis::Connection& conn = **lease;
    const redisReply& r = *replies[0];
    if (r.type == REDIS_REPLY_ERROR) throw_script_error(r, conn, label);
    if (r.type != REDIS_REPLY_INTEGER) {
      redis::detail::throw_unexpected_reply(r, conn.endpoint(), label, true);
    }
    Applied a;
    a.done = r.integer != 0;
    if (a.done) a.receipt = receipt;
    // A redirected read-ahead: the slot moved right after the script; read afresh.
    if (a.done && !redis::detail::is_redirect(*replies[1])) {
      a.read_ahead = redis::strings(replies[1], conn, "LRANGE " + target.dead);
    }
    return a;
  }

  // An error reply to the replay script. Errors raised before the script writes anything
  // (its checks, or the server refusing to run it) say nothing moved; any other may have
  // come after the pushes (never after a removal).
  [[noreturn]] static void throw_script_error(const redisReply& r, redis::Connection& conn,
                                              const std::string& label) {
    const std::string code = redis::detail::reply_code(redis::view(r));
    const bool known = code == "WRONGTYPE" || code == "NOSCRIPT" || code == "OOM" ||
                       code == "BUSY" || code == "NOPERM" || code == "READONLY" ||
                       code == "MOVED" || code == "ASK" || code == "CROSSSLOT" ||
                       code == "NOAUTH" || code == "LOADING" || code == "MASTERDOWN";
    redis::detail::throw_reply_error(
        r, conn.endpoint(), label, !known,
        known ? std::string("nothing was moved") +
                    (code == "WRONGTYPE" ? "; a list dlq writes to holds another type: rename "
                                           "that key or configure other key names"
                                         : "")
              : "items may have been copied to their destination without being removed "
                "(a duplicate, never a loss); run recover() and check the destination");
  }

  // Reads up to `max` items at the cursor. When the replay kept items (the cursor's offset
  // is their count), the read starts one earlier, at the last kept item: if that is not
  // there, another client removed kept items (remove(), a trim, another replayer), the
  // offset points past items not examined yet, and the head is read to find the place
  // again. False when the head kept changing over three tries (the caller reports a
  // conflict and retries after backing off).
  bool read_window(redis::Router& router, Lease& lease, const std::string& dead,
                   replay_cursor& cursor, std::size_t max) {
    auto lrange = [&](std::size_t from, std::size_t to) {
      auto replies = router.run(lease, dead, redis::Effect::read, [&](const std::string&) {
        return one(
            std::move(redis::Command("LRANGE").arg(std::string_view(dead)).arg(from).arg(to)));
      });
      return redis::strings(replies[0], **lease, "LRANGE " + dead);
    };
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (cursor.read(lrange(cursor.window_start(), cursor.offset_ + max - 1))) return true;
      // Read the head in chunks (the kept prefix may be long) up to the first item that
      // was not kept; the kept items left are now before it.
      constexpr std::size_t chunk = 1000;
      cursor.kept_.begin_realign();
      bool more = true;
      for (std::size_t start = 0; more && start < cursor.offset_; start += chunk) {
        const auto items = lrange(start, std::min(start + chunk, cursor.offset_) - 1);
        for (const std::string& item : items) {
          more = cursor.kept_.feed(item);
          if (!more) break;
        }
        if (items.size() < std::min(chunk, cursor.offset_ - start)) more = false;  // list ended
      }
      cursor.restart_at(cursor.kept_.finish_realign());
    }
    cursor.restart_at(cursor.offset_);
    return false;
  }

  static void check_queue(std::string_view queue, const char* where) {
    if (queue.empty()) {
      throw dlq::invalid_argument(
          dlq::detail::message("redis", std::string("RedisListStorage::") + where,
                               "the queue name is empty", "pass the name of the source queue"));
    }
  }

  // The step id a tombstone names (32 lowercase hex digits after the prefix, as
  // next_step_id() makes them), or "" when `item` does not have that shape.
  static std::string step_of_tombstone(std::string_view item) {
    if (item.size() != detail::tombstone_prefix.size() + 32) return {};
    const std::string_view step = item.substr(detail::tombstone_prefix.size());
    for (const char c : step) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
    }
    return std::string(step);
  }

  std::string next_step_id() {
    static constexpr char hex[] = "0123456789abcdef";
    const std::uint64_t a = shared_->step_base;
    const std::uint64_t b = shared_->step_counter.fetch_add(1, std::memory_order_relaxed);
    std::string id(32, '0');
    for (int i = 0; i < 16; ++i) {
      id[static_cast<std::size_t>(i)] = hex[(a >> (60 - 4 * i)) & 0xF];
      id[static_cast<std::size_t>(16 + i)] = hex[(b >> (60 - 4 * i)) & 0xF];
    }
    return id;
  }

  template <class F>
  void scan(redis::Connection& conn, const redis::KeyPattern& pattern, F&& on_key) {
    const std::string glob = pattern.glob();
    std::string cursor = "0";
    // SCAN ends when the server returns cursor 0; the bound only guards against a broken
    // server (10 million calls of COUNT 1000 cover far more keys than Redis can hold).
    for (long calls = 0; calls < 10'000'000; ++calls) {
      redis::Command c("SCAN");
      c.arg(std::string_view(cursor)).arg("MATCH").arg(std::string_view(glob)).arg("COUNT");
      c.arg(1000).arg("TYPE").arg("list").label("SCAN MATCH " + glob);
      redis::Reply r = conn.run(c, redis::Effect::read);
      redis::check(r, conn, c.label());
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        redis::detail::throw_unexpected_reply(*r, conn.endpoint(), c.label());
      }
      cursor.assign(redis::view(*r->element[0]));
      const redisReply& keys = *r->element[1];
      for (std::size_t i = 0; i < keys.elements; ++i)
        on_key(redis::view(*keys.element[i]));
      if (cursor == "0") return;
    }
  }

  // After the answer to a replay script was lost: reconnect, make sure the old connection
  // can run nothing more, and read the receipt. true = applied, false = not applied.
  // Throws (outcome unknown, nothing lost) when the server cannot be asked.
  bool resolve_lost_answer(redis::Connection& conn, long long old_client,
                           const std::string& receipt, const std::string& label,
                           const dlq::storage_error& original, bool cluster) {
    try {
      std::vector<redis::Command> cmds;
      if (old_client != 0) {
        redis::Command kill("CLIENT");
        kill.arg("KILL").arg("ID").arg(old_client).label("CLIENT KILL ID");
        cmds.push_back(std::move(kill));
      }
      // In a cluster this node may be importing the slot (the script ran after ASK): ASKING
      // lets GET read the receipt there, and does nothing on the slot's owner.
      if (cluster) cmds.emplace_back("ASKING");
      redis::Command get("GET");
      get.arg(std::string_view(receipt));
      cmds.push_back(std::move(get));
      auto replies = conn.run(cmds, redis::Effect::read);
      // CLIENT KILL may be refused by ACLs; then a script still queued on the old connection
      // may run later — it re-checks every item, so it moves each exactly once or not at all.
      const redisReply& g = redis::check(replies.back(), conn, "GET " + receipt);
      return g.type == REDIS_REPLY_STRING;
    } catch (const dlq::storage_error& e) {
      const std::string what = std::string(original.what()) +
                               " — and the outcome could not be resolved (" + e.what() +
                               "); nothing was lost: the batch of " + label +
                               " moved completely or not at all; run replay again";
      if (dynamic_cast<const dlq::timeout_error*>(&original) != nullptr) {
        throw dlq::timeout_error(what, true);
      }
      if (dynamic_cast<const dlq::connection_error*>(&original) != nullptr) {
        throw dlq::connection_error(what, true);
      }
      throw dlq::storage_error(what, true);
    }
  }

  // What threads share; on the heap so that the storage can be moved (into a
  // DeadLetterQueue, for example). A moved-from storage must not be used.
  struct Shared {
    Shared(redis::ConnectionOptions connection, redis::PoolOptions pool_options)
        : router(std::move(connection), pool_options),
          replay_script("replay script", std::string(redis::scripts::replay_step)),
          purge_script("purge script", std::string(redis::scripts::list_purge)),
          bounded_push_script("bounded push script",
                              std::string(redis::scripts::list_push_bounded)),
          bounded_batch_push_script("bounded batch push script",
                                    std::string(redis::scripts::list_push_bounded_batch)),
          capped_push_script("capped push script", std::string(redis::scripts::list_push_capped)),
          recover_script("recover script", std::string(redis::scripts::recover_tombstone)),
          fast_script("fast replay script", std::string(redis::scripts::replay_fast)) {}
    redis::Router router;
    redis::Script replay_script;
    redis::Script purge_script;
    redis::Script bounded_push_script;
    redis::Script bounded_batch_push_script;
    redis::Script capped_push_script;
    redis::Script recover_script;
    redis::Script fast_script;
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

inline void RedisListStorage::receipt_jar::drop() noexcept {
  if (keys_.empty()) return;
  if (const std::shared_ptr<Shared> owner = owner_.lock()) {
    try {
      Lease lease;
      owner->router.run(lease, keys_.front(), redis::Effect::read, [&](const std::string&) {
        redis::Command del("DEL");
        for (const auto& k : keys_)
          del.arg(std::string_view(k));
        return one(std::move(del));
      });
    } catch (...) {  // NOLINT(bugprone-empty-catch): the receipts expire by themselves
    }
  }
  keys_.clear();
}

}  // namespace dlq

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::redis defines DLQ_COMPILED_REDIS): these
// instantiations are built once, in src/redis.cpp; a translation unit that includes this header
// instantiates none of them.
#if defined(DLQ_COMPILED_REDIS)
#include "dlq/dead_letter_queue.hpp"
namespace dlq {
extern template class DeadLetterQueue<RedisListStorage>;
extern template class DeadLetterQueue<RedisListStorage&>;
}  // namespace dlq
#endif
