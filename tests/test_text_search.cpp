// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// dlq::detail::contains (dlq/detail/text_search.hpp): the one substring search behind the
// library's text filters (Filter::error_contains, payload_contains) and the console's
// case-insensitive ones — the same answers as std::string::find, and linear in the stored
// text whatever the condition holds.
#include <chrono>
#include <cstdint>
#include <string>

#include "dlq/detail/text_search.hpp"
#include "dlq/dlq.hpp"
#include "support/catch.hpp"

namespace test_text_search {

TEST_CASE("contains answers as find, with and without case folding") {
  const auto lower = [](std::string s) {
    for (char& c : s)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
  };
  std::uint32_t seed = 14;
  const auto next = [&] { return seed = seed * 1103515245u + 12345u; };
  for (int i = 0; i < 20000; ++i) {
    std::string hay, needle;
    for (std::size_t n = next() >> 25; n > 0; --n)
      hay += "aAaAaAb"[(next() >> 16) % 7];
    if (i % 2 == 0 || hay.size() < 34) {
      for (std::size_t n = (next() >> 29) + 1; n > 0; --n)
        needle += "aAaAaAb"[(next() >> 16) % 7];
    } else {  // over 32 bytes: a piece of hay, half of them with one byte changed
      const std::size_t len = 33 + (next() >> 16) % (hay.size() - 32);
      needle = hay.substr((next() >> 16) % (hay.size() - len + 1), len);
      if ((next() & 0x10000) != 0) {
        char& c = needle[(next() >> 16) % len];
        c = c == 'b' ? 'a' : 'b';
      }
    }
    INFO(hay << " / " << needle);
    REQUIRE(dlq::detail::contains(hay, needle, false) == (hay.find(needle) != std::string::npos));
    REQUIRE(dlq::detail::contains(hay, needle, true) ==
            (lower(hay).find(lower(needle)) != std::string::npos));
  }
  CHECK(dlq::detail::contains("abc", "", false));
  CHECK_FALSE(dlq::detail::contains("", "a", true));
}

// The library's filters used std::string_view::find: a condition that repeats the stored
// text's start ("AAAA…" — the base64 of zeros) compared the whole condition at each byte:
// 64 KiB of 'A' and a 'B' against 2 x 1 MiB payloads took seconds. Timed against the same
// searches with a 33-byte condition (the same algorithm, linear either way), so the check is
// a ratio and holds on a loaded machine: linear, the long condition costs about what the
// short one does (0.7-0.9 s each under ASan); quadratic, thousands of times more.
TEST_CASE("a library text filter costs the stored text's length, not times the filter's") {
  dlq::DeadLetterQueue<dlq::MemoryStorage> q;
  for (int i = 0; i < 2; ++i)
    q.send_to_dlq("blobs", std::string(1 << 20, 'A'), std::string(256 << 10, 'A'), 1, "w");
  const auto timed = [&](std::size_t condition_bytes) {
    dlq::Filter f;
    f.payload_contains = std::string(condition_bytes, 'A') + "B";
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(q.search("blobs", f).entries.empty());
    f.payload_contains.clear();
    f.error_contains = std::string(condition_bytes, 'A') + "B";
    CHECK(q.search("blobs", f).entries.empty());
    f.error_contains = std::string(condition_bytes, 'A');
    CHECK(q.search("blobs", f).entries.size() == 2);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double short_condition = timed(32);
  const double long_condition = timed(64 << 10);
  INFO("33 bytes: " << short_condition << " s, 64 KiB: " << long_condition << " s");
  CHECK(long_condition < 4 * short_condition + 0.25);
}

}  // namespace test_text_search
