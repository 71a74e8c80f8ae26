// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/store.hpp
/// The key-value store contract: what a store must provide so that dlq::KeyValueStorage
/// (dlq/kv/storage.hpp) can keep dead letters in it — four required members (save, load,
/// list, remove) and optional ones that make counting, policies and replay cheaper or exact.
/// A key-value store owns only records and atomicity; the adapter owns everything else.
/// Writing one: docs/backends.md; the suite every store passes:
/// tests/contract/kv_store_suite.hpp.
///
/// The contract (checked by dlq::kv::is_store_v / the dlq::kv::store concept, and by
/// static_asserts that name the missing member when KeyValueStorage is instantiated).
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
///   - `take_oldest(from, to, max)`: atomically moves up to `max` of the oldest records of
///     `from` to `to` (new versions, same order), skipping records other calls are moving
///     at that moment, and returns the moved ones, oldest first. Backs JobQueue::take, so
///     that concurrent takers get disjoint jobs without retrying on each other's
///     (PostgresStore: `FOR UPDATE SKIP LOCKED`). Without it, take is a compare-and-move.
///   - `collections(prefix)`: the names of the collections starting with `prefix` that hold
///     records, sorted. Backs JobQueue::consumers (PostgresStore has it).
///
/// Every member must be safe to call from several threads at once. Ready-made stores:
/// dlq::kv::MemoryStore (dlq/kv/memory_store.hpp; unit tests), dlq::kv::SqliteStore
/// (dlq/sqlite/sqlite_store.hpp; durable, one file, target dlq::sqlite) and
/// dlq::kv::RedisStore (dlq/redis/kv_store.hpp; target dlq::redis).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/detail/function_ref.hpp"
#include "dlq/detail/meta/detected.hpp"

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
template <class S>
using collections = decltype(std::declval<S&>().collections(std::string_view{}));
template <class S>
using take_oldest = decltype(std::declval<S&>().take_oldest(std::string_view{},
                                                            std::string_view{}, std::size_t{}));
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
template <class S>
using has_collections =
    meta::is_detected_convertible<std::vector<std::string>, ops::collections, S>;
template <class S>
using has_take_oldest = meta::is_detected_convertible<std::vector<Item>, ops::take_oldest, S>;

/// The lifetime increment() gives a counter: `ttl` clamped to [1 s, 100 years], so that a
/// store can add it to a clock in milliseconds or nanoseconds without overflow.
inline std::chrono::seconds counter_ttl(std::chrono::seconds ttl) noexcept {
  constexpr std::chrono::seconds longest(std::int64_t{100} * 365 * 24 * 3600);
  return std::clamp(ttl, std::chrono::seconds(1), longest);
}

}  // namespace detail

/// True when `S` (cv/ref-qualified or not) has every required member of the key-value store
/// contract described in dlq/kv/store.hpp.
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
                "(see dlq/kv/store.hpp)");
  static_assert(has_load<S>::value,
                "dlq: key-value store is missing `std::optional<dlq::kv::Item> "
                "load(std::string_view collection, std::string_view id)` "
                "(see dlq/kv/store.hpp)");
  static_assert(has_list<S>::value,
                "dlq: key-value store is missing `std::vector<dlq::kv::Item> "
                "list(std::string_view collection, const dlq::kv::Window&)` "
                "(see dlq/kv/store.hpp)");
  static_assert(has_remove<S>::value,
                "dlq: key-value store is missing `std::size_t remove(const "
                "std::vector<dlq::kv::Removal>&)` (see dlq/kv/store.hpp)");
  static constexpr bool value = true;
};

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

/// The number of records in `collection`: one call `count` when the store has it, else one
/// list of the whole collection.
template <class Kv>
std::size_t count_records(Kv& store, std::string_view collection) {
  if constexpr (has_count<Kv>::value) {
    return store.count(collection);
  } else {
    return store.list(collection, Window{}).size();
  }
}

/// The versions of the records in `window` of `collection`, oldest first: one call
/// `versions` when the store has it, else `list`.
template <class Kv>
std::vector<std::uint64_t> list_versions(Kv& store, std::string_view collection,
                                         const Window& window) {
  if constexpr (has_versions<Kv>::value) {
    return store.versions(collection, window);
  } else {
    std::vector<std::uint64_t> out;
    for (const Item& item : store.list(collection, window))
      out.push_back(item.version);
    return out;
  }
}

/// What a sink that writes into a key-value store hands the adapter: the writes of one push
/// (see "remove_and_save" at the top, and dlq::kv::JobQueue::writes_for).
using writes_callback = ::dlq::detail::function_ref<void(const std::vector<Write>&)>;

}  // namespace detail
}  // namespace kv
}  // namespace dlq
