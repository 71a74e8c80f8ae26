// The exception hierarchy: one base, typed causes, messages that say where and what to do.
#include "dlq/errors.hpp"

#include <type_traits>

#include "support/catch.hpp"

namespace test_errors {

TEST_CASE("every dlq exception derives from dlq::error and std::runtime_error", "[errors]") {
  STATIC_REQUIRE(std::is_base_of_v<std::runtime_error, dlq::error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::error, dlq::invalid_argument>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::error, dlq::format_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::error, dlq::queue_full_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::error, dlq::storage_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::storage_error, dlq::connection_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::storage_error, dlq::timeout_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::storage_error, dlq::protocol_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::storage_error, dlq::reply_error>);
  STATIC_REQUIRE(std::is_base_of_v<dlq::storage_error, dlq::conflict_error>);
}

TEST_CASE("a reply error keeps the server's first word and an unknown outcome is flagged",
          "[errors]") {
  const dlq::reply_error e("[dlq.redis] 127.0.0.1:6379: WRONGTYPE …", "WRONGTYPE", true);
  CHECK(e.code() == "WRONGTYPE");
  CHECK(e.outcome_unknown());
  CHECK_FALSE(dlq::timeout_error("t").outcome_unknown());
  try {
    throw dlq::timeout_error("late", true);
  } catch (const dlq::storage_error& s) {
    CHECK(s.outcome_unknown());
  }
}

TEST_CASE("messages read [dlq.component] where: what; what to do", "[errors]") {
  CHECK(dlq::detail::message("redis", "127.0.0.1:6379", "connection refused",
                             "is redis-server running?") ==
        "[dlq.redis] 127.0.0.1:6379: connection refused; is redis-server running?");
  CHECK(dlq::detail::message("queue", "", "empty") == "[dlq.queue] empty");
}

}  // namespace test_errors
