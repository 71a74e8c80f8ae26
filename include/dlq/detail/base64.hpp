// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Standard base64 (RFC 4648 §4, with padding): how non-JSON payloads travel in the envelope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlq::detail::base64 {

/// Writes the base64 of `in` at `dst` ((in.size() + 2) / 3 * 4 bytes); returns the end.
inline char* encode_to(std::string_view in, char* dst) noexcept {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const std::size_t n = in.size();
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    dst[0] = alphabet[(v >> 18) & 63];
    dst[1] = alphabet[(v >> 12) & 63];
    dst[2] = alphabet[(v >> 6) & 63];
    dst[3] = alphabet[v & 63];
    dst += 4;
  }
  if (i + 1 == n) {
    const std::uint32_t v = std::uint32_t{p[i]} << 16;
    dst[0] = alphabet[(v >> 18) & 63];
    dst[1] = alphabet[(v >> 12) & 63];
    dst[2] = '=';
    dst[3] = '=';
    dst += 4;
  } else if (i + 2 == n) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8);
    dst[0] = alphabet[(v >> 18) & 63];
    dst[1] = alphabet[(v >> 12) & 63];
    dst[2] = alphabet[(v >> 6) & 63];
    dst[3] = '=';
    dst += 4;
  }
  return dst;
}

/// Appends the base64 of `in` to `out` (encode_to into the grown string).
inline void encode(std::string_view in, std::string& out) {
  const std::size_t at = out.size();
  out.resize(at + (in.size() + 2) / 3 * 4);
  encode_to(in, &out[0] + at);
}

inline std::string encode(std::string_view in) {
  std::string out;
  encode(in, out);
  return out;
}

/// Decodes canonical padded base64 into `out`. Returns false (out unspecified) on any
/// character outside the alphabet, a wrong length, or misplaced padding.
inline bool decode(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (in.size() % 4 != 0) return false;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    const int a = value(in[i]);
    const int b = value(in[i + 1]);
    if (a < 0 || b < 0) return false;
    if (last && in[i + 2] == '=') {
      if (in[i + 3] != '=' || (b & 15) != 0) return false;
      out.push_back(static_cast<char>((a << 2) | (b >> 4)));
      return true;
    }
    const int c = value(in[i + 2]);
    if (c < 0) return false;
    if (last && in[i + 3] == '=') {
      if ((c & 3) != 0) return false;
      out.push_back(static_cast<char>((a << 2) | (b >> 4)));
      out.push_back(static_cast<char>(((b & 15) << 4) | (c >> 2)));
      return true;
    }
    const int d = value(in[i + 3]);
    if (d < 0) return false;
    out.push_back(static_cast<char>((a << 2) | (b >> 4)));
    out.push_back(static_cast<char>(((b & 15) << 4) | (c >> 2)));
    out.push_back(static_cast<char>(((c & 3) << 6) | d));
  }
  return true;
}

}  // namespace dlq::detail::base64
