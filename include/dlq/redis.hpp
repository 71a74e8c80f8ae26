// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis.hpp
/// Umbrella header for the Redis backends (CMake target dlq::redis, needs hiredis): the
/// core, dlq::RedisListStorage (dead letters as Redis lists), dlq::RedisSourceQueue (the
/// worker's side of the source lists), the key-value backend (dlq/kv.hpp) with
/// dlq::kv::RedisStore and dlq::kv::RedisListSink, and the connection layer (URLs,
/// options, pool, cluster routing). Everything that includes hiredis lives under dlq/redis/.
#pragma once
#include "dlq/dlq.hpp"
#include "dlq/kv.hpp"
#include "dlq/redis/kv_store.hpp"
#include "dlq/redis/list_sink.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/source_queue.hpp"

// Compiled mode (CMake DLQ_COMPILED=ON; dlq::redis defines DLQ_COMPILED_REDIS): these
// instantiations are built once, in src/redis.cpp; a unit that includes this header
// instantiates none of them (see dlq/dlq.hpp).
#if defined(DLQ_COMPILED_REDIS)
namespace dlq {
extern template class DeadLetterQueue<RedisListStorage>;
extern template class DeadLetterQueue<RedisListStorage&>;
extern template class KeyValueStorage<kv::RedisStore>;
extern template class KeyValueStorage<kv::RedisStore, kv::RedisListSink>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>&>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>>;
extern template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>&>;
}  // namespace dlq
#endif
