// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Compiled mode (CMake DLQ_COMPILED=ON): the SQLite backend's shipped instantiations (the
// key-value front end over SqliteStore, and dlqctl's over SqliteStore + JobQueue), built once
// into dlq::sqlite. The umbrella header declares them `extern template` (end of
// dlq/sqlite.hpp). SqliteStore's constructor
// (dlq/sqlite/sqlite_store-inl.hpp; see DLQ_SQLITE_INLINE in dlq/detail/compiled.hpp) is
// compiled here, once: the header only declares it.
#include "dlq/sqlite.hpp"

#include "dlq/sqlite/sqlite_store-inl.hpp"

namespace dlq {
namespace kv {
template class JobQueue<SqliteStore>;
}  // namespace kv
template class KeyValueStorage<kv::SqliteStore>;
template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>>;
template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore>&>;
template class KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>;
template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>>;
template class DeadLetterQueue<KeyValueStorage<kv::SqliteStore, kv::JobQueue<>>&>;
}  // namespace dlq
