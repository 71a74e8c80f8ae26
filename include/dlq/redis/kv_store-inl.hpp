// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/kv_store-inl.hpp
/// The definitions of RedisStore's constructors (see DLQ_REDIS_INLINE in
/// dlq/detail/compiled.hpp): included by kv_store.hpp in header-only mode, compiled into
/// dlq::redis in compiled mode, so that a unit opening a store does not compile the URL
/// parser, the pool and the scripts' set-up again.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "dlq/redis/kv_store.hpp"

namespace dlq {
namespace kv {

DLQ_REDIS_INLINE RedisStore::RedisStore(redis::ConnectionOptions connection,
                                        RedisStoreOptions options)
    : shared_(std::make_shared<shared>(std::move(connection), std::move(options))) {}

DLQ_REDIS_INLINE RedisStore::RedisStore(std::string_view url, RedisStoreOptions options)
    : RedisStore(redis::parse_url(url), std::move(options)) {}

}  // namespace kv
}  // namespace dlq
