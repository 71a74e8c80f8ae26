// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis.hpp
/// Umbrella header for the Redis backend (CMake target dlq::redis, needs hiredis): the
/// core, RedisListStorage, and the connection layer (URLs, options, pool).
#pragma once

#include "dlq/dlq.hpp"
#include "dlq/redis/options.hpp"
#include "dlq/storage/redis_list.hpp"
