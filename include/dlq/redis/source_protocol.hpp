// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/source_protocol.hpp
/// The decisions of the Redis source queue, written once and without I/O: its key names,
/// its three scripts (take, settle = ack or nack, recover), the arguments each call sends,
/// the bounds (at most 1000 jobs a take, 1000 a recover step), the name checks, and what a
/// reply means. Both dlq::RedisSourceQueue (blocking, hiredis) and
/// dlq::asio::AsyncSourceQueue<dlq::asio::RedisListStorage> (asynchronous, dlq's own RESP)
/// call these functions and only do the I/O around them, so the two front ends move the
/// same jobs between the same keys in the same atomic steps. Needs no hiredis; tested
/// without a server (tests/redis/test_source_protocol.cpp).
///
/// Keys, for the source key S of queue Q (RedisListOptions::source_key, default `queue:{Q}`):
/// the jobs are the list S (producers RPUSH, take moves from the head), consumer C's in-flight
/// jobs the list `S:inflight:C`, and the set `S:consumers` names the consumers that hold jobs.
/// All three share S's hash tag, so on Redis Cluster a queue's keys are in one slot. A queue
/// name holds no brace (dlq/queue_names.hpp): the `}` after it in S ends it, so no queue's
/// S is another's in-flight list (consumer `x}` of `orders` and the queue
/// `orders}:inflight:x` once shared `queue:{orders}:inflight:x}`). A consumer name may hold
/// any byte. With a pattern that has no `}` after the `*` (the Python seed's `queue:*`, a
/// fixed tag `{q}:*`) the name is not delimited: keep names free of `:inflight:` and
/// `:consumers` there (docs/names.md).
///
/// A call's arguments after the script (the script's body for EVAL, its SHA1 for EVALSHA) are
/// handed one by one to `arg(std::string_view)`, in order: numkeys, KEYS, ARGV — so the
/// blocking code appends them to a hiredis command and the async code formats them as RESP,
/// without copying a payload.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/source_queue.hpp"

namespace dlq::redis::source {

/// Take script. KEYS: source, in-flight, consumers. ARGV: max, consumer. Returns the jobs
/// the consumer already holds (up to max), else moves up to max jobs from the head of the
/// source into its in-flight list (and names it in the consumers set) and returns them.
inline constexpr std::string_view take_script = R"lua(
local max = tonumber(ARGV[1])
local held = redis.call('LRANGE', KEYS[2], 0, max - 1)
if #held > 0 then return held end
local out = {}
for i = 1, max do
  local v = redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
  if not v then break end
  out[i] = v
end
if #out > 0 then redis.call('SADD', KEYS[3], ARGV[2]) end
return out
)lua";

/// Settle script (ack, nack). KEYS: in-flight, source, consumers. ARGV: requeue ("1"/"0"),
/// consumer, payloads... Removes one in-flight item equal to each payload (and on nack
/// pushes it back at the source's tail, after checking the source is a list so nothing is
/// removed that cannot be put back); returns how many were held.
inline constexpr std::string_view settle_script = R"lua(
if ARGV[1] == '1' then
  local t = redis.call('TYPE', KEYS[2]).ok
  if t ~= 'list' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' is a ' .. t .. ', not a list; nothing was moved')
  end
end
local n = 0
for i = 3, #ARGV do
  if redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    n = n + 1
    if ARGV[1] == '1' then redis.call('RPUSH', KEYS[2], ARGV[i]) end
  end
end
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[2]) end
return n
)lua";

/// Recover script. KEYS: in-flight, source, consumers. ARGV: consumer, max. Moves up to max
/// in-flight jobs, oldest first, to the source's tail; returns how many.
inline constexpr std::string_view recover_script = R"lua(
local n = 0
local max = tonumber(ARGV[2])
while n < max do
  local v = redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT')
  if not v then break end
  n = n + 1
end
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[3], ARGV[1]) end
return n
)lua";

/// At most this many jobs move in one take (the script blocks the server while it runs).
inline constexpr std::size_t take_limit = 1000;
/// A recover moves this many jobs per script call (ARGV "1000"), and calls again while a
/// call moved as many.
inline constexpr long long recover_chunk = 1000;

/// The keys of one queue and one consumer.
struct Keys {
  std::string source;     ///< the job list S
  std::string in_flight;  ///< `S:inflight:C`, the consumer's in-flight list
  std::string consumers;  ///< `S:consumers`, the consumers holding jobs
};

/// The key of consumer `consumer`'s in-flight list, for the source key `source`.
inline std::string in_flight_key(std::string_view source, std::string_view consumer) {
  std::string k(source);
  k += ":inflight:";
  k += consumer;
  return k;
}
/// The key of the set of consumers that hold jobs, for the source key `source`.
inline std::string consumers_key(std::string_view source) {
  return std::string(source) + ":consumers";
}
/// The three keys of `consumer` on the queue whose source key is `source`.
inline Keys keys(std::string source, std::string_view consumer) {
  Keys k;
  k.in_flight = in_flight_key(source, consumer);
  k.consumers = consumers_key(source);
  k.source = std::move(source);
  return k;
}

/// How many jobs a take of `max` asks for: 0 means 1, more than take_limit means take_limit.
inline std::size_t take_count(std::size_t max) noexcept {
  return std::min<std::size_t>(std::max<std::size_t>(max, 1), take_limit);
}

/// The take script's ARGV[1] for a take of `max`: take_count(max) in decimal.
inline std::string take_count_arg(std::size_t max) {
  return std::to_string(take_count(max));
}

/// The take script's arguments: `count` is take_count_arg(max); every view handed to `arg`
/// refers to `k`, `consumer`, `count` or a literal (a hiredis command keeps the views).
template <class Arg>
void take_args(const Keys& k, std::string_view consumer, std::string_view count, Arg&& arg) {
  arg(std::string_view("3"));
  arg(std::string_view(k.source));
  arg(std::string_view(k.in_flight));
  arg(std::string_view(k.consumers));
  arg(count);
  arg(consumer);
}
/// How many arguments take_args() hands over.
inline constexpr std::size_t take_arg_count = 6;

/// The settle script's arguments: ack (`requeue` false) or nack (true) of `jobs` (views of
/// `k`, `consumer`, the payloads and literals).
template <class Arg>
void settle_args(const Keys& k, std::string_view consumer, const std::vector<SourceJob>& jobs,
                 bool requeue, Arg&& arg) {
  arg(std::string_view("3"));
  arg(std::string_view(k.in_flight));
  arg(std::string_view(k.source));
  arg(std::string_view(k.consumers));
  arg(std::string_view(requeue ? "1" : "0"));
  arg(consumer);
  for (const SourceJob& j : jobs)
    arg(std::string_view(j.payload));
}
/// How many arguments settle_args() hands over for `jobs` jobs.
inline std::size_t settle_arg_count(std::size_t jobs) noexcept {
  return 6 + jobs;
}

/// The recover script's arguments (one step of at most recover_chunk jobs; views of `k`,
/// `consumer` and literals).
template <class Arg>
void recover_args(const Keys& k, std::string_view consumer, Arg&& arg) {
  arg(std::string_view("3"));
  arg(std::string_view(k.in_flight));
  arg(std::string_view(k.source));
  arg(std::string_view(k.consumers));
  arg(consumer);
  arg(std::string_view("1000"));  // recover_chunk
}
/// How many arguments recover_args() hands over.
inline constexpr std::size_t recover_arg_count = 6;

/// After a recover step that moved `moved` jobs: true when another step must run (the step
/// moved a full chunk, so more may be held).
inline bool recover_again(long long moved) noexcept {
  return moved >= recover_chunk;
}

/// The jobs of a take's reply (its array of payloads, in order).
inline std::vector<SourceJob> jobs_of(std::vector<std::string> payloads) {
  std::vector<SourceJob> out;
  out.reserve(payloads.size());
  for (std::string& p : payloads)
    out.push_back(SourceJob{{}, std::move(p), 0});
  return out;
}

/// The label of a script call in messages: "source take script on <key>".
inline std::string label(std::string_view what, const std::string& key) {
  return "source " + std::string(what) + " script on " + key;
}

/// Refuses a queue name the rule of dlq/queue_names.hpp refuses (empty, a brace…; `where`:
/// the operation, for the message).
/// @throws dlq::invalid_argument
inline void check(std::string_view queue, const char* where) {
  dlq::detail::check_source_queue("redis", queue, where);
}
/// Refuses such a queue name, or an empty consumer name.
/// @throws dlq::invalid_argument
inline void check(std::string_view queue, std::string_view consumer, const char* where) {
  dlq::detail::check_source_names("redis", queue, consumer, where);
}

}  // namespace dlq::redis::source
