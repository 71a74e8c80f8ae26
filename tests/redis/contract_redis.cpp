// The storage contract suite on dlq::RedisListStorage, against the shared test server
// (RedisFixture: ctest test_contract_redis) and against the 3-master test cluster
// (ClusterSpread, ClusterOneSlot: contract_redis_cluster_fixtures.hpp, ctest
// test_contract_redis_cluster). One executable instantiates the suite once for the three
// fixtures; each ctest test selects its fixtures' cases by name (tests/redis/CMakeLists.txt).
// Each fixture uses its own key prefix, so the suite can run beside the other Redis tests.
#include <string>
#include <string_view>
#include <vector>

#include "dlq/redis/list_storage.hpp"
#include "redis/contract_redis_cluster_fixtures.hpp"
#include "redis/redis_test_util.hpp"

struct RedisFixture {
  using storage_type = dlq::RedisListStorage;

  RedisFixture()
      : url_(dlq::test::shared_redis_url()),
        storage_(url_, dlq::test::unique_layout()),
        raw_(url_) {}

  storage_type& storage() { return storage_; }

  std::vector<std::string> source(std::string_view queue) {
    return raw_.list(storage_.source_key(queue));
  }

  void push_raw(std::string_view queue, std::string_view raw) {
    raw_.rpush(storage_.key(queue, dlq::ListKind::dead), {std::string(raw)});
  }

 private:
  std::string url_;
  storage_type storage_;
  dlq::test::RawClient raw_;
};

#define DLQ_CONTRACT_FIXTURES RedisFixture, ClusterSpread, ClusterOneSlot
#include "contract/contract_suite.hpp"
