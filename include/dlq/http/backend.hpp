// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/backend.hpp
/// dlq::http::ConsoleBackend — everything the operator console (dlq/http/console.hpp) asks of
/// a dead-letter store, behind one virtual interface, and dlq::http::QueueBackend, the
/// implementation over a dlq::DeadLetterQueue.
///
/// The console is just another client of the library: it reads through peek/get/size and
/// moves entries only through replay/remove/purge/recover, so every promise of the library
/// (an entry is in exactly one place, whatever is killed when) holds for the console too.
///
/// The members with a default body (list_queues, stats, search, discard, metrics_text) are the
/// seams where
/// richer library calls plug in: override them, or change the default here, and the console uses
/// them everywhere.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/detail/json_scan.hpp>
#include <dlq/dlq.hpp>
#include <dlq/http/search.hpp>
#include <dlq/metrics/prometheus.hpp>

namespace dlq {
namespace http {

/// Depths and age of one queue, as the console shows them.
struct QueueStats {
  std::string name;         ///< the source queue's name
  std::size_t dead = 0;     ///< entries in the dead-letter list
  std::size_t corrupt = 0;  ///< items in the corrupt list
  /// Jobs waiting in the source queue, when the backend can tell (see waiting()).
  std::optional<std::size_t> waiting;
  /// dead_lettered_at of the oldest entry as stored; "" when the list is empty or the oldest
  /// entry has no readable time.
  std::string oldest_at;
  /// The oldest entry's time parsed; nullopt as for oldest_at.
  std::optional<std::chrono::system_clock::time_point> oldest_time;
};

/// What ConsoleBackend::discard did.
struct DiscardReport {
  std::size_t examined = 0;  ///< entries looked at
  std::size_t matched = 0;   ///< entries that matched (in a dry run: would be deleted)
  std::size_t deleted = 0;   ///< entries deleted (0 in a dry run)
  bool dry_run = false;      ///< nothing was deleted
  bool cancelled = false;    ///< stopped by the cancel flag
};

/// What the console needs from a store. Every member may throw the library's errors
/// (dlq::invalid_argument, dlq::storage_error and its subclasses); the console turns them
/// into JSON errors with a stable code. Implementations must be safe to call from several
/// threads at once (the HTTP server's pool and background replays).
class ConsoleBackend {
 public:
  virtual ~ConsoleBackend() = default;

  /// Names of the queues that have dead-letter or corrupt entries, sorted.
  virtual std::vector<std::string> queues() = 0;
  /// queues() split by the library's rule for queue names (dlq/queue_names.hpp): the names
  /// the console serves, and those it skips and counts (/api/queues `skipped_queues`, the
  /// gauge dlq_skipped_queues of /metrics). Default: dlq::split_queue_names(queues()).
  virtual QueueNames list_queues() { return split_queue_names(queues()); }
  /// Dead-letter depth of the queue.
  virtual std::size_t size(std::string_view queue) = 0;
  /// Corrupt-list depth of the queue.
  virtual std::size_t corrupt_size(std::string_view queue) = 0;
  /// Entries [start, start + count) of the dead-letter list, oldest first.
  virtual std::vector<Entry> peek(std::string_view queue, std::size_t start, std::size_t count) = 0;
  /// Items [start, start + count) of the corrupt list.
  virtual std::vector<Entry> corrupt(std::string_view queue, std::size_t start,
                                     std::size_t count) = 0;
  /// Entries of the dead or corrupt list from `start`, bounded by bytes before they leave
  /// the store: at least `min_count` (1 or more), then while their stored bytes stay within
  /// `max_bytes`, at most `count` (dlq::DeadLetterQueue::peek_bounded). nullopt when the
  /// store cannot bound a read by bytes: the console's scans then size their reads of peek
  /// and corrupt by the largest entry read so far (ScanLimits::read_bytes). Default: nullopt.
  virtual std::optional<PeekWindow> peek_bounded(ListKind /*kind*/, std::string_view /*queue*/,
                                                 std::size_t /*start*/, std::size_t /*count*/,
                                                 std::size_t /*min_count*/,
                                                 std::size_t /*max_bytes*/) {
    return std::nullopt;
  }
  /// The entry with this id, or nullopt.
  virtual std::optional<Entry> get(std::string_view queue, std::string_view id) = 0;
  /// Removes the entry with this id; false when there is none.
  virtual bool remove(std::string_view queue, std::string_view id) = 0;
  /// Removes the entries with these ids (POST /api/delete): which were removed and which were
  /// not there (dlq::DeadLetterQueue::remove_ids). Default: remove() for each id, so one audit
  /// record per entry removed; QueueBackend makes it one library call and one record.
  virtual RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids) {
    RemoveReport report;
    for (const auto& id : ids)
      (remove(queue, id) ? report.removed : report.not_found).push_back(id);
    return report;
  }
  /// remove_ids on behalf of `actor`, the name the audit trail gives the change (the
  /// console's named token; "" = the backend's own actor, Options::actor). Default: ignores
  /// `actor` and calls remove_ids; QueueBackend hands it to the library.
  virtual RemoveReport remove_ids_as(std::string_view queue, const std::vector<std::string>& ids,
                                     const std::string& actor) {
    (void)actor;
    return remove_ids(queue, ids);
  }
  /// Deletes the dead-letter list; returns how many entries it had.
  virtual std::size_t purge(std::string_view queue) = 0;
  /// Deletes the corrupt list; returns how many items it had.
  virtual std::size_t purge_corrupt(std::string_view queue) = 0;
  /// purge, purge_corrupt and recover on behalf of `actor`, for the audit trail (as
  /// remove_ids_as). Defaults: ignore `actor`; QueueBackend hands it to the library.
  virtual std::size_t purge_as(std::string_view queue, const std::string& actor) {
    (void)actor;
    return purge(queue);
  }
  virtual std::size_t purge_corrupt_as(std::string_view queue, const std::string& actor) {
    (void)actor;
    return purge_corrupt(queue);
  }
  virtual std::size_t recover_as(std::string_view queue, const std::string& actor) {
    (void)actor;
    return recover(queue);
  }
  /// Replays as dlq::DeadLetterQueue::replay does (progress and cancel in `options`; the
  /// audit's actor in ReplayOptions::actor).
  virtual ReplayReport replay(std::string_view queue, const ReplayOptions& options) = 0;
  /// Finishes interrupted replays (dlq::DeadLetterQueue::recover); returns items fixed.
  virtual std::size_t recover(std::string_view queue) = 0;

  /// Throws the library's storage errors (dlq::storage_error and subclasses) when the store
  /// cannot be reached; returns otherwise. GET /healthz asks only this, so it must be cheap
  /// whatever the store holds: never a listing (queues() SCANs a whole Redis database).
  /// Default: size() of one queue name no application uses (one LLEN on Redis, one indexed
  /// COUNT on SQLite); override it with a PING where the backend has one.
  virtual void check_reachable() { (void)size(health_probe_queue); }

  /// The queue name check_reachable() reads by default.
  static constexpr std::string_view health_probe_queue = "dlq.healthz-probe";

  /// Jobs waiting in the source queue, when the backend can tell. Default: nullopt.
  virtual std::optional<std::size_t> waiting(std::string_view /*queue*/) { return std::nullopt; }

  /// Depths and age of each queue. Default: size, corrupt_size and the oldest entry (one
  /// peek of one entry) per queue: cost independent of the queue's length.
  virtual std::vector<QueueStats> stats(const std::vector<std::string>& names) {
    std::vector<QueueStats> out;
    out.reserve(names.size());
    for (const auto& name : names) {
      QueueStats s;
      s.name = name;
      s.dead = size(name);
      s.corrupt = corrupt_size(name);
      s.waiting = waiting(name);
      if (s.dead > 0) {
        const auto first = peek(name, 0, 1);
        if (!first.empty() && first.front().ok() && first.front().dead_lettered_time) {
          s.oldest_at = first.front().dead_lettered_at;
          s.oldest_time = first.front().dead_lettered_time;
        }
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  /// One page of entries matching `filter`, continuing at `from` (nullopt = the head),
  /// within `limits`. Default: dlq::http::scan over peek_bounded, else peek (see
  /// dlq/http/search.hpp).
  virtual SearchPage search(std::string_view queue, const EntryQuery& filter,
                            const std::optional<Cursor>& from, const ScanLimits& limits) {
    return scan([this](std::string_view q, std::size_t s, std::size_t n) { return peek(q, s, n); },
                [this](std::string_view q, std::size_t s, std::size_t n, std::size_t least,
                       std::size_t bytes) {
                  return peek_bounded(ListKind::dead, q, s, n, least, bytes);
                },
                size(queue), queue, filter, from, limits, std::chrono::system_clock::now());
  }

  /// Deletes (does not replay) the entries of `queue` that match `query`, among those
  /// present when it starts, oldest first; `query` must not be empty (purge deletes all).
  /// Checks `cancel` (may be null) before every entry and calls `progress` (may be empty)
  /// after every window. With `dry_run` it only counts. Default: the ids of the entries present
  /// now are read first (peek, in pages of 1000), then a scan (see search) removes each match
  /// whose id is among them by id — as many entries per id as carried it at the start; each
  /// removal atomic on its own. It never deletes an entry added after it started, except an
  /// entry without an id that is byte-identical to one present at the start (their derived
  /// ids are equal); an entry that moved between two of those page reads (another client
  /// removed entries before it) is left, not deleted. The library's discard (QueueBackend,
  /// `dlqctl serve`; see discard_with) is exact on both counts: override this with it.
  /// @throws dlq::invalid_argument for an empty query; the store's errors (entries deleted
  ///         before the failure stay deleted; the report so far is lost with the exception).
  /// discard on behalf of `actor`, for the audit trail (as remove_ids_as). Default: ignores
  /// `actor` and calls discard; QueueBackend hands it to the library.
  virtual DiscardReport discard_as(std::string_view queue, const EntryQuery& query, bool dry_run,
                                   const std::atomic<bool>* cancel,
                                   const std::function<void(const DiscardReport&)>& progress,
                                   const std::string& actor) {
    (void)actor;
    return discard(queue, query, dry_run, cancel, progress);
  }
  virtual DiscardReport discard(std::string_view queue, const EntryQuery& query, bool dry_run,
                                const std::atomic<bool>* cancel,
                                const std::function<void(const DiscardReport&)>& progress) {
    if (query.empty())
      throw dlq::invalid_argument(dlq::detail::message("http", "discard", "no condition given",
                                                       "give a filter, or purge the whole queue"));
    DiscardReport report;
    report.dry_run = dry_run;
    std::map<std::string, std::size_t> present;  // id -> entries carrying it at the start
    constexpr std::size_t page_size = 1000;
    for (std::size_t start = 0;; start += page_size) {
      const auto page = peek(queue, start, page_size);
      for (const auto& e : page)
        ++present[e.id];
      if (page.size() < page_size) break;
    }
    ScanLimits limits;
    limits.limit = 500;
    limits.max_examined = 5000;
    std::optional<Cursor> at;
    // Matches among the entries the scan examined last (its anchors, Cursor::anchors) are
    // deleted only after the next read found the place: deleting all of them first would
    // lose the place and restart the scan at the head (see dlq/http/search.hpp).
    std::vector<Entry> deferred;
    const auto settle = [&](std::vector<Entry>& entries, std::size_t& removed) {
      for (const auto& e : entries) {
        if (cancel && cancel->load()) {
          report.cancelled = true;
          return false;
        }
        const auto it = present.find(e.id);
        if (it == present.end()) continue;  // added after the start
        if (--it->second == 0) present.erase(it);
        ++report.matched;
        if (!dry_run && remove(queue, e.id)) {
          ++report.deleted;
          ++removed;
        }
      }
      entries.clear();
      return true;
    };
    while (!present.empty()) {
      SearchPage page = search(queue, query, at, limits);
      std::size_t removed_here = 0;
      bool go = settle(deferred, removed_here);
      std::vector<Entry> now;
      for (auto& e : page.entries) {
        const bool anchor = !dry_run && page.next &&
                            std::find(page.next->anchors.begin(), page.next->anchors.end(),
                                      detail::scan_key(e)) != page.next->anchors.end();
        (anchor ? deferred : now).push_back(std::move(e));
      }
      go = go && settle(now, removed_here);
      report.examined += page.examined;
      if (progress) progress(report);
      if (!go || !page.next) break;
      at = page.next;
      at->position -= std::min(at->position, removed_here);  // they were before it
    }
    std::size_t removed_last = 0;
    if (!report.cancelled && !deferred.empty() && settle(deferred, removed_last) && progress)
      progress(report);
    return report;
  }

  /// Counters of this process's queue front end, when there is one (dlq::Counters).
  virtual std::optional<Counters> counters() { return std::nullopt; }

  /// The Prometheus text exposition served at /metrics. Default: a minimal exposition from
  /// stats() and counters() (see docs/console.md) of at most the queues listing_limits()
  /// allows, the rest counted by the gauge dlq_queues_omitted; a richer library exposition
  /// replaces it (an override should keep to listing_limits() too).
  virtual std::string metrics_text();

  /// The bounds of the listings /api/queues and /metrics answer with (dlq::cap_queue_names):
  /// the Console sets them from ConsoleOptions::max_listed_queues and max_listed_name_bytes.
  ListingLimits listing_limits() const { return {max_queues_.load(), max_name_bytes_.load()}; }
  /// Sets listing_limits() (the Console does, when it is made).
  void set_listing_limits(const ListingLimits& limits) {
    max_queues_.store(limits.max_queues);
    max_name_bytes_.store(limits.max_name_bytes);
  }

 private:
  std::atomic<std::size_t> max_queues_{default_max_listed_queues};
  std::atomic<std::size_t> max_name_bytes_{default_max_listed_name_bytes};
};

inline std::string ConsoleBackend::metrics_text() {
  QueueNames found = list_queues();
  cap_queue_names(found, listing_limits());
  const auto all = listed_stats(found, [this](const auto& names) { return stats(names); });
  const auto now = std::chrono::system_clock::now();
  std::string out;
  out +=
      "# HELP dlq_entries Items in a queue's dead-letter (list=\"dead\") or corrupt "
      "(list=\"corrupt\") list.\n# TYPE dlq_entries gauge\n";
  // Labels as in the library's exposition and `dlqctl metrics` (dlq/metrics/prometheus.hpp).
  const auto queues = metrics::detail::distinct_queue_labels(
      all, [](const QueueStats& s) -> std::string_view { return s.name; });
  for (const auto& [q, s] : queues) {
    out += "dlq_entries{" + q + ",list=\"dead\"} " + std::to_string(s->dead) + "\n";
    out += "dlq_entries{" + q + ",list=\"corrupt\"} " + std::to_string(s->corrupt) + "\n";
  }
  out +=
      "# HELP dlq_oldest_entry_age_seconds Age of the oldest dead letter of a queue (absent "
      "when the queue is empty or its oldest entry has no readable time).\n"
      "# TYPE dlq_oldest_entry_age_seconds gauge\n";
  for (const auto& [q, s] : queues) {
    if (!s->oldest_time) continue;
    const double age = std::max(0.0, std::chrono::duration<double>(now - *s->oldest_time).count());
    out += "dlq_oldest_entry_age_seconds{" + q + "} " + std::to_string(age) + "\n";
  }
  if (const auto c = counters()) {
    out +=
        "# HELP dlq_replayed_total Entries replayed by this process since it started (per "
        "process: sum over instances).\n# TYPE dlq_replayed_total counter\n";
    out += "dlq_replayed_total " + std::to_string(c->replayed) + "\n";
    out +=
        "# HELP dlq_corrupt_total Unreadable entries met by replays of this process.\n"
        "# TYPE dlq_corrupt_total counter\n";
    out += "dlq_corrupt_total " + std::to_string(c->corrupt) + "\n";
  }
  metrics::write_skipped_queues(out, found.skipped.size());
  metrics::write_omitted_queues(out, found.omitted);
  return out;
}

/// ConsoleBackend::discard through a library discard (DeadLetterQueue::discard, or anything
/// that takes dlq::DiscardOptions): `run` gets the options for `query` (its conditions as a
/// predicate, `dry_run`, `cancel`) and its report becomes the console's; `progress` is called
/// once, with the final report. The library's discard examines exactly the entries present
/// when it starts (see dlq/operations.hpp). QueueBackend and `dlqctl serve` use it.
/// `actor` is who the audit record names ("" = the library's Options::actor); the record's
/// filter is `query` as given (EntryQuery::describe()).
/// @throws dlq::invalid_argument for an empty query; what `run` throws.
inline DiscardReport discard_with(
    const std::function<dlq::DiscardReport(const dlq::DiscardOptions&)>& run,
    const EntryQuery& query, bool dry_run, const std::atomic<bool>* cancel,
    const std::function<void(const DiscardReport&)>& progress, const std::string& actor = {}) {
  if (query.empty())
    throw dlq::invalid_argument(dlq::detail::message("http", "discard", "no condition given",
                                                     "give a filter, or purge the whole queue"));
  dlq::DiscardOptions options;
  const auto now = std::chrono::system_clock::now();
  options.predicate = [&query, now](const Entry& e) { return query.matches(e, now); };
  options.predicate_terms = query.describe();  // the audit shows the filter as given
  options.dry_run = dry_run;
  options.cancel = cancel;
  options.actor = actor;
  const dlq::DiscardReport done = run(options);
  DiscardReport report;
  report.examined = done.examined;
  report.matched = done.discarded;
  report.deleted = dry_run ? 0 : done.discarded;
  report.dry_run = done.dry_run;
  report.cancelled = done.cancelled;
  if (progress) progress(report);
  return report;
}

/// A ConsoleBackend over a dlq::DeadLetterQueue<Storage> the application owns (it must
/// outlive the backend).
template <class Storage>
class QueueBackend : public ConsoleBackend {
 public:
  /// @param queue the application's queue front end (kept by reference)
  explicit QueueBackend(DeadLetterQueue<Storage>& queue) : q_(queue) {}

  std::vector<std::string> queues() override { return q_.queues(); }
  QueueNames list_queues() override { return q_.list_queues(); }
  std::size_t size(std::string_view queue) override { return q_.size(queue); }
  std::size_t corrupt_size(std::string_view queue) override { return q_.corrupt_size(queue); }
  std::vector<Entry> peek(std::string_view queue, std::size_t start, std::size_t count) override {
    return q_.peek(queue, start, count);
  }
  std::vector<Entry> corrupt(std::string_view queue, std::size_t start,
                             std::size_t count) override {
    return q_.corrupt(queue, start, count);
  }
  std::optional<PeekWindow> peek_bounded(ListKind kind, std::string_view queue,
                                         std::size_t start, std::size_t count,
                                         std::size_t min_count, std::size_t max_bytes) override {
    return q_.peek_bounded(queue, kind, start, count, min_count, max_bytes);
  }
  std::optional<Entry> get(std::string_view queue, std::string_view id) override {
    return q_.get(queue, id);
  }
  bool remove(std::string_view queue, std::string_view id) override { return q_.remove(queue, id); }
  /// One scan and one audit record for the whole request (DeadLetterQueue::remove_ids).
  RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids) override {
    return q_.remove_ids(queue, ids);
  }
  /// remove_ids with the audit record naming `actor`.
  RemoveReport remove_ids_as(std::string_view queue, const std::vector<std::string>& ids,
                             const std::string& actor) override {
    return q_.remove_ids(queue, ids, actor);
  }
  std::size_t purge(std::string_view queue) override { return q_.purge(queue); }
  std::size_t purge_corrupt(std::string_view queue) override { return q_.purge_corrupt(queue); }
  ReplayReport replay(std::string_view queue, const ReplayOptions& options) override {
    return q_.replay(queue, options);
  }
  std::size_t recover(std::string_view queue) override { return q_.recover(queue); }
  /// purge, purge_corrupt and recover with the audit record naming `actor`.
  std::size_t purge_as(std::string_view queue, const std::string& actor) override {
    return q_.purge(queue, actor);
  }
  std::size_t purge_corrupt_as(std::string_view queue, const std::string& actor) override {
    return q_.purge_corrupt(queue, actor);
  }
  std::size_t recover_as(std::string_view queue, const std::string& actor) override {
    return q_.recover(queue, actor);
  }
  std::optional<Counters> counters() override { return q_.counters(); }
  /// The library's exposition (dlq/metrics/prometheus.hpp): the queues listing_limits()
  /// allows (the rest counted by dlq_queues_omitted), the depths and ages from one stats()
  /// call, and this process's counters.
  std::string metrics_text() override { return metrics::scrape(q_, {}, listing_limits()); }
  /// The library's discard (dlq/operations.hpp) through discard_with: atomic per batch of the
  /// replay step, exactly the entries present when it starts, audited as one "discard"
  /// record. `progress` is called once, with the final report.
  DiscardReport discard(std::string_view queue, const EntryQuery& query, bool dry_run,
                        const std::atomic<bool>* cancel,
                        const std::function<void(const DiscardReport&)>& progress) override {
    return discard_with(
        [this, queue](const dlq::DiscardOptions& o) { return q_.discard(queue, o); }, query,
        dry_run, cancel, progress);
  }
  /// discard with the audit record naming `actor`.
  DiscardReport discard_as(std::string_view queue, const EntryQuery& query, bool dry_run,
                           const std::atomic<bool>* cancel,
                           const std::function<void(const DiscardReport&)>& progress,
                           const std::string& actor) override {
    return discard_with(
        [this, queue](const dlq::DiscardOptions& o) { return q_.discard(queue, o); }, query,
        dry_run, cancel, progress, actor);
  }

 private:
  DeadLetterQueue<Storage>& q_;
};

}  // namespace http
}  // namespace dlq
