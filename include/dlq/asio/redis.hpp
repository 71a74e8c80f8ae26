// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis.hpp
/// The Redis part of dlq::asio: dlq::asio::RedisConnection (non-blocking, its own RESP2
/// reader and writer on an Asio executor), dlq::asio::RedisListStorage and the Redis
/// dlq::asio::AsyncSourceQueue. CMake: link
/// dlq::asio and dlq::redis. See docs/async.md.
#pragma once

#include "dlq/asio.hpp"
#include "dlq/asio/redis_connection.hpp"
#include "dlq/asio/redis_list_storage.hpp"
#include "dlq/asio/redis_source_queue.hpp"
