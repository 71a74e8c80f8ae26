// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite.hpp
/// Umbrella header for the SQLite backend (CMake target dlq::sqlite, needs SQLite 3): the
/// core, the key-value backend (dlq/kv.hpp), dlq::kv::SqliteStore (durable records in one
/// file) and dlq::kv::JobQueue (a durable job queue in the same file). Everything that
/// includes sqlite3.h lives under dlq/sqlite/.
#pragma once
#include "dlq/kv.hpp"
#include "dlq/sqlite/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::sqlite defines DLQ_COMPILED_SQLITE): these
// instantiations are built once, in src/sqlite.cpp; a unit that includes this header
// instantiates none of them (see dlq/dlq.hpp).
#if defined(DLQ_COMPILED_SQLITE)
namespace dlq {
namespace kv {
extern template class JobQueue<SqliteStore>;
}  // namespace kv
extern template class KeyValueStorage<kv::SqliteStore>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>&>;
extern template class KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>&>;
}  // namespace dlq
#endif
