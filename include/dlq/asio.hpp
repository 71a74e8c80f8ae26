// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio.hpp
/// Umbrella of dlq::asio, the asynchronous API (CMake: dlq::asio; standalone Asio >= 1.22):
/// dlq::asio::AsyncDeadLetterQueue and dlq::asio::AsyncSourceQueue over the in-memory storage. Its
/// Redis part needs hiredis as well: include dlq/asio/redis.hpp and link dlq::redis too. See
/// docs/async.md.
#pragma once

#include "dlq/asio/dead_letter_queue.hpp"
#include "dlq/asio/source_queue.hpp"
