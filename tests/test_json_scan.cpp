// The JSON scanner: validation, exact spans, UTF-8, Python's NaN/Infinity, deep nesting.
#include "dlq/detail/json_scan.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "dlq/audit.hpp"

#include <string>
#include <vector>

#include "support/catch.hpp"

namespace test_json_scan {

namespace json = dlq::detail::json;

TEST_CASE("valid JSON values are recognised exactly", "[json]") {
  for (const char* ok : {"0", "-0", "1.5e10", "-1E-2", "12345678901234567890123", "true", "false",
                         "null", "\"\"", "\"a\\u00e9\\n\"", "[]", "{}", "[1,[2,{\"a\":[]}]]",
                         "{ \"a\" : 1 , \"b\" : [ ] }", "\"\xE2\x82\xAC\xF0\x9F\x98\x80\""}) {
    INFO(ok);
    CHECK(json::is_exact_value(ok));
  }
}

TEST_CASE("invalid JSON is rejected", "[json]") {
  for (const char* bad : {"",
                          " ",
                          "01",
                          "1.",
                          ".5",
                          "1e",
                          "+1",
                          "tru",
                          "nul",
                          "[1,]",
                          "{\"a\":1,}",
                          "{a:1}",
                          "{\"a\" 1}",
                          "[1 2]",
                          "\"unterminated",
                          "\"bad \\x escape\"",
                          "\"\\u12g4\"",
                          "\"ctrl \x01\"",
                          "{} {}",
                          " {}",
                          "{} ",
                          "NaN",
                          "Infinity",
                          "\"\xC3\x28\"",
                          "\"\xE0\x80\xAF\"",
                          "\"\xED\xA0\x80\"",
                          "\"\xF4\x90\x80\x80\"",
                          "\"\xFF\"",
                          "]",
                          "}"}) {
    INFO(bad);
    CHECK_FALSE(json::is_exact_value(bad));
  }
}

TEST_CASE("lenient mode accepts what Python's json.dumps writes for non-finite floats", "[json]") {
  CHECK(json::is_exact_value("[NaN,Infinity,-Infinity]", json::mode::lenient));
  CHECK_FALSE(json::is_exact_value("[NaN]", json::mode::strict));
}

TEST_CASE("deep nesting does not overflow the stack", "[json]") {
  const std::size_t depth = 200000;
  std::string deep(depth, '[');
  deep.append(depth, ']');
  CHECK(json::is_exact_value(deep));
  deep.pop_back();
  CHECK_FALSE(json::is_exact_value(deep));
}

TEST_CASE("string bodies are judged the same at every position of the 8-byte fast path", "[json]") {
  // skip_string_body skips plain ASCII eight bytes at a time; every byte that needs a closer
  // look must stop it wherever it falls in a block, and blocks must never read past the end.
  struct special {
    std::string bytes;
    bool valid;       // a string "aaa<bytes>aaa" (closed) is valid JSON
    bool has_escape;  // and contains a backslash escape
  };
  const std::vector<special> cases = {{"\\n", true, true},
                                      {"\\u00e9", true, true},
                                      {"\\x", false, true},
                                      {"\\u00g0", false, true},
                                      {"\x1f", false, false},
                                      {std::string(1, '\0'), false, false},
                                      {"\x7f", true, false},
                                      {"\xC3\xA9", true, false},
                                      {"\xE2\x82\xAC", true, false},
                                      {"\xF0\x9F\x98\x80", true, false},
                                      {"\x80", false, false},
                                      {"\xC3", false, false},
                                      {"\xED\xA0\x80", false, false},
                                      {"\xFF", false, false}};
  for (std::size_t before = 0; before <= 17; ++before) {
    for (std::size_t after = 0; after <= 9; ++after) {
      for (const auto& c : cases) {
        const std::string body = std::string(before, 'a') + c.bytes + std::string(after, 'b');
        const std::string text = body + "\"";
        INFO("before " << before << ", after " << after << ", special " << c.bytes.size()
                       << " bytes starting 0x" << std::hex
                       << static_cast<int>(static_cast<unsigned char>(c.bytes[0])));
        bool esc = false;
        const char* end = json::skip_string_body(text.data(), text.data() + text.size(), esc);
        if (c.valid) {
          CHECK(end == text.data() + text.size());
          CHECK(esc == c.has_escape);
        } else {
          CHECK(end == nullptr);
        }
        // Unterminated: never valid, whatever the bytes.
        bool esc2 = false;
        CHECK(json::skip_string_body(body.data(), body.data() + body.size(), esc2) == nullptr);
      }
      // The closing quote itself at every position: the string ends right after it.
      const std::string text = std::string(before, 'a') + "\"" + std::string(after, 'b');
      bool esc = false;
      CHECK(json::skip_string_body(text.data(), text.data() + text.size(), esc) ==
            text.data() + before + 1);
    }
  }
}

TEST_CASE("scan_object reports each member with its exact value bytes", "[json]") {
  std::vector<std::pair<std::string, std::string>> fields;
  const bool ok =
      json::scan_object(R"( { "a" : {"x": [1, 2]} , "b\"q":"s", "c": 1.50 } )", json::mode::strict,
                        [&](std::string_view k, bool, std::string_view v) {
                          fields.emplace_back(std::string(k), std::string(v));
                        });
  REQUIRE(ok);
  REQUIRE(fields.size() == 3);
  CHECK(fields[0] == std::make_pair(std::string("a"), std::string(R"({"x": [1, 2]})")));
  CHECK(fields[1] == std::make_pair(std::string(R"(b\"q)"), std::string(R"("s")")));
  CHECK(fields[2].second == "1.50");
  CHECK_FALSE(json::scan_object("[1]", json::mode::strict, [](auto, auto, auto) {}));
  CHECK_FALSE(json::scan_object("{\"a\":1", json::mode::strict, [](auto, auto, auto) {}));
  CHECK(json::scan_object("{}", json::mode::strict, [](auto, auto, auto) { FAIL("no members"); }));
}

TEST_CASE("strings are unescaped to UTF-8, surrogate pairs joined, lone ones replaced", "[json]") {
  std::string out;
  REQUIRE(json::string_value(R"("a\"b\\c\/d\n\t\u00e9\ud83d\ude00")", out));
  CHECK(out == "a\"b\\c/d\n\t\xC3\xA9\xF0\x9F\x98\x80");
  REQUIRE(json::string_value(R"("\ud800x")", out));
  CHECK(out == "\xEF\xBF\xBDx");
  CHECK_FALSE(json::string_value("42", out));
}

TEST_CASE("append_string writes valid JSON for any bytes", "[json]") {
  std::string out;
  json::append_string(out, std::string("q\"b\\n\n\x01\x00 caf\xC3\xA9 \xFF end", 20));
  CHECK(out == "\"q\\\"b\\\\n\\n\\u0001\\u0000 caf\xC3\xA9 \xEF\xBF\xBD end\"");
  CHECK(json::is_exact_value(out));
  std::string back;
  REQUIRE(json::string_value(out, back));
  CHECK(back == std::string("q\"b\\n\n\x01\x00 caf\xC3\xA9 \xEF\xBF\xBD end", 22));
}

// write_audit stores detail::audit_json(record), written by hand: it must be byte for byte
// what record.to_json().dump(-1, ' ', false, error_handler_t::replace) gave before.
TEST_CASE("audit records are written exactly as nlohmann's dump writes them", "[json][audit]") {
  const auto dumped = [](const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  SECTION("strings: escapes, UTF-8 and every kind of ill-formed byte sequence") {
    const unsigned char edges[] = {0x00, 0x01, 0x1f, 0x20, '"',  '\\', '/',  0x7f, 0x80,
                                   0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
                                   0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3,
                                   0xf4, 0xf5, 0xff, 'a',  '\n', '\t', '\b', '\f', '\r'};
    std::mt19937_64 rng(42);
    for (int n = 0; n < 50000; ++n) {
      std::string s;
      const int len = static_cast<int>(rng() % 12);
      for (int i = 0; i < len; ++i)
        s.push_back(static_cast<char>(rng() % 4 == 0 ? rng() & 0xff : edges[rng() % sizeof edges]));
      std::string mine;
      dlq::detail::append_dumped_string(mine, s);
      INFO("string of " << s.size() << " bytes, case " << n);
      REQUIRE(mine == dumped(nlohmann::ordered_json(s)));
    }
  }
  SECTION("values") {
    for (const char* text :
         {R"({"a":1,"b":[true,false,null,-5,18446744073709551615,1.5,1e300,0.1,-0.0,3.0],)"
          R"("c":{"x":"y\u0001"},"z":[],"o":{}})",
          "{}", "[]", "2.5e-320", "123456789.125", "-9223372036854775808"}) {
      const auto j = nlohmann::ordered_json::parse(text);
      std::string mine;
      dlq::detail::append_dumped(mine, j);
      CHECK(mine == dumped(j));
    }
    for (const auto& j :
         {nlohmann::ordered_json::binary({1, 2, 255}), nlohmann::ordered_json::binary({}, 7),
          nlohmann::ordered_json(std::nan("")),
          nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)}) {
      std::string mine;
      dlq::detail::append_dumped(mine, j);
      CHECK(mine == dumped(j));
    }
  }
  SECTION("records") {
    dlq::AuditRecord empty;
    CHECK(dlq::detail::audit_json(empty) == dumped(empty.to_json()));
    dlq::AuditRecord r;
    r.actor = "op\xe2\x82";
    r.operation = "replay";
    r.queue = "orders";
    r.filter = {{"error_contains", "time\xffout"}};
    r.counts = {{"examined", 10}, {"replayed", 7}};
    r.ids = {"a", "b\xc3"};
    r.ids_omitted = 3;
    r.outcome = "failed: \"x\"";
    r.detail["destination"] = "orders";
    r.detail["edits"] = nlohmann::ordered_json::array({{{"id", "x"}, {"old_sha256", "aa"}}});
    CHECK(dlq::detail::audit_json(r) == dumped(r.to_json()));
  }
}

// The front end builds audit counts and edits with detail::object_of instead of braced
// lists: the same members, in the same order, with the same value types.
TEST_CASE("object_of builds what the braced list built", "[json][audit]") {
  const std::size_t n = 7;
  const std::string id = "01J\xc3\xa9";
  const auto mine = dlq::detail::object_of("examined", n, "removed", 1, "id", id, "edited", n);
  const nlohmann::ordered_json theirs = {
      {"examined", n}, {"removed", 1}, {"id", id}, {"edited", n}};
  CHECK(mine == theirs);
  CHECK(mine.dump() == theirs.dump());
  REQUIRE(mine.is_object());
  CHECK(mine.begin().key() == "examined");
  CHECK(mine["examined"].type() == theirs["examined"].type());
  CHECK(mine["removed"].type() == theirs["removed"].type());
  CHECK(dlq::detail::object_of() == nlohmann::ordered_json::object());
  CHECK(nlohmann::ordered_json(nlohmann::ordered_json::value_t::object) ==
        nlohmann::ordered_json::object());
  CHECK(nlohmann::ordered_json(nlohmann::ordered_json::value_t::array) ==
        nlohmann::ordered_json::array());
}

// write_envelope writes the entry's context (a nlohmann::json) with
// detail::append_dumped_value: byte for byte what f.context.dump(-1, ' ', false,
// error_handler_t::replace) wrote before.
TEST_CASE("contexts are written exactly as nlohmann's dump writes them", "[json][entry]") {
  const auto dumped = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  for (const char* text :
       {R"({"b":1,"a":[true,false,null,-5,18446744073709551615,1.5,1e300,0.1,-0.0,3.0],)"
        R"("c":{"x":"y\u0001","\u00e9":"\ud83d\ude00"},"z":[],"o":{}})",
        "{}", "[]", "2.5e-320", "123456789.125", "-9223372036854775808", R"("a\"b")"}) {
    const auto j = nlohmann::json::parse(text);
    std::string mine;
    dlq::detail::append_dumped_value(mine, j);
    CHECK(mine == dumped(j));
  }
  nlohmann::json j;
  j["bad\xff key"] = "caf\xc3 \xed\xa0\x80 \xf0\x9f";
  j["bin"] = nlohmann::json::binary({1, 2, 255}, 3);
  j["nan"] = std::nan("");
  j["list"] = {1u, -2, 0.5, "x\x01"};
  std::string mine;
  dlq::detail::append_dumped_value(mine, j);
  CHECK(mine == dumped(j));
  std::mt19937_64 rng(7);
  for (int n = 0; n < 2000; ++n) {
    nlohmann::json o = nlohmann::json::object();
    for (int k = 0; k < 3; ++k) {
      std::string s;
      for (int i = static_cast<int>(rng() % 8); i > 0; --i)
        s.push_back(static_cast<char>(rng() & 0xff));
      o[s] = s;
    }
    std::string out;
    dlq::detail::append_dumped_value(out, o);
    INFO("case " << n);
    REQUIRE(out == dumped(o));
  }
}

namespace {
// The same value with the same types throughout (nlohmann's == calls 5u and 5 equal).
bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
      if (i.key() != j.key() || !same_json(*i, *j)) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_json(a[i], b[i])) return false;
    return true;
  }
  if (a.is_discarded()) return true;
  if (a.is_number_float())
    return std::memcmp(a.get_ptr<const double*>(), b.get_ptr<const double*>(), sizeof(double)) == 0;
  return a == b;
}
}  // namespace

// parse_entry reads the entry's context with detail::read_json_dom instead of nlohmann's
// parser: the same value (or discarded) as json::parse(text, nullptr, false) for any text.
TEST_CASE("read_json_dom reads what nlohmann's parser reads", "[json][entry]") {
  const auto check = [](const std::string& text) {
    const auto mine = dlq::detail::read_json_dom<nlohmann::json>(text);
    const auto theirs = nlohmann::json::parse(text, nullptr, false);
    INFO("text: " << text);
    REQUIRE(same_json(mine, theirs));
  };
  const std::vector<std::string> cases = {"",
                                          " ",
                                          "{}",
                                          "[]",
                                          "{ }",
                                          "[ ]",
                                          " {\"a\" : 1 } ",
                                          "null",
                                          "true",
                                          "false",
                                          "nul",
                                          "truex",
                                          "0",
                                          "-0",
                                          "01",
                                          "-01",
                                          "1.",
                                          ".5",
                                          "1.5",
                                          "-1.5e3",
                                          "1E5",
                                          "1e+5",
                                          "1e-5",
                                          "1e",
                                          "1e+",
                                          "-",
                                          "--1",
                                          "+1",
                                          "18446744073709551615",
                                          "18446744073709551616",
                                          "-9223372036854775808",
                                          "-9223372036854775809",
                                          "99999999999999999999999",
                                          "1e999",
                                          "-1e999",
                                          "1e-999",
                                          "2.5e-320",
                                          "0.1",
                                          "3.0",
                                          "NaN",
                                          "Infinity",
                                          "-Infinity",
                                          "\"a\\u00e9\\ud83d\\ude00\"",
                                          "\"\\ud800\"",
                                          "\"\\udc00\"",
                                          "\"\\ud800\\u0041\"",
                                          "\"\\ud800x\"",
                                          "\"\\u12\"",
                                          "\"\\uzzzz\"",
                                          "\"\\x\"",
                                          "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
                                          std::string("\"a\x01\""),
                                          std::string("\"a\tb\""),
                                          "\"caf\xc3\xa9\"",
                                          "\"caf\xc3\"",
                                          "\"\xed\xa0\x80\"",
                                          "\"\xf4\x90\x80\x80\"",
                                          "\"\xc0\xaf\"",
                                          "\"\xef\xbb\xbf\"",
                                          "\xef\xbb\xbf{}",
                                          "\xef\xbb{}",
                                          std::string("{}\0garbage", 10),
                                          std::string("\0", 1),
                                          std::string("[1,\0]", 5),
                                          std::string("1\0", 2),
                                          "{\"a\":1,\"a\":[2]}",
                                          "{\"a\":1,}",
                                          "[1,]",
                                          "[,1]",
                                          "{,}",
                                          "{\"a\"}",
                                          "{\"a\":}",
                                          "{a:1}",
                                          "[1 2]",
                                          "{\"a\":1 \"b\":2}",
                                          "[[[[]]]]",
                                          "{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}}}",
                                          "[1]x",
                                          "[1] ",
                                          "\t\n\r [1]\r\n",
                                          "[1]\f",
                                          "\"unterminated",
                                          "[\"a\",",
                                          "{\"k\":\"v\"",
                                          "[true,false,null,-5,1.5]",
                                          "{\"\":0}",
                                          "{\"z\":1,\"b\":2,\"a\":3}",
                                          "[1e2,1E-2,-0.0,0e0]",
                                          "1 2",
                                          "[] []"};
  for (const auto& text : cases)
    check(text);
  std::string deep;
  for (int i = 0; i < 256; ++i)
    deep += '[';
  deep += '1';
  for (int i = 0; i < 256; ++i)
    deep += ']';
  check(deep);
  // Random mutations of valid documents: flipped, dropped and inserted bytes.
  const std::vector<std::string> seeds = {
      R"({"trace":"abc","n":[1,-2,3.5,1e3,true,null],"o":{"k":"v\u00e9\ud83d\ude00"}})",
      R"([{"a":18446744073709551615},{"b":-9223372036854775808},"\\\"\/",0.000001])",
      "{\"caf\xc3\xa9\":\"\xf0\x9f\x98\x80\",\"x\":[[],{}]}"};
  const std::string alphabet = "{}[]\":,.-+eE0123456789 \\/utrfnalsbx\x01\x80\xc3\xa9\xed\xff";
  std::mt19937_64 rng(2026);
  for (int n = 0; n < 30000; ++n) {
    std::string t = seeds[rng() % seeds.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
      const std::size_t at = rng() % (t.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          if (at < t.size()) t[at] = c;
          break;
        case 1:
          if (at < t.size()) t.erase(at, 1);
          break;
        default:
          t.insert(at, 1, c);
      }
    }
    check(t);
  }
}

TEST_CASE("write_string stays within max_string_size and writes what nlohmann writes", "[json]") {
  std::mt19937 rng(18);
  // Edge-biased bytes: controls, quotes, backslashes, valid and broken UTF-8 sequences.
  const std::vector<std::string> pieces = {
      "a",    "\"",       "\\",       "\n",           "\x01",
      "\x1f", "\x7f",     "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
      "\xC3", "\xE2\x82", "\xFF",     "\xED\xA0\x80", "/"};
  const auto written = [](const std::string& text, json::invalid_utf8 invalid) {
    std::string buf(json::max_string_size(text.size()) + 1, '#');
    char* end = json::write_string(&buf[0], text, invalid);
    REQUIRE(static_cast<std::size_t>(end - buf.data()) <= json::max_string_size(text.size()));
    REQUIRE(buf.back() == '#');  // nothing past the bound
    std::string appended = "x";  // append_string: the same bytes after what was there
    json::append_string(appended, text, invalid);
    REQUIRE(appended == "x" + std::string(buf.data(), end));
    return std::string(buf.data(), end);
  };
  const auto check = [&](const std::string& text) {
    // per_subpart is nlohmann's replace rule; per_byte writes one U+FFFD per invalid byte,
    // so it equals nlohmann's output once each invalid byte stands alone.
    REQUIRE(written(text, json::invalid_utf8::per_subpart) ==
            nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const std::string per_byte = written(text, json::invalid_utf8::per_byte);
    const auto back = nlohmann::json::parse(per_byte, nullptr, false);
    REQUIRE(back.is_string());
  };
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i)
      text += pieces[rng() % pieces.size()];
    check(text);
  }
  for (int c = 0; c < 256; ++c) {  // each byte alone and repeated, the worst case included
    check(std::string(1, static_cast<char>(c)));
    check(std::string(7, static_cast<char>(c)));
  }
  // per_byte: a cut-short sequence gives one U+FFFD per byte, per_subpart one in all.
  CHECK(written("\xE2\x82x", json::invalid_utf8::per_byte) == "\"\xEF\xBF\xBD\xEF\xBF\xBDx\"");
  CHECK(written("\xE2\x82x", json::invalid_utf8::per_subpart) == "\"\xEF\xBF\xBDx\"");
}

// Generated documents rather than mutations of three seeds: numbers at every boundary of
// nlohmann's integer / unsigned / float split (long digit runs, -0, exponents that overflow
// or underflow), strings of escapes (surrogates whole, lone and reversed, \u0000) and raw
// bytes (all of 0x00..0xFF), whitespace nlohmann does not skip (\v \f), a BOM, a NUL after
// the value, repeated member names; each read both ways, and each value nlohmann reads
// dumped both ways. Any divergence fails with the text that shows it.
TEST_CASE("read_json_dom and append_dumped_value agree with nlohmann on generated documents",
          "[json][entry]") {
  std::mt19937_64 rng(20261202);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto digits = [&](std::size_t n, bool lead_zero_ok) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i)
      s.push_back(static_cast<char>('0' + ((i == 0 && !lead_zero_ok) ? 1 + pick(9) : pick(10))));
    return s;
  };
  const auto number = [&]() -> std::string {
    static const char* const fixed[] = {"-0",
                                        "0",
                                        "-0.0",
                                        "9223372036854775807",
                                        "9223372036854775808",
                                        "-9223372036854775808",
                                        "-9223372036854775809",
                                        "18446744073709551615",
                                        "18446744073709551616",
                                        "1e308",
                                        "1.7976931348623157e308",
                                        "1.7976931348623159e308",
                                        "4.9e-324",
                                        "2e-324",
                                        "1e-400",
                                        "1E+2",
                                        "1e400"};
    if (pick(4) == 0) return fixed[pick(sizeof fixed / sizeof *fixed)];
    std::string s = pick(2) ? "-" : "";
    s += pick(5) == 0 ? "0" : digits(1 + pick(pick(4) == 0 ? 40 : 20), false);
    if (pick(3) == 0) s += "." + digits(1 + pick(20), true);
    if (pick(3) == 0) {
      s += pick(2) ? "e" : "E";
      const std::size_t sign = pick(3);
      if (sign == 1) s += "+";
      if (sign == 2) s += "-";
      s += digits(1 + pick(4), true);
    }
    return s;
  };
  const auto string = [&]() -> std::string {
    static const char* const escapes[] = {"\\\"",
                                          "\\\\",
                                          "\\/",
                                          "\\b",
                                          "\\f",
                                          "\\n",
                                          "\\r",
                                          "\\t",
                                          "\\u0000",
                                          "\\u001f",
                                          "\\u00e9",
                                          "\\uffff",
                                          "\\ud83d",
                                          "\\ude00",
                                          "\\uDBFF",
                                          "\\uDFFF",
                                          "\\ud800\\udc00",
                                          "\\udc00\\ud800",
                                          "\\u",
                                          "\\x"};
    std::string s = "\"";
    for (std::size_t n = pick(8); n > 0; --n) {
      switch (pick(4)) {
        case 0:
          s += escapes[pick(sizeof escapes / sizeof *escapes)];
          break;
        case 1:
          s.push_back(static_cast<char>(rng() & 0xff));  // any byte: control, NUL, invalid UTF-8
          break;
        case 2: {
          static const char* const utf8[] = {"\xc3\xa9",         "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                             "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80"};
          s += utf8[pick(sizeof utf8 / sizeof *utf8)];
          break;
        }
        default:
          s.push_back(static_cast<char>('a' + pick(26)));
      }
    }
    return s + "\"";
  };
  const auto ws = [&]() -> std::string {
    static const char* const spaces[] = {"", "", "", " ", "\t", "\n", "\r", " \r\n\t", "\v", "\f"};
    return pick(3) == 0 ? spaces[pick(sizeof spaces / sizeof *spaces)] : "";
  };
  std::function<std::string(int)> value = [&](int depth) -> std::string {
    const std::size_t kind = depth > 4 ? 2 + pick(3) : pick(5);
    if (kind == 0 || kind == 1) {
      const bool object = kind == 0;
      std::string s(1, object ? '{' : '[');
      const std::size_t n = pick(5);
      for (std::size_t i = 0; i < n; ++i) {
        if (i != 0) s += ws() + "," + ws();
        if (object) s += (pick(3) == 0 ? std::string("\"k\"") : string()) + ws() + ":" + ws();
        s += value(depth + 1);
      }
      return s + ws() + (object ? '}' : ']');
    }
    if (kind == 2) return number();
    if (kind == 3) return string();
    static const char* const literals[] = {"true", "false", "null"};
    return literals[pick(3)];
  };
  std::size_t read = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string text = ws() + value(0) + ws();
    if (pick(20) == 0) text.insert(0, "\xef\xbb\xbf");
    if (pick(20) == 0) text += std::string(1, '\0') + "x";
    for (std::size_t k = pick(3) == 0 ? 1 + pick(2) : 0; k > 0; --k) {
      const std::size_t at = pick(text.size() + 1);
      if (pick(2) && at < text.size())
        text.erase(at, 1);
      else
        text.insert(at, 1, static_cast<char>(rng() & 0xff));
    }
    const auto mine = dlq::detail::read_json_dom<nlohmann::json>(text);
    const auto theirs = nlohmann::json::parse(text, nullptr, false);
    INFO("case " << n << " text: " << text);
    REQUIRE(same_json(mine, theirs));
    if (theirs.is_discarded()) continue;
    ++read;
    std::string out;
    dlq::detail::append_dumped_value(out, theirs);
    REQUIRE(out == theirs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  CHECK(read > 5000);  // the generator mostly writes valid documents
  // Doubles from random bit patterns (subnormals, NaN, infinities, the largest) dumped both ways.
  for (int n = 0; n < 20000; ++n) {
    const std::uint64_t bits = rng();
    double x = 0;
    std::memcpy(&x, &bits, sizeof x);
    const nlohmann::json j = {{"x", x}, {"y", static_cast<std::int64_t>(bits)}, {"z", bits}};
    std::string out;
    dlq::detail::append_dumped_value(out, j);
    INFO("bits " << bits);
    REQUIRE(out == j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

}  // namespace test_json_scan
