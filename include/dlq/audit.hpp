// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file audit.hpp
/// The audit trail: one record per operator mutation — replay (with its filter and report),
/// edited replay, discard, remove, purge, trim, recover — saying when, who, what, on which
/// entries and with what outcome. Read back with DeadLetterQueue::audit(queue, since, limit).
/// Sends (worker failures) are not audited: they are the data, and their volume would
/// drown the trail.
///
/// One write per operation (remove_ids: per call, however many ids), never per entry. Ids
/// are listed up to Options::audit_max_ids (default 100) with a count of the rest, each cut
/// to its first 256 bytes and "…" (an entry written by another program may carry an id of any
/// length: detail::audit_max_id_bytes); each text
/// condition of the filter (error_contains, worker, ...) up to its first 1024 bytes, with its
/// length in "<name>_bytes" when it was cut. So every record is of bounded size.
///
/// The trail records changes: an operation that changed nothing writes no record — a remove
/// of ids that are not there, a purge of an empty list, a replay or discard that matched
/// nothing, a dry run, a recover that fixed nothing. A failed or cancelled operation is
/// recorded when it changed something before it stopped (the record says what). So the
/// trail grows with what was done to the entries, not with the number of requests: a flood
/// of requests that change nothing cannot push earlier records out.
///
/// Where records live (on the same backend as the entries):
/// - dlq::MemoryStorage: in memory, per queue;
/// - dlq::RedisListStorage: a Redis Stream per queue, `<dead key>:audit` (same hash tag as
///   the queue; see dlq/redis/audit_stream.hpp);
/// - dlq::KeyValueStorage: records of the collection `<prefix>{queue}:audit` in the store
///   (a SQLite table row each on dlq::kv::SqliteStore).
///
/// Retention is by age (dlq::AuditRetention in dlq/policies.hpp; RedisListOptions::audit_retention,
/// KeyValueOptions::audit_retention, MemoryStorage's constructor): each append removes the
/// queue's records made more than max_age (default 90 days) before it, by the writers'
/// clock (Options::clock, as for entries' Retention::max_age). A count an operator can
/// exhaust does not decide what stays: records are written for changes only (above), and
/// the hard cap, max_records (default 1 000 000 per queue), is there to bound memory, far
/// above what operations write in 90 days. When the cap does remove records younger than
/// max_age it says so: the storage reports how many, the front end counts them
/// (Counters::audit_dropped, `dlq_audit_dropped_total`), logs it at error level
/// (`[dlq.audit] …`) and writes an "audit_dropped" record (counts: dropped) in the trail at
/// that place. Every process that writes a queue's trail applies its own settings: give
/// them all the same (dlqctl: --audit-max-age, --audit-max-records), or the shortest
/// max_age and smallest cap among them is what holds.
///
/// When an audit write fails the operation is NOT undone (its entries have moved already):
/// the failure is counted in Counters::audit_errors, logged through Options::log at error
/// level (`[dlq.audit] …`), and the operation returns normally.
///
/// Storage contract (optional members; a storage without them has no trail and audit()
/// returns nothing):
///
///     std::size_t audit_append(std::string_view queue,
///                              std::chrono::system_clock::time_point at,
///                              std::string_view record);    // one JSON object; returns how
///                                                           // many records younger than the
///                                                           // retention age it dropped (a
///                                                           // cap); may return void
///     std::vector<std::string> audit_read(std::string_view queue,
///                                         std::chrono::system_clock::time_point since,
///                                         std::size_t limit);  // records at >= since,
///                                                              // oldest first, at most limit
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlq/detail/compiled.hpp"
#include "dlq/detail/json_dom.hpp"
#include "dlq/detail/sha256.hpp"
#include "dlq/detail/time.hpp"
#include "dlq/entry.hpp"

namespace dlq {

/// The actor of an audit record when neither the call nor Options::actor named one. Set
/// Options::actor (a service's name, the operator's login) to have the trail say more.
inline constexpr std::string_view unknown_actor = "unknown";

/// One audit record.
struct AuditRecord {
  /// When the operation finished (Options::clock).
  std::chrono::system_clock::time_point time{};
  /// Who: the per-call actor, else Options::actor, else dlq::unknown_actor ("unknown"):
  /// never empty in a record this library wrote (records of older versions may be).
  std::string actor;
  /// What: "replay", "replay_edited" (a replay with ReplayOptions::transform, or
  /// replay_edited()), "discard", "remove", "purge", "purge_corrupt", "trim",
  /// "recover"; "audit_dropped" marks where the trail's cap removed records younger than
  /// its max age (counts: "dropped"; see AuditRetention).
  std::string operation;
  /// The queue operated on.
  std::string queue;
  /// The filter (Filter::describe(): its ids cut at Options::audit_max_ids, the rest counted
  /// in "ids_omitted"; each text cut to its first 1024 bytes, its length in "<name>_bytes");
  /// null (written as an empty object) when the operation had none.
  nlohmann::ordered_json filter;
  /// Counts of the report, by name (e.g. {"examined": 10, "replayed": 7}); null (written as
  /// an empty object) when none.
  nlohmann::ordered_json counts;
  /// Ids of the entries affected, at most Options::audit_max_ids of them.
  std::vector<std::string> ids;
  /// Ids affected and not listed in `ids`.
  std::size_t ids_omitted = 0;
  /// "ok", "cancelled", or "failed: <message>" (what was applied before the failure).
  std::string outcome = "ok";
  /// Operation-specific details (replay: destination, batch number; edit: "old_sha256",
  /// "new_sha256" of the payloads); null (written as an empty object) when none.
  nlohmann::ordered_json detail;

  /// The record as one JSON object (what the storage keeps).
  nlohmann::ordered_json to_json() const;

  /// Reads a record written by to_json(). Fields that are missing or of another type keep
  /// their defaults, so a damaged record still shows what it has.
  /// (A template only so that a translation unit that never calls it does not compile
  /// nlohmann's parser; Json is always nlohmann::ordered_json.)
  template <class Json = nlohmann::ordered_json>
  static AuditRecord from_json(std::string_view text);
};

template <class Json>
AuditRecord AuditRecord::from_json(std::string_view text) {
  AuditRecord r;
  const auto j = detail::parse_json_or_discarded<Json>(text);
  if (!j.is_object()) {
    r.outcome = "unreadable audit record";
    return r;
  }
  const auto str = [&](const char* key, std::string& out) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_string()) out = it->template get<std::string>();
  };
  std::string time;
  str("time", time);
  if (const auto t = detail::iso_time::parse(time)) r.time = *t;
  str("actor", r.actor);
  str("operation", r.operation);
  str("queue", r.queue);
  str("outcome", r.outcome);
  if (auto it = j.find("filter"); it != j.end() && it->is_object()) r.filter = *it;
  if (auto it = j.find("counts"); it != j.end() && it->is_object()) r.counts = *it;
  if (auto it = j.find("detail"); it != j.end() && it->is_object()) r.detail = *it;
  if (auto it = j.find("ids"); it != j.end() && it->is_array())
    for (const auto& id : *it)
      if (id.is_string()) r.ids.push_back(id.template get<std::string>());
  if (auto it = j.find("ids_omitted"); it != j.end() && it->is_number_unsigned())
    r.ids_omitted = it->template get<std::size_t>();
  return r;
}

namespace detail {

/// Appends `text` as a JSON string exactly as nlohmann's dump(-1, ' ', false,
/// error_handler_t::replace) writes it: `"`, `\\`, \b \f \n \r \t escaped, other control
/// characters as \u00xx, UTF-8 kept, and each maximal ill-formed subsequence replaced by one
/// U+FFFD (the bytes of a cut-short sequence together, the byte that broke it read again).
void append_dumped_string(std::string& out, std::string_view text);

/// Appends `value` as nlohmann's `value.dump(-1, ' ', false, error_handler_t::replace)`
/// writes it, byte for byte, without compiling nlohmann's serializer.
void append_dumped(std::string& out, const nlohmann::ordered_json& value);

/// `record.to_json().dump(-1, ' ', false, error_handler_t::replace)`, written directly (what
/// write_audit stores).
std::string audit_json(const AuditRecord& record);

template <class S, class = void>
struct has_audit : std::false_type {};
template <class S>
struct has_audit<
    S, std::void_t<
           decltype(std::declval<S&>().audit_append(
               std::string_view{}, std::chrono::system_clock::time_point{}, std::string_view{})),
           decltype(std::declval<S&>().audit_read(
               std::string_view{}, std::chrono::system_clock::time_point{}, std::size_t{}))>>
    : std::true_type {};

/// Milliseconds since the epoch (what storages index audit records by).
inline std::int64_t audit_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

/// Sets `j["key"] = value` for each (key, value) pair, in order, making `j` an object: the
/// value of the braced list `{{"key", value}, ...}`, without basic_json's initializer-list
/// constructor (json_ref and its deduction over every element), which every translation unit
/// that writes an audit record would otherwise compile.
inline void set_members(nlohmann::ordered_json&) {}
template <class V, class... Rest>
void set_members(nlohmann::ordered_json& j, const char* key, const V& value, const Rest&... rest) {
  j[key] = value;
  set_members(j, rest...);
}

/// The object `{{"key", value}, ...}`, built by set_members.
template <class... Members>
nlohmann::ordered_json object_of(const Members&... members) {
  nlohmann::ordered_json j = nlohmann::ordered_json(nlohmann::ordered_json::value_t::object);
  set_members(j, members...);
  return j;
}

/// The longest text condition an audit record keeps of a filter, in bytes.
inline constexpr std::size_t audit_max_filter_text_bytes = 1024;

/// The longest id an audit record keeps, in bytes. dlq's own ids have 36; an entry written by
/// another program may carry an id of any length, and a record copies the ids it changed:
/// one of 100 entries with 1 MiB ids made a record of 117 MB. A longer id is cut (audit_id).
inline constexpr std::size_t audit_max_id_bytes = 256;

/// The first bytes of `text`, at most `max`, never cut inside a UTF-8 sequence.
inline std::size_t utf8_prefix(std::string_view text, std::size_t max) {
  if (text.size() <= max) return text.size();
  std::size_t keep = max;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80)
    --keep;  // text[keep] continues a sequence: cut before the sequence's lead byte
  return keep;
}

/// `id` as an audit record keeps it: whole up to audit_max_id_bytes, else its first bytes
/// and "…" (U+2026), so a reader sees it was cut.
inline std::string audit_id(std::string_view id) {
  if (id.size() <= audit_max_id_bytes) return std::string(id);
  return std::string(id.substr(0, utf8_prefix(id, audit_max_id_bytes))) + "\xE2\x80\xA6";
}

/// Collects the ids of one audit record: the first `max` kept (each by audit_id), the rest
/// counted.
struct audit_ids {
  std::size_t max = 100;
  std::vector<std::string> ids;
  std::size_t omitted = 0;
  void add(std::string_view id) {
    if (ids.size() < max)
      ids.push_back(audit_id(id));
    else
      ++omitted;
  }
};

/// A filter for an audit record (Filter::describe()): its "ids" cut to the first `max`, the
/// rest counted in "ids_omitted" — as the record's own ids — each by audit_id, and each text
/// longer than audit_max_filter_text_bytes cut to its first bytes (never inside a UTF-8
/// sequence), its length in "<name>_bytes", so that a call naming many ids or long texts
/// writes a record of bounded size (the trail's record cap bounds its memory only then).
inline nlohmann::ordered_json audit_filter(nlohmann::ordered_json filter, std::size_t max) {
  std::vector<std::pair<std::string, std::size_t>> cut;
  for (auto& [name, value] : filter.items()) {
    if (!value.is_string()) continue;
    auto& text = value.template get_ref<std::string&>();
    if (text.size() <= audit_max_filter_text_bytes) continue;
    cut.emplace_back(name, text.size());
    text.resize(utf8_prefix(text, audit_max_filter_text_bytes));
  }
  for (const auto& [name, bytes] : cut)
    filter[name + "_bytes"] = bytes;
  const auto it = filter.find("ids");
  if (it == filter.end() || !it->is_array()) return filter;
  for (auto& id : *it)
    if (id.is_string()) id = audit_id(id.template get_ref<const std::string&>());
  if (it->size() <= max) return filter;
  const std::size_t omitted = it->size() - max;
  it->erase(it->begin() + static_cast<std::ptrdiff_t>(max), it->end());
  filter["ids_omitted"] = omitted;
  return filter;
}

}  // namespace detail

}  // namespace dlq

#if defined(DLQ_HEADER_ONLY)
#include "dlq/audit-inl.hpp"
#endif
