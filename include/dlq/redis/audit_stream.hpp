// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/audit_stream.hpp
/// The audit trail of a Redis-backed queue (see dlq/audit.hpp): one Redis Stream per queue,
/// key `<dead key>:audit` (e.g. `dlq:{orders}:audit`, the queue's hash tag, so in Redis
/// Cluster it lives on the queue's master). Each stream entry has two fields: `at` (the
/// record's time, milliseconds since the epoch, by the writer's clock) and `record` (the
/// JSON record).
///
/// Appending: one script (scripts/audit_append.hpp) adds the record and applies the
/// retention (dlq::AuditRetention) atomically: the oldest entries whose `at` is before the
/// new record's time minus max_age are deleted (XDEL, stopping at the first younger one;
/// by `at`, the same clock as reading by `since`, not by the stream id), then the cap
/// (XTRIM MAXLEN, exact, when the stream is over AuditRetention::cap_trigger()). One round
/// trip; in the steady state the script reads one entry beside its XADD.
///
/// Reading: `XRANGE key <since - 10 min> + COUNT …`, in pages, keeping entries whose `at` is
/// at or after `since`. The stream id is the server's clock; the 10 minute margin covers
/// writer clocks that run behind the server's by up to that much. Costs: one XADD per
/// record (one round trip); a read is one round trip per 500 records examined.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/policies.hpp"
#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"
#include "dlq/redis/script.hpp"

namespace dlq::redis::audit_stream {

/// Appends one record made at `at_ms` and applies `retention` (see the file comment);
/// returns how many records the cap removed.
/// @throws the dlq::storage_error subclasses (dlq::reply_error WRONGTYPE when `key` holds
///         another type; nothing was written).
inline std::size_t append(Router& router, Script& script, const std::string& key,
                          std::int64_t at_ms, std::string_view record,
                          const AuditRetention& retention) {
  const std::int64_t before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     retention
                                         .expire_before(std::chrono::system_clock::time_point(
                                             std::chrono::milliseconds(at_ms)))
                                         .time_since_epoch())
                                     .count();
  const std::string label = "audit append script on " + key;
  std::optional<ConnectionPool::Lease> lease;
  auto replies = router.run(
      lease, key, Effect::write,
      [&](const std::string& sha) {
        Command c("EVALSHA");
        c.arg_copy(sha).arg(1).arg(std::string_view(key)).arg(at_ms).arg(record);
        c.arg(before_ms).arg(retention.cap_trigger()).arg(retention.max_records);
        c.arg(AuditRetention::max_dropped_per_append).label(label);
        std::vector<Command> v;
        v.push_back(std::move(c));
        return v;
      },
      &script);
  return static_cast<std::size_t>(integer(replies[0], **lease, label));
}

/// Records with `at` >= since_ms, oldest first, at most `limit`.
/// @throws the dlq::storage_error subclasses.
inline std::vector<std::string> read(Router& router, const std::string& key, std::int64_t since_ms,
                                     std::size_t limit) {
  std::vector<std::string> out;
  if (limit == 0) return out;
  constexpr std::int64_t margin_ms = 10 * 60 * 1000;
  std::string start = since_ms > margin_ms ? std::to_string(since_ms - margin_ms) : "-";
  constexpr std::size_t page = 500;
  std::optional<ConnectionPool::Lease> lease;
  for (;;) {
    auto replies = router.run(lease, key, Effect::read, [&](const std::string&) {
      Command c("XRANGE");
      c.arg(std::string_view(key)).arg(std::string_view(start)).arg("+").arg("COUNT").arg(page);
      c.label("XRANGE " + key);
      std::vector<Command> v;
      v.push_back(std::move(c));
      return v;
    });
    const redisReply& r = check(replies[0], **lease, "XRANGE " + key);
    if (r.type != REDIS_REPLY_ARRAY) detail::throw_unexpected_reply(r, (*lease)->endpoint(), key);
    std::string last_id;
    for (std::size_t i = 0; i < r.elements; ++i) {
      const redisReply& e = *r.element[i];
      if (e.type != REDIS_REPLY_ARRAY || e.elements != 2) continue;
      last_id.assign(view(*e.element[0]));
      const redisReply& fields = *e.element[1];
      std::int64_t at = 0;
      std::string_view record;
      for (std::size_t f = 0; f + 1 < fields.elements; f += 2) {
        const std::string_view name = view(*fields.element[f]);
        const std::string_view value = view(*fields.element[f + 1]);
        if (name == "at") {
          at = std::strtoll(std::string(value).c_str(), nullptr, 10);
        } else if (name == "record") {
          record = value;
        }
      }
      if (at >= since_ms) {
        out.emplace_back(record);
        if (out.size() >= limit) return out;
      }
    }
    if (r.elements < page) return out;
    start = "(" + last_id;  // exclusive: the entries after the last one read
  }
}

}  // namespace dlq::redis::audit_stream
