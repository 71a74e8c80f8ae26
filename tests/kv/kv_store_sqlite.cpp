// The key-value store suite (tests/contract/kv_store_suite.hpp) on dlq::kv::SqliteStore, with
// synchronous=FULL and with synchronous=NORMAL and no idle connections.
#include "kv_fixtures.hpp"

#define DLQ_KV_STORE_FIXTURES kvtest::SqliteKv, kvtest::SqliteNormalKv
#include "contract/kv_store_suite.hpp"
