// The PostgreSQL backend's I/O-free pieces (dlq/postgres/detail/sql.hpp), without a server.
#include "dlq/postgres/detail/sql.hpp"

#include <string>

#include "support/catch.hpp"

namespace test_postgres_sql {

using dlq::postgres::detail::int8_bytes;
using dlq::postgres::detail::int8_value;
using dlq::postgres::detail::lock_key;
using dlq::postgres::detail::quote_identifier;

TEST_CASE("an identifier is quoted, its quotes doubled", "[postgres]") {
  CHECK(quote_identifier("dlq") == "\"dlq\"");
  CHECK(quote_identifier("Orders") == "\"Orders\"");
  CHECK(quote_identifier("a\"; DROP TABLE x; --") == "\"a\"\"; DROP TABLE x; --\"");
  CHECK(quote_identifier("\"") == "\"\"\"\"");
  CHECK_THROWS_AS(quote_identifier(""), dlq::invalid_argument);
  CHECK_THROWS_AS(quote_identifier(std::string("a\0b", 3)), dlq::invalid_argument);
  // PostgreSQL truncates an identifier to 63 bytes: a longer name is refused.
  CHECK(quote_identifier(std::string(63, 'a')) == "\"" + std::string(63, 'a') + "\"");
  CHECK_THROWS_AS(quote_identifier(std::string(64, 'a')), dlq::invalid_argument);
  CHECK_THROWS_AS(quote_identifier(std::string(31, 'a') + std::string(33, '"')),
                  dlq::invalid_argument);
}

TEST_CASE("a bigint round-trips through the binary format", "[postgres]") {
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::int64_t{258},
                         INT64_MAX, INT64_MIN}) {
    CHECK(int8_bytes(v).size() == 8);
    CHECK(int8_value(int8_bytes(v)) == v);
  }
  CHECK(int8_bytes(258) == std::string("\0\0\0\0\0\0\1\2", 8));
  CHECK(int8_value("short") == 0);
}

TEST_CASE("lock keys depend on the schema and the collection", "[postgres]") {
  CHECK(lock_key("dlq", "dlq:{a}:dead") == lock_key("dlq", "dlq:{a}:dead"));
  CHECK(lock_key("dlq", "dlq:{a}:dead") != lock_key("dlq", "dlq:{b}:dead"));
  CHECK(lock_key("dlq", "x") != lock_key("other", "x"));
  // The NUL between them: ("ab", "c") and ("a", "bc") are different keys.
  CHECK(lock_key("ab", "c") != lock_key("a", "bc"));
}

}  // namespace test_postgres_sql
