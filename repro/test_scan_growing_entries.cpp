// Round 7 of issue 27 (NOT registered with CMake: it fails until the scan can bound a read
// by bytes before it reads). To run it: append this test case to tests/test_search_place.cpp
// and `ninja test_core && tests/test_core "*grow*"`.
//
// ScanLimits::read_bytes sizes each peek by the largest entry read so far. Entries that grow
// mid-scan defeat it: after 600 small entries a read asks for 516 entries, and if those are
// 4 MiB each the read holds ~400 MiB (100 of them) — dlqctl serve: 600 entries of ~200
// bytes then 100 of 4 MiB, filtered /api/entries peak +806 MiB, /api/entry of the last
// +804 MiB (+16 / +28 MiB with only the large entries).
TEST_CASE("the console's scan bounds a read's bytes when entries grow mid-scan (round 7)") {
  std::vector<dlq::Entry> list;
  for (std::size_t i = 0; i < 700; ++i) {
    dlq::Entry e;
    e.id = "e" + std::to_string(i);
    e.raw = i < 600 ? e.id : std::string(64 << 10, 'a') + e.id;  // small, then 64 KiB
    e.error = "other";
    list.push_back(std::move(e));
  }
  std::size_t most_bytes = 0;
  const auto peek = [&](std::string_view, std::size_t start, std::size_t count) {
    std::vector<dlq::Entry> out;
    std::size_t bytes = 0;
    for (std::size_t i = start; i < list.size() && i < start + count; ++i) {
      bytes += list[i].raw.size();
      out.push_back(list[i]);
    }
    most_bytes = std::max(most_bytes, bytes);
    return out;
  };
  dlq::http::EntryQuery f;
  f.error = "match";  // nothing matches: the scan reads every entry
  dlq::http::ScanLimits limits;
  limits.read_bytes = 256 << 10;
  (void)dlq::http::scan(peek, list.size(), "q", f, std::nullopt, limits,
                        std::chrono::system_clock::now());
  INFO("largest read: " << most_bytes << " bytes, budget " << limits.read_bytes);
  CHECK(most_bytes <= 2 * limits.read_bytes);  // 100 x 64 KiB = 6.4 MiB before a fix
}
