// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file replay-inl.hpp
/// The definitions of replay.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by replay.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include "dlq/replay.hpp"

namespace dlq::detail {

DLQ_INLINE replay_engine::result::result()
    : edits(nlohmann::ordered_json(nlohmann::ordered_json::value_t::array)) {}

DLQ_INLINE replay_engine::result replay_engine::run(const ReplayOptions& options,
                                                    bool keep_replayed) {
  if (!options.to_queue.empty()) queue_core::validate_queue(options.to_queue, "replay (to_queue)");
  select(options);
  keep_replayed_ = keep_replayed;
  result_.report.dry_run = options.dry_run;
  // "All" is the entries present now. The storage bounds the walk to exactly those when it
  // can (replay_snapshot, see dlq/storage.hpp); else the walk examines at most as many
  // entries as there are now — exact only while no other client removes entries.
  const std::optional<std::size_t> bounded = list_.snapshot();
  at_start_ = bounded ? *bounded : list_.size();
  std::size_t budget = bounded ? std::numeric_limits<std::size_t>::max() : at_start_;
  // Batches start at one entry (the entry size is not known yet); with a rate, at most
  // about a tenth of a second's worth of entries each.
  const std::size_t cap = options.rate > 0 && options.rate / 10 < 1e9
                              ? static_cast<std::size_t>(std::max(1.0, options.rate / 10))
                              : std::numeric_limits<std::size_t>::max();
  batched_walk walk(core_, list_, 1, cap);
  auto begin = [this] {
    pending_.clear();
    step_raw_.clear();
    step_notes_.clear();
    step_limit_used_ = 0;
    step_past_limit_ = 0;
  };
  auto decide = [&](std::string_view raw, Decision& d) { this->decide(options, raw, d); };
  auto give_up = [this](std::size_t consecutive) {
    return message(
        "replay", "queue '" + std::string(queue_) + "'",
        "the dead-letter list kept changing under the replay (" + std::to_string(consecutive) +
            " batches in a row) without getting shorter",
        "another process is rewriting the same entries; nothing was lost, run the replay "
        "again when it is done (" +
            std::to_string(result_.report.replayed) + " entries were replayed before this)");
  };
  const auto started = core_.now();
  // The fast path (see fast()): while it is on, each round first moves the provable
  // entries at the head server-side, then hands the run of unprovable ones after them —
  // and only those — to the compare-and-move step.
  fast_ = fast_eligible(options);
  while (budget > 0 && limit_left_ > 0 && !(by_id_ && ids_left_.empty())) {
    if (options.cancel && options.cancel->load()) {
      result_.report.cancelled = true;
      break;
    }
    std::size_t slow_limit = budget;
    if (fast_) {
      const fast_next next = fast_round(options, budget, cap, started, slow_limit);
      if (next == fast_next::stop) break;
      if (next == fast_next::next_round) continue;
    }
    const std::size_t examined = walk.next(slow_limit, Decider(decide), begin, give_up);
    result_.report.conflicts = walk.conflicts();
    if (examined == 0) break;
    commit(options, examined);
    budget -= std::min(budget, examined);
    const ReplayReport& r = result_.report;
    if (options.on_progress)
      options.on_progress({r.examined, r.replayed, r.set_aside, remaining(r.examined)});
    if (options.rate > 0 && r.replayed > 0) pace(options.rate, started, options.cancel);
  }
  for (const auto& id : ids_left_)
    result_.report.skipped.push_back({id, SkipReason::not_found, "no entry with this id"});
  return std::move(result_);
}

DLQ_INLINE replay_engine::fast_next replay_engine::fast_round(
    const ReplayOptions& options, std::size_t& budget, std::size_t cap,
    std::chrono::system_clock::time_point started, std::size_t& slow_limit) {
  if (fast_skip_ > 0) {
    --fast_skip_;  // backing off: the last fast step moved nothing (see below)
    return fast_next::slow_step;
  }
  // Fast steps grow like the walk's batches (x4 from one entry), up to eight batches of
  // Options::replay_batch_items (the storage pipelines them, each atomic and bounded
  // in bytes), so that cancel and on_progress see the first entries move early. After
  // a step that an unprovable entry ended, at most 63 (one script: the next such entry
  // may be near).
  const FastStep f = fast(options, std::min({budget, cap, fast_window_}));
  fast_window_ = f.unprovable > 0
                     ? std::min<std::size_t>(fast_window_ * 4, 63)
                     : std::min(fast_window_ * 4, 8 * core_.options.replay_batch_items);
  if (f.declined) {
    fast_ = false;
    return fast_next::slow_step;
  }
  budget -= std::min(budget, f.moved);
  fast_run_ += f.moved;
  if (f.moved > 0 && options.rate > 0) pace(options.rate, started, options.cancel);
  if (f.unprovable == 0)
    return f.moved == 0 ? fast_next::stop : fast_next::next_round;  // 0: the list ends here
  if (budget == 0 || limit_left_ == 0) return fast_next::stop;
  if (options.cancel && options.cancel->load()) {
    result_.report.cancelled = true;
    return fast_next::stop;
  }
  // An unprovable entry ended the run of provable ones. A long run goes on with the
  // fast path at once (compare-and-move decides just the unprovable ones). A short one
  // — none at all in a queue of base64 entries, a few where a Python worker and a dlq
  // one share a queue — costs two round trips per run, where compare-and-move alone
  // takes up to Options::replay_batch_items entries per round trip: then
  // compare-and-move goes on with its own batches (it decides provable entries the
  // same way) for 1, 2, 4 … 16 batches before the next fast step.
  const bool long_run = fast_run_ >= fast_min_run;
  fast_run_ = 0;
  if (long_run) {
    fast_backoff_ = 1;
    slow_limit = std::min(budget, f.unprovable);
  } else {
    fast_skip_ = fast_backoff_;
    fast_backoff_ = std::min<std::size_t>(fast_backoff_ * 2, 16);
  }
  return fast_next::slow_step;
}

DLQ_INLINE void replay_engine::select(const ReplayOptions& o) {
  destination_ = o.to_queue.empty() ? queue_ : std::string_view(o.to_queue);
  ids_left_.insert(o.ids.begin(), o.ids.end());
  by_id_ = !o.ids.empty();
  limit_left_ = o.limit == 0 ? std::numeric_limits<std::size_t>::max() : o.limit;
  matcher_.emplace(o, core_.now());
  filtered_ = !matcher_->matches_all() || static_cast<bool>(o.filter);
  need_ids_ = o.record_ids || static_cast<bool>(core_.options.on_event) || collect_audit_;
  result_.ids.max = core_.options.audit_max_ids;
}

DLQ_INLINE void replay_engine::pace(double rate, std::chrono::system_clock::time_point started,
                                    const std::atomic<bool>* cancel) {
  const double seconds = std::min(static_cast<double>(result_.report.replayed) / rate, 1e9);
  const auto due = started + std::chrono::round<std::chrono::system_clock::duration>(
                                 std::chrono::duration<double>(seconds));
  for (auto now = core_.now(); due > now; now = core_.now()) {
    if (cancel && cancel->load()) return;
    core_.wait(std::min<std::chrono::nanoseconds>(due - now, std::chrono::milliseconds(100)));
  }
}

DLQ_INLINE void replay_engine::decide(const ReplayOptions& o, std::string_view raw, Decision& d) {
  if (step_limit_used_ >= limit_left_) {  // the limit is reached: leave the rest, unexamined
    ++step_past_limit_;
    return;
  }
  envelope_view view;
  std::string_view payload;
  problem_.clear();
  const bool readable = view_envelope(raw, view);
  if (!readable) problem_ = unreadable_reason(raw);
  if (!readable || !cut_payload(view, scratch_, payload, problem_)) {
    std::string id = readable ? entry_id(view, raw) : derived_id(raw);
    if (by_id_ && !take_id(id)) return;  // not asked for: leave it alone
    pending_item item{Action::keep, std::move(id), SkipReason::corrupt, problem_, true};
    if (o.set_aside_corrupt) {
      item.action = Action::set_aside;
      if (!o.dry_run) d.action = Action::set_aside;
    }
    pending_.push_back(std::move(item));
    return;
  }
  std::string id;
  if (by_id_) {
    id = entry_id(view, raw);
    if (!take_id(id)) return;
  } else {
    if (view.parked == "true") {
      pending_.push_back({Action::keep, entry_id(view, raw), SkipReason::parked,
                          "parked by the poison-loop guard; replay it by id", true});
      return;
    }
    if (filtered_ && !matches(o, view, raw)) return;
    if (need_ids_) id = entry_id(view, raw);
  }
  ++step_limit_used_;
  if (keep_replayed_) step_raw_.emplace_back(raw);
  pending_.push_back({Action::replay, std::move(id), SkipReason{}, {}, false});
  if (o.transform) {
    if (auto edited = o.transform(parse_entry(std::string(raw)))) {
      // Refused before anything of this step is applied (see detail/edit.hpp).
      if (blank_payload(*edited))
        throw blank_edit_error(
            queue_, pending_.back().id.empty() ? entry_id(view, raw) : pending_.back().id,
            edited->size());
      edit_note note{pending_.size() - 1, {}, {}};
      if (collect_audit_ && result_.ids.ids.size() + step_notes_.size() < result_.ids.max) {
        note.old_sha = sha256_hex(payload);
        note.new_sha = sha256_hex(*edited);
      }
      step_notes_.push_back(std::move(note));
      edited_ = std::move(*edited);  // the storage copies it before the next call
      payload = edited_;
    }
  }
  if (o.dry_run) return;
  d.action = Action::replay;
  d.destination = destination_;
  d.payload = payload;
  d.identity = identity_of(view);
}

DLQ_INLINE std::string replay_engine::unreadable_reason(std::string_view raw) {
  return json::skip_value(raw.data(), raw.data() + raw.size(), json::mode::lenient) != nullptr
             ? "not a JSON object"
             : "not valid JSON";
}

DLQ_INLINE void replay_engine::commit(const ReplayOptions& o, std::size_t examined) {
  ReplayReport& report = result_.report;
  // The entries of the window after the limit was reached were read, not examined: they are
  // left as if the batch had ended before them (as the fast step, which never reads them).
  report.examined += examined - std::min(examined, step_past_limit_);
  ++report.batches;
  auto& counters = core_.counters;
  std::size_t next_note = 0;
  for (std::size_t index = 0; index < pending_.size(); ++index) {
    auto& p = pending_[index];
    const edit_note* note = nullptr;
    if (next_note < step_notes_.size() && step_notes_[next_note].index == index)
      note = &step_notes_[next_note++];
    if (by_id_) ids_left_.erase(p.id);
    if (p.action == Action::replay) {
      ++report.replayed;
      --limit_left_;
      if (collect_audit_) result_.ids.add(p.id);
      if (note) {
        ++report.edited;
        if (!note->old_sha.empty())
          result_.edits.push_back(
              object_of("id", p.id, "old_sha256", note->old_sha, "new_sha256", note->new_sha));
      }
      if (!o.dry_run) {
        counters.replayed.fetch_add(1, std::memory_order_relaxed);
        core_.emit(EventKind::replayed, queue_, p.id, destination_);
      }
      if (o.record_ids) report.replayed_ids.push_back(p.id);
    } else if (p.action == Action::set_aside) {
      ++report.set_aside;
    }
    if (p.skipped && p.reason == SkipReason::corrupt) {
      counters.corrupt.fetch_add(1, std::memory_order_relaxed);
      core_.emit(EventKind::corrupt, queue_, p.id, p.detail);
    }
    if (p.skipped) report.skipped.push_back({std::move(p.id), p.reason, std::move(p.detail)});
  }
  for (auto& raw : step_raw_)
    result_.replayed_raw.push_back(std::move(raw));
  step_raw_.clear();
}

}  // namespace dlq::detail
