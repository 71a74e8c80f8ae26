// dlqctl's text helpers: durations, printable text, truncation, tables, URLs, progress bar.
#include <chrono>
#include <sstream>
#include <string>

#include "format.hpp"
#include "store.hpp"
#include "support/catch.hpp"

namespace test_format {

using namespace std::chrono_literals;
using dlqctl::parse_duration;

TEST_CASE("durations: units, sums, bare seconds", "[cli][format]") {
  CHECK(parse_duration("90s") == 90s);
  CHECK(parse_duration("500ms") == 500ms);
  CHECK(parse_duration("15m") == 15min);
  CHECK(parse_duration("15min") == 15min);
  CHECK(parse_duration("2h") == 2h);
  CHECK(parse_duration("1h30m") == 90min);
  CHECK(parse_duration("7d") == 168h);
  CHECK(parse_duration("1w") == 168h);
  CHECK(parse_duration("1.5h") == 90min);
  CHECK(parse_duration("42") == 42s);
  CHECK(parse_duration("0s") == 0s);
  for (const char* bad : {"", "h", "1x", "1h 30m", "-5s", "1..2s", ".", "1h30", "30 s", "1e3s",
                          "99999999999999999999999999999999999999d", "yesterday"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_duration(bad), dlqctl::usage_error);
  }
}

TEST_CASE("durations are at most 100 years: longer is a usage error, never a wrap",
          "[cli][format]") {
  CHECK(parse_duration("36500d") == std::chrono::hours(24 * 36500));
  CHECK(parse_duration("5214w2d") == std::chrono::hours(24 * 36500));
  // 106752 days and more do not fit in 64-bit nanoseconds; they used to come back negative
  for (const char* long_ : {"36501d", "106752d", "200000d", "999999999d", "5215w", "3153600001"}) {
    INFO(long_);
    try {
      const auto d = parse_duration(long_);
      FAIL_CHECK("accepted as " << d.count() << " ns");
    } catch (const dlqctl::usage_error& e) {
      CHECK(std::string(e.what()).find("100 years") != std::string::npos);
    }
  }
}

TEST_CASE("printable text escapes what would break a line or a terminal", "[cli][format]") {
  CHECK(dlqctl::printable("plain") == "plain");
  CHECK(dlqctl::printable("a\nb\tc\r") == "a\\nb\\tc\\r");
  CHECK(dlqctl::printable(std::string("\0\x1b[31m", 6)) == "\\x00\\x1b[31m");
  CHECK(dlqctl::printable("caf\xC3\xA9 \xE2\x82\xAC") == "caf\xC3\xA9 \xE2\x82\xAC");  // UTF-8 kept
  CHECK(dlqctl::printable("\xff\xC3") == "\\xff\\xc3");           // not UTF-8: escaped
  CHECK(dlqctl::printable("\xED\xA0\x80") == "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  CHECK(dlqctl::printable("back\\slash") == "back\\\\slash");
}

TEST_CASE("truncation counts code points and never splits one", "[cli][format]") {
  CHECK(dlqctl::truncate("abcdef", 10) == "abcdef");
  CHECK(dlqctl::truncate("abcdef", 4) == "abc\xE2\x80\xA6");
  CHECK(dlqctl::width(dlqctl::truncate("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3)) == 3);
  CHECK(dlqctl::truncate("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\xE2\x80\xA6");
}

TEST_CASE("tables align columns and keep one row per line", "[cli][format]") {
  dlqctl::Table t({{"N", 0, true}, {"NAME", 5}, {"NOTE"}});
  t.add({"1", "alpha", "x"});
  t.add({"100", "a very long name", "multi\nline"});
  std::ostringstream out;
  t.print(out);
  CHECK(out.str() ==
        "  N  NAME   NOTE\n"
        "  1  alpha  x\n"
        "100  a ve\xE2\x80\xA6  multi\\nline\n");
}

TEST_CASE("the progress bar shows done/total, moved, rate and ETA", "[cli][format]") {
  std::ostringstream out;
  dlqctl::ProgressBar bar(out, true, 0ms, "replay orders");
  const std::string s = bar.render(5000, 10000, 4990, 2s);
  CHECK(s.find("replay orders [############------------]  50%") == 0);
  CHECK(s.find("5000/10000") != std::string::npos);
  CHECK(s.find("moved 4990") != std::string::npos);
  CHECK(s.find("2500/s") != std::string::npos);
  CHECK(s.find("ETA 2s") != std::string::npos);
  CHECK(bar.render(10, 10, 10, 1s).find("100%") != std::string::npos);
  dlqctl::ProgressBar off(out, false, 0ms, "x");
  off.update(1, 2, 1);
  CHECK_FALSE(off.shown());
  bar.update(1, 2, 1);
  CHECK(bar.shown());
  bar.finish();
  CHECK(out.str().rfind("\r\x1b[K") == out.str().size() - 4);  // erased at the end
}

}  // namespace test_format
