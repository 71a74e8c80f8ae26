// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file queue_names.hpp
/// Which queue names dlq serves, decided once: dlq::queue_name_problem is the rule behind
/// the validation of every call that takes a queue name (dlq::invalid_argument) and behind
/// every listing of the queues found in a store (DeadLetterQueue::queues and list_queues,
/// stats() of all queues, trim() of all, metrics::scrape, the console's /api/queues and
/// /metrics, dlqctl's queues, stats and metrics).
///
/// A store shared with other programs may hold keys that look like dlq's but whose queue name
/// the rule refuses (Redis: a foreign list `dlq:{nul\x00byte}`). A listing skips such names —
/// they are not escaped: an escaped name would not name the queue, and every call on it
/// would be refused anyway — serves the others, and counts what it skipped
/// (QueueNames::skipped; the gauge dlq_skipped_queues; `skipped_queues` in the console's
/// /api/queues). Bytes that are not UTF-8 are not a problem: such a queue is served, and each
/// output escapes its name its own way (Prometheus `\xNN`, JSON U+FFFD). A queue whose lists
/// the store refuses to read because a key of another type has a list's name (Redis
/// WRONGTYPE: `SET dlq:{x} ...` beside the list `dlq:{x}:corrupt`) is skipped and counted the
/// same way by the listings' stats (listed_stats).
///
/// A queue name is at most dlq::max_queue_name_bytes (1024) bytes. Redis would take keys of
/// up to 512 MB, but every name travels in every key, log line, metric label, audit record
/// and console URL: 1024 bytes is far beyond any real queue name, and percent-encoded
/// (at most 3 KiB) it still fits the console's request line (cpp-httplib takes 8 KiB) next
/// to the other parameters. A longer name is refused like an empty one.
///
/// A queue name contains no brace (`{` or `}`), on every backend. Every key of the default
/// layouts puts the name inside braces — Redis `dlq:{Q}`, `dlq:{Q}:corrupt`, `queue:{Q}`,
/// `queue:{Q}:inflight:C`; kv `dlq:{Q}:dead`, `jobs:{Q}:ready`, `jobs:{Q}:held:C` — so that
/// the first `}` after the prefix ends the name: then no two (queue, consumer) pairs share a
/// key, and on Redis Cluster every key of a queue has the same hash tag (one slot). A `}` in
/// a name ended it early: consumer `x}` of `orders` holds its jobs in
/// `queue:{orders}:inflight:x}`, the job list of the queue `orders}:inflight:x`, whose takes
/// then handed out jobs another worker held, and whose pushes landed in that worker's
/// in-flight list. `{` is refused with it (a name `{orders}` looks like a hash tag and is
/// none). Names are refused, not escaped: an escaped name would not name the same keys as
/// the Python seed and other programs sharing the store. Consumer names may hold any byte
/// but are never empty: they come after the queue's `}`, so they cannot move it
/// (dlq::detail::check_source_names). The memory backend refuses exactly the same names, so
/// a unit test refuses what production refuses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"

namespace dlq {

/// The longest queue name dlq accepts, in bytes (see the file comment).
inline constexpr std::size_t max_queue_name_bytes = 1024;

/// Why dlq refuses `name` as a queue name, or nullptr when it accepts it: "the queue name is
/// empty", "the queue name is longer than 1024 bytes", "the queue name contains a NUL
/// byte", "the queue name contains '{'" or "... '}'" (the first brace; the rule of the file
/// comment).
inline const char* queue_name_problem(std::string_view name) noexcept {
  static_assert(max_queue_name_bytes == 1024, "the message below names the limit");
  if (name.empty()) return "the queue name is empty";
  if (name.size() > max_queue_name_bytes) return "the queue name is longer than 1024 bytes";
  if (name.find('\0') != std::string_view::npos) return "the queue name contains a NUL byte";
  const auto brace = name.find_first_of("{}");
  if (brace != std::string_view::npos)
    return name[brace] == '{' ? "the queue name contains '{'" : "the queue name contains '}'";
  return nullptr;
}

namespace detail {

/// What to do about a name queue_name_problem refuses, for the message of
/// check_queue_name.
inline std::string queue_name_hint(std::string_view name) {
  if (name.empty()) return "pass the queue's name";
  if (name.size() > max_queue_name_bytes) return "use a shorter queue name";
  const auto brace = name.find_first_of("{}");
  if (name.find('\0') != std::string_view::npos || brace == std::string_view::npos)
    return "use a printable queue name";
  return "at byte " + std::to_string(brace) +
         "; braces delimit the key's hash tag around the queue name (queue:{orders}), so a "
         "brace would let this name reach another queue's keys: use another character, "
         "e.g. '(' or '-' (docs/names.md)";
}

/// Refuses a queue name queue_name_problem refuses, with a message that names the problem,
/// for a brace its byte offset, and what to do (`component`, `where`: the message's prefix
/// and the call).
/// @throws dlq::invalid_argument
inline void check_queue_name(const char* component, const char* where, std::string_view queue) {
  if (const char* problem = queue_name_problem(queue))
    throw invalid_argument(message(component, where, problem, queue_name_hint(queue)));
}

}  // namespace detail

/// The queue names a listing found, split by queue_name_problem.
struct QueueNames {
  std::vector<std::string> names;    ///< names dlq serves, sorted, each once
  std::vector<std::string> skipped;  ///< names found that it refuses, sorted, each once
  /// Names dlq serves that a capped listing left out of `names` (cap_queue_names).
  std::size_t omitted = 0;
};

/// The most queues the console's /api/queues and /metrics answer with (the default of
/// dlq::http::ConsoleOptions::max_listed_queues): a store may hold any number of queues (20,000
/// foreign lists of 900-byte names made 20 MB and 38 MB answers), one answer stays bounded.
inline constexpr std::size_t default_max_listed_queues = 1000;

/// The most bytes of queue names those answers hold (ConsoleOptions::max_listed_name_bytes):
/// 1 MiB, so 1000 names of up to 1024 bytes fit; /metrics writes each name twice or three
/// times and /api/queues once, so an answer stays within a few MiB.
inline constexpr std::size_t default_max_listed_name_bytes = std::size_t{1} << 20;

/// The bounds of a listing answer (cap_queue_names).
struct ListingLimits {
  std::size_t max_queues = default_max_listed_queues;         ///< queues at most
  std::size_t max_name_bytes = default_max_listed_name_bytes;  ///< sum of their names' bytes
};

/// Keeps the first names of `found.names`, in the order the listing gives them (sorted), while
/// there are at most `limits.max_queues` and their bytes sum to at most
/// `limits.max_name_bytes`; the names after them are dropped and counted in `found.omitted`
/// (/api/queues `omitted_queues`, the gauge dlq_queues_omitted of /metrics).
inline void cap_queue_names(QueueNames& found, const ListingLimits& limits) {
  std::size_t kept = 0;
  std::size_t bytes = 0;
  while (kept < found.names.size() && kept < limits.max_queues &&
         found.names[kept].size() <= limits.max_name_bytes - bytes) {
    bytes += found.names[kept].size();
    ++kept;
  }
  found.omitted += found.names.size() - kept;
  found.names.resize(kept);
}

/// Sorts `found`, drops repeats, and moves the names queue_name_problem refuses to
/// QueueNames::skipped.
inline QueueNames split_queue_names(std::vector<std::string> found) {
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  QueueNames out;
  for (auto& name : found)
    (queue_name_problem(name) == nullptr ? out.names : out.skipped).push_back(std::move(name));
  return out;
}

/// The stats of the queues a listing found (`found.names`) through `read` (the names ->
/// one stats value per name, in order: e.g. DeadLetterQueue::stats): one call for all; when
/// the store refuses it because a key of another type holds the name of a queue's list
/// (dlq::reply_error WRONGTYPE), one call per queue, and the queues it refuses are moved to
/// found.skipped (sorted), so one foreign key does not blind the listing of every queue.
/// @throws what `read` throws, but WRONGTYPE.
template <class Read>
auto listed_stats(QueueNames& found, Read&& read) -> decltype(read(found.names)) {
  const auto wrong_type = [](const reply_error& e) { return e.code() == "WRONGTYPE"; };
  try {
    return read(found.names);
  } catch (const reply_error& e) {
    if (!wrong_type(e)) throw;
  }
  decltype(read(found.names)) out;
  std::vector<std::string> kept;
  for (auto& name : found.names) {
    try {
      auto one = read(std::vector<std::string>{name});
      for (auto& s : one)
        out.push_back(std::move(s));
      kept.push_back(std::move(name));
    } catch (const reply_error& e) {
      if (!wrong_type(e)) throw;
      found.skipped.push_back(std::move(name));
    }
  }
  found.names = std::move(kept);
  std::sort(found.skipped.begin(), found.skipped.end());
  return out;
}

}  // namespace dlq
