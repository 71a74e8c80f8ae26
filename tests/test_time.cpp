// ISO-8601 timestamps as Python's isoformat() writes and reads them.
#include "dlq/detail/time.hpp"

#include <chrono>

#include "support/catch.hpp"

namespace test_time {

namespace t = dlq::detail::iso_time;
using namespace std::chrono;

TEST_CASE("timestamps are written like Python's isoformat() with microseconds", "[time]") {
  const auto tp = system_clock::time_point(seconds(1796009539)) + microseconds(123456);
  CHECK(t::format(tp) == "2026-11-30T03:32:19.123456+00:00");
  CHECK(t::format(system_clock::time_point(seconds(0))) == "1970-01-01T00:00:00.000000+00:00");
  CHECK(t::format(system_clock::time_point(seconds(951782400))) ==
        "2000-02-29T00:00:00.000000+00:00");
}

TEST_CASE("timestamps are read with or without a fraction, with +00:00, Z or an offset", "[time]") {
  const auto base = system_clock::time_point(seconds(1796009539));
  CHECK(t::parse("2026-11-30T03:32:19+00:00") == base);
  CHECK(t::parse("2026-11-30T03:32:19.123456+00:00") == base + microseconds(123456));
  CHECK(t::parse("2026-11-30T03:32:19.5Z") == base + milliseconds(500));
  CHECK(t::parse("2026-11-30T03:32:19.123456789Z") == base + microseconds(123456));
  CHECK(t::parse("2026-11-30T04:32:19+01:00") == base);
  CHECK(t::parse("2026-11-29T22:32:19-05:00") == base);
  CHECK(t::parse("2026-11-30 03:32:19") == base);
  CHECK(t::parse("2026-11-30T03:32:19") == base);
}

TEST_CASE("malformed timestamps are rejected", "[time]") {
  for (const char* bad :
       {"", "2026-11-30", "2026-13-01T00:00:00Z", "2026-11-30T25:00:00Z", "2026-11-30T03:32:19.Z",
        "2026-11-30T03:32:19+0000", "yesterday", "2026-11-30T03:32:19Zjunk"}) {
    INFO(bad);
    CHECK_FALSE(t::parse(bad).has_value());
  }
}

TEST_CASE("format and parse round-trip across the clock's range", "[time]") {
  // system_clock counts nanoseconds on libstdc++: its range is 1678..2262.
  for (long long s : {-5000000000LL, -1LL, 0LL, 1LL, 1796009539LL, 9000000000LL}) {
    const auto tp = system_clock::time_point(seconds(s)) + microseconds(999999);
    INFO(s);
    CHECK(t::parse(t::format(tp)) == tp);
  }
}

}  // namespace test_time
