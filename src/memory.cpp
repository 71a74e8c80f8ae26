// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Compiled mode (CMake DLQ_COMPILED=ON): the core's shipped instantiations, built once into
// dlq::dlq. The headers declare them `extern template` (end of dlq/storage/memory.hpp and
// dlq/kv/memory_store.hpp), so users' translation units only call them.
#include "dlq/dlq.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/storage.hpp"

namespace dlq {
template class DeadLetterQueue<MemoryStorage>;
template class DeadLetterQueue<MemoryStorage&>;
template class KeyValueStorage<kv::MemoryStore>;
template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>>;
template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>&>;
}  // namespace dlq
