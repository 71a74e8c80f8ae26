// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file policies.hpp
/// Operational policies of a DeadLetterQueue, the same on every backend: retention with a
/// visible signal, the audit trail's retention (AuditRetention, held by the storages), the
/// poison-loop guard, events (hooks) and counters — and dlq::Options, the queue's settings
/// that gather them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>

namespace dlq {

/// What retention does with a new entry when its queue already holds max_length entries.
enum class Overflow : unsigned char {
  evict_oldest,  ///< store it and evict the oldest entries (each one reported as an event)
  reject         ///< refuse it with dlq::queue_full_error; nothing is written
};

/// How many dead letters a queue keeps, and for how long. Every eviction is counted and
/// reported through Options::on_event — never silent.
///
/// max_length is enforced when entries are sent. max_age is enforced by trim(), which also
/// re-applies max_length, and by a TrimTimer that calls it periodically, so old entries go
/// even when no new failure arrives. Trimming works from the oldest end in bounded batches
/// (one atomic step each), so it never blocks a Redis server for long.
struct Retention {
  /// Most entries kept per queue; 0 (the default) = unlimited.
  std::size_t max_length = 0;
  /// Entries dead-lettered longer ago than this are evicted by trim(); 0 (the default) =
  /// kept forever. Entries without a readable timestamp are kept.
  std::chrono::seconds max_age{0};
  /// What happens to a new entry when the queue is full. Default: evict the oldest.
  Overflow overflow = Overflow::evict_oldest;
};

/// How long an audit trail keeps its records, and the hard cap on their number (see
/// dlq/audit.hpp). Each shipped storage holds one and applies it on every append.
struct AuditRetention {
  /// Records are kept at least this long: each append removes the records made more than
  /// max_age before it (by the writers' clock). Default 90 days; 0 = no age limit.
  std::chrono::seconds max_age{std::chrono::hours(24 * 90)};
  /// Most records per queue — a bound on memory, not a retention policy: when the trail
  /// holds more than this plus 1 % (at least one), the oldest are removed down to it, at
  /// most 10 000 per append, and those younger than max_age are reported (see
  /// dlq/audit.hpp). Default 1 000 000; 0 = no cap.
  std::size_t max_records = 1000000;

  /// Most records the cap removes in one append (a trail far over a lowered cap comes down
  /// over several appends, so no append blocks a server for long).
  static constexpr std::size_t max_dropped_per_append = 10000;

  /// The time before which records are removed when a record made at `now` is appended:
  /// now - max_age; the epoch (nothing is removed) when max_age is 0 or longer than `now`
  /// since the epoch.
  std::chrono::system_clock::time_point expire_before(
      std::chrono::system_clock::time_point now) const noexcept {
    using clock = std::chrono::system_clock;
    if (max_age.count() <= 0 ||
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()) <= max_age)
      return clock::time_point{};
    return now - std::chrono::duration_cast<clock::duration>(max_age);
  }

  /// The trail length above which the cap removes records: max_records plus 1 % (at least
  /// one), so that the cap acts in chunks rather than on every append; 0 when there is no cap.
  std::size_t cap_trigger() const noexcept {
    if (max_records == 0) return 0;
    const std::size_t slack = max_records / 100 == 0 ? 1 : max_records / 100;
    constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
    return max_records > most - slack ? most : max_records + slack;
  }

  /// How many of the oldest records the cap removes when the trail holds `count` (after the
  /// records older than max_age were removed): 0 up to cap_trigger(), else down to
  /// max_records, at most max_dropped_per_append.
  std::size_t excess(std::size_t count) const noexcept {
    if (max_records == 0 || count <= cap_trigger()) return 0;
    const std::size_t over = count - max_records;
    return over < max_dropped_per_append ? over : max_dropped_per_append;
  }
};

/// The poison-loop guard: a job that keeps failing after replay is parked instead of cycling
/// forever. Each send counts how many times the same job has been dead-lettered (by
/// Failure::job_id, else by a fingerprint of the payload bytes) and stores the count on the
/// entry ("dead_letter_count"). Once the count passes park_after the entry is written
/// parked ("parked": true): it stays inspectable, replay-all skips it and reports it
/// (SkipReason::parked), and replaying it by id forces it through.
///
/// The counts live in the storage where it offers bump_count (Redis: one key per job that
/// expires; memory: a bounded map), else in a bounded map inside this process. Either way
/// they expire `remember_for` after the job's last dead-lettering. With the guard on, a send
/// makes one more storage call (the count) before the push.
struct PoisonGuard {
  /// Park entries of jobs dead-lettered more than this many times; 0 (the default) = off.
  std::int64_t park_after = 0;
  /// How long a job's count is remembered after its last dead-lettering. Default 7 days.
  std::chrono::seconds remember_for{std::chrono::hours(24 * 7)};
};

/// What happened, for Options::on_event.
enum class EventKind : unsigned char {
  dead_lettered,  ///< an entry was stored (detail: the error text)
  replayed,       ///< an entry was moved back (detail: the destination queue)
  evicted,        ///< retention removed an entry (detail: "max_length" or "max_age")
  parked,         ///< the poison guard parked a new entry (detail: its dead_letter_count)
  corrupt,        ///< replay met an unreadable entry (detail: what is wrong with it)
  discarded       ///< an operator deleted an entry with discard() (detail: "discard")
};

/// One event. The views are valid only during the callback.
struct Event {
  EventKind kind;
  std::string_view queue;   ///< the source queue
  std::string_view id;      ///< the entry id
  std::string_view detail;  ///< see EventKind
};

/// Severity of a message passed to Options::log.
enum class LogLevel : unsigned char { debug, info, warning, error };

/// A snapshot of a DeadLetterQueue's counters since it was created; cheap to take (relaxed
/// atomic loads), meant for a metrics scrape.
struct Counters {
  std::uint64_t sent = 0;                  ///< entries stored
  std::uint64_t rejected = 0;              ///< sends refused because the queue was full
  std::uint64_t replayed = 0;              ///< entries moved back
  std::uint64_t evicted = 0;               ///< entries removed by retention
  std::uint64_t evicted_for_length = 0;    ///< of those, beyond Retention::max_length
  std::uint64_t evicted_for_age = 0;       ///< of those, older than Retention::max_age
  std::uint64_t parked = 0;                ///< entries parked by the poison guard
  std::uint64_t corrupt = 0;               ///< unreadable entries met by replay
  std::uint64_t conflicts = 0;             ///< replay batches redone after a concurrent change
  std::uint64_t hook_errors = 0;           ///< exceptions thrown by on_event / log (swallowed)
  std::uint64_t timeout_errors = 0;        ///< storage timeouts
  std::uint64_t connection_errors = 0;     ///< storage connection failures
  std::uint64_t reply_errors = 0;          ///< commands the server refused
  std::uint64_t other_storage_errors = 0;  ///< other storage failures
  std::uint64_t discarded = 0;             ///< entries deleted by discard()
  std::uint64_t audited = 0;               ///< audit records written (dlq/audit.hpp)
  std::uint64_t audit_errors = 0;  ///< audit writes that failed (the operation stood; logged)
  /// Audit records younger than the trail's max age that its cap removed (dlq/audit.hpp,
  /// AuditRetention): the trail of that time is incomplete; logged, and marked in the trail.
  std::uint64_t audit_dropped = 0;
};

/// Which payloads send accepts (Options::payloads).
enum class Payloads : unsigned char {
  any,       ///< every payload: JSON embedded verbatim, anything else as base64 (the default)
  json_only  ///< only JSON payloads (whitespace around the value allowed); anything else is
             ///< refused with dlq::invalid_argument — for keys shared with the Python service,
             ///< which would replay a base64 payload as a string (see dlq/entry.hpp)
};

/// Settings of a DeadLetterQueue. Every default is usable as is.
struct Options {
  /// Source of the current time for dead_lettered_at, ids and age filters.
  /// Empty (the default) = std::chrono::system_clock::now. Tests set a fixed clock.
  std::function<std::chrono::system_clock::time_point()> clock;
  /// How the library waits (replay pacing, back-off after a conflict). Empty (the default) =
  /// std::this_thread::sleep_for. Tests pair a fake sleep with a fake clock.
  std::function<void(std::chrono::nanoseconds)> sleep;
  /// Worker name recorded when a Failure names none. Default "" (as the Python seed).
  std::string worker;
  /// Which payloads send accepts. Default Payloads::any (JSON verbatim, other bytes as
  /// base64); Payloads::json_only refuses a payload that is not JSON with
  /// dlq::invalid_argument before anything is stored.
  Payloads payloads = Payloads::any;
  /// Most entries one replay batch moves. Default 1000; 0 means the default.
  std::size_t replay_batch_items = 1000;
  /// Bytes one replay batch aims at: the batch shrinks for large entries so that no single
  /// atomic step (one Redis script) blocks the server for long. Default 1 MiB; 0 = default.
  std::size_t replay_batch_bytes = std::size_t{1} << 20;
  /// Consecutive batches that may find the list changed under them (another process
  /// removing entries at the same place) before replay gives up with conflict_error.
  /// Default 100; 0 means the default.
  std::size_t max_conflicts = 100;
  /// Retention of every queue not named in retention_for. Default: keep everything.
  Retention retention;
  /// Retention per queue name, overriding `retention`.
  std::map<std::string, Retention, std::less<>> retention_for;
  /// The poison-loop guard. Default: off.
  PoisonGuard poison_guard;
  /// Called for every entry dead-lettered, replayed, evicted, parked, or found corrupt (see
  /// EventKind). May be called from any thread that uses the queue. An exception it throws
  /// is counted (Counters::hook_errors) and logged, and never breaks the operation.
  std::function<void(const Event&)> on_event;
  /// Where the library's own messages go (evictions, rejections, swallowed hook errors,
  /// errors of the trim timer). Empty (the default) = nowhere: no logging library is imposed.
  std::function<void(LogLevel, std::string_view)> log;
  /// Who operates this queue, written in the audit trail (dlq/audit.hpp) when an operation
  /// names no actor of its own. Default "": such records say dlq::unknown_actor ("unknown")
  /// (dlqctl sets the OS user; `dlqctl serve` the console's token name).
  std::string actor;
  /// Most entry ids one audit record lists, in `ids` and again in its filter's "ids"; the
  /// rest are counted ("ids_omitted"). Default 100.
  std::size_t audit_max_ids = 100;
};

namespace detail {
/// The live counters behind Counters.
struct live_counters {
  std::atomic<std::uint64_t> sent{0}, rejected{0}, replayed{0}, evicted{0}, parked{0}, corrupt{0},
      conflicts{0}, hook_errors{0}, timeout_errors{0}, connection_errors{0}, reply_errors{0},
      other_storage_errors{0};
  std::atomic<std::uint64_t> evicted_for_length{0}, evicted_for_age{0};
  std::atomic<std::uint64_t> discarded{0}, audited{0}, audit_errors{0}, audit_dropped{0};

  Counters snapshot() const noexcept {
    constexpr auto r = std::memory_order_relaxed;
    Counters c;
    c.sent = sent.load(r);
    c.rejected = rejected.load(r);
    c.replayed = replayed.load(r);
    c.evicted = evicted.load(r);
    c.evicted_for_length = evicted_for_length.load(r);
    c.evicted_for_age = evicted_for_age.load(r);
    c.parked = parked.load(r);
    c.corrupt = corrupt.load(r);
    c.conflicts = conflicts.load(r);
    c.hook_errors = hook_errors.load(r);
    c.timeout_errors = timeout_errors.load(r);
    c.connection_errors = connection_errors.load(r);
    c.reply_errors = reply_errors.load(r);
    c.other_storage_errors = other_storage_errors.load(r);
    c.discarded = discarded.load(r);
    c.audited = audited.load(r);
    c.audit_errors = audit_errors.load(r);
    c.audit_dropped = audit_dropped.load(r);
    return c;
  }
};
}  // namespace detail

}  // namespace dlq
