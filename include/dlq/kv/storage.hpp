// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/storage.hpp
/// dlq::KeyValueStorage — the storage adapter over a key-value store: one record per entry,
/// keyed by queue and entry id (the shape of the Rust seed's `dlq:{task_id}` records).
///
/// What it gives you:
///   - A caller-supplied job id is the entry id (keyed_by_job_id), so dead-lettering the same
///     job again replaces its record — new attempt, new time, moved to the end of the order —
///     instead of adding a second one. Entries without a job id get a fresh id.
///   - Oldest-first listing in windows, one batched read per window (never a load per key).
///   - Entries without any id (bytes written by another program) are keyed by the id
///     dlq::Entry derives from their bytes ("raw-…"), so every record can be addressed.
///   - Replay into a destination of your choice (a "sink": any callable, or an object with
///     push/push_many; see "Sinks" below).
///       * **Exactly-once** when the sink writes into the same store (a dlq::kv::JobQueue on
///         the same SqliteStore file or MemoryStore; exactly_once() says so): each step saves
///         the jobs and removes the records in one store transaction (remove_and_save).
///       * **At-least-once** otherwise — push first, then remove, because no transaction
///         spans the store and the destination: a replay that dies between the push and the
///         remove leaves the records in place and the next replay pushes them again, so the
///         destination can see a payload twice — the price of never losing one. Two
///         processes replaying the same queue at once can also both push an entry (one
///         process serialises its own replays). Before pushing, a step re-reads its window:
///         a record removed or replaced since it was read makes the step a `conflict`
///         (nothing pushed, nothing removed; the front end decides again). The removal is a
///         compare-and-delete on the record's version, in one atomic store call: if the job
///         was dead-lettered again while its payload was being pushed, the new record is
///         kept (a new failure) and counted in superseded(). remove(id) and purge of the
///         same adapter (or a copy) wait for a step pushing the record instead of deleting
///         it under the step; another process's remove is not coordinated with the push.
///
/// The key-value store contract it adapts (the members a store provides, and which optional
/// ones turn on which policies) is dlq/kv/store.hpp.
///
/// Sinks — where replay pushes payloads. The sink is the adapter's second template parameter
/// and a constructor argument (class template argument deduction picks its type from the
/// argument). Accepted, in order of preference:
///
///     s.push_many(const std::vector<dlq::kv::Message>&)   // one call per replay step
///     s(const std::vector<dlq::kv::Message>&)             // one call per replay step
///     s.push(std::string_view queue, std::string_view payload)   // one call per item
///     s(std::string_view queue, std::string_view payload)        // one call per item
///
/// or a std::reference_wrapper to one of those. The sink is called from replay_step only,
/// under the adapter's replay lock, so it is never called concurrently by one adapter. A
/// sink that throws aborts the step before anything is removed. The default sink is
/// dlq::kv::MemoryQueues (dlq/kv/sinks.hpp), an in-memory set of queues for tests;
/// dlq::kv::RedisListSink (dlq/redis/kv_store.hpp) pushes onto Redis lists.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/meta/detected.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/detail/audit_trail.hpp"
#include "dlq/kv/detail/in_flight.hpp"
#include "dlq/kv/detail/layout.hpp"
#include "dlq/kv/detail/replay_plan.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Options of dlq::KeyValueStorage.
struct KeyValueOptions {
  /// Start of every collection name. A queue's records live in the collections
  /// `<prefix>{<queue>}:dead` and `<prefix>{<queue>}:corrupt` (the braces are a Redis hash
  /// tag, so one queue's keys share a cluster slot), and the names of the queues that were
  /// ever used in `<prefix>queues`. Default "dlq:". Two adapters with different prefixes
  /// share a store without seeing each other's entries.
  std::string prefix = "dlq:";
  /// How long the audit trail keeps its records (collection `<prefix>{<queue>}:audit`; see
  /// dlq/audit.hpp). Default: 90 days, at most 1 000 000 records per queue.
  AuditRetention audit_retention;
};

namespace kv {
namespace detail {

namespace ops {
template <class Sink>
using sink_store = decltype(std::declval<Sink&>().store());
template <class Sink>
using writes_for = decltype(std::declval<Sink&>().writes_for(
    std::declval<const std::vector<Message>&>(), std::declval<writes_callback>()));
}  // namespace ops

/// True when `Sink` writes into a store of type `Kv`: `Kv& store()` and `writes_for`.
template <class Sink, class Kv>
using is_store_sink =
    std::bool_constant<std::is_same_v<meta::detected_t<ops::sink_store, Sink>, Kv&> &&
                       meta::is_detected<ops::writes_for, Sink>::value>;

/// True when replay into `Sink` can be one store transaction: the sink writes into a store of
/// type `Kv` (store() and writes_for) and `Kv` has remove_and_save and shares_data_with.
template <class Kv, class Sink>
inline constexpr bool joint_capable_v = is_store_sink<sink_target_t<Sink>, Kv>::value&&
    has_remove_and_save<Kv>::value&& has_shares_data_with<Kv>::value;

}  // namespace detail
}  // namespace kv

/// Storage adapter (see dlq/storage.hpp) over a key-value store `Kv` (the contract in
/// dlq/kv/store.hpp), replaying into a sink `Sink`.
///
/// - `Kv` is held by value. The stores that ship with dlq are handles: copies share the same
///   data, so keep a copy to inspect the store while the adapter uses it.
/// - `Sink` is held by value too (wrap it in std::ref to share one you own). Default:
///   dlq::kv::MemoryQueues, an in-memory handle; sink() returns it.
/// - Entries are keyed by queue and id. keyed_by_job_id is true: the front end passes the job
///   id as the entry id, and saving the same id again replaces the record (it moves to the
///   end, as a new failure). Records without a job id carry the fresh id the front end made.
/// - replay_step pushes first, then removes (at-least-once, never lost; the destination may
///   see a payload twice if a replay dies in between, or if two processes replay the same
///   queue at once) — unless the sink writes into this store (exactly_once(): one store
///   transaction per step). The removal is one atomic store call for the whole step and applies to
///   a record only if its version is still the one read; a record replaced meanwhile stays.
/// - Policies (dlq::Retention, dlq::PoisonGuard): push returns the dead list's new length,
///   push_capped saves and evicts in one atomic store call, push_bounded (one record or a
///   batch, all or nothing) is atomic in the store and bump_count keeps the poison guard's
///   counts in the store — shared by every process using it — when the store has
///   save_and_count, save_capped, save_if_below / save_if_fits and increment (MemoryStore,
///   SqliteStore and RedisStore all do); see "Policies" in dlq/kv/store.hpp for the
///   fallbacks otherwise.
///
/// Thread-safe when the store is (every shipped store is). Copies share the queue registry
/// cache, the counters and the replay lock.
template <class Kv, class Sink = kv::MemoryQueues>
class KeyValueStorage {
  static_assert(kv::detail::check_store<Kv>::value, "");
  static_assert(
      kv::is_sink_v<Sink>,
      "dlq: KeyValueStorage's Sink needs `push_many(const std::vector<dlq::kv::Message>&)`, "
      "`operator()(const std::vector<dlq::kv::Message>&)`, "
      "`push(std::string_view queue, std::string_view payload)` or "
      "`operator()(std::string_view queue, std::string_view payload)` "
      "(see dlq/kv/storage.hpp)");

 public:
  /// A caller-supplied job id is the entry id; sending the same job again replaces its record.
  static constexpr bool keyed_by_job_id = true;

  /// Replay position: the version of the last record a step examined (0 = from the oldest).
  /// Kept records stay before it; records saved later (new failures, replaced records) come
  /// after it.
  struct replay_cursor {
    std::uint64_t after = 0;  ///< version of the last examined record; 0 = start
    /// The walk examines only records with a version up to this (see replay_snapshot); the
    /// default bounds nothing.
    std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
  };

  /// Adapts a default-constructed store, replaying into a default-constructed sink (with the
  /// defaults: an empty dlq::kv::MemoryStore into a dlq::kv::MemoryQueues), so that
  /// `dlq::DeadLetterQueue<dlq::KeyValueStorage<dlq::kv::MemoryStore>> q;` works. Declared
  /// only when both are default-constructible (a member template, so that an explicit
  /// instantiation over a store that needs arguments, such as SqliteStore, is valid).
  template <class K = Kv, class S = Sink,
            std::enable_if_t<
                std::is_default_constructible_v<K> && std::is_default_constructible_v<S>, int> = 0>
  KeyValueStorage() : KeyValueStorage(K{}, S{}) {}

  /// Adapts `store`, replaying into `sink`.
  /// @throws dlq::invalid_argument if options.prefix is empty.
  explicit KeyValueStorage(Kv store, Sink sink = Sink{}, KeyValueOptions options = {});

  /// True when replay is exactly-once: the sink writes into the same store as the dead
  /// letters (a dlq::kv::JobQueue over the same SqliteStore or MemoryStore), so each replay
  /// step pushes the payloads and removes the records in one store transaction
  /// (remove_and_save). False: push first, then remove (at-least-once).
  bool exactly_once() const noexcept { return joint_; }

  /// The store (a handle to the same data the adapter uses).
  Kv& store() noexcept { return store_; }
  /// The replay destination.
  Sink& sink() noexcept { return sink_; }

  /// The collection holding `queue`'s list `kind`: "<prefix>{<queue>}:dead" or ":corrupt".
  std::string collection(std::string_view queue, ListKind kind) const {
    return kv::detail::collection_name(prefix_, queue, kind);
  }

  /// True when push reads the dead list's length (the store has save_and_count: a count of
  /// the list, linear on SQLite and PostgreSQL): a send that needs no length uses push_many.
  static constexpr bool push_counts_list = kv::detail::has_save_and_count<Kv>::value;
  /// What push returns: the dead list's new length when push_counts_list, else void.
  using push_result = std::conditional_t<push_counts_list, std::size_t, void>;

  /// Stores one envelope under (record.queue, record.id) — record.job_id when id is empty,
  /// and an id derived from the envelope's bytes ("raw-" + hash, as dlq::Entry derives it)
  /// when both are empty — replacing the record a previous send of the same id left. One
  /// atomic store call.
  /// @returns when the store has save_and_count: the number of records in the queue's dead
  ///          list right after the push (a replaced record does not add one); else nothing.
  /// @throws dlq::invalid_argument if the queue name is empty; what the store throws.
  push_result push(const Record& record) {
    if constexpr (kv::detail::has_save_and_count<Kv>::value) {
      return write_records(std::vector<Record>{record}, [this](const std::vector<kv::Write>& w) {
        return store_.save_and_count(w);
      });
    } else {
      push_many(std::vector<Record>{record});
    }
  }

  /// Stores several envelopes in one atomic store call, in order (a later record with the
  /// same id replaces an earlier one). Nothing is stored if it throws.
  /// @throws dlq::invalid_argument if a record's queue name is empty; what the store throws.
  void push_many(const std::vector<Record>& records) {
    if (records.empty()) return;
    write_records(records, [this](const std::vector<kv::Write>& w) {
      store_.save(w);
      return 0;
    });
  }

  /// Stores one envelope (keyed as push does) only while the queue's dead list holds fewer
  /// than `max_length` records, atomically in the store (kv store member save_if_below), so
  /// that concurrent senders — threads or processes — never take the list past the bound.
  /// Replacing the record of a job already in the list is not growth and is always admitted.
  /// Declared only when the store has save_if_below. A queue this adapter has not written to
  /// before is first entered in the queue registry (a load; a save if absent).
  /// @returns false, having stored nothing, when the list is full.
  /// @throws dlq::invalid_argument if the queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_save_if_below<K>::value, int> = 0>
  bool push_bounded(const Record& record, std::size_t max_length) {
    kv::detail::check_queue(record.queue, "push_bounded");
    register_queue(record.queue);
    const std::string coll = collection(record.queue, ListKind::dead);
    std::string derived;
    return store_.save_if_below(
        kv::Write{coll, kv::detail::record_key(record, derived), record.envelope}, max_length);
  }

  /// Stores `records` (all of one queue; keyed as push does) only if the queue's dead list
  /// then holds at most `max_length` records, atomically in the store (kv store member
  /// save_if_fits): all of them or none. Replacing the record of a job already in the list is
  /// not growth. Declared only when the store has save_if_fits. A queue this adapter has not
  /// written to before is first entered in the queue registry (a load; a save if absent).
  /// @returns false, having stored nothing, when they do not fit.
  /// @throws dlq::invalid_argument if a record's queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_save_if_fits<K>::value, int> = 0>
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return true;
    const std::string_view queue = records.front().queue;
    kv::detail::check_queue(queue, "push_bounded");
    register_queue(queue);
    const std::string coll = collection(queue, ListKind::dead);
    std::vector<std::string> derived(records.size());
    std::vector<kv::Write> writes;
    writes.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i)
      writes.push_back(
          kv::Write{coll, kv::detail::record_key(records[i], derived[i]), records[i].envelope});
    return store_.save_if_fits(writes, max_length);
  }

  /// Stores `records` (all of one queue; keyed as push does) and, in the same atomic store
  /// call (kv store member save_capped), removes the oldest records of the queue's dead list
  /// beyond `max_length`. Declared only when the store has save_capped.
  /// @returns the removed records' bytes, oldest first.
  /// @throws dlq::invalid_argument if a record's queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_save_capped<K>::value, int> = 0>
  std::vector<std::string> push_capped(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return {};
    std::vector<kv::Item> removed = write_records(records, [&](const std::vector<kv::Write>& w) {
      return store_.save_capped(w, max_length);
    });
    std::vector<std::string> out;
    out.reserve(removed.size());
    for (kv::Item& item : removed)
      out.push_back(std::move(item.value));
    return out;
  }

  /// Adds one to the counter `key` of `queue` (the poison-loop guard's count of one job) and
  /// returns its new value; the counter expires `ttl` after its last bump (clamped to
  /// [1 s, 100 years]). The counter lives in the store (kv store member increment, under the
  /// queue's dead collection name, in the store's counter namespace), so every adapter and process
  /// sharing the store counts together. Declared only when the store has increment.
  /// @throws dlq::invalid_argument if the queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_increment<K>::value, int> = 0>
  std::int64_t bump_count(std::string_view queue, std::string_view key, std::chrono::seconds ttl) {
    kv::detail::check_queue(queue, "bump_count");
    return store_.increment(collection(queue, ListKind::dead), key, ttl);
  }

  /// Number of records in `queue`'s list `kind`.
  std::size_t size(std::string_view queue, ListKind kind) {
    return kv::detail::count_records(store_, collection(queue, kind));
  }

  /// Up to `count` records of `queue`'s list `kind`, oldest first, from position `start`
  /// (0 = the oldest). One store read.
  std::vector<std::string> range(std::string_view queue, ListKind kind, std::size_t start,
                                 std::size_t count) {
    if (count == 0) return {};
    kv::Window window;
    window.offset = start;
    window.limit = count;
    std::vector<kv::Item> items = store_.list(collection(queue, kind), window);
    std::vector<std::string> out;
    out.reserve(items.size());
    for (kv::Item& item : items)
      out.push_back(std::move(item.value));
    return out;
  }

  /// Up to `window.limit` records of `queue`'s list `kind` with their ids and versions,
  /// oldest first (pass the last version seen as `window.after` to page on). One store read.
  std::vector<kv::Item> items(std::string_view queue, ListKind kind, const kv::Window& window) {
    return store_.list(collection(queue, kind), window);
  }

  /// The record stored under entry id `id`, if any: one store lookup. An id derived from an
  /// entry's bytes ("raw-…", the id dlq::Entry gives an entry without one, e.g. a corrupt
  /// record) that is not a key is looked for among the records' bytes (one paged scan).
  std::optional<std::string> find(std::string_view queue, ListKind kind, std::string_view id) {
    const std::string coll = collection(queue, kind);
    std::optional<kv::Item> item = store_.load(coll, id);
    if (item) return std::move(item->value);
    if (id.rfind("raw-", 0) != 0) return std::nullopt;
    kv::Window window;
    window.limit = page_size;
    for (;;) {
      std::vector<kv::Item> page = store_.list(coll, window);
      for (kv::Item& i : page)
        if (detail::derived_id(i.value) == id) return std::move(i.value);
      if (page.size() < window.limit) return std::nullopt;
      window.after = page.back().version;
    }
  }

  /// Removes the record with entry id `id` if its bytes equal `raw` (an empty `raw` matches
  /// any bytes). When no record under `id` has those bytes (an entry whose id was derived
  /// from its bytes, e.g. a corrupt one), removes the oldest record equal to `raw` instead.
  /// The removal is a compare-and-delete on the version read, so a record replaced meanwhile
  /// is kept. A record that a replay step of this adapter (or a copy) is pushing right now
  /// is not removed under it: remove waits until the step is done and then decides — false
  /// when the step replayed the record, as it usually does. Called from inside the sink, on
  /// the thread running that step, it cannot wait and returns false for such a record (the
  /// replay wins). @returns true if a record was removed.
  bool remove(std::string_view queue, ListKind kind, std::string_view id, std::string_view raw) {
    const std::string coll = collection(queue, kind);
    kv::detail::in_flight& flight = shared_->flight;
    std::unique_lock<std::mutex> lock = flight.lock();
    for (;;) {
      const removal r = remove_locked(coll, id, raw);
      if (r != removal::held) return r == removal::removed;
      if (flight.on_step_thread()) return false;
      flight.wait(lock);
    }
  }

  /// Removes every record of `queue`'s list `kind`. @returns exactly how many were removed.
  /// Records that a replay step of this adapter (or a copy) is pushing right now are not
  /// counted as removed under it: purge waits until the step is done (called from inside the
  /// sink, it leaves those records to the step instead).
  std::size_t purge(std::string_view queue, ListKind kind) {
    const std::string coll = collection(queue, kind);
    kv::detail::in_flight& flight = shared_->flight;
    std::unique_lock<std::mutex> lock = flight.lock();
    for (;;) {
      // Under the flight lock: no step can start pushing records of `coll` meanwhile.
      if (!flight.holds_any(coll)) return remove_all(coll, false);
      if (flight.on_step_thread()) return remove_all(coll, true);
      flight.wait(lock);
    }
  }

  /// The queues that have dead or corrupt records, sorted by name.
  std::vector<std::string> queues() {
    kv::Window all;
    std::vector<kv::Item> registered = store_.list(kv::detail::registry_name(prefix_), all);
    std::vector<std::string> out;
    for (kv::Item& item : registered) {
      if (size(item.id, ListKind::dead) > 0 || size(item.id, ListKind::corrupt) > 0)
        out.push_back(std::move(item.id));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// The dead-list sizes of `queue_names`, in the same order.
  std::vector<std::size_t> sizes(const std::vector<std::string>& queue_names) {
    std::vector<std::size_t> out;
    out.reserve(queue_names.size());
    for (const std::string& q : queue_names)
      out.push_back(size(q, ListKind::dead));
    return out;
  }

  /// Length and oldest and newest record of both lists of each queue, in order (the storage
  /// member behind DeadLetterQueue::stats, see dlq/stats.hpp): one store call `ends` per list,
  /// each list read at one instant. Declared only when the store has `ends` (MemoryStore,
  /// SqliteStore, RedisStore); otherwise DeadLetterQueue::stats falls back to size() and
  /// range(), which under steady churn may report a list's end times unknown (untimed).
  template <class K = Kv, std::enable_if_t<kv::detail::has_ends<K>::value, int> = 0>
  std::vector<QueueEnds> stats(const std::vector<std::string>& queue_names) {
    auto list = [this](const std::string& coll) {
      kv::Ends e = store_.ends(coll);
      ListEnds out;
      out.length = e.count;
      if (e.count > 0 && e.first && e.last) {
        out.first = std::move(e.first->value);
        out.last = std::move(e.last->value);
      }
      return out;
    };
    std::vector<QueueEnds> out(queue_names.size());
    for (std::size_t i = 0; i < queue_names.size(); ++i) {
      out[i].dead = list(collection(queue_names[i], ListKind::dead));
      out[i].corrupt = list(collection(queue_names[i], ListKind::corrupt));
    }
    return out;
  }

  /// Bounds the walk with `cursor` to the records `queue`'s dead list holds now (see
  /// "Snapshot" in dlq/storage.hpp) and returns their number: the store gives every save a
  /// version greater than any the collection has had, so the records present now are exactly
  /// those with a version up to the newest one now — a record saved later (a new failure, or
  /// a job dead-lettered again, whose record is replaced and moves to the end) has a greater
  /// one, whatever the senders' clocks say. One store call `ends` when the store has it; else
  /// the dead list is read through once, in pages (list).
  std::size_t replay_snapshot(std::string_view queue, replay_cursor& cursor) {
    const std::string dead = collection(queue, ListKind::dead);
    if constexpr (kv::detail::has_ends<Kv>::value) {
      const kv::Ends e = store_.ends(dead);
      cursor.last = e.last ? e.last->version : 0;
      return e.count;
    } else {
      std::size_t n = 0;
      std::uint64_t last = 0;
      kv::Window window;
      window.limit = page_size;
      for (;;) {
        const std::vector<kv::Item> page = store_.list(dead, window);
        n += page.size();
        if (!page.empty()) last = std::max(last, page.back().version);
        if (page.size() < window.limit) break;
        window.after = page.back().version;
      }
      cursor.last = last;
      return n;
    }
  }

  /// Reads up to `max_items` (0 = 1) records after the cursor, oldest first, asks `decide`
  /// about each, and then:
  ///  1. checks, in one read of the same window, that every record to replay or set aside is
  ///     still stored with the version read; if one is not (removed or replaced meanwhile),
  ///     applies nothing and returns `conflict` (the caller decides again);
  ///  2. pushes every Action::replay payload to the sink (one call when it takes batches);
  ///  3. only after the sink returned, removes those records and every Action::discard
  ///     record, and moves every Action::set_aside record to the corrupt list, in one
  ///     atomic store call. Each removal
  ///     applies only if the record still has the version read: a job dead-lettered again
  ///     between 1 and 3 keeps its new record (a new failure), counted in superseded().
  /// At-least-once: if the sink throws, nothing is removed and the exception propagates; if
  /// the process dies between 2 and 3, the records stay and a later replay pushes them again.
  ///
  /// Exactly-once when the sink writes into this store (exactly_once()): 1-3 are one store
  /// transaction (remove_and_save) — the jobs are saved and the records removed together,
  /// or, when a record was removed or replaced since it was read, nothing is written and the
  /// step returns `conflict`.
  StepResult replay_step(std::string_view queue, replay_cursor& cursor, std::size_t max_items,
                         Decider decide) {
    std::lock_guard<std::mutex> replay_lock(shared_->replay_mutex);
    const std::string dead = collection(queue, ListKind::dead);
    kv::Window window;
    window.after = cursor.after;
    window.limit = max_items == 0 ? 1 : max_items;
    std::vector<kv::Item> items = store_.list(dead, window);
    // Only records of the snapshot (versions ascend: the later ones are all past it).
    items.erase(std::find_if(items.begin(), items.end(),
                             [&cursor](const kv::Item& i) { return i.version > cursor.last; }),
                items.end());
    if (items.empty()) return StepResult{};

    const std::string corrupt = collection(queue, ListKind::corrupt);
    kv::detail::replay_plan plan;
    kv::detail::plan_replay(items, dead, corrupt, decide, plan);
    if (joint_) {
      if (!joint_step(plan)) return StepResult{0, true};
    } else if (!separate_step(dead, window, plan)) {
      return StepResult{0, true};
    }
    cursor.after = items.back().version;
    return StepResult{items.size(), false};
  }

  /// How many records replay pushed (or was to set aside) but did not remove because they
  /// were replaced or removed between the step's check and its removal — typically the job
  /// was dead-lettered again while its payload was being pushed: the new record was kept. Counted
  /// since this adapter (or the one it was copied from) was made.
  std::size_t superseded() const noexcept {
    return shared_->superseded.load(std::memory_order_relaxed);
  }

  // --- the audit trail (see dlq/audit.hpp) ---------------------------------------------

  /// The retention of the audit trail (KeyValueOptions::audit_retention).
  const AuditRetention& audit_retention() const noexcept { return audit_retention_; }

  /// The collection holding `queue`'s audit records: "<prefix>{<queue>}:audit".
  std::string audit_collection(std::string_view queue) const {
    return prefix_ + "{" + std::string(queue) + "}:audit";
  }

  /// Appends one audit record made at `at`: one save (a record "<ms> <json>" under a fresh
  /// time-ordered id), then the trail's retention: the oldest records made before
  /// `audit_retention().expire_before(at)` are removed (one list of one record when there
  /// are none; at most 1000 per append), and on the first and every 64th append of this
  /// adapter the trail is counted and the cap applied (AuditRetention::excess). Returns how
  /// many records younger than the max age the cap removed.
  std::size_t audit_append(std::string_view queue, std::chrono::system_clock::time_point at,
                           std::string_view record) {
    return kv::detail::audit_append(store_, audit_collection(queue), audit_retention_,
                                    shared_->audit_appends, at, record);
  }

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) {
    return kv::detail::audit_read(store_, audit_collection(queue), since, limit);
  }

 private:
  static constexpr std::size_t page_size = 1000;

  struct shared {
    kv::detail::queue_registry registry;  // the queues entered in the registry
    std::mutex replay_mutex;  // one replay step at a time: no duplicate pushes within a process
    std::atomic<std::size_t> superseded{0};
    std::atomic<std::size_t> audit_appends{0};
    kv::detail::in_flight flight;  // the records the running replay step is pushing
  };

  /// Steps 1-3 of replay_step in one store transaction (the sink writes into this store).
  /// False when a record changed since it was read: nothing was written.
  bool joint_step(const kv::detail::replay_plan& plan) {
    if constexpr (kv::detail::joint_capable_v<Kv, Sink>) {
      if (plan.removals.empty()) return true;
      if (plan.payloads.empty()) return store_.remove_and_save(plan.removals, {});
      std::optional<bool> applied;
      auto apply = [&](const std::vector<kv::Write>& writes) {
        applied = store_.remove_and_save(plan.removals, writes);
      };
      kv::detail::sink_target_t<Sink>& target = sink_;
      target.writes_for(plan.messages(), apply);
      if (!applied)
        throw invalid_argument(detail::message(
            "kv", "replay_step", "the sink's writes_for did not hand over its writes",
            "writes_for must call its callback once with the writes of the messages"));
      return *applied;
    } else {
      (void)plan;
      return false;  // never called: joint_ is false
    }
  }

  /// Steps 1-3 of replay_step when the sink is elsewhere: check that the records of `plan`
  /// are unchanged (one read of `window` of `dead`), push, then remove (compare-and-delete).
  /// The records it removes are held from the check until it returns: remove(id) and purge
  /// wait for it instead of deleting a record whose payload is being pushed. False when a
  /// record changed since it was read: nothing was pushed or removed.
  bool separate_step(const std::string& dead, const kv::Window& window,
                     const kv::detail::replay_plan& plan) {
    const kv::detail::in_flight::hold held(shared_->flight, dead, plan.removals);
    if (!plan.removals.empty() &&
        !kv::detail::still_unchanged(plan.removals,
                                     kv::detail::list_versions(store_, dead, window)))
      return false;
    if (!plan.payloads.empty()) kv::detail::deliver(sink_, plan.messages());
    if (!plan.removals.empty()) {
      const std::size_t applied = store_.remove(plan.removals);
      if (applied < plan.removals.size())
        shared_->superseded.fetch_add(plan.removals.size() - applied, std::memory_order_relaxed);
    }
    return true;
  }

  enum class removal { removed, not_removed, held };

  /// remove's work, under the flight lock: `held` when the record to remove is in flight.
  removal remove_locked(const std::string& coll, std::string_view id, std::string_view raw) {
    if (!id.empty()) {
      if (std::optional<kv::Item> item = store_.load(coll, id)) {
        if (!raw.empty() && item->value != raw)
          return removal::not_removed;  // the record under this id holds other bytes: replaced
        if (shared_->flight.held(coll, id)) return removal::held;
        return store_.remove({kv::Removal{coll, id, item->version, {}}}) == 1
                   ? removal::removed
                   : removal::not_removed;
      }
    }
    if (raw.empty()) return removal::not_removed;
    kv::Window window;
    window.limit = page_size;
    for (;;) {
      std::vector<kv::Item> page = store_.list(coll, window);
      for (const kv::Item& item : page) {
        if (item.value != raw) continue;
        if (shared_->flight.held(coll, item.id)) return removal::held;
        return store_.remove({kv::Removal{coll, item.id, item.version, {}}}) == 1
                   ? removal::removed
                   : removal::not_removed;
      }
      if (page.size() < window.limit) return removal::not_removed;
      window.after = page.back().version;
    }
  }

  /// purge's work, under the flight lock; `skip_held`: leave the records in flight.
  std::size_t remove_all(const std::string& coll, bool skip_held) {
    if constexpr (kv::detail::has_remove_all<Kv>::value) {
      if (!skip_held) return store_.remove_all(coll);
    }
    std::size_t removed = 0;
    kv::Window window;
    window.limit = page_size;
    for (;;) {
      std::vector<kv::Item> page = store_.list(coll, window);
      if (page.empty()) return removed;
      std::vector<kv::Removal> removals;
      removals.reserve(page.size());
      for (const kv::Item& item : page)
        if (!skip_held || !shared_->flight.held(coll, item.id))
          removals.push_back(kv::Removal{coll, item.id, item.version, {}});
      if (!removals.empty()) removed += store_.remove(removals);
      window.after = page.back().version;
    }
  }

  /// Saves `records` (registry entries for queues not registered yet first) with one call
  /// `save(writes)`, the record writes last, in order. Returns what `save` returns.
  template <class Save>
  auto write_records(const std::vector<Record>& records, Save&& save) {
    kv::detail::learn_registered(store_, prefix_, records, shared_->registry);
    kv::detail::record_writes batch;
    kv::detail::plan_writes(prefix_, records, shared_->registry, batch);
    auto result = save(batch.writes);
    shared_->registry.add(batch.new_queues);
    return result;
  }

  // Enters `queue` in the queue registry (one store call) unless this adapter knows it.
  // A queue the registry holds is not written again (kv::detail::learn_registered).
  void register_queue(std::string_view queue) {
    if (shared_->registry.known(queue)) return;
    const std::string registry = kv::detail::registry_name(prefix_);
    if (!store_.load(registry, queue)) store_.save({kv::Write{registry, queue, {}}});
    shared_->registry.add(queue);
  }

  Kv store_;
  Sink sink_;
  std::shared_ptr<shared> shared_;
  std::string prefix_;
  AuditRetention audit_retention_;
  bool joint_ = false;  // replay is one store transaction (see exactly_once)
};

// --- KeyValueStorage's constructor ---------------------------------------------------------

template <class Kv, class Sink>
DLQ_MEMBER_INLINE KeyValueStorage<Kv, Sink>::KeyValueStorage(Kv store, Sink sink,
                                                             KeyValueOptions options)
    : store_(std::move(store)), sink_(std::move(sink)), shared_(std::make_shared<shared>()) {
  if (options.prefix.empty())
    throw invalid_argument(detail::message("kv", "KeyValueOptions::prefix", "is empty",
                                           "use a non-empty prefix such as \"dlq:\""));
  prefix_ = std::move(options.prefix);
  audit_retention_ = options.audit_retention;
  if constexpr (kv::detail::joint_capable_v<Kv, Sink>) {
    kv::detail::sink_target_t<Sink>& target = sink_;
    joint_ = store_.shares_data_with(target.store());
  }
}

}  // namespace dlq
