// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file storage.hpp
/// The storage contract: what a backend must provide so that dlq::DeadLetterQueue can run on
/// it. The front end owns everything that is the same on every backend (envelopes, ids,
/// validation, filters, policies, reports); a storage owns only bytes and atomicity.
///
/// A storage `S` keeps, per queue name, two ordered lists of opaque byte strings — the
/// dead-letter list (ListKind::dead) and the list of corrupt items set aside by replay
/// (ListKind::corrupt) — and the source queues that replay pushes payloads to. Every member
/// must be safe to call from several threads at once.
///
/// Required members (checked by dlq::is_storage and, under C++20, the dlq::storage concept):
///
///     void push(const dlq::Record& record);                 // append to the dead list
///     void push_many(const std::vector<dlq::Record>& records);
///     std::size_t size(std::string_view queue, dlq::ListKind kind);
///     std::vector<std::string> range(std::string_view queue, dlq::ListKind kind,
///                                    std::size_t start, std::size_t count);
///     bool remove(std::string_view queue, dlq::ListKind kind, std::string_view id,
///                 std::string_view raw);                    // first item equal to raw
///     std::size_t purge(std::string_view queue, dlq::ListKind kind);  // exact count removed
///     std::vector<std::string> queues();                    // queues with dead or corrupt items
///     std::vector<std::size_t> sizes(const std::vector<std::string>& queues);  // dead lists
///     using replay_cursor = …;                              // default-constructible
///     dlq::StepResult replay_step(std::string_view queue, replay_cursor& cursor,
///                                 std::size_t max_items, dlq::Decider decide);
///
/// Optional members, used when present:
///
///     std::size_t push(const dlq::Record&);                 // push may return the dead
///                                                           // list's new length (saves a
///                                                           // size() call for retention)
///     bool push_bounded(const dlq::Record&, std::size_t max_length);
///                                                           // push only while the list has
///                                                           // fewer than max_length items,
///                                                           // atomically; false = full
///     bool push_bounded(const std::vector<dlq::Record>& records, std::size_t max_length);
///                                                           // records of one queue: push all
///                                                           // of them only if the list then
///                                                           // holds at most max_length items,
///                                                           // atomically; false = none pushed
///     std::vector<std::string> push_capped(const std::vector<dlq::Record>& records,
///                                          std::size_t max_length);
///                                                           // records of one queue: push them
///                                                           // and, atomically with the push,
///                                                           // remove the oldest items beyond
///                                                           // max_length; returns the removed
///                                                           // items, oldest first
///     std::int64_t bump_count(std::string_view queue, std::string_view key,
///                             std::chrono::seconds ttl);    // +1 to a counter that expires
///                                                           // ttl after its last bump; returns
///                                                           // the new value (poison guard)
///     std::size_t recover(std::string_view queue);          // finish interrupted replays
///     std::size_t replay_snapshot(std::string_view queue, replay_cursor& cursor);
///                                                           // bounds the walk with `cursor`
///                                                           // to the items present now (see
///                                                           // "Snapshot" below); returns the
///                                                           // dead list's length now
///     std::optional<std::string> find(std::string_view queue, dlq::ListKind kind,
///                                     std::string_view id); // fast lookup by entry id
///     static constexpr bool keyed_by_job_id = true;         // a job id is the entry id and
///                                                           // re-sending a job replaces it
///     dlq::FastStep replay_fast(std::string_view queue, replay_cursor& cursor,
///                               std::size_t max_items, std::string_view destination,
///                               bool want_ids);     // unfiltered replay of the entries whose
///                                                   // bytes prove their payload span (see
///                                                   // FastStep); nothing of the others
///     dlq::BoundedRange range_bytes(std::string_view queue, dlq::ListKind kind,
///                                   std::size_t start, std::size_t count,
///                                   std::size_t min_count, std::size_t max_bytes);
///                                                           // range bounded by bytes before
///                                                           // the items leave the store (see
///                                                           // BoundedRange); the console's
///                                                           // scans and the lookups by id use
///                                                           // it, else they size reads by the
///                                                           // largest item read so far
///     std::vector<dlq::QueueEnds> stats(const std::vector<std::string>& queues);
///                                                           // per queue, in order: length,
///                                                           // first and last item of both
///                                                           // lists, each queue read at one
///                                                           // instant, at a cost independent
///                                                           // of the lists' lengths (see
///                                                           // dlq/stats.hpp; fallback: size
///                                                           // and range)
///
/// replay_step is the one operation with a protocol. It reads up to `max_items` items of the
/// dead list at the cursor, calls `decide` once per item in list order, then applies all the
/// decisions atomically: every item marked Action::replay is removed and its payload pushed
/// to the destination queue, every item marked Action::set_aside is moved to the corrupt
/// list, every Action::discard item is deleted, every Action::keep item stays where it is. If the
/// list changed between the read and the apply so that the decided items are no longer where they
/// were, nothing is applied and the result says `conflict`; the caller then calls again and the
/// items are decided anew. "Where they were" may be checked by comparing whole items or, where
/// the decider gave one, by Decision::identity (the entry's stored id; see Decision). A step that
/// finds no item at the cursor returns examined == 0. Where the backend cannot apply atomically
/// across stores (a key-value store replaying into an external queue) it pushes first and removes
/// second — at-least-once, never lost — and documents it.
///
/// Snapshot. replay_snapshot(queue, cursor), called once before the cursor's first step,
/// fixes the set of items the walk with that cursor may examine: the items the dead list holds
/// at that instant. From then on replay_step and replay_fast with the cursor examine (decide,
/// count, move) only items of that set, whatever other clients remove or add meanwhile — an
/// item added later is never passed to the decider, and a step that finds no item of the set
/// left at the cursor returns examined == 0 — and they reach every item of the set that is
/// still there. It must be exact, not an estimate: a bound by position that other removals
/// shift, or by time (other senders' clocks differ), is not. The front end's replay and
/// discard rely on it ("entries present when the run started"). dlq::MemoryStorage numbers its
/// items, dlq::KeyValueStorage uses the store's record versions, dlq::RedisListStorage keeps a
/// bound per run on the server that every dlq operation removing items adjusts (see its file
/// comment). A storage without the member gets the front end's fallback: at most as many
/// items as the list held at the start — exact only while nothing else removes items.
#pragma once

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

/// Which of a queue's two stored lists an operation addresses.
enum class ListKind : unsigned char {
  dead,    ///< the dead-letter list: entries waiting for inspection and replay
  corrupt  ///< items replay could not read, set aside for inspection
};

/// One envelope to store. The views must stay valid for the duration of the call.
struct Record {
  std::string_view queue;     ///< source queue name (never empty)
  std::string_view id;        ///< the entry id written in the envelope
  std::string_view job_id;    ///< caller-supplied job id, empty when none
  std::string_view envelope;  ///< the complete JSON envelope bytes
};

/// The length and the two end items of one stored list (the optional storage member `stats`).
struct ListEnds {
  std::size_t length = 0;  ///< items in the list
  std::string first;       ///< the oldest item (position 0) as stored; "" when length == 0
  std::string last;        ///< the newest item (position length - 1); "" when length == 0
};

/// Both lists of one queue, as the optional storage member `stats` returns them: read at one
/// instant, so that `length` and the end items agree.
struct QueueEnds {
  ListEnds dead;     ///< the dead-letter list
  ListEnds corrupt;  ///< the corrupt list
};

/// What the optional storage member `range_bytes(queue, kind, start, count, min_count,
/// max_bytes)` read, at one instant as `range`: items [start, start + k) where k is the most
/// items, at most `count`, such that either k <= min_count or their bytes add up to at most
/// `max_bytes` — the first `min_count` items (at least 1) whatever their size, then items
/// while the total stays within `max_bytes`. Fewer than `count` items and `capped` false:
/// the list ends after them. dlq::MemoryStorage and dlq::RedisListStorage (a script: the
/// items beyond the budget stay on the server) have it.
struct BoundedRange {
  std::vector<std::string> items;  ///< the items, oldest first
  /// True when the read stopped at max_bytes with more items in the list after the last
  /// one (a short read that is not the end of the list).
  bool capped = false;
};

/// What replay does with one stored item.
enum class Action : unsigned char {
  keep,       ///< leave it in the dead-letter list, in place
  replay,     ///< remove it and push `payload` to `destination`
  set_aside,  ///< move it, unchanged, to the queue's corrupt list
  discard     ///< remove it (retention evicting it; the front end reports every one)
};

/// A decision about one item, filled in by the front end during replay_step.
/// `destination` and `payload` stay valid until the decider is called again or the step
/// returns; a storage copies what it needs before that.
struct Decision {
  Action action = Action::keep;
  std::string_view destination;  ///< queue name to push the payload to (Action::replay)
  std::string_view payload;      ///< exact payload bytes to push (Action::replay)
  /// Optional: a part of the raw item (a view into the bytes passed to the decider) that no
  /// other item of the list contains at the same offset in an item of the same length — the
  /// entry's id as stored. Empty (the default) = the storage compares the whole item.
  ///
  /// A storage that must re-check, when it applies a decision, that the item at the decided
  /// position is still the decided one (dlq::RedisListStorage, whose server-side check costs
  /// time per byte compared) may compare only the item's length and these bytes at their
  /// offset. Why that suffices: every entry dlq writes carries a UUIDv7 id with 62 random
  /// bits, so a shifted window puts an item with another id — or another length — at the
  /// position, and the check fails as the full comparison would. Byte-identical twins pass
  /// either check and are interchangeable. Only an item crafted to carry another entry's id
  /// at the same offset with the same length passes where the full comparison would not;
  /// then that item is removed and its own bytes at the decided payload span are pushed —
  /// another entry is never lost, and the payload pushed is always bytes of the item that
  /// was removed. This holds as long as no two different items of a list carry the same
  /// id, so the front end sets identity only to a stored id in canonical UUID form (what it
  /// writes; random, so never shared by chance) — not for seed-written entries (no id) nor
  /// for a job id that a storage keyed by job id uses as the entry id (re-sending the job
  /// rewrites the entry under the same id). Storages may ignore it
  /// (dlq::MemoryStorage compares whole items: cheap in memory). A view that is not inside
  /// the raw item is ignored.
  std::string_view identity;
};

/// The decider a storage calls once per item: (raw item bytes, decision to fill in).
using Decider = detail::function_ref<void(std::string_view, Decision&)>;

/// What one replay_step did.
struct StepResult {
  std::size_t examined = 0;  ///< items read and decided; 0 (without conflict) = nothing left
  bool conflict = false;     ///< the list changed under the step; nothing was applied
};

/// What one replay_fast did (the optional storage member behind the fast path of an
/// unfiltered replay). The storage moves, atomically and oldest first, the items at the
/// cursor whose bytes prove, without parsing, the span of their payload and that they are
/// neither parked nor corrupt (dlq::RedisListStorage: the layout dlq writes, see
/// dlq/redis/scripts/replay_fast.hpp) — exactly the items the compare-and-move step would
/// replay, with the same payload bytes and ids — and stops at the first item it cannot
/// prove; the caller hands that one to replay_step, which decides it as always. A storage may
/// split one fast step into several atomic moves (RedisListStorage pipelines up to four
/// scripts): the front end reports each as a batch.
struct FastStep {
  std::size_t moved = 0;         ///< items moved to the destination (their payloads pushed)
  std::size_t unprovable = 0;    ///< items right after them that it could not prove (0 = it
                                 ///< stopped at a limit, or the list ended)
  bool declined = false;         ///< the cursor is not where a fast step can run (items were
                                 ///< kept before it); nothing was read or moved
  std::vector<std::string> ids;  ///< ids of the moved items, in order, when asked for
  /// How many items each atomic move took, in order (they add up to `moved`); empty = one
  /// move of `moved` items.
  std::vector<std::size_t> batches;
};

namespace detail {

// Each member of the contract as one expression over `S`; meta::is_detected says whether
// it is well-formed (and is_detected_convertible whether its type is the one required).
namespace ops {
template <class S>
using push = decltype(std::declval<S&>().push(std::declval<const Record&>()));
template <class S>
using push_many =
    decltype(std::declval<S&>().push_many(std::declval<const std::vector<Record>&>()));
template <class S>
using size = decltype(std::declval<S&>().size(std::string_view{}, ListKind::dead));
template <class S>
using range = decltype(std::declval<S&>().range(std::string_view{}, ListKind::dead, std::size_t{},
                                                std::size_t{}));
template <class S>
using remove = decltype(std::declval<S&>().remove(std::string_view{}, ListKind::dead,
                                                  std::string_view{}, std::string_view{}));
template <class S>
using purge = decltype(std::declval<S&>().purge(std::string_view{}, ListKind::dead));
template <class S>
using queues = decltype(std::declval<S&>().queues());
template <class S>
using sizes = decltype(std::declval<S&>().sizes(std::declval<const std::vector<std::string>&>()));
template <class S>
using replay_cursor = std::enable_if_t<std::is_default_constructible_v<typename S::replay_cursor>>;

struct decider_archetype {
  void operator()(std::string_view, Decision&) const {}
};
template <class S>
using replay_step = decltype(std::declval<S&>().replay_step(
    std::string_view{}, std::declval<typename S::replay_cursor&>(), std::size_t{},
    Decider(std::declval<decider_archetype&>())));
template <class S>
using recover = decltype(std::declval<S&>().recover(std::string_view{}));
template <class S>
using find =
    decltype(std::declval<S&>().find(std::string_view{}, ListKind::dead, std::string_view{}));
template <class S>
using push_bounded =
    decltype(std::declval<S&>().push_bounded(std::declval<const Record&>(), std::size_t{}));
template <class S>
using push_bounded_many = decltype(std::declval<S&>().push_bounded(
    std::declval<const std::vector<Record>&>(), std::size_t{}));
template <class S>
using push_capped = decltype(std::declval<S&>().push_capped(
    std::declval<const std::vector<Record>&>(), std::size_t{}));
template <class S>
using bump_count = decltype(std::declval<S&>().bump_count(std::string_view{}, std::string_view{},
                                                          std::chrono::seconds{}));
template <class S>
using keyed_by_job_id = std::enable_if_t<S::keyed_by_job_id>;
template <class S>
using range_bytes = decltype(std::declval<S&>().range_bytes(
    std::string_view{}, ListKind::dead, std::size_t{}, std::size_t{}, std::size_t{},
    std::size_t{}));
template <class S>
using stats = decltype(std::declval<S&>().stats(std::declval<const std::vector<std::string>&>()));
template <class S>
using replay_snapshot = decltype(std::declval<S&>().replay_snapshot(
    std::string_view{}, std::declval<typename S::replay_cursor&>()));
template <class S>
using replay_fast = decltype(std::declval<S&>().replay_fast(
    std::string_view{}, std::declval<typename S::replay_cursor&>(), std::size_t{},
    std::string_view{}, bool{}));
}  // namespace ops

template <class S>
using has_push = meta::is_detected<ops::push, S>;
template <class S>
using has_push_many = meta::is_detected<ops::push_many, S>;
template <class S>
using has_size = meta::is_detected_convertible<std::size_t, ops::size, S>;
template <class S>
using has_range = meta::is_detected_convertible<std::vector<std::string>, ops::range, S>;
template <class S>
using has_remove = meta::is_detected_convertible<bool, ops::remove, S>;
template <class S>
using has_purge = meta::is_detected_convertible<std::size_t, ops::purge, S>;
template <class S>
using has_queues = meta::is_detected_convertible<std::vector<std::string>, ops::queues, S>;
template <class S>
using has_sizes = meta::is_detected_convertible<std::vector<std::size_t>, ops::sizes, S>;
template <class S>
using has_replay_cursor = meta::is_detected<ops::replay_cursor, S>;
template <class S>
using has_replay_step = meta::is_detected_convertible<StepResult, ops::replay_step, S>;
template <class S>
using has_recover = meta::is_detected_convertible<std::size_t, ops::recover, S>;
template <class S>
using has_find = meta::is_detected_convertible<std::optional<std::string>, ops::find, S>;
/// push returns the dead list's new length.
template <class S>
using push_returns_size = meta::is_detected_convertible<std::size_t, ops::push, S>;
/// push reads that length at a cost (a constant `S::push_counts_list`, true: KeyValueStorage
/// on a store with save_and_count), so a push that needs no length calls push_many.
template <class S, class = void>
struct push_counts_list : std::false_type {};
template <class S>
struct push_counts_list<S, std::void_t<decltype(S::push_counts_list)>>
    : std::bool_constant<S::push_counts_list> {};
template <class S>
using has_push_bounded = meta::is_detected_convertible<bool, ops::push_bounded, S>;
template <class S>
using has_push_bounded_many = meta::is_detected_convertible<bool, ops::push_bounded_many, S>;
template <class S>
using has_push_capped =
    meta::is_detected_convertible<std::vector<std::string>, ops::push_capped, S>;
template <class S>
using has_bump_count = meta::is_detected_convertible<std::int64_t, ops::bump_count, S>;
template <class S>
using has_range_bytes = meta::is_detected_convertible<BoundedRange, ops::range_bytes, S>;
template <class S>
using has_stats = meta::is_detected_convertible<std::vector<QueueEnds>, ops::stats, S>;
template <class S>
using has_replay_fast = meta::is_detected_convertible<FastStep, ops::replay_fast, S>;
template <class S>
using has_replay_snapshot = meta::is_detected_convertible<std::size_t, ops::replay_snapshot, S>;
template <class S>
using keyed_by_job_id = meta::is_detected<ops::keyed_by_job_id, S>;

}  // namespace detail

/// True when `S` (cv/ref-qualified or not) has every required member of the storage contract.
template <class S>
inline constexpr bool is_storage_v = [] {
  using T = std::remove_cv_t<std::remove_reference_t<S>>;
  return detail::has_push<T>::value && detail::has_push_many<T>::value &&
         detail::has_size<T>::value && detail::has_range<T>::value &&
         detail::has_remove<T>::value && detail::has_purge<T>::value &&
         detail::has_queues<T>::value && detail::has_sizes<T>::value &&
         detail::has_replay_cursor<T>::value && detail::has_replay_step<T>::value;
}();

/// Detection trait for the storage contract; see is_storage_v.
template <class S>
struct is_storage : std::bool_constant<is_storage_v<S>> {};

#if defined(__cpp_concepts) && __cpp_concepts >= 201907L
/// C++20 concept for the storage contract (a thin wrapper over dlq::is_storage_v).
template <class S>
concept storage = is_storage_v<S>;
#endif

namespace detail {
/// Instantiated by DeadLetterQueue: one static_assert per required member, so a compiler
/// error names exactly what a storage is missing.
template <class S>
struct check_storage {
  static_assert(has_push<S>::value,
                "dlq: Storage is missing `void push(const dlq::Record&)` (see dlq/storage.hpp)");
  static_assert(has_push_many<S>::value,
                "dlq: Storage is missing `void push_many(const std::vector<dlq::Record>&)` "
                "(see dlq/storage.hpp)");
  static_assert(has_size<S>::value,
                "dlq: Storage is missing `std::size_t size(std::string_view queue, "
                "dlq::ListKind)` (see dlq/storage.hpp)");
  static_assert(has_range<S>::value,
                "dlq: Storage is missing `std::vector<std::string> range(std::string_view, "
                "dlq::ListKind, std::size_t start, std::size_t count)` (see dlq/storage.hpp)");
  static_assert(has_remove<S>::value,
                "dlq: Storage is missing `bool remove(std::string_view queue, dlq::ListKind, "
                "std::string_view id, std::string_view raw)` (see dlq/storage.hpp)");
  static_assert(has_purge<S>::value,
                "dlq: Storage is missing `std::size_t purge(std::string_view queue, "
                "dlq::ListKind)` (see dlq/storage.hpp)");
  static_assert(has_queues<S>::value,
                "dlq: Storage is missing `std::vector<std::string> queues()` "
                "(see dlq/storage.hpp)");
  static_assert(has_sizes<S>::value,
                "dlq: Storage is missing `std::vector<std::size_t> sizes(const "
                "std::vector<std::string>&)` (see dlq/storage.hpp)");
  static_assert(has_replay_cursor<S>::value,
                "dlq: Storage is missing a default-constructible `replay_cursor` member type "
                "(see dlq/storage.hpp)");
  static_assert(!has_replay_cursor<S>::value || has_replay_step<S>::value,
                "dlq: Storage is missing `dlq::StepResult replay_step(std::string_view queue, "
                "replay_cursor&, std::size_t max_items, dlq::Decider)` (see dlq/storage.hpp)");
  static constexpr bool value = true;
};
}  // namespace detail

}  // namespace dlq
