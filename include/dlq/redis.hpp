// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis.hpp
/// Umbrella header for the Redis backends (CMake target dlq::redis, needs hiredis): the
/// core, dlq::RedisListStorage (dead letters as Redis lists), dlq::RedisSourceQueue (the
/// worker's side of the source lists), the key-value backend's
/// dlq::kv::RedisStore and dlq::kv::RedisListSink, and the connection layer (URLs,
/// options, pool, cluster routing). Everything that includes hiredis lives under dlq/redis/.
#pragma once
#include "dlq/dlq.hpp"
#include "dlq/redis/kv_store.hpp"
#include "dlq/redis/list_sink.hpp"
#include "dlq/redis/list_storage.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/redis/source_queue.hpp"
