// The storage contract suite on dlq::KeyValueStorage over the in-memory stores.
#include "kv_contract_fixtures.hpp"

#define DLQ_CONTRACT_FIXTURES KvMemoryFixture, KvMinimalFixture
#include "contract/contract_suite.hpp"
