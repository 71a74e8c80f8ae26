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
/// The key-value store contract (checked by dlq::kv::is_store_v / the dlq::kv::store concept,
/// and by static_asserts that name the missing member when KeyValueStorage is instantiated).
/// Keys are two-level: a *collection* (the key prefix shared by every record of one list,
/// e.g. "dlq:{orders}:dead") and an *id* inside it. Each record also has a *version*: a
/// number the store assigns on every save, strictly greater than every version the
/// collection has had, so that ascending version is oldest-first and a replaced record moves
/// to the end. Versions are never reused (a compare-and-delete relies on that).
///
///     // Required
///     void save(const std::vector<dlq::kv::Write>& writes);        // insert or replace, in
///                                                                  // order, atomically
///     std::optional<dlq::kv::Item> load(std::string_view collection, std::string_view id);
///     std::vector<dlq::kv::Item> list(std::string_view collection,  // oldest first, one read
///                                     const dlq::kv::Window& window);
///     std::size_t remove(const std::vector<dlq::kv::Removal>& removals);  // atomically; each
///                                     // only if its version still matches; returns how many
///     // Optional (faster than the fallbacks built on list/remove)
///     std::size_t count(std::string_view collection);
///     std::size_t remove_all(std::string_view collection);         // exact count removed
///     std::vector<std::uint64_t> versions(std::string_view collection,  // list without the
///                                         const dlq::kv::Window& window); // ids and values
///     dlq::kv::Ends ends(std::string_view collection);             // record count, oldest
///                                     // and newest record, read at one instant (backs
///                                     // KeyValueStorage::stats, see dlq/stats.hpp)
///     // Optional, for the front end's policies (see "Policies" below)
///     std::size_t save_and_count(const std::vector<dlq::kv::Write>& writes);
///     bool save_if_below(const dlq::kv::Write& write, std::size_t max_records);
///     bool save_if_fits(const std::vector<dlq::kv::Write>& writes, std::size_t max_records);
///     std::vector<dlq::kv::Item> save_capped(const std::vector<dlq::kv::Write>& writes,
///                                            std::size_t max_records);
///     std::int64_t increment(std::string_view collection, std::string_view key,
///                            std::chrono::seconds ttl);
///     // Optional, for exactly-once replay into a sink that writes into the same store
///     bool remove_and_save(const std::vector<dlq::kv::Removal>& removals,
///                          const std::vector<dlq::kv::Write>& writes);
///     bool shares_data_with(const Store& other) const;
///
/// Policies. KeyValueStorage offers the storage contract's optional members push (returning
/// the new length), push_capped, push_bounded (one record, and a batch) and bump_count
/// exactly when the store has the member they need; otherwise it does not declare them and
/// dlq::DeadLetterQueue falls back (eviction right after the push for Overflow::evict_oldest,
/// size() then push for Overflow::reject — both approximate under concurrent senders — and
/// poison counts kept inside each process).
///
///   - `save_and_count(writes)`: as save, atomically, and returns how many records the
///     collection of the *last* write holds after the save (0 when `writes` is empty).
///     Backs `std::size_t KeyValueStorage::push`, which saves retention's size() call.
///   - `save_if_below(write, max_records)`: atomically, saves `write` (insert or replace, as
///     save) only if its collection then holds fewer than `max_records` records, or already
///     holds a record with the write's id (a replacement never counts as growth). Returns
///     false, having written nothing, when the collection is full. `max_records` 0 = nothing
///     new is ever admitted (replacements still are). Backs push_bounded, so that
///     Overflow::reject is exact under any number of concurrent senders and processes.
///   - `save_if_fits(writes, max_records)`: atomically, saves every write (all of one
///     collection; insert or replace, as save) only if the collection then holds at most
///     `max_records` records (a replacement never counts as growth). Returns false, having
///     written nothing, when they do not fit. Backs the batch push_bounded, so that a batch
///     under Overflow::reject is stored whole or not at all, exactly under concurrency.
///   - `save_capped(writes, max_records)`: as save, atomically, and in the same atomic step
///     removes the oldest records of the *last* write's collection beyond `max_records`;
///     returns the removed records, oldest first. Backs push_capped, so that
///     Overflow::evict_oldest keeps exactly max_length records under any number of
///     concurrent senders and reports every eviction.
///   - `increment(collection, key, ttl)`: atomically adds one to the counter named (collection,
///     key) and returns its new value (1 for a counter that did not exist or had expired). The
///     counter expires `ttl` after its last increment (clamped to between one second and 100
///     years: kv::detail::counter_ttl). Counters are a namespace of their own: they are never
///     records, never listed or counted, and purging a collection leaves them. The store must
///     keep them bounded: expired counters are deleted (Redis: EXPIRE; SQLite: each increment
///     deletes up to 16 expired counters; MemoryStore: a bounded map). Backs bump_count, so the
///     poison-loop guard counts a job's failures across every process sharing the store.
///   - `remove_and_save(removals, writes)`: atomically, if every removal's record exists with
///     its version (any when 0), applies all the removals and then saves `writes` (as save);
///     otherwise writes nothing and returns false. `shares_data_with(other)`: true when
///     `other` reaches the same data (a copy, or the same file). When the sink has
///     `Store& store()` and `void writes_for(const std::vector<dlq::kv::Message>&,
///     callback)` (dlq::kv::JobQueue) on a store that shares this store's data, replay steps
///     run through remove_and_save: exactly-once.
///
/// Every member must be safe to call from several threads at once. Ready-made stores:
/// dlq::kv::MemoryStore (dlq/kv/memory_store.hpp; unit tests), dlq::kv::SqliteStore
/// (dlq/sqlite/sqlite_store.hpp; durable, one file, target dlq::sqlite) and
/// dlq::kv::RedisStore (dlq/redis/kv_store.hpp; target dlq::redis).
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
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/function_ref.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/meta/detected.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/policies.hpp"
#include "dlq/storage.hpp"

namespace dlq {
namespace kv {

/// One stored record, as load and list return it.
struct Item {
  std::string id;             ///< the record's id inside its collection (the entry id)
  std::string value;          ///< the stored bytes, exactly as saved
  std::uint64_t version = 0;  ///< assigned by the store on save; never 0 for a stored record
};

/// One record to save. The views must stay valid for the duration of the call.
struct Write {
  std::string_view collection;  ///< e.g. "dlq:{orders}:dead"
  std::string_view id;          ///< the record's id inside the collection
  std::string_view value;       ///< the bytes to store
};

/// One record to remove (or move). The views must stay valid for the duration of the call.
struct Removal {
  std::string_view collection;  ///< where the record is
  std::string_view id;          ///< its id
  std::uint64_t version = 0;    ///< remove only if the record still has this version; 0 = any
  std::string_view move_to;     ///< empty: delete; else save the value under the same id in
                                ///< this collection (new version) and delete the original
};

/// A window of a collection, oldest first: the records with version > `after`, skipping the
/// first `offset` of those, at most `limit` of them (0 = no limit).
struct Window {
  std::uint64_t after = 0;  ///< version to start after; 0 = from the oldest
  std::size_t offset = 0;   ///< records to skip after `after`; 0 = none
  std::size_t limit = 0;    ///< most records to return; 0 = all
};

/// What the optional store member `ends` returns: a collection's record count and its
/// oldest and newest record (by version), read at one instant.
struct Ends {
  std::size_t count = 0;      ///< records in the collection
  std::optional<Item> first;  ///< the oldest record; nullopt when there is none
  std::optional<Item> last;   ///< the newest record; nullopt when there is none
};

namespace detail {

namespace meta = ::dlq::detail::meta;

// Each member of the store contract as one expression over `S` (see dlq/storage.hpp).
namespace ops {
template <class S>
using save = decltype(std::declval<S&>().save(std::declval<const std::vector<Write>&>()));
template <class S>
using load = decltype(std::declval<S&>().load(std::string_view{}, std::string_view{}));
template <class S>
using list = decltype(std::declval<S&>().list(std::string_view{}, std::declval<const Window&>()));
template <class S>
using remove = decltype(std::declval<S&>().remove(std::declval<const std::vector<Removal>&>()));
template <class S>
using count = decltype(std::declval<S&>().count(std::string_view{}));
template <class S>
using remove_all = decltype(std::declval<S&>().remove_all(std::string_view{}));
template <class S>
using versions =
    decltype(std::declval<S&>().versions(std::string_view{}, std::declval<const Window&>()));
template <class S>
using save_and_count =
    decltype(std::declval<S&>().save_and_count(std::declval<const std::vector<Write>&>()));
template <class S>
using save_if_below =
    decltype(std::declval<S&>().save_if_below(std::declval<const Write&>(), std::size_t{}));
template <class S>
using save_if_fits = decltype(std::declval<S&>().save_if_fits(
    std::declval<const std::vector<Write>&>(), std::size_t{}));
template <class S>
using save_capped = decltype(std::declval<S&>().save_capped(
    std::declval<const std::vector<Write>&>(), std::size_t{}));
template <class S>
using increment = decltype(std::declval<S&>().increment(std::string_view{}, std::string_view{},
                                                        std::chrono::seconds{}));
template <class S>
using ends = decltype(std::declval<S&>().ends(std::string_view{}));
}  // namespace ops

template <class S>
using has_save = meta::is_detected<ops::save, S>;
template <class S>
using has_load = meta::is_detected_convertible<std::optional<Item>, ops::load, S>;
template <class S>
using has_list = meta::is_detected_convertible<std::vector<Item>, ops::list, S>;
template <class S>
using has_remove = meta::is_detected_convertible<std::size_t, ops::remove, S>;
template <class S>
using has_count = meta::is_detected_convertible<std::size_t, ops::count, S>;
template <class S>
using has_remove_all = meta::is_detected_convertible<std::size_t, ops::remove_all, S>;
template <class S>
using has_versions = meta::is_detected_convertible<std::vector<std::uint64_t>, ops::versions, S>;
template <class S>
using has_save_and_count = meta::is_detected_convertible<std::size_t, ops::save_and_count, S>;
template <class S>
using has_save_if_below = meta::is_detected_convertible<bool, ops::save_if_below, S>;
template <class S>
using has_save_if_fits = meta::is_detected_convertible<bool, ops::save_if_fits, S>;
template <class S>
using has_save_capped = meta::is_detected_convertible<std::vector<Item>, ops::save_capped, S>;
template <class S>
using has_increment = meta::is_detected_convertible<std::int64_t, ops::increment, S>;
template <class S>
using has_ends = meta::is_detected_convertible<Ends, ops::ends, S>;

/// The lifetime increment() gives a counter: `ttl` clamped to [1 s, 100 years], so that a
/// store can add it to a clock in milliseconds or nanoseconds without overflow.
inline std::chrono::seconds counter_ttl(std::chrono::seconds ttl) noexcept {
  constexpr std::chrono::seconds longest(std::int64_t{100} * 365 * 24 * 3600);
  return std::clamp(ttl, std::chrono::seconds(1), longest);
}

}  // namespace detail

/// True when `S` (cv/ref-qualified or not) has every required member of the key-value store
/// contract described in dlq/kv/storage.hpp.
template <class S>
inline constexpr bool is_store_v = [] {
  using T = std::remove_cv_t<std::remove_reference_t<S>>;
  return detail::has_save<T>::value && detail::has_load<T>::value && detail::has_list<T>::value &&
         detail::has_remove<T>::value;
}();

/// Detection trait for the key-value store contract; see is_store_v.
template <class S>
struct is_store : std::bool_constant<is_store_v<S>> {};

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// C++20 concept for the key-value store contract (a thin wrapper over dlq::kv::is_store_v).
template <class S>
concept store = is_store_v<S>;
#endif

namespace detail {
/// Instantiated by KeyValueStorage: one static_assert per required member, so a compiler
/// error names exactly what a key-value store is missing.
template <class S>
struct check_store {
  static_assert(has_save<S>::value,
                "dlq: key-value store is missing `void save(const std::vector<dlq::kv::Write>&)` "
                "(see dlq/kv/storage.hpp)");
  static_assert(has_load<S>::value,
                "dlq: key-value store is missing `std::optional<dlq::kv::Item> "
                "load(std::string_view collection, std::string_view id)` "
                "(see dlq/kv/storage.hpp)");
  static_assert(has_list<S>::value,
                "dlq: key-value store is missing `std::vector<dlq::kv::Item> "
                "list(std::string_view collection, const dlq::kv::Window&)` "
                "(see dlq/kv/storage.hpp)");
  static_assert(has_remove<S>::value,
                "dlq: key-value store is missing `std::size_t remove(const "
                "std::vector<dlq::kv::Removal>&)` (see dlq/kv/storage.hpp)");
  static constexpr bool value = true;
};

}  // namespace detail

}  // namespace kv

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

// The optional members for exactly-once replay (see "remove_and_save" at the top).
namespace ops {
template <class S>
using remove_and_save = decltype(std::declval<S&>().remove_and_save(
    std::declval<const std::vector<Removal>&>(), std::declval<const std::vector<Write>&>()));
template <class S>
using shares_data_with =
    decltype(std::declval<const S&>().shares_data_with(std::declval<const S&>()));
}  // namespace ops

template <class S>
using has_remove_and_save = meta::is_detected_convertible<bool, ops::remove_and_save, S>;
template <class S>
using has_shares_data_with = meta::is_detected_convertible<bool, ops::shares_data_with, S>;

/// What a sink that writes into a key-value store hands the adapter: the writes of one push.
using writes_callback = ::dlq::detail::function_ref<void(const std::vector<Write>&)>;

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

/// Storage adapter (see dlq/storage.hpp) over a key-value store `Kv` (see the contract at the
/// top of this file), replaying into a sink `Sink`.
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
///   SqliteStore and RedisStore all do); see "Policies" at the top of this file for the
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
    std::string c;
    c.reserve(prefix_.size() + queue.size() + 11);
    c += prefix_;
    c += '{';
    c += queue;
    c += kind == ListKind::dead ? "}:dead" : "}:corrupt";
    return c;
  }

  /// What push returns: the dead list's new length (std::size_t) when the store has
  /// save_and_count, else nothing (void), so that the front end reads the length itself.
  using push_result =
      std::conditional_t<kv::detail::has_save_and_count<Kv>::value, std::size_t, void>;

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
  /// before is first entered in the queue registry (one more store call, once per queue).
  /// @returns false, having stored nothing, when the list is full.
  /// @throws dlq::invalid_argument if the queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_save_if_below<K>::value, int> = 0>
  bool push_bounded(const Record& record, std::size_t max_length) {
    check_queue(record.queue, "push_bounded");
    register_queue(record.queue);
    const std::string coll = collection(record.queue, ListKind::dead);
    std::string derived;
    return store_.save_if_below(kv::Write{coll, record_key(record, derived), record.envelope},
                                max_length);
  }

  /// Stores `records` (all of one queue; keyed as push does) only if the queue's dead list
  /// then holds at most `max_length` records, atomically in the store (kv store member
  /// save_if_fits): all of them or none. Replacing the record of a job already in the list is
  /// not growth. Declared only when the store has save_if_fits. A queue this adapter has not
  /// written to before is first entered in the queue registry (one more store call, once).
  /// @returns false, having stored nothing, when they do not fit.
  /// @throws dlq::invalid_argument if a record's queue name is empty; what the store throws.
  template <class K = Kv, std::enable_if_t<kv::detail::has_save_if_fits<K>::value, int> = 0>
  bool push_bounded(const std::vector<Record>& records, std::size_t max_length) {
    if (records.empty()) return true;
    const std::string_view queue = records.front().queue;
    check_queue(queue, "push_bounded");
    register_queue(queue);
    const std::string coll = collection(queue, ListKind::dead);
    std::vector<std::string> derived(records.size());
    std::vector<kv::Write> writes;
    writes.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i)
      writes.push_back(kv::Write{coll, record_key(records[i], derived[i]), records[i].envelope});
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
    check_queue(queue, "bump_count");
    return store_.increment(collection(queue, ListKind::dead), key, ttl);
  }

  /// Number of records in `queue`'s list `kind`.
  std::size_t size(std::string_view queue, ListKind kind) { return count(collection(queue, kind)); }

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
    std::unique_lock<std::mutex> lock(shared_->flight_mutex);
    for (;;) {
      const removal r = remove_locked(coll, id, raw);
      if (r != removal::held) return r == removal::removed;
      if (shared_->replaying == std::this_thread::get_id()) return false;
      shared_->flight_done.wait(lock);
    }
  }

  /// Removes every record of `queue`'s list `kind`. @returns exactly how many were removed.
  /// Records that a replay step of this adapter (or a copy) is pushing right now are not
  /// counted as removed under it: purge waits until the step is done (called from inside the
  /// sink, it leaves those records to the step instead).
  std::size_t purge(std::string_view queue, ListKind kind) {
    const std::string coll = collection(queue, kind);
    std::unique_lock<std::mutex> lock(shared_->flight_mutex);
    for (;;) {
      // Under the flight lock: no step can start pushing records of `coll` meanwhile.
      if (!holds_any_locked(coll)) return remove_all(coll, false);
      if (shared_->replaying == std::this_thread::get_id()) return remove_all(coll, true);
      shared_->flight_done.wait(lock);
    }
  }

  /// The queues that have dead or corrupt records, sorted by name.
  std::vector<std::string> queues() {
    kv::Window all;
    std::vector<kv::Item> registered = store_.list(registry_collection(), all);
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

    std::string corrupt;
    std::vector<std::string> destinations;  // distinct destination names, usually one
    // (destination index, payload): a view into the item when the payload is a part of it
    // (the usual case: the front end cuts the payload out of the envelope), else into `owned`.
    std::vector<std::pair<std::size_t, std::string_view>> payloads;
    std::deque<std::string> owned;  // stable addresses
    std::vector<kv::Removal> removals;
    payloads.reserve(items.size());
    removals.reserve(items.size());
    for (const kv::Item& item : items) {
      Decision decision;
      decide(item.value, decision);
      if (decision.action == Action::replay) {
        if (decision.destination.empty())
          throw invalid_argument(detail::message("kv", "replay_step", "empty destination queue",
                                                 "the decider must name a destination"));
        std::size_t d = 0;
        while (d < destinations.size() && destinations[d] != decision.destination)
          ++d;
        if (d == destinations.size()) destinations.emplace_back(decision.destination);
        const char* begin = item.value.data();
        const char* p = decision.payload.data();
        if (p != nullptr && std::less_equal<const char*>()(begin, p) &&
            std::less_equal<const char*>()(p + decision.payload.size(),
                                           begin + item.value.size())) {
          payloads.emplace_back(d, decision.payload);
        } else {
          owned.emplace_back(decision.payload);
          payloads.emplace_back(d, owned.back());
        }
        removals.push_back(kv::Removal{dead, item.id, item.version, {}});
      } else if (decision.action == Action::set_aside) {
        if (corrupt.empty()) corrupt = collection(queue, ListKind::corrupt);
        removals.push_back(kv::Removal{dead, item.id, item.version, {}});
        removals.back().move_to = corrupt;  // `corrupt` is set once: the view stays valid
      } else if (decision.action == Action::discard) {
        removals.push_back(kv::Removal{dead, item.id, item.version, {}});
      }
    }
    if (joint_) {
      if (!joint_step(payloads, destinations, removals)) return StepResult{0, true};
      cursor.after = items.back().version;
      return StepResult{items.size(), false};
    }
    // The records this step will remove are held from here until it returns: remove(id) and
    // purge wait for it instead of deleting a record whose payload is being pushed.
    const flight held(*shared_, dead, removals);
    if (!removals.empty()) {
      // 1. Still there, unchanged? One read of the same window (removals only shrink it,
      //    new and replaced records land after it, so every surviving record is in it).
      const std::vector<std::uint64_t> now = versions(dead, window);
      std::size_t j = 0;
      for (const kv::Removal& r : removals) {
        while (j < now.size() && now[j] < r.version)
          ++j;
        if (j == now.size() || now[j] != r.version) return StepResult{0, true};
      }
    }
    if (!payloads.empty()) {  // 2. push
      std::vector<kv::Message> messages;
      messages.reserve(payloads.size());
      for (const auto& p : payloads)
        messages.push_back(kv::Message{destinations[p.first], p.second});
      kv::detail::deliver(sink_, messages);
    }
    if (!removals.empty()) {  // 3. remove (compare-and-delete)
      const std::size_t applied = store_.remove(removals);
      if (applied < removals.size())
        shared_->superseded.fetch_add(removals.size() - applied, std::memory_order_relaxed);
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
    const std::string coll = audit_collection(queue);
    static detail::id_generator ids;
    const std::string id = ids.next(at);
    const std::string value = std::to_string(detail::audit_ms(at)) + " " + std::string(record);
    store_.save({kv::Write{coll, id, value}});
    const std::int64_t before = detail::audit_ms(audit_retention_.expire_before(at));
    if (before > 0) {  // age: oldest first, up to the first younger record
      kv::Window window;
      window.limit = 1;
      for (std::size_t budget = 1000; budget > 0;) {
        const std::vector<kv::Item> items = store_.list(coll, window);
        std::vector<kv::Removal> old;
        bool young = false;
        for (const kv::Item& item : items) {
          if (audit_record_ms(item.value) >= before) {
            young = true;
            break;
          }
          old.push_back(kv::Removal{coll, item.id, item.version, {}});
        }
        if (!old.empty()) store_.remove(old);
        budget -= std::min(budget, old.size());
        if (young || items.size() < window.limit) break;
        window.after = items.back().version;
        window.limit = std::min<std::size_t>(100, budget);
      }
    }
    if (audit_retention_.max_records == 0 ||
        shared_->audit_appends.fetch_add(1, std::memory_order_relaxed) % 64 != 0)
      return 0;
    std::size_t excess = audit_retention_.excess(count(coll));
    std::size_t dropped = 0;
    kv::Window oldest;
    while (excess > 0) {  // the cap: the oldest, in pages
      oldest.limit = std::min<std::size_t>(excess, page_size);
      const std::vector<kv::Item> items = store_.list(coll, oldest);
      if (items.empty()) break;
      std::vector<kv::Removal> removals;
      for (const kv::Item& item : items) {
        removals.push_back(kv::Removal{coll, item.id, item.version, {}});
        if (audit_record_ms(item.value) >= before) ++dropped;
      }
      store_.remove(removals);
      excess -= std::min(excess, items.size());
      oldest.after = items.back().version;
    }
    return dropped;
  }

  /// The queue's audit records made at or after `since`, oldest first, at most `limit`.
  std::vector<std::string> audit_read(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) {
    const std::string coll = audit_collection(queue);
    const std::int64_t since_ms = detail::audit_ms(since);
    std::vector<std::string> out;
    kv::Window window;
    window.limit = page_size;
    while (out.size() < limit) {
      const std::vector<kv::Item> page = store_.list(coll, window);
      for (const kv::Item& item : page) {
        const auto space = item.value.find(' ');
        if (space == std::string::npos) continue;
        if (audit_record_ms(item.value) < since_ms) continue;
        out.push_back(item.value.substr(space + 1));
        if (out.size() >= limit) break;
      }
      if (page.size() < window.limit) break;
      window.after = page.back().version;
    }
    return out;
  }

 private:
  static constexpr std::size_t page_size = 1000;

  // The time of a stored audit record ("<ms> <json>"); 0 when it has none.
  static std::int64_t audit_record_ms(const std::string& value) {
    return std::strtoll(value.c_str(), nullptr, 10);
  }

  struct shared {
    std::mutex mutex;  // guards registered
    std::set<std::string, std::less<>> registered;
    std::mutex replay_mutex;  // one replay step at a time: no duplicate pushes within a process
    std::atomic<std::size_t> superseded{0};
    std::atomic<std::size_t> audit_appends{0};
    // The records the running replay step is pushing and removing (flight_key), and its
    // thread: remove and purge wait for the step rather than delete such a record.
    std::mutex flight_mutex;  // guards in_flight and replaying; held by remove and purge
    std::condition_variable flight_done;  // notified when a step lets its records go
    std::set<std::string, std::less<>> in_flight;
    std::thread::id replaying;
  };

  /// Steps 1-3 of replay_step in one store transaction (the sink writes into this store).
  /// False when a record changed since it was read: nothing was written.
  bool joint_step(const std::vector<std::pair<std::size_t, std::string_view>>& payloads,
                  const std::vector<std::string>& destinations,
                  const std::vector<kv::Removal>& removals) {
    if constexpr (kv::detail::joint_capable_v<Kv, Sink>) {
      if (removals.empty()) return true;
      std::vector<kv::Message> messages;
      messages.reserve(payloads.size());
      for (const auto& p : payloads)
        messages.push_back(kv::Message{destinations[p.first], p.second});
      if (messages.empty()) return store_.remove_and_save(removals, {});
      std::optional<bool> applied;
      auto apply = [&](const std::vector<kv::Write>& writes) {
        applied = store_.remove_and_save(removals, writes);
      };
      kv::detail::sink_target_t<Sink>& target = sink_;
      target.writes_for(messages, apply);
      if (!applied)
        throw invalid_argument(detail::message(
            "kv", "replay_step", "the sink's writes_for did not hand over its writes",
            "writes_for must call its callback once with the writes of the messages"));
      return *applied;
    } else {
      (void)payloads;
      (void)destinations;
      (void)removals;
      return false;  // never called: joint_ is false
    }
  }

  static std::string flight_key(std::string_view coll, std::string_view id) {
    std::string k;
    k.reserve(coll.size() + 1 + id.size());
    k.append(coll).push_back('\0');
    k.append(id);
    return k;
  }

  /// Holds a replay step's records (see shared::in_flight) for the step's lifetime.
  class flight {
   public:
    flight(shared& sh, const std::string& coll, const std::vector<kv::Removal>& removals)
        : sh_(sh) {
      if (removals.empty()) return;
      std::lock_guard<std::mutex> lock(sh_.flight_mutex);
      for (const kv::Removal& r : removals)
        sh_.in_flight.insert(flight_key(coll, r.id));
      sh_.replaying = std::this_thread::get_id();
      active_ = true;
    }
    flight(const flight&) = delete;
    flight& operator=(const flight&) = delete;
    ~flight() {
      if (!active_) return;
      {
        std::lock_guard<std::mutex> lock(sh_.flight_mutex);
        sh_.in_flight.clear();  // one step at a time (replay_mutex): all of them are ours
        sh_.replaying = std::thread::id();
      }
      sh_.flight_done.notify_all();
    }

   private:
    shared& sh_;
    bool active_ = false;
  };

  bool held_locked(std::string_view coll, std::string_view id) const {
    return !shared_->in_flight.empty() &&
           shared_->in_flight.find(flight_key(coll, id)) != shared_->in_flight.end();
  }

  bool holds_any_locked(std::string_view coll) const {
    const std::string prefix = flight_key(coll, {});
    auto it = shared_->in_flight.lower_bound(prefix);
    return it != shared_->in_flight.end() && it->compare(0, prefix.size(), prefix) == 0;
  }

  enum class removal { removed, not_removed, held };

  /// remove's work, under the flight lock: `held` when the record to remove is in flight.
  removal remove_locked(const std::string& coll, std::string_view id, std::string_view raw) {
    if (!id.empty()) {
      if (std::optional<kv::Item> item = store_.load(coll, id)) {
        if (!raw.empty() && item->value != raw)
          return removal::not_removed;  // the record under this id holds other bytes: replaced
        if (held_locked(coll, id)) return removal::held;
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
        if (held_locked(coll, item.id)) return removal::held;
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
        if (!skip_held || !held_locked(coll, item.id))
          removals.push_back(kv::Removal{coll, item.id, item.version, {}});
      if (!removals.empty()) removed += store_.remove(removals);
      window.after = page.back().version;
    }
  }

  std::string registry_collection() const { return prefix_ + "queues"; }

  static void check_queue(std::string_view queue, const char* where) {
    if (queue.empty())
      throw invalid_argument(detail::message("kv", where, "a record has an empty queue name",
                                             "give every entry its source queue's name"));
  }

  /// The key a record is stored under: its id, else its job id, else an id derived from its
  /// bytes (kept in `derived`, which must outlive the returned view).
  static std::string_view record_key(const Record& r, std::string& derived) {
    if (!r.id.empty()) return r.id;
    if (!r.job_id.empty()) return r.job_id;
    derived = detail::derived_id(r.envelope);
    return derived;
  }

  /// Saves `records` (and registry entries for queues this adapter has not seen yet, first)
  /// with one call `save(writes)`; the record writes come last, in order. Returns what
  /// `save` returns.
  template <class Save>
  auto write_records(const std::vector<Record>& records, Save&& save) {
    std::vector<std::string> collections;
    collections.reserve(records.size());
    std::vector<std::string> derived(records.size());  // ids of records that came without one
    std::vector<std::string_view> new_queues;
    for (const Record& r : records) {
      check_queue(r.queue, "push");
      if (collections.empty() || r.queue != records[collections.size() - 1].queue)
        collections.push_back(collection(r.queue, ListKind::dead));
      else
        collections.push_back(collections.back());
      if (!known_queue(r.queue) &&
          std::find(new_queues.begin(), new_queues.end(), r.queue) == new_queues.end())
        new_queues.push_back(r.queue);
    }
    std::vector<kv::Write> writes;
    writes.reserve(records.size() + new_queues.size());
    const std::string registry = registry_collection();
    for (std::string_view q : new_queues)
      writes.push_back(kv::Write{registry, q, {}});
    for (std::size_t i = 0; i < records.size(); ++i)
      writes.push_back(
          kv::Write{collections[i], record_key(records[i], derived[i]), records[i].envelope});
    auto result = save(writes);
    if (!new_queues.empty()) {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      for (std::string_view q : new_queues)
        shared_->registered.emplace(q);
    }
    return result;
  }

  // Enters `queue` in the queue registry (one store call) unless this adapter knows it.
  void register_queue(std::string_view queue) {
    if (known_queue(queue)) return;
    const std::string registry = registry_collection();
    store_.save({kv::Write{registry, queue, {}}});
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->registered.emplace(queue);
  }

  bool known_queue(std::string_view queue) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->registered.find(queue) != shared_->registered.end();
  }

  std::vector<std::uint64_t> versions(const std::string& coll, const kv::Window& window) {
    if constexpr (kv::detail::has_versions<Kv>::value) {
      return store_.versions(coll, window);
    } else {
      std::vector<std::uint64_t> out;
      for (const kv::Item& item : store_.list(coll, window))
        out.push_back(item.version);
      return out;
    }
  }

  std::size_t count(const std::string& coll) {
    if constexpr (kv::detail::has_count<Kv>::value) {
      return store_.count(coll);
    } else {
      return store_.list(coll, kv::Window{}).size();
    }
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
