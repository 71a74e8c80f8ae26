// Base64: how non-JSON payloads travel.
#include "dlq/detail/base64.hpp"

#include <string>

#include "support/catch.hpp"

namespace test_base64 {

namespace b64 = dlq::detail::base64;

TEST_CASE("base64 matches RFC 4648 test vectors", "[base64]") {
  CHECK(b64::encode("") == "");
  CHECK(b64::encode("f") == "Zg==");
  CHECK(b64::encode("fo") == "Zm8=");
  CHECK(b64::encode("foo") == "Zm9v");
  CHECK(b64::encode("foob") == "Zm9vYg==");
  CHECK(b64::encode("fooba") == "Zm9vYmE=");
  CHECK(b64::encode("foobar") == "Zm9vYmFy");
}

TEST_CASE("every byte value round-trips", "[base64]") {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<char>(i));
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    std::string out;
    REQUIRE(b64::decode(b64::encode(all.substr(0, len)), out));
    CHECK(out == all.substr(0, len));
  }
}

TEST_CASE("malformed base64 is rejected", "[base64]") {
  std::string out;
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zm9v!A==", "=Zm9", "Zm=v"}) {
    INFO(bad);
    CHECK_FALSE(b64::decode(bad, out));
  }
}

}  // namespace test_base64
