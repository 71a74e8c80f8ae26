// The storage contract suite on dlq::KeyValueStorage over the SQLite store, with both
// durability settings.
#include "kv_contract_fixtures.hpp"

#define DLQ_CONTRACT_FIXTURES KvSqliteFixture, KvSqliteNormalFixture
#include "contract/contract_suite.hpp"
