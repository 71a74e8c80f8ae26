// The key-value store suite (tests/contract/kv_store_suite.hpp) on dlq::kv::PostgresStore, on
// the private test server (fixture `postgres`), each store in a schema of its own.
#include "postgres_fixtures.hpp"

#define DLQ_KV_STORE_FIXTURES pgtest::PostgresKv, pgtest::PostgresNoPoolKv
#include "contract/kv_store_suite.hpp"
