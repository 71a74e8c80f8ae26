// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The batched walk that replay and retention share: one queue's dead list, from its oldest
// end, in atomic replay_step batches whose size grows towards the byte and item targets, with
// back-off and a bound when batches conflict. It runs over a type-erased view of the storage
// (dead_list), so it — and the engines above it — is compiled once, whatever the storage.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "dlq/detail/function_ref.hpp"
#include "dlq/detail/queue_core.hpp"
#include "dlq/errors.hpp"
#include "dlq/storage.hpp"

namespace dlq::detail {

/// One walk over one queue's dead list: what the engines need of a storage. Each instance
/// holds its own replay cursor.
class dead_list {
 public:
  /// Number of entries in the dead list now.
  virtual std::size_t size() = 0;
  /// Bounds the walk to the entries present now (the storage's replay_snapshot, see
  /// dlq/storage.hpp) and returns their number; nullopt when the storage has no such bound
  /// (the engines then bound the walk by that count themselves). Called once, first.
  virtual std::optional<std::size_t> snapshot() = 0;
  /// One replay_step at the walk's cursor (see dlq/storage.hpp).
  virtual StepResult step(std::size_t max_items, Decider decide) = 0;
  /// True when the storage uses a job id as the entry id (see keyed_by_job_id).
  virtual bool keyed_by_job_id() const noexcept = 0;
  /// True when the storage has the fast step (replay_fast, see dlq/storage.hpp).
  virtual bool has_fast_step() const noexcept = 0;
  /// One replay_fast at the walk's cursor; {declined = true} when the storage has none.
  virtual FastStep fast_step(std::size_t max_items, std::string_view destination,
                             bool want_ids) = 0;

 protected:
  ~dead_list() = default;
};

/// dead_list over a storage `S` (see dlq/storage.hpp).
template <class S>
class storage_dead_list final : public dead_list {
 public:
  storage_dead_list(S& storage, std::string_view queue) : storage_(storage), queue_(queue) {}
  std::size_t size() override { return storage_.size(queue_, ListKind::dead); }
  std::optional<std::size_t> snapshot() override {
    if constexpr (has_replay_snapshot<S>::value) {
      return storage_.replay_snapshot(queue_, cursor_);
    } else {
      return std::nullopt;
    }
  }
  StepResult step(std::size_t max_items, Decider decide) override {
    return storage_.replay_step(queue_, cursor_, max_items, decide);
  }
  bool keyed_by_job_id() const noexcept override { return detail::keyed_by_job_id<S>::value; }
  bool has_fast_step() const noexcept override { return has_replay_fast<S>::value; }
  FastStep fast_step(std::size_t max_items, std::string_view destination, bool want_ids) override {
    if constexpr (has_replay_fast<S>::value) {
      return storage_.replay_fast(queue_, cursor_, max_items, destination, want_ids);
    } else {
      FastStep none;
      none.declined = true;
      return none;
    }
  }

 private:
  S& storage_;
  std::string_view queue_;
  typename S::replay_cursor cursor_{};
};

/// Steps through a dead list in batches. Each batch starts at `first_window` items and grows
/// (x4 a batch) towards Options::replay_batch_bytes (by the average entry size seen) and
/// Options::replay_batch_items, and never beyond `window_cap`. A batch that conflicts (the
/// list changed under it) is redone after a back-off; after Options::max_conflicts conflicts
/// in a row without the list getting shorter the walk throws conflict_error.
class batched_walk {
 public:
  /// What the caller says when the walk gives up: the conflict_error's text, given the
  /// number of conflicts in a row.
  using give_up_message = function_ref<std::string(std::size_t consecutive)>;

  batched_walk(queue_core& core, dead_list& list, std::size_t first_window,
               std::size_t window_cap = std::numeric_limits<std::size_t>::max())
      : core_(core), list_(list), window_(first_window), cap_(window_cap) {}

  /// Applies one batch of at most min(window, `limit`) items, calling `decide` once per item.
  /// `begin` runs before every attempt (a redone batch is decided anew: the caller resets
  /// what it collected). Returns the items examined; 0 = the list ends at the cursor.
  /// @throws conflict_error (text from `give_up`) as described above; what the storage throws.
  std::size_t next(std::size_t limit, Decider decide, function_ref<void()> begin,
                   give_up_message give_up) {
    for (;;) {
      begin();
      std::uint64_t bytes = 0;
      auto measured = [&](std::string_view raw, Decision& d) {
        bytes += raw.size();
        decide(raw, d);
      };
      const std::size_t n = std::max<std::size_t>(1, std::min({window_, limit, cap_}));
      const StepResult step = list_.step(n, Decider(measured));
      if (step.conflict) {
        on_conflict(give_up);
        continue;
      }
      consecutive_ = 0;
      if (step.examined == 0) return 0;
      const std::uint64_t average = std::max<std::uint64_t>(1, bytes / step.examined);
      const auto by_bytes = static_cast<std::size_t>(
          std::max<std::uint64_t>(1, core_.options.replay_batch_bytes / average));
      window_ = std::min({by_bytes, window_ * 4, core_.options.replay_batch_items});
      return step.examined;
    }
  }

  /// Batches redone so far because the list changed under them.
  std::size_t conflicts() const noexcept { return conflicts_; }

 private:
  // Someone else removed entries where the walk was working. Back off (so that a second
  // replayer of the same queue can finish its batches) and try again; give up only when the
  // list stops shrinking — a change that is not progress.
  void on_conflict(give_up_message give_up) {
    ++conflicts_;
    core_.counters.conflicts.fetch_add(1, std::memory_order_relaxed);
    const std::size_t size_now = list_.size();
    consecutive_ = consecutive_ != 0 && size_now < size_before_ ? 1 : consecutive_ + 1;
    size_before_ = size_now;
    if (consecutive_ >= core_.options.max_conflicts) throw conflict_error(give_up(consecutive_));
    core_.back_off(consecutive_, conflicts_);
  }

  queue_core& core_;
  dead_list& list_;
  std::size_t window_;
  std::size_t cap_;
  std::size_t conflicts_ = 0;
  std::size_t consecutive_ = 0;
  std::size_t size_before_ = 0;
};

}  // namespace dlq::detail
