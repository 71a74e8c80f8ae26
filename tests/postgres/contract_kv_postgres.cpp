// The storage contract suite on dlq::KeyValueStorage over dlq::kv::PostgresStore (private
// test server, a schema per fixture), replaying into the adapter's in-memory sink.
#include "kv/kv_contract_fixtures.hpp"
#include "postgres_fixtures.hpp"

struct KvPostgresFixture : KvFixtureBase<dlq::kv::PostgresStore> {
  KvPostgresFixture() : KvFixtureBase(pgtest::PostgresKv{}.make()) {}
};
static_assert(dlq::detail::has_stats<KvPostgresFixture::storage_type>::value,
              "the PostgreSQL store reads stats at one instant (the contract suite relies on it)");

#define DLQ_CONTRACT_FIXTURES KvPostgresFixture
#include "contract/contract_suite.hpp"
