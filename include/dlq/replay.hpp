// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file replay.hpp
/// Replay: what to replay (ReplayOptions), what a replay did (ReplayReport, Skipped,
/// ReplayProgress), and the engine DeadLetterQueue::replay runs.
///
/// Semantics:
/// - Entries move oldest first, in batches; each batch moves atomically (on Redis: one
///   script), so an entry is at every instant in exactly one place — the dead-letter list,
///   the destination queue or the corrupt list — whatever fails or is killed, when.
///   (dlq::KeyValueStorage replaying into an external sink cannot apply across the two: it
///   pushes first and removes second — at-least-once, never lost.)
/// - "All" means the entries present when the replay started: the replay examines only
///   those, whatever other clients remove or add meanwhile, so an entry dead-lettered again
///   during the run is not replayed again by the same run, and every entry present at the
///   start and still there is reached. The storage bounds the walk (replay_snapshot, see
///   "Snapshot" in dlq/storage.hpp); on a storage without that member the replay examines at
///   most as many entries as the list held at the start.
/// - Filters (ids, error text, worker, age, predicate) leave non-matching entries in place,
///   in order.
/// - Corrupt entries (not JSON, no payload, …) are never dropped: replay moves them to the
///   queue's corrupt list and reports them; corrupt() shows them.
/// - Parked entries (the poison-loop guard) stay in place and are reported, unless asked for
///   by id.
///
/// The engine (detail::replay_engine) walks the list in batches (detail/batched_walk.hpp, the
/// walk retention uses too), decides each entry from its bytes (detail::envelope_view; the
/// entry is parsed into a dlq::Entry only for ReplayOptions::filter), and turns the applied
/// decisions into the report, the counters and the events. On a storage with the fast step
/// (dlq::FastStep; RedisListStorage) an unfiltered replay moves the entries whose bytes
/// prove their payload span server-side first and hands only the others to the walk; the
/// report, counters, events and audit record are the same as without it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dlq/audit.hpp"
#include "dlq/detail/batched_walk.hpp"
#include "dlq/detail/compiled.hpp"
#include "dlq/detail/edit.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/json_scan.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/policies.hpp"
#include "dlq/search.hpp"
#include "dlq/storage.hpp"

namespace dlq {

/// Why replay passed over an entry it was asked about.
enum class SkipReason : unsigned char {
  corrupt,   ///< unreadable; moved to the corrupt list (or left, in a dry run)
  parked,    ///< parked by the poison-loop guard; replay it by id to force it
  not_found  ///< an id given in ReplayOptions::ids is not in the dead-letter list
};

/// One entry replay passed over, and why.
struct Skipped {
  std::string id;      ///< entry id (derived from the bytes for unreadable entries)
  SkipReason reason;   ///< why
  std::string detail;  ///< human-readable detail (e.g. what is wrong with a corrupt entry)
};

/// Running totals of a replay, passed to ReplayOptions::on_progress after every batch.
struct ReplayProgress {
  std::size_t examined = 0;   ///< entries looked at so far
  std::size_t replayed = 0;   ///< entries moved so far (would be, in a dry run)
  std::size_t set_aside = 0;  ///< corrupt entries set aside so far
  /// Entries of the starting snapshot not looked at yet: the number present at the start
  /// less those examined (an upper bound: entries another client removed meanwhile count)
  std::size_t remaining = 0;
};

/// A predicate over one entry, for ReplayOptions::filter: holds any callable
/// `bool(const dlq::Entry&)` (empty by default = no condition). Replay parses an entry into
/// a dlq::Entry only to call a filter that is set.
class EntryFilter {
 public:
  using predicate = std::function<bool(const Entry&)>;

  /// No condition.
  EntryFilter() = default;
  /// No condition.
  EntryFilter(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)
  /// The condition `f(entry)`.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, EntryFilter> &&
                                              !std::is_same_v<std::decay_t<F>, std::nullptr_t> &&
                                              std::is_invocable_r_v<bool, F&, const Entry&>>>
  EntryFilter(F f)  // NOLINT(google-explicit-constructor): assigned from lambdas by design
      : predicate_(std::move(f)), on_raw_(&parse_and_test) {
    if (!predicate_) on_raw_ = nullptr;
  }

  /// True when a condition is set.
  explicit operator bool() const noexcept { return on_raw_ != nullptr; }
  /// The condition on an entry. Precondition: one is set.
  bool operator()(const Entry& entry) const { return predicate_(entry); }
  /// The condition on stored bytes (parsed with dlq::parse_entry). Precondition: one is set.
  bool test_raw(std::string_view raw) const { return on_raw_(predicate_, raw); }

 private:
  static bool parse_and_test(const predicate& p, std::string_view raw) {
    return p(parse_entry(std::string(raw)));
  }

  predicate predicate_;
  bool (*on_raw_)(const predicate&, std::string_view) = nullptr;
};

/// What to replay, and where to. The default replays everything present at the start back to
/// the source queue. The conditions of the dlq::Filter base (ids, error text, error type,
/// worker, job id, age, payload text, predicate) select the entries; with `ids` set the
/// other conditions do not apply, and ids not found are reported as skipped.
struct ReplayOptions : Filter {
  /// Most entries to replay; 0 = no limit.
  std::size_t limit = 0;
  /// Destination queue; empty = the queue the entries were dead-lettered from.
  std::string to_queue;
  /// Only entries for which this returns true; empty = no condition. It runs while the
  /// storage decides a batch: it must not call this queue's operations (on the key-value
  /// backend, whose replay holds a lock, that would deadlock); decide from the Entry alone.
  EntryFilter filter;
  /// Edit-and-replay: the payload to push for an entry instead of its stored one, or
  /// nullopt to push it unchanged; empty (the default) = no edits. Applied inside the same
  /// atomic step that moves the entry (Decision::payload carries the edited bytes), so after
  /// any crash the entry is either in the dead-letter list with its original payload or in
  /// the destination with the edited one, never both, never neither. On the key-value
  /// backend replaying into an external sink it is at-least-once, as every replay there:
  /// the edited payload may be pushed twice, the record stays until its push returned, and
  /// once pushed the original is never pushed. Runs under the same rules as `filter`.
  /// Counted in ReplayReport::edited; the audit record ("replay_edited") holds the SHA-256
  /// of the old and new payload of each edit (bounded by Options::audit_max_ids). An edit
  /// to an empty or whitespace-only payload is refused: replay() throws
  /// dlq::invalid_argument and the step holding it moves nothing (the steps before it stay
  /// replayed; see dlq/detail/edit.hpp).
  std::function<std::optional<std::string>(const Entry&)> transform;
  /// Who asks, for the audit trail; empty (the default) = Options::actor.
  std::string actor;
  /// Decide and report, but move nothing.
  bool dry_run = false;
  /// Move corrupt entries met on the way to the corrupt list (default). When false they stay
  /// in place and are only reported.
  bool set_aside_corrupt = true;
  /// Record the id of every replayed entry in ReplayReport::replayed_ids (default: off,
  /// since a replay of millions would hold millions of ids).
  bool record_ids = false;
  /// Most entries replayed per second; 0 = as fast as the backend allows. Batches shrink to
  /// about a tenth of a second's worth so that the pace is even.
  double rate = 0;
  /// Called after every applied batch with the running totals (see ReplayProgress).
  std::function<void(const ReplayProgress&)> on_progress;
  /// Checked before every batch and during the pauses a `rate` makes: once it is true the
  /// replay stops between batches and reports `cancelled`. Nothing is lost; everything reported as
  /// replayed was moved.
  const std::atomic<bool>* cancel = nullptr;

  /// Replay everything present at the start.
  static ReplayOptions all() { return {}; }
  /// Replay at most the `n` oldest entries.
  static ReplayOptions first(std::size_t n) {
    ReplayOptions o;
    o.limit = n;
    return o;
  }
  /// Replay exactly these entries.
  static ReplayOptions by_ids(std::vector<std::string> ids) {
    ReplayOptions o;
    o.ids = std::move(ids);
    return o;
  }
};

/// What a replay did. Counts are exact: every entry examined is in exactly one of
/// replayed, set_aside, or left in place.
struct ReplayReport {
  std::size_t examined = 0;   ///< entries looked at
  std::size_t replayed = 0;   ///< entries moved to the destination (would be, in a dry run)
  std::size_t set_aside = 0;  ///< corrupt entries moved to the corrupt list (would be, dry run)
  std::size_t batches = 0;    ///< atomic steps applied
  std::size_t conflicts = 0;  ///< batches redone because the list changed under them
  std::size_t edited = 0;     ///< replayed with a payload from ReplayOptions::transform
  bool dry_run = false;       ///< nothing was moved
  bool cancelled = false;     ///< ReplayOptions::cancel stopped the run between batches
  std::vector<std::string> replayed_ids;  ///< with ReplayOptions::record_ids
  std::vector<Skipped> skipped;           ///< corrupt / parked entries passed over, ids not found
};

namespace detail {

/// The filter of a replay as its audit record shows it: Filter::describe(), and what
/// ReplayOptions::filter selects — the members of predicate_terms when it alone carries
/// them (no predicate), else `"filter": true` (detail::describe_predicate).
inline nlohmann::ordered_json replay_description(const ReplayOptions& o) {
  nlohmann::ordered_json j = o.describe();
  if (o.filter)
    describe_predicate(j, o.predicate ? nlohmann::ordered_json() : o.predicate_terms, "filter");
  return j;
}

}  // namespace detail

namespace detail {

/// One replay of one queue over a dead list (one instance per run).
class replay_engine {
 public:
  /// What run() did: the report, and the stored bytes of every replayed entry when asked for
  /// (replay_one returns the entry it replayed).
  struct result {
    ReplayReport report;
    std::vector<std::string> replayed_raw;
    audit_ids ids;                 ///< replayed ids for the audit record (with collect_audit)
    nlohmann::ordered_json edits;  ///< {id, old/new sha256}; an empty array at first
    result();
  };

  /// Collect what the audit record needs (result::ids, result::edits). Default off.
  void collect_audit(bool on) noexcept { collect_audit_ = on; }

  /// What a run that threw had done before (the batches applied stay applied).
  const result& partial() const noexcept { return result_; }

  /// The replay of `queue` (the name must outlive the engine) over `list`.
  replay_engine(queue_core& core, dead_list& list, std::string_view queue)
      : core_(core), list_(list), queue_(queue) {}

  /// Replays as `options` say; with `keep_replayed`, result::replayed_raw holds the bytes of
  /// every replayed entry. @throws invalid_argument for a bad to_queue; conflict_error when
  /// the list keeps changing under the replay; what the storage throws (batches applied
  /// before stay applied).
  result run(const ReplayOptions& options, bool keep_replayed = false);

 private:
  struct pending_item {
    Action action;        // what this batch does with it (dry runs: what it would do)
    std::string id;       // filled when it will be reported
    SkipReason reason{};  // for skipped items
    std::string detail;
    bool skipped = false;
  };
  // An edited item of the current batch (index into pending_) and its payload hashes (empty
  // once the audit record has no room for more).
  struct edit_note {
    std::size_t index;
    std::string old_sha, new_sha;
  };

  // The parts of the options the decider consults per entry, prepared once.
  void select(const ReplayOptions& o);

  // The fast path runs for an unfiltered replay that moves entries and reports only ids and
  // counts: no ids asked for, no filter or predicate, no edits, no dry run, no stored bytes
  // kept (replay_one), on a storage that has replay_fast.
  bool fast_eligible(const ReplayOptions& o) const noexcept {
    return list_.has_fast_step() && !by_id_ && !filtered_ && !o.transform && !o.dry_run &&
           !keep_replayed_;
  }

  // Whether this batch's ids are read by anything: ReplayOptions::record_ids, the event
  // hook (one Event per replayed entry, with its id), or the audit record while it has room
  // for ids (Options::audit_max_ids; the rest are only counted). The counters and the report
  // need counts only.
  bool ids_needed(const ReplayOptions& o) const noexcept {
    return o.record_ids || static_cast<bool>(core_.options.on_event) ||
           (collect_audit_ && result_.ids.ids.size() < result_.ids.max);
  }

  // One fast step of at most `max` entries (and at most the limit left), committed to the
  // report, counters and events like a replay_step batch of replayed entries.
  FastStep fast(const ReplayOptions& o, std::size_t max) {
    const bool want_ids = ids_needed(o);
    FastStep f = list_.fast_step(std::min(max, limit_left_), destination_, want_ids);
    if (f.declined || f.moved == 0) return f;
    ReplayReport& report = result_.report;
    const std::size_t examined = report.examined, replayed = report.replayed;
    report.examined += f.moved;
    report.replayed += f.moved;
    limit_left_ -= std::min(limit_left_, f.moved);
    core_.counters.replayed.fetch_add(f.moved, std::memory_order_relaxed);
    if (want_ids && f.ids.size() == f.moved) {
      for (const auto& id : f.ids) {
        if (collect_audit_) result_.ids.add(id);
        core_.emit(EventKind::replayed, queue_, id, destination_);
        if (o.record_ids) report.replayed_ids.push_back(id);
      }
    } else if (collect_audit_) {
      result_.ids.omitted += f.moved;
    }
    // Each atomic move is one batch: counted, and reported to on_progress with the totals
    // after it.
    std::size_t done = 0;
    for (const std::size_t n : f.batches.empty() ? std::vector<std::size_t>{f.moved} : f.batches) {
      if (n == 0) continue;
      done += n;
      ++report.batches;
      if (o.on_progress)
        o.on_progress(
            {examined + done, replayed + done, report.set_aside, remaining(examined + done)});
    }
    return f;
  }

  // What a replay round does after its fast step (see fast_round).
  enum class fast_next { slow_step, next_round, stop };

  // A round's fast step while the fast path is on (see run()): moves the provable entries at
  // the head, takes them off `budget`, and says what the round does next; `slow_limit` is
  // how many entries the compare-and-move step may then examine.
  fast_next fast_round(const ReplayOptions& options, std::size_t& budget, std::size_t cap,
                       std::chrono::system_clock::time_point started, std::size_t& slow_limit);

  // ReplayProgress::remaining after `examined` entries.
  std::size_t remaining(std::size_t examined) const noexcept {
    return at_start_ - std::min(at_start_, examined);
  }

  // Keeps the run at `rate`: the n-th entry is not replayed before started + n / rate (a
  // pause of at most 10^9 s, so that the time stays representable). Waits in slices of at
  // most 100 ms and returns early once `cancel` is set.
  void pace(double rate, std::chrono::system_clock::time_point started,
            const std::atomic<bool>* cancel);

  void decide(const ReplayOptions& o, std::string_view raw, Decision& d);

  static std::string unreadable_reason(std::string_view raw);

  // The stored id's value span (quotes included) when it is a canonical UUID — what dlq
  // writes (UUIDv7, 62 random bits), so no other item carries it by chance at the same
  // offset; else empty: the storage compares the whole item (see Decision::identity).
  // Not when a storage keyed by job id used the job id as the entry id: re-sending the
  // job rewrites the entry under the same id.
  std::string_view identity_of(const envelope_view& view) const {
    if (list_.keyed_by_job_id() && !view.job_id.empty()) return {};
    const std::string_view v = view.id;
    const bool quoted = v.size() == 38 && v.front() == '"' && v.back() == '"';
    return quoted && is_canonical_uuid(v.substr(1, 36)) ? v : std::string_view{};
  }

  bool matches(const ReplayOptions& o, const envelope_view& view, std::string_view raw) const {
    if (!matcher_->matches(raw, true, view, matcher_->needs_id() ? entry_id(view, raw) : ""))
      return false;
    if (o.filter && !o.filter.test_raw(raw)) return false;
    return true;
  }

  // An id asked for and not yet taken (in this or an earlier batch).
  bool take_id(const std::string& id) const {
    if (ids_left_.count(id) == 0) return false;
    for (const auto& p : pending_)
      if (p.id == id) return false;  // a byte-identical twin in the same batch
    return true;
  }

  // A batch was applied: its decisions become the report, the counters and the events.
  void commit(const ReplayOptions& o, std::size_t examined);

  queue_core& core_;
  dead_list& list_;
  std::string_view queue_;
  // From the options (select()).
  std::string_view destination_;
  std::unordered_set<std::string> ids_left_;
  bool by_id_ = false;
  bool filtered_ = false;
  bool need_ids_ = false;
  bool keep_replayed_ = false;
  bool fast_ = false;             // the fast path is on (fast_eligible, and not declined yet)
  std::size_t fast_window_ = 1;   // most entries the next fast step takes
  std::size_t fast_skip_ = 0;     // compare-and-move batches to run before the next fast step
  std::size_t fast_backoff_ = 1;  // fast_skip_ after the next short run
  std::size_t fast_run_ = 0;      // provable entries moved since an unprovable one ended a step
  // The shortest run of provable entries worth its two round trips (a fast step and a
  // compare-and-move step) against compare-and-move alone: on loopback the break-even is
  // ~60 entries (every 100th entry from Python: 52 ms fast, 108 ms compare-and-move alone;
  // every 10th: 239 against 91), over a network with more latency it is higher.
  static constexpr std::size_t fast_min_run = 128;
  std::optional<filter_matcher> matcher_;
  bool collect_audit_ = false;
  // The run so far.
  std::size_t at_start_ = 0;  // entries present at the start
  std::size_t limit_left_ = 0;
  result result_;
  // The batch being decided.
  std::size_t step_limit_used_ = 0;
  std::size_t step_past_limit_ = 0;  // items of the batch left because the limit was reached
  std::vector<pending_item> pending_;
  std::vector<std::string> step_raw_;
  std::string scratch_;
  std::string problem_;
  std::string edited_;                 // the edited payload of the item being decided
  std::vector<edit_note> step_notes_;  // this batch's edits
};

}  // namespace detail

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/replay-inl.hpp"
#endif
