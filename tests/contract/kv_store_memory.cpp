// The key-value store suite on the in-memory stores.
#include "contract/kv_memory_fixtures.hpp"

#define DLQ_KV_STORE_FIXTURES kvtest::MemoryKv, kvtest::MinimalKv
#include "contract/kv_store_suite.hpp"
