// The key-value store suite (tests/contract/kv_store_suite.hpp) on dlq::kv::RedisStore, on the
// shared test server in a key namespace of its own.
#include "kv_fixtures.hpp"

#define DLQ_KV_STORE_FIXTURES kvtest::RedisKv
#include "contract/kv_store_suite.hpp"
