// The storage contract suite on dlq::MemoryStorage.
#include "contract/memory_fixture.hpp"

#define DLQ_CONTRACT_FIXTURES MemoryFixture
#include "contract/contract_suite.hpp"
