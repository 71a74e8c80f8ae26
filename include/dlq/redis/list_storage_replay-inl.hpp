// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/list_storage_replay-inl.hpp
/// The compare-and-move replay step of RedisListStorage (replay_step, replay_snapshot,
/// recover): read a window, decide it, apply the decisions with one script, resolve a lost
/// answer by its receipt. Definitions of list_storage.hpp's non-template members (see
/// DLQ_REDIS_INLINE in dlq/detail/compiled.hpp): included by list_storage.hpp in header-only
/// mode, compiled into the library in compiled mode.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/entry.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/scripts/recover_tombstone.hpp"
#include "dlq/redis/scripts/replay_step.hpp"
#include "dlq/redis/scripts/snapshot.hpp"

namespace dlq {

DLQ_REDIS_INLINE StepResult RedisListStorage::replay_step(std::string_view queue,
                                                          replay_cursor& cursor,
                                                          std::size_t max_items, Decider decide) {
  check_queue(queue, "replay_step");
  StepResult result;
  if (max_items == 0) return result;
  const std::size_t max = std::min(max_items, options_.max_batch_items);
  const StepTarget target = step_target(queue);
  Lease lease;
  if (!window_at(target, lease, cursor, max)) {
    result.conflict = true;  // the head kept changing: the caller backs off and retries
    return result;
  }
  cursor.take();
  const std::size_t first_item = cursor.next_;  // the window item plan index 0 stands for
  const ReplayPlan plan = plan_step(target, cursor, max, decide);
  result.examined = plan.examined;
  if (plan.items.empty()) {
    cursor.passed(plan.examined, plan.kept);
    return result;
  }
  const std::size_t from = cursor.offset();
  Applied applied;
  try {
    applied = apply(target, lease, cursor, plan, max);
  } catch (const dlq::storage_error& e) {
    cursor.restart_at(from);
    // The server is out of reach: leave the receipts to expire rather than wait for it
    // again when the cursor goes away.
    if (dynamic_cast<const dlq::reply_error*>(&e) == nullptr) cursor.receipts_.forget();
    throw;
  } catch (...) {
    cursor.restart_at(from);
    throw;
  }
  if (!applied.receipt.empty()) cursor.receipts_.add(std::move(applied.receipt), shared_);
  if (!applied.done) {  // conflict: nothing applied; a read-ahead would be stale
    cursor.restart_at(from);
    result.conflict = true;
    return result;
  }
  std::vector<std::string> ids;  // the moved entries' ids, for a replication_error
  if (options_.replicas_to_ack > 0) ids = moved_ids(cursor, first_item, plan);
  cursor.applied(plan.kept, std::move(applied.read_ahead));
  confirm(applied.wait.get(), applied.endpoint, "replay script on " + target.dead,
          std::move(ids), plan.items.size(), redis::detail::AckedWrite::move);
  return result;
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::moved_ids(
    const replay_cursor& cursor, std::size_t first_item, const ReplayPlan& plan) {
  std::vector<std::string> ids;
  ids.reserve(plan.items.size());
  for (const auto& item : plan.items) {
    const std::string& raw = cursor.window_[first_item + item.index];
    detail::envelope_view view;
    ids.push_back(detail::view_envelope(raw, view) ? detail::entry_id(view, raw)
                                                   : detail::derived_id(raw));
  }
  return ids;
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::recover(std::string_view queue) {
  check_queue(queue, "recover");
  const std::string k = dead_.key(queue);
  const std::string corrupt = corrupt_.key(queue);
  redis::Router& router = routed();
  Lease lease;
  std::set<std::string> suspects;
  constexpr std::size_t chunk = 1000;
  for (std::size_t start = 0;; start += chunk) {
    auto replies = router.run(lease, k, redis::Effect::read, [&](const std::string&) {
      return one(std::move(
          redis::Command("LRANGE").arg(std::string_view(k)).arg(start).arg(start + chunk - 1)));
    });
    const auto items = redis::strings(replies[0], **lease, "LRANGE " + k);
    for (const auto& it : items) {
      if (it.compare(0, detail::tombstone_prefix.size(), detail::tombstone_prefix) == 0) {
        suspects.insert(it);
      }
    }
    if (items.size() < chunk) break;
  }
  const std::string label = "recover script on " + k;
  const std::string runs = runs_key(k);
  std::size_t removed = 0;
  for (const auto& item : suspects) {
    const std::string step = step_of_tombstone(item);
    const std::string receipt = k + ":receipt:" + (step.empty() ? "-" : step);
    // The script's effect is the same when it runs twice (what it moved is gone from the
    // dead list), so a lost answer is harmless: a read, retried once after a lost connection.
    auto replies = router.run(
        lease, k, redis::Effect::read,
        [&](const std::string& sha) {
          redis::Command c("EVALSHA");
          c.arg_copy(sha).arg(4).arg(std::string_view(k)).arg(std::string_view(corrupt));
          c.arg(std::string_view(receipt)).arg(std::string_view(runs)).arg(std::string_view(item));
          c.arg(step.empty() ? "0" : "1").arg(redis::scripts::replay_tombstones_mark);
          c.label(label);
          return one(std::move(c));
        },
        &shared_->recover_script);
    const redisReply& r = redis::check(replies[0], **lease, label);
    if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 ||
        r.element[0]->type != REDIS_REPLY_INTEGER) {
      redis::detail::throw_unexpected_reply(r, (*lease)->endpoint(), label);
    }
    removed += static_cast<std::size_t>(r.element[0]->integer);
  }
  return removed;
}

DLQ_REDIS_INLINE RedisListStorage::StepTarget RedisListStorage::step_target(
    std::string_view queue) {
  StepTarget t;
  t.queue = queue;
  t.dead = dead_.key(queue);
  t.router = &routed();
  t.cluster = t.router->clustered();
  t.slot = redis::key_slot(t.dead);
  if (t.cluster && redis::hashed_part(t.dead).size() == t.dead.size()) {
    throw dlq::invalid_argument(dlq::detail::message(
        "redis", "RedisListStorage::replay_step",
        "queue name '" + std::string(queue) + "' gives key '" + t.dead +
            "' an empty hash tag, so its lists would be in different Redis Cluster slots",
        "in Redis Cluster a queue name must not start with '}'"));
  }
  return t;
}

DLQ_REDIS_INLINE bool RedisListStorage::window_at(const StepTarget& target, Lease& lease,
                                                  replay_cursor& cursor, std::size_t max) {
  cursor.check_anchor();
  if (cursor.has_read_ahead()) return true;
  // Nothing read ahead (or an empty read-ahead: items may have arrived since).
  return read_window(*target.router, lease, target.dead, cursor, max);
}

DLQ_REDIS_INLINE RedisListStorage::ReplayPlan RedisListStorage::plan_step(
    const StepTarget& target, const replay_cursor& cursor, std::size_t max, Decider& decide) const {
  ReplayPlan plan;
  const std::size_t available = std::min(cursor.window_.size() - cursor.next_, max);
  std::size_t bytes = 0;
  const std::less<const char*> before;
  auto inside = [&before](std::string_view part, const std::string& raw) {
    return part.data() != nullptr && !before(part.data(), raw.data()) &&
           !before(raw.data() + raw.size(), part.data() + part.size());
  };
  for (std::size_t i = 0; i < available; ++i) {
    const std::string& raw = cursor.window_[cursor.next_ + i];
    Decision d;
    decide(std::string_view(raw), d);
    ++plan.examined;
    if (d.action != Action::keep && d.action != Action::set_aside && d.action != Action::discard &&
        d.action != Action::replay) {
      d.action = Action::keep;  // an action this storage does not know: leave the item
    }
    if (d.action == Action::keep) {
      plan.kept.add(raw);
      continue;
    }
    redis::scripts::ReplayItem it;
    it.index = static_cast<std::uint32_t>(i);
    it.length = static_cast<std::uint32_t>(raw.size());
    it.check = raw;
    // The script compares the item at its index with `check`: the identity when there is
    // one (length + id bytes at their offset), else the whole raw item.
    if (!d.identity.empty() && inside(d.identity, raw)) {
      it.identity_first = static_cast<std::uint32_t>(d.identity.data() - raw.data()) + 1;
      it.check = d.identity;
    }
    // Twice the raw size either way: the script re-reads the item and either receives it
    // back or cuts a payload (up to its size) out of it.
    bytes += 2 * raw.size();
    if (d.action == Action::set_aside) {
      it.target = redis::scripts::replay_set_aside;
    } else if (d.action == Action::discard) {
      it.target = redis::scripts::replay_discard;
    } else {
      it.target = destination_index(target, plan, d.destination);
      if (inside(d.payload, raw)) {  // a span of the raw item: no bytes sent
        it.payload_first = static_cast<std::uint32_t>(d.payload.data() - raw.data()) + 1;
        it.payload_last = it.payload_first + static_cast<std::uint32_t>(d.payload.size()) - 1;
      } else {
        plan.payloads.emplace_back(d.payload);
        bytes += d.payload.size();
      }
    }
    plan.items.push_back(it);
    if (bytes >= options_.max_batch_bytes) {
      plan.budget_reached = true;
      break;
    }
  }
  return plan;
}

DLQ_REDIS_INLINE std::uint32_t RedisListStorage::destination_index(
    const StepTarget& target, ReplayPlan& plan, std::string_view destination) const {
  const std::string key = source_.key(destination.empty() ? target.queue : destination);
  std::size_t at = 0;
  while (at < plan.destinations.size() && plan.destinations[at] != key)
    ++at;
  if (at == plan.destinations.size()) {
    if (target.cluster && redis::key_slot(key) != target.slot) {
      throw dlq::invalid_argument(dlq::detail::message(
          "redis", "RedisListStorage::replay_step",
          "replay from queue '" + std::string(target.queue) + "' to queue '" +
              std::string(destination) + "': in Redis Cluster '" + key + "' (slot " +
              std::to_string(redis::key_slot(key)) + ") and '" + target.dead + "' (slot " +
              std::to_string(target.slot) +
              ") are on different hash slots, and a replay moves entries atomically "
              "within one slot only; nothing was moved",
          "replay to the entries' own queue, then move them on from there"));
    }
    plan.destinations.push_back(key);
  }
  return static_cast<std::uint32_t>(at) + redis::scripts::replay_first_destination;
}

DLQ_REDIS_INLINE RedisListStorage::Applied RedisListStorage::apply(const StepTarget& target,
                                                                   Lease& lease,
                                                                   replay_cursor& cursor,
                                                                   const ReplayPlan& plan,
                                                                   std::size_t max) {
  const std::size_t from = cursor.offset();
  const std::size_t to = from + plan.kept.size();  // the next window's offset
  const bool anchored = to > 0 && cursor.kept_.size() + plan.kept.size() == to;
  bool head = from == 0;  // the decided items are the head of the list: one LTRIM
  for (std::size_t j = 0; head && j < plan.items.size(); ++j)
    head = plan.items[j].index == j;
  const std::string step = next_step_id();
  const std::string tombstone = std::string(detail::tombstone_prefix) + step;
  const std::string receipt = target.dead + ":receipt:" + step;
  const std::string corrupt = corrupt_.key(target.queue);
  const std::string label = "replay script on " + target.dead;
  const std::string ttl = std::to_string(options_.receipt_ttl.count());
  const std::string packed = redis::scripts::encode_replay_plan(plan.items);
  const std::string runs = runs_key(target.dead);
  redis::scripts::ReplayCall call{};
  call.dead = target.dead;
  call.corrupt = corrupt;
  call.receipt = receipt;
  call.runs = runs;
  call.destinations = &plan.destinations;
  call.offset = from;
  call.span = plan.items.back().index + std::size_t{1};
  call.tombstone = tombstone;
  call.head = head;
  call.receipt_ttl_ms = ttl;
  call.items = &plan.items;
  call.run = cursor.run();
  call.payloads = &plan.payloads;
  // Callers grow their batches (the front end by x4 a step), so read up to 4x this step's
  // size ahead — but when the byte budget ended this step, the next one will end near the
  // same count: read a quarter more rather than items that would be read again.
  std::size_t ahead = std::min(max * 4, options_.max_batch_items);
  if (plan.budget_reached) ahead = std::min(ahead, plan.examined + plan.examined / 4 + 1);
  // The next window, from the last kept item if the replay keeps items at the head (the
  // next step checks that it is still there).
  const std::size_t first = anchored ? to - 1 : to;  // the list position of the window's first
  auto build = [&](const std::string& sha) {  // + WAIT when replicas_to_ack > 0
    return waited(step_commands(sha, call, packed, label, cursor, first, to + ahead - 1));
  };

  long long old_client = 0;
  std::vector<redis::Reply> replies;
  try {
    replies = target.router->run(lease, target.dead, redis::Effect::write, build,
                                 &shared_->replay_script, 0, &old_client);
  } catch (const dlq::storage_error& e) {
    if (!e.outcome_unknown() || !lease) throw;
    Applied a;
    a.done = resolve_lost_answer(**lease, old_client, receipt, label, e, target.cluster);
    a.receipt = receipt;  // read now; absent when not applied (deleting it costs nothing)
    a.endpoint = (*lease)->endpoint();  // no WAIT reply: an applied step is unconfirmed
    return a;
  }
  cursor.receipts_.forget();  // the DEL's answer was read with the others
  redis::Reply wait = take_wait(replies);
  redis::Connection& conn = **lease;
  const redisReply& r = *replies[0];
  if (r.type == REDIS_REPLY_ERROR) throw_script_error(r, conn, label);
  if (r.type != REDIS_REPLY_INTEGER) {
    redis::detail::throw_unexpected_reply(r, conn.endpoint(), label, true);
  }
  Applied a;
  a.done = r.integer != 0;
  a.wait = std::move(wait);
  a.endpoint = conn.endpoint();
  if (a.done) a.receipt = receipt;
  // The read-ahead, unless it did not answer with items — a redirection (the slot moved
  // right after the script; in a transaction EXEC then fails), or the run's bound gone: the
  // step applied all the same, and the next one reads afresh.
  if (!a.done) return a;
  a.read_ahead = read_ahead_reply(replies, conn, target.dead, !cursor.run().empty(), first);
  return a;
}

DLQ_REDIS_INLINE std::vector<redis::Command> RedisListStorage::step_commands(
    const std::string& sha, const redis::scripts::ReplayCall& call, const std::string& packed,
    const std::string& label, const replay_cursor& cursor, std::size_t first, std::size_t last) {
  std::vector<redis::Command> cmds;
  cmds.reserve(2);
  cmds.push_back(redis::scripts::replay_step_command(sha, call, packed));
  cmds.back().label(label);
  if (cursor.run().empty()) {
    redis::Command next("LRANGE");
    next.arg(call.dead).arg(first).arg(last);
    cmds.push_back(std::move(next));
  } else {
    // With the run's bound, read at the same instant, to clip the window to it here (a
    // read script would copy every item through Lua: ~15 % of a compare-and-move replay;
    // the step script has just refreshed the run's deadline).
    cmds.emplace_back("MULTI");
    redis::Command next("LRANGE");
    next.arg(call.dead).arg(first).arg(last);
    cmds.push_back(std::move(next));
    redis::Command bound("HGET");
    bound.arg(call.runs).arg(std::string_view(cursor.run()));
    cmds.push_back(std::move(bound));
    cmds.emplace_back("EXEC");
  }
  // Earlier steps' receipts: their answers were read, nobody needs them any more.
  if (!cursor.receipts_.keys().empty()) {
    redis::Command del("DEL");
    for (const auto& k : cursor.receipts_.keys())
      del.arg(std::string_view(k));
    cmds.push_back(std::move(del));
  }
  return cmds;
}

DLQ_REDIS_INLINE std::optional<std::vector<std::string>> RedisListStorage::read_ahead_reply(
    const std::vector<redis::Reply>& replies, redis::Connection& conn, const std::string& dead,
    bool bounded, std::size_t first) {
  if (!bounded) {
    if (replies[1]->type != REDIS_REPLY_ARRAY) return std::nullopt;
    return redis::strings(replies[1], conn, "LRANGE " + dead);
  }
  const redisReply& exec = *replies[4];
  if (exec.type != REDIS_REPLY_ARRAY || exec.elements != 2 ||
      exec.element[0]->type != REDIS_REPLY_ARRAY || exec.element[1]->type != REDIS_REPLY_STRING)
    return std::nullopt;
  const std::string_view value = redis::view(*exec.element[1]);
  std::size_t bound = 0, digits = 0;
  for (; digits < value.size() && value[digits] >= '0' && value[digits] <= '9'; ++digits)
    bound = bound * 10 + static_cast<std::size_t>(value[digits] - '0');
  if (digits == 0) return std::nullopt;
  const redisReply& items = *exec.element[0];
  std::vector<std::string> window;
  for (std::size_t i = 0; i < items.elements && first + i < bound; ++i)
    window.emplace_back(redis::view(*items.element[i]));
  return window;
}

[[noreturn]] DLQ_REDIS_INLINE void RedisListStorage::throw_script_error(const redisReply& r,
                                                                        redis::Connection& conn,
                                                                        const std::string& label) {
  const std::string code = redis::detail::reply_code(redis::view(r));
  const bool known = code == "WRONGTYPE" || code == "NOSCRIPT" || code == "OOM" || code == "BUSY" ||
                     code == "NOPERM" || code == "READONLY" || code == "MOVED" || code == "ASK" ||
                     code == "CROSSSLOT" || code == "NOAUTH" || code == "LOADING" ||
                     code == "MASTERDOWN" || code == "DLQSNAPSHOT";
  redis::detail::throw_reply_error(
      r, conn.endpoint(), label, !known,
      known ? std::string("nothing was moved") +
                  (code == "WRONGTYPE" ? "; a list dlq writes to holds another type: rename "
                                         "that key or configure other key names"
                                       : "")
            : "items may have been copied to their destination without being removed "
              "(a duplicate, never a loss); run recover() and check the destination");
}

DLQ_REDIS_INLINE bool RedisListStorage::read_window(redis::Router& router, Lease& lease,
                                                    const std::string& dead, replay_cursor& cursor,
                                                    std::size_t max) {
  auto lrange = [&](std::size_t from, std::size_t to) {
    auto replies = router.run(lease, dead, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LRANGE").arg(std::string_view(dead)).arg(from).arg(to)));
    });
    return redis::strings(replies[0], **lease, "LRANGE " + dead);
  };
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (cursor.read(read_items(router, lease, dead, cursor, cursor.window_start(),
                               cursor.offset_ + max - 1)))
      return true;
    // Read the head in chunks (the kept prefix may be long) up to the first item that
    // was not kept; the kept items left are now before it.
    constexpr std::size_t chunk = 1000;
    cursor.kept_.begin_realign();
    bool more = true;
    for (std::size_t start = 0; more && start < cursor.offset_; start += chunk) {
      const auto items = lrange(start, std::min(start + chunk, cursor.offset_) - 1);
      for (const std::string& item : items) {
        more = cursor.kept_.feed(item);
        if (!more) break;
      }
      if (items.size() < std::min(chunk, cursor.offset_ - start)) more = false;  // list ended
    }
    cursor.restart_at(cursor.kept_.finish_realign());
  }
  cursor.restart_at(cursor.offset_);
  return false;
}

DLQ_REDIS_INLINE std::vector<std::string> RedisListStorage::read_items(
    redis::Router& router, Lease& lease, const std::string& dead, const replay_cursor& cursor,
    std::size_t from, std::size_t to) {
  if (cursor.run().empty()) {
    auto replies = router.run(lease, dead, redis::Effect::read, [&](const std::string&) {
      return one(std::move(redis::Command("LRANGE").arg(std::string_view(dead)).arg(from).arg(to)));
    });
    return redis::strings(replies[0], **lease, "LRANGE " + dead);
  }
  const std::string runs = runs_key(dead);
  const std::string ttl = std::to_string(options_.receipt_ttl.count());
  const std::string label = "snapshot read script on " + dead;
  // It refreshes the run's deadline, a write that is the same when repeated: retried as a read.
  auto replies = router.run(
      lease, dead, redis::Effect::read,
      [&](const std::string& sha) {
        redis::Command c("EVALSHA");
        c.arg_copy(sha).arg(2).arg(std::string_view(dead)).arg(std::string_view(runs));
        c.arg(from).arg(to).arg(std::string_view(cursor.run())).arg(std::string_view(ttl));
        c.label(label);
        return one(std::move(c));
      },
      &shared_->snapshot_read_script);
  return redis::strings(replies[0], **lease, label);
}

DLQ_REDIS_INLINE std::size_t RedisListStorage::replay_snapshot(std::string_view queue,
                                                               replay_cursor& cursor) {
  check_queue(queue, "replay_snapshot");
  const StepTarget target = step_target(queue);
  const std::string runs = runs_key(target.dead);
  std::string run = next_step_id();
  const std::string ttl = std::to_string(options_.receipt_ttl.count());
  const std::string label = "snapshot script on " + target.dead;
  Lease lease;
  auto replies = target.router->run(
      lease, target.dead, redis::Effect::write,
      [&](const std::string& sha) {
        redis::Command c("EVALSHA");
        c.arg_copy(sha).arg(2).arg(std::string_view(target.dead)).arg(std::string_view(runs));
        c.arg(std::string_view(run)).arg(std::string_view(ttl)).label(label);
        return one(std::move(c));
      },
      &shared_->snapshot_begin_script);
  const auto n = static_cast<std::size_t>(redis::integer(replies[0], **lease, label));
  cursor.run_.set(runs, std::move(run), shared_);
  return n;
}

DLQ_REDIS_INLINE std::string RedisListStorage::step_of_tombstone(std::string_view item) {
  if (item.size() != detail::tombstone_prefix.size() + 32) return {};
  const std::string_view step = item.substr(detail::tombstone_prefix.size());
  for (const char c : step) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
  }
  return std::string(step);
}

DLQ_REDIS_INLINE std::string RedisListStorage::next_step_id() {
  static constexpr char hex[] = "0123456789abcdef";
  const std::uint64_t a = shared_->step_base;
  const std::uint64_t b = shared_->step_counter.fetch_add(1, std::memory_order_relaxed);
  std::string id(32, '0');
  for (int i = 0; i < 16; ++i) {
    id[static_cast<std::size_t>(i)] = hex[(a >> (60 - 4 * i)) & 0xF];
    id[static_cast<std::size_t>(16 + i)] = hex[(b >> (60 - 4 * i)) & 0xF];
  }
  return id;
}

DLQ_REDIS_INLINE bool RedisListStorage::resolve_lost_answer(
    redis::Connection& conn, long long old_client, const std::string& receipt,
    const std::string& label, const dlq::storage_error& original, bool cluster) {
  try {
    std::vector<redis::Command> cmds;
    if (old_client != 0) {
      redis::Command kill("CLIENT");
      kill.arg("KILL").arg("ID").arg(old_client).label("CLIENT KILL ID");
      cmds.push_back(std::move(kill));
    }
    // In a cluster this node may be importing the slot (the script ran after ASK): ASKING
    // lets GET read the receipt there, and does nothing on the slot's owner.
    if (cluster) cmds.emplace_back("ASKING");
    redis::Command get("GET");
    get.arg(std::string_view(receipt));
    cmds.push_back(std::move(get));
    auto replies = conn.run(cmds, redis::Effect::read);
    // CLIENT KILL may be refused by ACLs; then a script still queued on the old connection
    // may run later — it re-checks every item, so it moves each exactly once or not at all.
    const redisReply& g = redis::check(replies.back(), conn, "GET " + receipt);
    return g.type == REDIS_REPLY_STRING;
  } catch (const dlq::storage_error& e) {
    const std::string what = std::string(original.what()) +
                             " — and the outcome could not be resolved (" + e.what() +
                             "); nothing was lost: the batch of " + label +
                             " moved completely or not at all; run replay again";
    if (dynamic_cast<const dlq::timeout_error*>(&original) != nullptr) {
      throw dlq::timeout_error(what, true);
    }
    if (dynamic_cast<const dlq::connection_error*>(&original) != nullptr) {
      throw dlq::connection_error(what, true);
    }
    throw dlq::storage_error(what, true);
  }
}

// The cursor's moves (see replay_cursor in list_storage.hpp).
DLQ_REDIS_INLINE void RedisListStorage::replay_cursor::restart_at(std::size_t offset) {
  offset_ = offset;
  window_.clear();
  next_ = 0;
  state_ = state::unread;
}

DLQ_REDIS_INLINE void RedisListStorage::replay_cursor::check_anchor() {
  if (state_ != state::anchored) return;
  if (!window_.empty() && kept_.is_last(window_.front())) {
    next_ = 1;
    state_ = state::ready;
  } else {
    state_ = state::unread;
  }
}

DLQ_REDIS_INLINE bool RedisListStorage::replay_cursor::read(std::vector<std::string> window) {
  window_ = std::move(window);
  next_ = 0;
  state_ = reads_from_anchor() ? state::anchored : state::ready;
  check_anchor();
  return state_ == state::ready;
}

DLQ_REDIS_INLINE void RedisListStorage::replay_cursor::passed(std::size_t examined,
                                                              const detail::kept_prefix& kept) {
  kept_.append(kept);
  offset_ += kept.size();
  next_ += examined;
  state_ = state::ready;
}

DLQ_REDIS_INLINE void RedisListStorage::replay_cursor::applied(
    const detail::kept_prefix& kept, std::optional<std::vector<std::string>> ahead) {
  kept_.append(kept);
  offset_ += kept.size();
  next_ = 0;
  if (ahead) {
    window_ = std::move(*ahead);
    state_ = reads_from_anchor() ? state::anchored : state::ready;
  } else {
    window_.clear();
    state_ = state::unread;
  }
}

DLQ_REDIS_INLINE void RedisListStorage::receipt_jar::drop() noexcept {
  if (keys_.empty()) return;
  if (const std::shared_ptr<Shared> owner = owner_.lock()) {
    try {
      Lease lease;
      owner->router.run(lease, keys_.front(), redis::Effect::read, [&](const std::string&) {
        redis::Command del("DEL");
        for (const auto& k : keys_)
          del.arg(std::string_view(k));
        return one(std::move(del));
      });
    } catch (...) {  // NOLINT(bugprone-empty-catch): the receipts expire by themselves
    }
  }
  keys_.clear();
}

DLQ_REDIS_INLINE void RedisListStorage::run_field::drop() noexcept {
  if (id_.empty()) return;
  if (const std::shared_ptr<Shared> owner = owner_.lock()) {
    try {
      Lease lease;
      owner->router.run(lease, key_, redis::Effect::read, [&](const std::string&) {
        return one(std::move(
            redis::Command("HDEL").arg(std::string_view(key_)).arg(std::string_view(id_))));
      });
    } catch (...) {  // NOLINT(bugprone-empty-catch): the field expires by itself
    }
  }
  id_.clear();
}

}  // namespace dlq
