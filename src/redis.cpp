// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Compiled mode (CMake DLQ_COMPILED=ON): the Redis backends' shipped instantiations, built
// once into dlq::redis. The umbrella header declares them `extern template` (end of
// dlq/redis.hpp). RedisListStorage's member
// definitions and RedisStore's constructors (dlq/redis/list_storage*-inl.hpp, kv_store-inl.hpp;
// see DLQ_REDIS_INLINE in dlq/detail/compiled.hpp) are compiled here, once: the headers only
// declare them.
#include "dlq/redis.hpp"

#include "dlq/redis/kv_store-inl.hpp"
#include "dlq/redis/list_storage-inl.hpp"
#include "dlq/redis/list_storage_fast-inl.hpp"
#include "dlq/redis/list_storage_replay-inl.hpp"

namespace dlq {
template class DeadLetterQueue<RedisListStorage>;
template class DeadLetterQueue<RedisListStorage&>;
template class KeyValueStorage<kv::RedisStore>;
template class KeyValueStorage<kv::RedisStore, kv::RedisListSink>;
template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>>;
template class DeadLetterQueue<KeyValueStorage<kv::RedisStore>&>;
template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>>;
template class DeadLetterQueue<KeyValueStorage<kv::RedisStore, kv::RedisListSink>&>;
}  // namespace dlq
