// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/audit_stream.hpp
/// The audit trail of a Redis-backed queue (see dlq/audit.hpp): one Redis Stream per queue,
/// key `<dead key>:audit` (e.g. `dlq:{orders}:audit`, the queue's hash tag, so in Redis
/// Cluster it lives on the queue's master), capped with `XADD … MAXLEN ~ n`. Each stream
/// entry has two fields: `at` (the record's time, milliseconds since the epoch, by the
/// writer's clock) and `record` (the JSON record).
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

#include "dlq/redis/cluster.hpp"
#include "dlq/redis/connection.hpp"

namespace dlq::redis::audit_stream {

/// Appends one record: `XADD key MAXLEN ~ max_records * at <ms> record <json>`.
/// @throws the dlq::storage_error subclasses (dlq::reply_error WRONGTYPE when `key` holds
///         another type).
inline void append(Router& router, const std::string& key, std::int64_t at_ms,
                   std::string_view record, std::size_t max_records) {
  std::optional<ConnectionPool::Lease> lease;
  auto replies = router.run(lease, key, Effect::write, [&](const std::string&) {
    Command c("XADD");
    c.arg(std::string_view(key)).arg("MAXLEN").arg("~").arg(max_records).arg("*");
    c.arg("at").arg(at_ms).arg("record").arg(record).label("XADD " + key);
    std::vector<Command> v;
    v.push_back(std::move(c));
    return v;
  });
  check(replies[0], **lease, "XADD " + key);
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
