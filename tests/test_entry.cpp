// The wire format: what send writes, what is read back, and how bad bytes are reported.
#include "dlq/entry.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "support/catch.hpp"

namespace test_entry {

using namespace std::chrono;

namespace {
std::string envelope(std::string_view payload, const dlq::Failure& f,
                     std::string_view worker = "w") {
  dlq::detail::envelope_input in;
  in.queue = "orders";
  in.payload = payload;
  in.failure = &f;
  in.worker = worker;
  in.id = "0190aaaa-0000-7000-8000-000000000001";
  in.time = system_clock::time_point(seconds(1796009539)) + microseconds(7);
  std::string out;
  dlq::detail::write_envelope(out, in);
  return out;
}
}  // namespace

TEST_CASE("the envelope carries the seed's six fields with their names and types", "[entry]") {
  dlq::Failure f;
  f.error = "payment \"timeout\"\n";
  f.attempt = 3;
  const std::string raw = envelope(R"({"order":42})", f, "worker-7");
  // payload_bytes (the length of original_payload's value) first, then the payload and the id:
  // the layout the server-side replay step proves (dlq/redis/scripts/replay_fast.hpp).
  CHECK(raw ==
        R"({"payload_bytes":12,"original_payload":{"order":42},)"
        R"("id":"0190aaaa-0000-7000-8000-000000000001",)"
        R"("queue":"orders","error":"payment \"timeout\"\n",)"
        R"("attempt":3,"worker":"worker-7","dead_lettered_at":"2026-11-30T03:32:19.000007+00:00",)"
        R"("envelope_bytes":252})");
  CHECK(raw.size() == 252);
  const auto j = nlohmann::json::parse(raw);
  CHECK(j["attempt"].is_number_integer());
  CHECK(j["original_payload"]["order"] == 42);
}

TEST_CASE("envelope_bytes, last, is the byte length of the whole envelope as written", "[entry]") {
  // Its own digits included: sizes around 999 and 9999 bytes, where the value gains a digit
  // (1000 and 10000 cannot be written: with the fourth digit the envelope is 1001 bytes);
  // and appended to a buffer that already holds bytes.
  dlq::Failure f;
  f.error = "e";
  const std::size_t base = envelope("\"\"", f).size();
  std::vector<std::size_t> sizes;
  for (std::size_t around : {std::size_t{999}, std::size_t{9999}}) {
    for (std::size_t pad = around - base - 5; pad < around - base + 5; ++pad) {
      const std::string payload = "\"" + std::string(pad, 'x') + "\"";
      dlq::detail::envelope_input in;
      in.queue = "orders";
      in.payload = payload;
      in.failure = &f;
      in.worker = "w";
      in.id = "0190aaaa-0000-7000-8000-000000000001";
      in.time = system_clock::time_point(seconds(1796009539));
      std::string out = "prefix";
      dlq::detail::write_envelope(out, in);
      const std::string raw = out.substr(6);
      const std::string tail = R"(,"envelope_bytes":)" + std::to_string(raw.size()) + "}";
      INFO(raw.size());
      REQUIRE(raw.size() >= tail.size());
      CHECK(raw.compare(raw.size() - tail.size(), tail.size(), tail) == 0);
      CHECK(nlohmann::json::parse(raw)["envelope_bytes"] == raw.size());
      sizes.push_back(raw.size());
    }
  }
  for (std::size_t n : {std::size_t{998}, std::size_t{999}, std::size_t{1001}, std::size_t{1002},
                        std::size_t{9999}, std::size_t{10001}}) {
    INFO(n);
    CHECK(std::count(sizes.begin(), sizes.end(), n) == 1);
  }
}

TEST_CASE("payload_bytes is the byte length of original_payload's value as written", "[entry]") {
  dlq::Failure f;
  f.error = "e";
  const std::string binary("\xff\x00\x01\x02", 4);
  for (const std::string& payload :
       {std::string(R"({"a":[1,2,"}"]})"), std::string("7"), std::string(" {\"b\":1}\n"), binary,
        std::string("x"), std::string("ab"), std::string("abc")}) {
    const std::string raw = envelope(payload, f, "w");
    // Only a verbatim JSON payload starts the envelope with payload_bytes: the flags that
    // change how an entry replays (whitespace kept, base64) come before it.
    const bool verbatim = dlq::detail::shape_of(payload) == dlq::detail::payload_shape::json;
    CHECK((raw.rfind(R"({"payload_bytes":)", 0) == 0) == verbatim);
    const std::string head = R"("payload_bytes":)";
    const std::size_t at = raw.find(head);
    REQUIRE(at != std::string::npos);
    const std::size_t digits_end = raw.find(',', at);
    const std::size_t n = std::stoul(raw.substr(at + head.size(), digits_end - at - head.size()));
    const std::string key = R"(,"original_payload":)";
    REQUIRE(raw.compare(digits_end, key.size(), key) == 0);
    const std::size_t first = digits_end + key.size();
    // The value spans exactly n bytes and the id follows it.
    CHECK(raw.compare(first + n, 7, R"(,"id":")") == 0);
    const auto j = nlohmann::json::parse(raw);
    CHECK(nlohmann::json::parse(raw.substr(first, n)) == j["original_payload"]);
    CHECK(j["payload_bytes"] == n);
    CHECK(dlq::parse_entry(raw).payload == payload);
  }
  // A parked entry starts with its flag, so it never looks like an unflagged one.
  dlq::detail::envelope_input in;
  in.queue = "orders";
  in.payload = "7";
  in.failure = &f;
  in.worker = "w";
  in.id = "0190aaaa-0000-7000-8000-000000000001";
  in.parked = true;
  std::string parked;
  dlq::detail::write_envelope(parked, in);
  CHECK(parked.rfind(R"({"parked":true,"payload_bytes":1,"original_payload":7,"id":)", 0) == 0);
  CHECK(dlq::parse_entry(parked).parked);
}

TEST_CASE("optional fields are written only when set", "[entry]") {
  dlq::Failure f;
  f.error = "e";
  f.error_type = "TimeoutError";
  f.job_id = "job-9";
  f.context = {{"tenant", "acme"}};
  const auto j = nlohmann::json::parse(envelope("{}", f));
  CHECK(j["error_type"] == "TimeoutError");
  CHECK(j["job_id"] == "job-9");
  CHECK(j["context"]["tenant"] == "acme");
  CHECK_FALSE(j.contains("payload_encoding"));
  const auto e = dlq::parse_entry(envelope("{}", f));
  CHECK(e.error_type == "TimeoutError");
  CHECK(e.job_id == "job-9");
  CHECK(e.context["tenant"] == "acme");
}

TEST_CASE("a JSON payload is embedded verbatim; anything else is base64 with a marker", "[entry]") {
  dlq::Failure f;
  f.error = "e";
  const std::string big = R"({"n":12345678901234567,"m":9223372036854775807,"l":[],"o":{}})";
  const std::string raw = envelope(big, f);
  CHECK(raw.find(big) != std::string::npos);
  auto e = dlq::parse_entry(raw);
  CHECK(e.payload == big);
  CHECK(e.payload_encoding == dlq::PayloadEncoding::json);

  const std::string binary("\x00\x01\xff{", 4);
  e = dlq::parse_entry(envelope(binary, f));
  CHECK(e.ok());
  CHECK(e.payload == binary);
  CHECK(e.payload_encoding == dlq::PayloadEncoding::base64);
  CHECK(nlohmann::json::parse(e.raw)["payload_encoding"] == "base64");
  CHECK(e.payload_json() == "AAH/ew==");
}

TEST_CASE("unknown fields are kept and shown", "[entry]") {
  const auto e = dlq::parse_entry(
      R"({"original_payload": 1, "queue": "q", "trace": {"span": "ab"}, "id": "x1", "priority": 5})");
  CHECK(e.ok());
  const auto j = e.to_json();
  CHECK(j["trace"]["span"] == "ab");
  CHECK(j["priority"] == 5);
  CHECK(j["id"] == "x1");
  CHECK(e.raw.find("\"priority\": 5") != std::string::npos);
}

TEST_CASE("missing or mistyped seed fields are tolerated; only the payload is required",
          "[entry]") {
  const auto e = dlq::parse_entry(R"({"original_payload": null, "attempt": "three", "worker": 7})");
  CHECK(e.ok());
  CHECK(e.payload == "null");
  CHECK(e.attempt == 0);
  CHECK(e.worker.empty());
  CHECK(e.queue.empty());
  CHECK_FALSE(e.dead_lettered_time.has_value());
  CHECK(dlq::parse_entry(R"({"original_payload": 1, "attempt": 4.0})").attempt == 4);
  CHECK(dlq::parse_entry(R"({"original_payload": 1, "attempt": 99999999999999999999})").attempt ==
        0);
}

TEST_CASE("unreadable entries say why and keep their bytes", "[entry]") {
  struct bad_case {
    std::string raw;
    std::string problem;
  };
  const bad_case cases[] = {
      {"nope", "not valid JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"queue": "q"})", "no \"original_payload\" field"},
      {R"({"original_payload": "!!", "payload_encoding": "base64"})", "not a base64 string"},
      {R"({"original_payload": 5, "payload_encoding": "base64"})", "not a base64 string"},
      {R"({"original_payload": 5, "payload_encoding": "zstd"})", "unknown payload_encoding"},
  };
  for (const auto& c : cases) {
    INFO(c.raw);
    const auto e = dlq::parse_entry(c.raw);
    CHECK_FALSE(e.ok());
    CHECK(e.problem.find(c.problem) != std::string::npos);
    CHECK(e.raw == c.raw);
    CHECK_FALSE(e.id.empty());
    CHECK_THROWS_AS(dlq::parse_entry_or_throw(c.raw), dlq::format_error);
  }
  const auto text = dlq::parse_entry("nope").to_json();
  CHECK(text["raw"] == "nope");
  CHECK(text["problem"] == "not valid JSON");
  const auto bin = dlq::parse_entry(std::string("\xff\x00", 2)).to_json();
  CHECK(bin["raw_base64"] == "/wA=");
}

TEST_CASE("duplicate keys resolve as in Python: the last one wins", "[entry]") {
  const auto e =
      dlq::parse_entry(R"({"original_payload": 1, "error": "first", "error": "second"})");
  CHECK(e.error == "second");
}

TEST_CASE("non-finite floats written by Python's json.dumps do not make an entry corrupt",
          "[entry]") {
  const auto e =
      dlq::parse_entry(R"({"original_payload": {"x": NaN, "y": -Infinity}, "queue": "q"})");
  CHECK(e.ok());
  CHECK(e.payload == R"({"x": NaN, "y": -Infinity})");
}

// Issue 11 item 6: what to_json() shows agrees with ok(), and the payload is shown.
TEST_CASE("to_json shows a readable entry as readable even when strict JSON cannot hold it",
          "[entry]") {
  struct shown_case {
    std::string raw;
    std::string payload_text;  // original_payload as raw text
  };
  const shown_case cases[] = {
      {R"({"original_payload": {"x": NaN, "y": -Infinity}, "queue": "q", "error": "e"})",
       R"({"x": NaN, "y": -Infinity})"},
      {R"({"original_payload": {"s": "\ude00"}, "queue": "q", "error": "e"})",
       R"({"s": "\ude00"})"},
      {R"({"original_payload": "\ud800 alone", "queue": "q", "error": "e"})", R"("\ud800 alone")"},
  };
  for (const auto& c : cases) {
    INFO(c.raw);
    const auto e = dlq::parse_entry(c.raw);
    REQUIRE(e.ok());
    auto j = e.to_json();  // not const: a missing key reads as null
    CHECK_FALSE(j.contains("problem"));
    CHECK(j["id"] == e.id);
    CHECK(j["queue"] == "q");
    CHECK(j["error"] == "e");
    CHECK(j["original_payload"] == c.payload_text);  // shown as its raw text
    CHECK(j.contains("note"));
    CHECK_NOTHROW(j.dump());
  }
  // A field of dlq's own that strict JSON cannot hold is shown as text too; the rest as JSON.
  const auto e = dlq::parse_entry(
      R"({"original_payload": {"ok": 1}, "context": {"v": NaN}, "queue": "q", "attempt": 2})");
  REQUIRE(e.ok());
  auto j = e.to_json();  // not const: a missing key reads as null
  CHECK(j["original_payload"]["ok"] == 1);
  CHECK(j["context"] == R"({"v": NaN})");
  CHECK(j["attempt"] == 2);
  CHECK_FALSE(j.contains("problem"));
}

// Issue 15 item 5: JSON with whitespace around it is embedded verbatim, not as base64.
TEST_CASE("a JSON payload with surrounding whitespace is embedded and replayed byte-exact",
          "[entry]") {
  dlq::Failure f;
  f.error = "e";
  const std::string payloads[] = {"{\"a\":1}\n", " [1, 2]\t", "\r\n\"text\" ", "\n42\n\n",
                                  " {\"a\" : [ ] } "};
  for (const auto& p : payloads) {
    INFO(p);
    const std::string raw = envelope(p, f);
    const auto j = nlohmann::json::parse(raw);  // still one valid JSON object
    CHECK_FALSE(j.contains("payload_encoding"));
    CHECK(j["original_payload"] == nlohmann::json::parse(p));  // what the Python seed sees
    CHECK(raw.find(p) != std::string::npos);                   // verbatim
    const auto e = dlq::parse_entry(raw);
    REQUIRE(e.ok());
    CHECK(e.payload == p);  // replay cuts the same bytes back out, whitespace included
    CHECK(e.payload_encoding == dlq::PayloadEncoding::json);
    dlq::detail::envelope_view view;
    REQUIRE(dlq::detail::view_envelope(raw, view));
    std::string scratch, problem;
    std::string_view cut;
    REQUIRE(dlq::detail::cut_payload(view, scratch, cut, problem));
    CHECK(cut == p);
    CHECK(cut.data() >= raw.data());  // a view into the stored bytes, not a copy
    CHECK(cut.data() + cut.size() <= raw.data() + raw.size());
  }
  // Whitespace only, or whitespace around something that is not JSON: base64 as before.
  for (const std::string& p : {std::string("\n"), std::string(" {\"a\":} "), std::string("")}) {
    INFO(p);
    const auto e = dlq::parse_entry(envelope(p, f));
    REQUIRE(e.ok());
    CHECK(e.payload == p);
    CHECK(e.payload_encoding == dlq::PayloadEncoding::base64);
  }
  // The Python seed writes ", " and ": ": its payloads are cut without the separators' spaces.
  const auto seed = dlq::parse_entry(R"({"original_payload": {"a": 1}, "queue": "q"})");
  CHECK(seed.payload == R"({"a": 1})");
}

TEST_CASE("payload_whitespace widens the cut only to whitespace between the ':' and the next field",
          "[entry]") {
  // Hand-made (or Python-rewritten) envelopes carrying the flag, with odd spacing anywhere:
  // the cut is exactly the bytes between the ':' after "original_payload" and the ',' or '}'
  // after its value, never a separator or a byte of another field.
  struct Case {
    std::string raw, payload;
  };
  const std::string big_ws(200000, ' ');
  const Case cases[] = {
      {"{\"original_payload\" :\t {\"a\": [1, {\"b\" : \" }, \"}]} \n , \"payload_whitespace\" : "
       "true}",
       "\t {\"a\": [1, {\"b\" : \" }, \"}]} \n "},
      {"{\"payload_whitespace\":true,\"original_payload\":\r\n7\r\n}", "\r\n7\r\n"},
      {"  {\"payload_whitespace\":true,\"original_payload\":\"x\"}  ", "\"x\""},
      {"{\"original_payload\":" + big_ws + "[[[[]]]]" + big_ws + ",\"payload_whitespace\":true}",
       big_ws + "[[[[]]]]" + big_ws},
      // The last duplicate wins for both the payload and the flag.
      {"{\"original_payload\": 1 ,\"payload_whitespace\":true,\"original_payload\": 2 ,"
       "\"payload_whitespace\":false}",
       "2"},
      // Only the literal true widens: a string "true" or 1 does not.
      {"{\"original_payload\": 3 ,\"payload_whitespace\":\"true\"}", "3"},
      {"{\"original_payload\": 4 ,\"payload_whitespace\":1}", "4"},
  };
  for (const Case& c : cases) {
    INFO(c.raw.substr(0, 120));
    const auto e = dlq::parse_entry(c.raw);
    REQUIRE(e.ok());
    CHECK(e.payload == c.payload);
    CHECK(e.payload_encoding == dlq::PayloadEncoding::json);
  }
  // The flag on a base64 payload changes nothing: the decoded bytes come back.
  const auto b = dlq::parse_entry(
      R"({"original_payload": "AAE=" ,"payload_encoding":"base64","payload_whitespace":true})");
  REQUIRE(b.ok());
  CHECK(b.payload == std::string("\0\1", 2));
  // Sent payloads of every shape round-trip byte-exact, also huge and deeply nested ones.
  dlq::Failure f;
  f.error = "e";
  const std::string nested = std::string(500, '[') + std::string(500, ']');
  for (const std::string& p :
       {"\n" + nested + "\n", big_ws + "{}" + big_ws, std::string("\t\"\\u0000\"\r"),
        std::string(" -0.5e+10 "), std::string("\n\ntrue"), std::string("null ")}) {
    INFO(p.size());
    const std::string raw = envelope(p, f);
    CHECK(raw.find("\"payload_whitespace\":true") != std::string::npos);
    const auto e = dlq::parse_entry(raw);
    REQUIRE(e.ok());
    CHECK(e.payload == p);
  }
}

TEST_CASE("json_only refuses a payload that is not JSON with invalid_argument", "[entry]") {
  dlq::Failure f;
  f.error = "e";
  auto write = [&](std::string_view payload) {
    dlq::detail::envelope_input in;
    in.queue = "orders";
    in.payload = payload;
    in.failure = &f;
    in.worker = "w";
    in.id = "id-1";
    in.json_only = true;
    std::string out;
    dlq::detail::write_envelope(out, in);
    return out;
  };
  CHECK_NOTHROW(write("{\"a\":1}\n"));
  CHECK_NOTHROW(write("[1]"));
  CHECK_THROWS_AS(write(std::string("\x00\x01", 2)), dlq::invalid_argument);
  CHECK_THROWS_AS(write("plain text"), dlq::invalid_argument);
  CHECK_THROWS_AS(write(""), dlq::invalid_argument);
  try {
    write("plain text");
  } catch (const dlq::invalid_argument& e) {
    CHECK(std::string(e.what()).find("[dlq.") == 0);
    CHECK(std::string(e.what()).find("json_only") != std::string::npos);
  }
}

TEST_CASE("check_payload refuses only under json_only, before anything is written", "[entry]") {
  CHECK_NOTHROW(dlq::detail::check_payload("q", "not json", false));
  CHECK_NOTHROW(dlq::detail::check_payload("q", " {\"a\":1}\n", true));
  CHECK_THROWS_AS(dlq::detail::check_payload("q", "not json", true), dlq::invalid_argument);
}

namespace {
// The envelope written field by field by appending, the plainest way (the wire format the
// Python service and the interop tests expect), envelope_bytes counted by brute force.
std::string reference_envelope(const dlq::detail::envelope_input& in) {
  namespace d = dlq::detail;
  const dlq::Failure& f = *in.failure;
  const d::payload_shape shape = d::shape_of(in.payload);
  const bool as_json = shape != d::payload_shape::binary;
  const std::size_t encoded = as_json ? in.payload.size() : (in.payload.size() + 2) / 3 * 4 + 2;
  std::string out = "{";
  if (in.parked) out += "\"parked\":true,";
  if (shape == d::payload_shape::spaced) out += "\"payload_whitespace\":true,";
  if (!as_json) out += "\"payload_encoding\":\"base64\",";
  out += "\"payload_bytes\":" + std::to_string(encoded) + ",\"original_payload\":";
  if (as_json) {
    out += in.payload;
  } else {
    out += '"';
    d::base64::encode(in.payload, out);
    out += '"';
  }
  const auto field = [&out](const char* name, std::string_view v) {
    out += name;
    d::json::append_string(out, v);
  };
  field(",\"id\":", in.id);
  field(",\"queue\":", in.queue);
  field(",\"error\":", f.error);
  out += ",\"attempt\":" + std::to_string(f.attempt);
  field(",\"worker\":", in.worker);
  out += ",\"dead_lettered_at\":\"" + d::iso_time::format(in.time) + '"';
  if (!f.error_type.empty()) field(",\"error_type\":", f.error_type);
  if (!f.job_id.empty()) field(",\"job_id\":", f.job_id);
  if (!f.context.is_null())
    out +=
        ",\"context\":" + f.context.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (in.dead_letter_count > 0)
    out += ",\"dead_letter_count\":" + std::to_string(in.dead_letter_count);
  out += ",\"envelope_bytes\":";
  std::size_t total = out.size() + 2;  // one digit and the '}'
  while (std::to_string(total).size() + out.size() + 1 != total)
    ++total;
  out += std::to_string(total) + '}';
  return out;
}
}  // namespace

TEST_CASE("write_envelope writes the field-by-field reference bytes, short and long fields",
          "[entry]") {
  std::mt19937 rng(18);
  const std::vector<std::string> pieces = {
      "a", "\"", "\\", "\n", "\x01", "\xC3\xA9", "\xF0\x9F\x98\x80", "\xFF", "\xE2\x82", "z"};
  const auto text = [&](std::size_t max) {
    std::string s;
    const std::size_t n = max == 0 ? 0 : rng() % max;
    for (std::size_t i = 0; i < n; ++i)
      s += pieces[rng() % pieces.size()];
    return s;
  };
  const std::vector<std::string> payloads = {
      "{\"a\":1}", "  [1, 2]\n", "xyz", "", "\x00\x01\xFF", "12", "\"s\"", std::string(1000, 'q')};
  for (int round = 0; round < 3000; ++round) {
    // Up to ~1000 bytes of fields, with every kind of byte that needs escaping.
    const std::size_t max = round % 3 == 0 ? 400 : 40;
    dlq::Failure f;
    f.error = text(max);
    f.attempt = static_cast<std::int64_t>(rng() % 5) - 1;
    if (rng() % 2 != 0) f.error_type = text(max / 4 + 1);
    if (rng() % 2 != 0) f.job_id = text(max / 4 + 1);
    if (rng() % 3 == 0) f.context = nlohmann::json{{"k", text(20)}, {"n", round}};
    const std::string queue = text(max / 4 + 1), worker = text(max / 4 + 1), id = text(60);
    const std::string payload = payloads[rng() % payloads.size()];
    dlq::detail::envelope_input in;
    in.queue = queue;
    in.payload = payload;
    in.failure = &f;
    in.worker = worker;
    in.id = id;
    in.time = system_clock::time_point(microseconds(static_cast<std::int64_t>(rng()) * 1000003));
    in.dead_letter_count = rng() % 3 == 0 ? static_cast<std::int64_t>(rng() % 100000) : 0;
    in.parked = rng() % 4 == 0;
    std::string out = "prefix";  // appended to what the string holds
    dlq::detail::write_envelope(out, in);
    INFO(round);
    REQUIRE(out == "prefix" + reference_envelope(in));
  }
}

}  // namespace test_entry
