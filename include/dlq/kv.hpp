// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv.hpp
/// Umbrella header for the key-value backend in the core (CMake target dlq::dlq): the core,
/// the key-value store contract (dlq/kv/store.hpp), the adapter dlq::KeyValueStorage, its
/// sinks and the in-memory store dlq::kv::MemoryStore. The durable stores come with their
/// own umbrellas: dlq/sqlite.hpp (dlq::kv::SqliteStore), dlq/redis.hpp (dlq::kv::RedisStore).
#pragma once
#include "dlq/dlq.hpp"
#include "dlq/kv/job_queue.hpp"
#include "dlq/kv/memory_store.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/kv/store.hpp"

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::dlq defines DLQ_COMPILED_LIB): these
// instantiations are built once, in src/memory.cpp; a unit that includes this header
// instantiates none of them (see dlq/dlq.hpp).
#if defined(DLQ_COMPILED_LIB)
namespace dlq {
extern template class KeyValueStorage<kv::MemoryStore>;
extern template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::MemoryStore>&>;
}  // namespace dlq
#endif
