// The storage contract suite on dlq::KeyValueStorage over the Redis store (shared test server).
#include "kv_contract_fixtures.hpp"

#define DLQ_CONTRACT_FIXTURES KvRedisFixture
#include "contract/contract_suite.hpp"
