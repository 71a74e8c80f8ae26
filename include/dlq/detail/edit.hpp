// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/edit.hpp
/// The rule for edited payloads (ReplayOptions::transform, DeadLetterQueue::replay_edited):
/// an edit whose result is empty or only whitespace is refused. A failed edit looks like
/// that — a transform whose jq failed inside a pipeline, `true`, `echo`, an empty file —
/// and an empty payload is never a valid job: replaying it would push a job no worker can
/// run and delete the original, which then survives only as a hash in the audit trail.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dlq/errors.hpp"

namespace dlq::detail {

/// True when `payload` is empty or holds only ASCII whitespace (space, tab, CR, LF, VT,
/// FF): never a valid edited payload.
inline bool blank_payload(std::string_view payload) noexcept {
  for (const char c : payload)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\v' && c != '\f') return false;
  return true;
}

/// The error for an edit of entry `id` of `queue` whose result is blank (`bytes` long).
inline dlq::invalid_argument blank_edit_error(std::string_view queue, std::string_view id,
                                              std::size_t bytes) {
  return dlq::invalid_argument(
      message("replay", "queue '" + std::string(queue) + "', entry '" + std::string(id) + "'",
              "the edited payload is empty (" + std::to_string(bytes) +
                  (bytes == 0 ? " bytes" : " bytes of whitespace") +
                  "), and an empty payload is never a valid job",
              "nothing was replayed and the dead letter keeps its payload; check what produced the "
              "edit (a transform that failed prints nothing)"));
}

}  // namespace dlq::detail
