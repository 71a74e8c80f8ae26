// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlq.hpp
/// Umbrella header for the core: the front end, the wire format, the storage contract,
/// the in-memory backend and the source-queue interface (dlq/source_queue.hpp). Backends with
/// dependencies are included on their own: dlq/redis.hpp (dlq::redis), dlq/sqlite.hpp
/// (dlq::sqlite).
#pragma once

#include "dlq/audit.hpp"
#include "dlq/dead_letter_queue.hpp"
#include "dlq/entry.hpp"
#include "dlq/errors.hpp"
#include "dlq/operations.hpp"
#include "dlq/policies.hpp"
#include "dlq/queue_names.hpp"
#include "dlq/replay.hpp"
#include "dlq/retention.hpp"
#include "dlq/search.hpp"
#include "dlq/source_queue.hpp"
#include "dlq/storage.hpp"
#include "dlq/storage/memory.hpp"
#include "dlq/version.hpp"

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::dlq defines DLQ_COMPILED_LIB): these
// instantiations are built once, in src/memory.cpp, so a unit that includes this header
// compiles calls into the library instead of the front end (docs/install.md, "Compiled
// mode"). They live here, not in dlq/storage/memory.hpp: a backend header never includes the
// front end.
#if defined(DLQ_COMPILED_LIB)
namespace dlq {
extern template class DeadLetterQueue<MemoryStorage>;
extern template class DeadLetterQueue<MemoryStorage&>;
}  // namespace dlq
#endif
