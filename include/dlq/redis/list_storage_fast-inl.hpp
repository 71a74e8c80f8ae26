// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_storage_fast-inl.hpp
/// The fast path of an unfiltered replay on RedisListStorage (replay_fast, the script
/// dlq/redis/scripts/replay_fast.hpp): the front end first moves the entries at the head whose
/// frame proves their payload span — what dlq writes for an unflagged entry,
/// `{"payload_bytes":N,"original_payload":…,"id":…`, ending with
/// `,"envelope_bytes":<the item's length>}` (dlq/entry.hpp) — with one script per batch,
/// returning their ids only when something reads them (ReplayOptions::record_ids,
/// Options::on_event, the audit record's first Options::audit_max_ids ids), else their count.
/// The first item it cannot prove (a Python or older envelope, a corrupt, parked, base64 or
/// whitespace-kept entry, a wrong length field, two entries joined into one item) ends the
/// fast step, and replay_step decides it. The replay invariants of list_storage.hpp hold for
/// both; the fast script writes nothing but the move itself (no receipt, no tombstone).
/// Definitions of list_storage.hpp's non-template members (see DLQ_REDIS_INLINE in
/// dlq/detail/compiled.hpp): included by list_storage.hpp in header-only mode, compiled into
/// the library in compiled mode.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/scripts/replay_fast.hpp"

namespace dlq {

DLQ_REDIS_INLINE FastStep RedisListStorage::replay_fast(std::string_view queue,
                                                        replay_cursor& cursor,
                                                        std::size_t max_items,
                                                        std::string_view destination,
                                                        bool want_ids) {
  check_queue(queue, "replay_fast");
  FastStep result;
  if (cursor.offset() != 0) {
    result.declined = true;
    return result;
  }
  if (max_items == 0) return result;
  const StepTarget target = step_target(queue);
  ReplayPlan plan;  // only for its destination check: the same slot rule as replay_step
  destination_index(target, plan, destination);
  const std::string label = "fast replay script on " + target.dead;
  Lease lease;
  std::vector<redis::Reply> replies;
  const bool acked = options_.replicas_to_ack > 0;  // a replication_error names the ids
  try {
    replies = send_fast(target, lease, cursor, plan.destinations.front(), max_items,
                        want_ids || acked, label);
  } catch (const dlq::storage_error& e) {
    cursor.restart_at(0);
    if (!e.outcome_unknown()) throw;
    throw_fast_lost(e, label);
  }
  cursor.restart_at(0);
  const redis::Reply wait = take_wait(replies);
  read_fast_answers(replies, **lease, cursor, label, result);
  if (acked && result.moved > 0) {
    confirm(wait.get(), (*lease)->endpoint(), label, result.ids, result.moved,
            redis::detail::AckedWrite::move);
  }
  if (!want_ids) result.ids.clear();
  return result;
}

DLQ_REDIS_INLINE std::vector<redis::Reply> RedisListStorage::send_fast(
    const StepTarget& target, Lease& lease, const replay_cursor& cursor, const std::string& dest,
    std::size_t max_items, bool want_ids, const std::string& label) {
  // From 64 items on, four scripts of a quarter each in one round trip, from 128 on eight
  // of an eighth (each at most max_batch_items): the engine's steps of eight batches made
  // replay_all 0.83x the LMOVE loop where four made it 0.76-0.78x (half the round trips;
  // docs/benchmarks.md).
  // Each is atomic and reads the head itself, so each takes up where the previous one
  // stopped (one that follows a script ended by an unprovable item stops there too, moving
  // nothing); between two of them other clients' commands run.
  std::size_t scripts = max_items >= 128 ? 8 : max_items >= 64 ? 4 : 1;
  const std::size_t per = std::min((max_items + scripts - 1) / scripts, options_.max_batch_items);
  scripts = std::min<std::size_t>(scripts, (max_items + per - 1) / per);
  const std::string runs = runs_key(target.dead);
  const std::string ttl = std::to_string(options_.receipt_ttl.count());
  return target.router->run(
      lease, target.dead, redis::Effect::write,
      [&](const std::string& sha) {
        std::vector<redis::Command> cmds;
        for (std::size_t k = 0; k < scripts; ++k) {
          const std::size_t n = std::min(per, max_items - k * per);
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(3).arg(std::string_view(target.dead));
          c.arg(std::string_view(dest)).arg(std::string_view(runs));
          c.arg(n).arg(options_.max_batch_bytes);
          c.arg(want_ids ? "1" : "0").arg(std::min<std::size_t>(n, 256));
          c.arg(k > 0 ? "1" : "0").arg(std::string_view(cursor.run()));
          c.arg(std::string_view(ttl)).label(label);
          cmds.push_back(std::move(c));
        }
        return waited(std::move(cmds));  // + WAIT when replicas_to_ack > 0
      },
      &shared_->fast_script);
}

[[noreturn]] DLQ_REDIS_INLINE void RedisListStorage::throw_fast_lost(const dlq::storage_error& e,
                                                                     const std::string& label) {
  const std::string what = std::string(e.what()) + " — each " + label +
                           " moved its entries completely or not at all; nothing was lost; "
                           "run the replay again";
  if (dynamic_cast<const dlq::timeout_error*>(&e) != nullptr) throw dlq::timeout_error(what, true);
  if (dynamic_cast<const dlq::connection_error*>(&e) != nullptr)
    throw dlq::connection_error(what, true);
  throw dlq::storage_error(what, true);
}

DLQ_REDIS_INLINE void RedisListStorage::read_fast_answers(const std::vector<redis::Reply>& replies,
                                                          redis::Connection& conn,
                                                          replay_cursor& cursor,
                                                          const std::string& label,
                                                          FastStep& result) {
  const redisReply* last = nullptr;  // the last script that answered: the head it left
  // A later script that met an unprovable item first answers {0, 1, {}, {}} without
  // reading the run (ARGV[5]): the head is still the run the script before it returned
  // (other clients may have changed it meanwhile: replay_step re-checks what it applies);
  // when that script stopped at its item limit instead, the run is unread (unprovable 1,
  // no window: replay_step reads it).
  bool stopped_after = false;
  // A script's error (a slot that moved meanwhile, out of memory, a script killed by
  // SCRIPT KILL before its first write) moved nothing, and the scripts after it ran all
  // the same: every script that answered is reported (its moves are in the destination),
  // and the error is met again by the next step. Only when no script answered is the
  // first error thrown (nothing moved).
  const redisReply* failed = nullptr;
  bool answered = false;
  for (std::size_t k = 0; k < replies.size(); ++k) {
    const redisReply& r = *replies[k];
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 4 ||
        r.element[0]->type != REDIS_REPLY_INTEGER || r.element[1]->type != REDIS_REPLY_INTEGER ||
        r.element[2]->type != REDIS_REPLY_ARRAY || r.element[3]->type != REDIS_REPLY_ARRAY) {
      if (failed == nullptr) failed = &r;
      continue;
    }
    answered = true;
    const bool stopped = k > 0 && r.element[0]->integer == 0 && r.element[1]->integer == 1 &&
                         r.element[3]->elements == 0;
    stopped_after = stopped;
    if (!stopped) last = &r;
    result.moved += static_cast<std::size_t>(r.element[0]->integer);
    result.batches.push_back(static_cast<std::size_t>(r.element[0]->integer));
    const redisReply& ids = *r.element[2];
    for (std::size_t i = 0; i < ids.elements; ++i)
      result.ids.emplace_back(redis::view(*ids.element[i]));
  }
  // The unprovable items the last script met are the new head, read in the same atomic
  // step: the next replay_step decides them without reading them again (and re-checks them
  // when it applies).
  if (!answered) {
    if (failed->type == REDIS_REPLY_ERROR) throw_script_error(*failed, conn, label);
    redis::detail::throw_unexpected_reply(*failed, conn.endpoint(), label, true);
  }
  if (last == nullptr) {  // the first script failed; the ones that answered stopped at once
    result.unprovable = 1;
    return;
  }
  result.unprovable = static_cast<std::size_t>(last->element[1]->integer);
  if (stopped_after && result.unprovable == 0) result.unprovable = 1;
  const redisReply& rest = *last->element[3];
  std::vector<std::string> window;
  window.reserve(rest.elements);
  for (std::size_t i = 0; i < rest.elements; ++i)
    window.emplace_back(redis::view(*rest.element[i]));
  if (!window.empty()) cursor.read(std::move(window));
}

}  // namespace dlq
