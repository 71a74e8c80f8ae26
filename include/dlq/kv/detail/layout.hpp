// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/detail/layout.hpp
/// How dlq::KeyValueStorage lays entries out in a key-value store: the collection of each
/// queue's lists, the key each record is stored under, and the queue registry (the
/// collection naming every queue ever written, so that queues() needs no key scan).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/detail/id.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/storage.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// The collection holding `queue`'s list `kind`: "<prefix>{<queue>}:dead" or ":corrupt".
inline std::string collection_name(std::string_view prefix, std::string_view queue, ListKind kind) {
  std::string c;
  c.reserve(prefix.size() + queue.size() + 11);
  c += prefix;
  c += '{';
  c += queue;
  c += kind == ListKind::dead ? "}:dead" : "}:corrupt";
  return c;
}

/// The collection naming every queue ever written (ids = queue names, empty values).
inline std::string registry_name(std::string_view prefix) {
  return std::string(prefix) + "queues";
}

/// @throws dlq::invalid_argument when `queue` is empty (`where` names the call).
inline void check_queue(std::string_view queue, const char* where) {
  if (queue.empty())
    throw invalid_argument(::dlq::detail::message("kv", where, "a record has an empty queue name",
                                                  "give every entry its source queue's name"));
}

/// The key a record is stored under: its id, else its job id, else an id derived from its
/// bytes (kept in `derived`, which must outlive the returned view).
inline std::string_view record_key(const Record& r, std::string& derived) {
  if (!r.id.empty()) return r.id;
  if (!r.job_id.empty()) return r.job_id;
  derived = ::dlq::detail::derived_id(r.envelope);
  return derived;
}

/// The queues an adapter (and its copies) has entered in the registry: each is written
/// there once per adapter, not once per push.
class queue_registry {
 public:
  bool known(std::string_view queue) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queues_.find(queue) != queues_.end();
  }
  void add(std::string_view queue) {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_.emplace(queue);
  }
  void add(const std::vector<std::string_view>& queues) {
    if (queues.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::string_view q : queues)
      queues_.emplace(q);
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::string, std::less<>> queues_;
};

/// The writes of one push: registry entries for the queues not known yet first, then one
/// write per record into its queue's dead list, in order. Its views point into the records
/// and into itself: keep the records alive, and do not copy or move it.
struct record_writes {
  record_writes() = default;
  record_writes(const record_writes&) = delete;
  record_writes& operator=(const record_writes&) = delete;

  std::vector<Write> writes;
  std::vector<std::string_view> new_queues;  ///< queues entered in the registry by `writes`
  std::string registry;                      ///< the registry's collection
  std::vector<std::string> collections;      ///< each record's collection
  std::vector<std::string> derived;          ///< ids of records that came without one
};

/// Marks as `known` each queue of `records` the registry of `prefix` in `store` holds already
/// (one load per queue not known yet), so that its sends write no registry entry: the
/// registry is one collection for all queues, and its writers run one at a time (on
/// PostgreSQL under its lock — inside an application's transaction until that COMMIT, and
/// dlq::postgres::send_to_dlq(conn, …) makes an adapter per call). Registry entries are
/// never removed, so a queue found there stays registered.
/// @throws dlq::invalid_argument for an empty queue name; what the store throws.
template <class Kv>
void learn_registered(Kv& store, std::string_view prefix, const std::vector<Record>& records,
                      queue_registry& known) {
  const std::string registry = registry_name(prefix);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string_view q = records[i].queue;
    if (i > 0 && q == records[i - 1].queue) continue;
    check_queue(q, "push");
    if (!known.known(q) && store.load(registry, q)) known.add(q);
  }
}

/// Fills `out` with the writes that store `records` under `prefix` (see record_writes).
/// @throws dlq::invalid_argument if a record's queue name is empty (nothing is filled in
///         that matters: the caller writes nothing).
inline void plan_writes(std::string_view prefix, const std::vector<Record>& records,
                        const queue_registry& known, record_writes& out) {
  out.collections.reserve(records.size());
  out.derived.resize(records.size());
  for (const Record& r : records) {
    check_queue(r.queue, "push");
    if (out.collections.empty() || r.queue != records[out.collections.size() - 1].queue)
      out.collections.push_back(collection_name(prefix, r.queue, ListKind::dead));
    else
      out.collections.push_back(out.collections.back());
    if (!known.known(r.queue) &&
        std::find(out.new_queues.begin(), out.new_queues.end(), r.queue) == out.new_queues.end())
      out.new_queues.push_back(r.queue);
  }
  out.registry = registry_name(prefix);
  out.writes.reserve(records.size() + out.new_queues.size());
  for (std::string_view q : out.new_queues)
    out.writes.push_back(Write{out.registry, q, {}});
  for (std::size_t i = 0; i < records.size(); ++i)
    out.writes.push_back(
        Write{out.collections[i], record_key(records[i], out.derived[i]), records[i].envelope});
}

}  // namespace detail
}  // namespace kv
}  // namespace dlq
