// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/async_reads.hpp
/// Internal to dlq::asio: the reads of an AsyncDeadLetterQueue on an asynchronous storage —
/// size, peek, and get's page-by-page scan, re-anchored as the blocking get's when other
/// clients remove entries meanwhile. Not part of the API.
#pragma once

#include <asio/dispatch.hpp>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlq/asio/detail/async_queue.hpp"
#include "dlq/detail/id.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/entry.hpp"

namespace dlq::asio::detail {

inline std::vector<Entry> parse_all(std::vector<std::string> raws) {
  std::vector<Entry> out;
  out.reserve(raws.size());
  for (auto& raw : raws)
    out.push_back(parse_entry(std::move(raw)));
  return out;
}

// The id of a stored item, exactly as the blocking front end derives it.
inline std::string stored_id(const std::string& raw) {
  dlq::detail::envelope_view view;
  return dlq::detail::view_envelope(raw, view) ? dlq::detail::entry_id(view, raw)
                                               : dlq::detail::derived_id(raw);
}

template <class Storage>
void async_queue<Storage>::size(std::string queue, done_fn<std::size_t> done) {
  try {
    dlq::detail::queue_core::validate_queue(queue, "size");
  } catch (...) {
    return done(std::current_exception(), 0);
  }
  auto self = this->shared_from_this();
  ::asio::dispatch(executor, [self, queue = std::move(queue), done = std::move(done)] {
    self->storage_.size(queue, self->counted(done));
  });
}

template <class Storage>
void async_queue<Storage>::peek(std::string queue, std::size_t start, std::size_t count,
                                done_fn<std::vector<Entry>> done) {
  try {
    dlq::detail::queue_core::validate_queue(queue, "peek");
  } catch (...) {
    return done(std::current_exception(), {});
  }
  auto self = this->shared_from_this();
  ::asio::dispatch(
      executor, [self, queue = std::move(queue), start, count, done = std::move(done)] {
        self->storage_.range(queue, start, count,
                             [self, done](std::exception_ptr e, std::vector<std::string> raws) {
                               self->count_failure(e);
                               done(e, e ? std::vector<Entry>{} : parse_all(std::move(raws)));
                             });
      });
}

// One async_get: the blocking get's scan (DeadLetterQueue::find_raw), one round trip
// per step. Pages are read by offset while other clients may remove entries (a replay,
// a trim): each page after the first is read from the last item of the page before;
// when that item is not there the list moved left under the scan, which finds the item
// again (a page back) and goes on after it, so no entry slides past unseen. If it was
// removed itself the scan starts over (at most 3 times; then "not found").
template <class Storage>
struct async_queue<Storage>::get_scan {
  std::string queue, id;
  bool plain = false;  // the id is stored verbatim: a cheap pre-check (id_stored_verbatim)
  std::size_t start = 0;
  std::optional<std::string> last;  // the last item of the previous page
  int restarts = 0;
  done_fn<std::optional<Entry>> done;
};

template <class Storage>
void async_queue<Storage>::get(std::string queue, std::string id,
                               done_fn<std::optional<Entry>> done) {
  try {
    dlq::detail::queue_core::validate_queue(queue, "get");
  } catch (...) {
    return done(std::current_exception(), std::nullopt);
  }
  auto self = this->shared_from_this();
  ::asio::dispatch(executor, [self, queue = std::move(queue), id = std::move(id),
                              done = std::move(done)]() mutable {
    auto scan = std::make_shared<get_scan>();
    scan->queue = std::move(queue);
    scan->id = std::move(id);
    scan->plain = dlq::detail::id_stored_verbatim(scan->id);
    scan->done = std::move(done);
    self->get_page(std::move(scan));
  });
}

template <class Storage>
void async_queue<Storage>::get_page(std::shared_ptr<get_scan> scan) {
  auto self = this->shared_from_this();
  const bool anchored = scan->last.has_value();
  storage_.range(scan->queue, anchored ? scan->start - 1 : scan->start,
                 anchored ? get_page_size + 1 : get_page_size,
                 [self, scan, anchored](std::exception_ptr e, std::vector<std::string> raws) {
                   self->count_failure(e);
                   if (e) return scan->done(e, std::nullopt);
                   if (anchored && (raws.empty() || raws.front() != *scan->last))
                     return self->get_reanchor(scan);
                   const std::size_t first = anchored ? 1 : 0;
                   for (std::size_t i = first; i < raws.size(); ++i) {
                     std::string& raw = raws[i];
                     if (scan->plain && raw.find(scan->id) == std::string::npos) continue;
                     if (stored_id(raw) == scan->id)
                       return scan->done(nullptr, parse_entry(std::move(raw)));
                   }
                   if (raws.size() - first < get_page_size)
                     return scan->done(nullptr, std::nullopt);
                   scan->last = std::move(raws.back());
                   scan->start += get_page_size;
                   self->get_page(scan);
                 });
}

// The list moved left under the scan: find the last item seen a page back.
template <class Storage>
void async_queue<Storage>::get_reanchor(std::shared_ptr<get_scan> scan) {
  auto self = this->shared_from_this();
  const std::size_t start = scan->start;
  const std::size_t back = start - 1 > get_page_size ? start - 1 - get_page_size : 0;
  storage_.range(scan->queue, back, start - back,
                 [self, scan, back](std::exception_ptr e, std::vector<std::string> before) {
                   self->count_failure(e);
                   if (e) return scan->done(e, std::nullopt);
                   const auto it = std::find(before.rbegin(), before.rend(), *scan->last);
                   if (it != before.rend()) {
                     scan->start = back + static_cast<std::size_t>(before.rend() - it);
                   } else if (++scan->restarts <= 3) {
                     scan->start = 0;
                     scan->last.reset();
                   } else {
                     return scan->done(nullptr, std::nullopt);
                   }
                   self->get_page(scan);
                 });
}

}  // namespace dlq::asio::detail
