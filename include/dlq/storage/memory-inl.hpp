// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file storage/memory-inl.hpp
/// The definitions of memory.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by memory.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/storage/memory.hpp"

namespace dlq {

DLQ_INLINE MemoryStorage::MemoryStorage() : state_(std::make_unique<state>()) {}
DLQ_INLINE MemoryStorage::MemoryStorage(AuditRetention audit_retention)
    : state_(std::make_unique<state>()) {
  state_->audit_retention = audit_retention;
}
DLQ_INLINE MemoryStorage::~MemoryStorage() = default;
DLQ_INLINE MemoryStorage::MemoryStorage(MemoryStorage&&) noexcept = default;
DLQ_INLINE MemoryStorage& MemoryStorage::operator=(MemoryStorage&&) noexcept = default;

DLQ_INLINE std::size_t MemoryStorage::push(const Record& record) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists& l = lists_for(record.queue);
  append_dead(l, record.envelope);
  return l.dead.size();
}

DLQ_INLINE bool MemoryStorage::push_bounded(const Record& record, std::size_t max_length) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists& l = lists_for(record.queue);
  if (l.dead.size() >= max_length) return false;
  append_dead(l, record.envelope);
  return true;
}

DLQ_INLINE bool MemoryStorage::push_bounded(const std::vector<Record>& records,
                                            std::size_t max_length) {
  if (records.empty()) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists& l = lists_for(records.front().queue);
  if (l.dead.size() + records.size() > max_length) return false;
  for (const Record& r : records)
    append_dead(l, r.envelope);
  return true;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::push_capped(const std::vector<Record>& records,
                                                               std::size_t max_length) {
  std::vector<std::string> evicted;
  if (records.empty()) return evicted;
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists& l = lists_for(records.front().queue);
  for (const Record& r : records)
    append_dead(l, r.envelope);
  while (l.dead.size() > max_length) {
    evicted.push_back(std::move(l.dead.front()));
    l.dead.pop_front();
    l.numbers.pop_front();
  }
  return evicted;
}

DLQ_INLINE std::int64_t MemoryStorage::bump_count(std::string_view queue, std::string_view key,
                                                  std::chrono::seconds ttl) {
  std::string id(queue);
  id.push_back('\0');
  id.append(key);
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->counters.bump(id, ttl);
}

DLQ_INLINE void MemoryStorage::push_many(const std::vector<Record>& records) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const Record& r : records)
    append_dead(lists_for(r.queue), r.envelope);
}

DLQ_INLINE std::size_t MemoryStorage::size(std::string_view queue, ListKind kind) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const lists* l = find_lists(queue);
  return l ? list_of(*l, kind).size() : 0;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::range(std::string_view queue, ListKind kind,
                                                         std::size_t start, std::size_t count) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const lists* l = find_lists(queue);
  return l ? slice(list_of(*l, kind), start, count) : std::vector<std::string>{};
}

DLQ_INLINE BoundedRange MemoryStorage::range_bytes(std::string_view queue, ListKind kind,
                                                   std::size_t start, std::size_t count,
                                                   std::size_t min_count, std::size_t max_bytes) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  BoundedRange out;
  const lists* l = find_lists(queue);
  if (!l) return out;
  const auto& list = list_of(*l, kind);
  const std::size_t least = std::max<std::size_t>(1, min_count);
  std::size_t bytes = 0;
  for (std::size_t i = start; i < list.size() && i - start < count; ++i) {
    const std::size_t n = list[i].size();
    // beyond min_count only while the total stays within max_bytes: once it is over
    // (the min_count items alone), not even an empty item fits (the Redis script alike)
    if (out.items.size() >= least && (bytes > max_bytes || n > max_bytes - bytes)) {
      out.capped = true;
      break;
    }
    bytes += n;
    out.items.push_back(list[i]);
  }
  return out;
}

DLQ_INLINE bool MemoryStorage::remove(std::string_view queue, ListKind kind,
                                      std::string_view /*id*/, std::string_view raw) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  if (!l) return false;
  auto& list = list_of(*l, kind);
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (*it == raw) {
      if (kind == ListKind::dead) l->numbers.erase(l->numbers.begin() + (it - list.begin()));
      list.erase(it);
      return true;
    }
  }
  return false;
}

DLQ_INLINE std::size_t MemoryStorage::purge(std::string_view queue, ListKind kind) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  if (!l) return 0;
  auto& list = list_of(*l, kind);
  const std::size_t n = list.size();
  list.clear();
  if (kind == ListKind::dead) l->numbers.clear();
  return n;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::queues() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::string> names;
  for (const auto& [name, l] : state_->queues)
    if (!l.dead.empty() || !l.corrupt.empty()) names.push_back(name);
  return names;
}

DLQ_INLINE std::vector<std::size_t> MemoryStorage::sizes(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::size_t> out;
  out.reserve(names.size());
  for (const auto& name : names) {
    const lists* l = find_lists(name);
    out.push_back(l ? l->dead.size() : 0);
  }
  return out;
}

DLQ_INLINE std::vector<QueueEnds> MemoryStorage::stats(const std::vector<std::string>& names) {
  auto ends = [](const std::deque<std::string>& list) {
    ListEnds e;
    e.length = list.size();
    if (!list.empty()) {
      e.first = list.front();
      e.last = list.back();
    }
    return e;
  };
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<QueueEnds> out(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (const lists* l = find_lists(names[i])) out[i] = {ends(l->dead), ends(l->corrupt)};
  }
  return out;
}

DLQ_INLINE std::size_t MemoryStorage::replay_snapshot(std::string_view queue,
                                                      replay_cursor& cursor) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  cursor.last = state_->pushed;  // every item pushed later gets a greater number
  const lists* l = find_lists(queue);
  return l ? l->dead.size() : 0;
}

DLQ_INLINE StepResult MemoryStorage::replay_step(std::string_view queue, replay_cursor& cursor,
                                                 std::size_t max_items, Decider decide) {
  std::vector<std::string> window;
  std::vector<std::uint64_t> numbers;  // of the window's items: what the apply checks
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const lists* l = find_lists(queue);
    if (!l) return {};
    find_place(l->dead, cursor);
    // Numbers ascend along the list: the snapshot's items at the cursor end where the first
    // item numbered past the bound is.
    const auto from = l->numbers.begin() +
                      static_cast<std::ptrdiff_t>(std::min(cursor.offset, l->numbers.size()));
    const auto end = std::upper_bound(from, l->numbers.end(), cursor.last);
    const auto n = std::min(max_items, static_cast<std::size_t>(end - from));
    window = slice(l->dead, cursor.offset, n);
    numbers.assign(from, from + static_cast<std::ptrdiff_t>(window.size()));
  }
  if (window.empty()) return {};

  struct planned {
    Action action = Action::keep;
    std::string destination;
    std::string payload;
  };
  std::vector<planned> plan(window.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < window.size(); ++i) {
    Decision d;
    decide(window[i], d);
    plan[i].action = d.action;
    if (d.action == Action::replay) {
      plan[i].destination.assign(d.destination.data(), d.destination.size());
      plan[i].payload.assign(d.payload.data(), d.payload.size());
    } else if (d.action == Action::keep) {
      ++kept;
    }
  }

  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  const std::size_t begin = cursor.offset;
  if (!l || l->dead.size() < begin + window.size()) return {0, true};
  // The same items (by number: a byte-identical twin that moved into place is another item)
  // where they were decided.
  for (std::size_t i = 0; i < window.size(); ++i)
    if (l->numbers[begin + i] != numbers[i]) return {0, true};
  if (kept != window.size()) {
    std::size_t write = begin;
    for (std::size_t i = 0; i < window.size(); ++i) {
      std::string& item = l->dead[begin + i];
      switch (plan[i].action) {
        case Action::keep:
          if (write != begin + i) {
            l->dead[write] = std::move(item);
            l->numbers[write] = l->numbers[begin + i];
          }
          ++write;
          break;
        case Action::replay:
          lists_for(plan[i].destination).source.push_back(std::move(plan[i].payload));
          break;
        case Action::set_aside:
          l->corrupt.push_back(std::move(item));
          break;
        case Action::discard:
          break;
      }
    }
    const auto first = l->dead.begin() + static_cast<std::ptrdiff_t>(write);
    l->dead.erase(first, first + static_cast<std::ptrdiff_t>(window.size() - kept));
    const auto nfirst = l->numbers.begin() + static_cast<std::ptrdiff_t>(write);
    l->numbers.erase(nfirst, nfirst + static_cast<std::ptrdiff_t>(window.size() - kept));
  }
  for (std::size_t i = 0; i < window.size(); ++i)
    if (plan[i].action == Action::keep) cursor.kept.add(window[i]);
  cursor.offset += kept;
  return {window.size(), false};
}

DLQ_INLINE std::size_t MemoryStorage::audit_append(std::string_view queue,
                                                   std::chrono::system_clock::time_point at,
                                                   std::string_view record) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto& trail = state_->audit[std::string(queue)];
  trail.emplace_back(at, std::string(record));
  const AuditRetention& keep = state_->audit_retention;
  const auto before = keep.expire_before(at);
  while (!trail.empty() && trail.front().first < before)
    trail.pop_front();
  std::size_t dropped = 0;
  for (std::size_t n = keep.excess(trail.size()); n > 0; --n) {
    if (trail.front().first >= before) ++dropped;
    trail.pop_front();
  }
  return dropped;
}

DLQ_INLINE const AuditRetention& MemoryStorage::audit_retention() const noexcept {
  return state_->audit_retention;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::audit_read(
    std::string_view queue, std::chrono::system_clock::time_point since, std::size_t limit) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::string> out;
  const auto it = state_->audit.find(queue);
  if (it == state_->audit.end()) return out;
  for (const auto& [at, record] : it->second) {
    if (out.size() >= limit) break;
    if (at >= since) out.push_back(record);
  }
  return out;
}

DLQ_INLINE void MemoryStorage::source_push(std::string_view queue, std::string_view payload) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists_for(queue).source.emplace_back(payload);
}

DLQ_INLINE std::optional<std::string> MemoryStorage::source_pop(std::string_view queue) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  if (!l || l->source.empty()) return std::nullopt;
  std::string job = std::move(l->source.front());
  l->source.pop_front();
  return job;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::source_take(std::string_view queue,
                                                               std::string_view consumer,
                                                               std::size_t max) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists& l = lists_for(queue);
  auto held = l.in_flight.find(consumer);
  if (held != l.in_flight.end() && !held->second.empty()) return slice(held->second, 0, max);
  std::vector<std::string> out;
  if (l.source.empty()) return out;
  if (held == l.in_flight.end())
    held = l.in_flight.emplace(std::string(consumer), std::deque<std::string>{}).first;
  while (out.size() < max && !l.source.empty()) {
    out.push_back(l.source.front());
    held->second.push_back(std::move(l.source.front()));
    l.source.pop_front();
  }
  return out;
}

DLQ_INLINE std::size_t MemoryStorage::source_settle(std::string_view queue,
                                                    std::string_view consumer,
                                                    const std::vector<std::string_view>& payloads,
                                                    bool requeue) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  if (!l) return 0;
  auto held = l->in_flight.find(consumer);
  if (held == l->in_flight.end()) return 0;
  std::size_t n = 0;
  for (std::string_view p : payloads) {
    auto it = std::find(held->second.begin(), held->second.end(), p);
    if (it == held->second.end()) continue;
    if (requeue) l->source.push_back(std::move(*it));
    held->second.erase(it);
    ++n;
  }
  if (held->second.empty()) l->in_flight.erase(held);
  return n;
}

DLQ_INLINE std::size_t MemoryStorage::source_recover(std::string_view queue,
                                                     std::string_view consumer) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  lists* l = find_lists(queue);
  if (!l) return 0;
  auto held = l->in_flight.find(consumer);
  if (held == l->in_flight.end()) return 0;
  const std::size_t n = held->second.size();
  for (std::string& p : held->second)
    l->source.push_back(std::move(p));
  l->in_flight.erase(held);
  return n;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::source_consumers(std::string_view queue) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::string> out;
  if (const lists* l = find_lists(queue))
    for (const auto& [name, held] : l->in_flight)
      if (!held.empty()) out.push_back(name);
  return out;
}

DLQ_INLINE std::size_t MemoryStorage::source_in_flight(std::string_view queue,
                                                       std::string_view consumer) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const lists* l = find_lists(queue);
  if (!l) return 0;
  auto held = l->in_flight.find(consumer);
  return held == l->in_flight.end() ? 0 : held->second.size();
}

DLQ_INLINE std::size_t MemoryStorage::source_size(std::string_view queue) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const lists* l = find_lists(queue);
  return l ? l->source.size() : 0;
}

DLQ_INLINE std::vector<std::string> MemoryStorage::source_range(std::string_view queue,
                                                                std::size_t start,
                                                                std::size_t count) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const lists* l = find_lists(queue);
  return l ? slice(l->source, start, count) : std::vector<std::string>{};
}

DLQ_INLINE std::vector<std::string> MemoryStorage::slice(const std::deque<std::string>& list,
                                                         std::size_t start, std::size_t count) {
  std::vector<std::string> out;
  if (start >= list.size()) return out;
  const std::size_t n = std::min(count, list.size() - start);
  out.reserve(n);
  const auto first = list.begin() + static_cast<std::ptrdiff_t>(start);
  out.assign(first, first + static_cast<std::ptrdiff_t>(n));
  return out;
}

DLQ_INLINE void MemoryStorage::find_place(const std::deque<std::string>& dead,
                                          replay_cursor& cursor) {
  if (cursor.offset == 0 || cursor.kept.size() != cursor.offset) return;  // a hand-made cursor
  if (dead.size() >= cursor.offset && cursor.kept.is_last(dead[cursor.offset - 1])) return;
  cursor.kept.begin_realign();
  for (std::size_t i = 0; i < cursor.offset && i < dead.size(); ++i)
    if (!cursor.kept.feed(dead[i])) break;
  cursor.offset = cursor.kept.finish_realign();
}

DLQ_INLINE void MemoryStorage::append_dead(lists& l, std::string_view bytes) {
  l.dead.emplace_back(bytes);
  l.numbers.push_back(++state_->pushed);
}

DLQ_INLINE MemoryStorage::lists* MemoryStorage::find_lists(std::string_view queue) {
  auto it = state_->queues.find(queue);
  return it == state_->queues.end() ? nullptr : &it->second;
}

DLQ_INLINE MemoryStorage::lists& MemoryStorage::lists_for(std::string_view queue) {
  auto it = state_->queues.find(queue);
  if (it == state_->queues.end()) it = state_->queues.emplace(std::string(queue), lists{}).first;
  return it->second;
}

}  // namespace dlq
