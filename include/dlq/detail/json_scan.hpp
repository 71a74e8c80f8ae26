// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A small JSON scanner that validates and finds byte spans without building a document.
// It is what makes payloads byte-exact: a JSON payload is embedded in the envelope verbatim,
// and replay cuts the value's exact byte span back out (a DOM round trip would sort keys,
// reformat numbers and turn `[]` and `{}` into each other in some libraries).
//
// Strict mode follows RFC 8259 and requires well-formed UTF-8 (RFC 3629) in strings.
// Lenient mode additionally accepts NaN, Infinity and -Infinity, which Python's json.dumps
// writes for float('nan') / float('inf'): entries written by the Python seed must load.
// The scanner is iterative (no recursion), so deep nesting cannot overflow the stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace dlq::detail::json {

enum class mode : unsigned char { strict, lenient };

inline bool is_ws(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline const char* skip_ws(const char* p, const char* end) noexcept {
  while (p != end && is_ws(*p))
    ++p;
  return p;
}

/// The length of the UTF-8 sequence that byte `c` leads (2 to 4; 0 when `c` leads none) and
/// the range its second byte must lie in (Unicode Table 3-7: no overlongs, no surrogates, at
/// most U+10FFFF); every later byte lies in 0x80..0xBF.
inline std::size_t utf8_lead(unsigned char c, unsigned char& lo, unsigned char& hi) noexcept {
  lo = 0x80;
  hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) {
    if (c == 0xE0) lo = 0xA0;  // overlong below
    if (c == 0xED) hi = 0x9F;  // surrogates above
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (c == 0xF0) lo = 0x90;  // overlong below
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    return 4;
  }
  return 0;
}

/// How many bytes from `p` (a byte >= 0x80, `p` < `end`) are a well-formed prefix of the
/// sequence its first byte leads: the whole sequence, or the "maximal subpart" of an
/// ill-formed one (Unicode 3.9; at least 1 byte, the lead byte alone when it leads none).
/// `whole` says which.
inline std::size_t utf8_prefix(const char* p, const char* end, bool& whole) noexcept {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  unsigned char lo = 0, hi = 0;
  const std::size_t len = utf8_lead(u[0], lo, hi);
  std::size_t good = 1;
  if (len != 0 && p + 1 != end && u[1] >= lo && u[1] <= hi) {
    good = 2;
    while (good < len && p + good != end && (u[good] & 0xC0) == 0x80)
      ++good;
  }
  whole = len != 0 && good == len;
  return good;
}

/// Length of the well-formed multi-byte UTF-8 sequence at `p` (Unicode Table 3-7: no
/// overlongs, no surrogates, at most U+10FFFF), or 0 when the bytes are not one.
inline std::size_t utf8_sequence_length(const char* p, const char* end) noexcept {
  bool whole = false;
  const std::size_t good = utf8_prefix(p, end, whole);
  return whole ? good : 0;
}

/// True when `text` is well-formed UTF-8 (NUL and control characters allowed).
inline bool is_valid_utf8(std::string_view text) noexcept {
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p != end) {
    if (static_cast<unsigned char>(*p) < 0x80) {
      ++p;
      continue;
    }
    const std::size_t len = utf8_sequence_length(p, end);
    if (len == 0) return false;
    p += len;
  }
  return true;
}

/// True when none of the 8 bytes of `w` needs a closer look inside a string: no '"', no
/// backslash, no control character (< 0x20), no byte >= 0x80. Each test is the classic
/// "has a zero byte" bit trick; it never misses such a byte, and a false alarm only sends
/// the scanner down the byte-by-byte path, so it cannot change what is accepted.
inline bool plain_string_bytes(std::uint64_t w) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t high = 0x8080808080808080ULL;
  const std::uint64_t q = w ^ (ones * '"');
  const std::uint64_t b = w ^ (ones * '\\');
  const std::uint64_t special =
      ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w) | w;
  return (special & high) == 0;
}

/// Skips the body of a string whose opening quote was consumed; returns the position after
/// the closing quote, or nullptr if the string is malformed (bad escape, control character,
/// invalid UTF-8, unterminated). `has_escape` is set when a backslash occurs.
inline const char* skip_string_body(const char* p, const char* end, bool& has_escape) noexcept {
  while (p != end) {
    // Plain ASCII eight bytes at a time (most of a payload's strings), then byte by byte.
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      if (!plain_string_bytes(w)) break;
      p += 8;
    }
    if (p == end) break;
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') return p + 1;
    if (c == '\\') {
      has_escape = true;
      if (++p == end) return nullptr;
      switch (*p) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          ++p;
          break;
        case 'u':
          if (end - p < 5) return nullptr;
          for (int i = 1; i <= 4; ++i) {
            const char h = p[i];
            const bool hex =
                (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
            if (!hex) return nullptr;
          }
          p += 5;
          break;
        default:
          return nullptr;
      }
      continue;
    }
    if (c < 0x20) return nullptr;
    if (c < 0x80) {
      ++p;
      continue;
    }
    const std::size_t len = utf8_sequence_length(p, end);
    if (len == 0) return nullptr;
    p += len;
  }
  return nullptr;
}

inline const char* skip_literal(const char* p, const char* end, std::string_view word) noexcept {
  if (static_cast<std::size_t>(end - p) < word.size()) return nullptr;
  if (std::string_view(p, word.size()) != word) return nullptr;
  return p + word.size();
}

inline const char* skip_number(const char* p, const char* end, mode m) noexcept {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (p != end && *p == '-') {
    ++p;
    if (m == mode::lenient && p != end && *p == 'I') return skip_literal(p, end, "Infinity");
  }
  if (p == end) return nullptr;
  if (*p == '0') {
    ++p;
  } else if (*p >= '1' && *p <= '9') {
    while (p != end && digit(*p))
      ++p;
  } else {
    return nullptr;
  }
  if (p != end && *p == '.') {
    ++p;
    if (p == end || !digit(*p)) return nullptr;
    while (p != end && digit(*p))
      ++p;
  }
  if (p != end && (*p == 'e' || *p == 'E')) {
    ++p;
    if (p != end && (*p == '+' || *p == '-')) ++p;
    if (p == end || !digit(*p)) return nullptr;
    while (p != end && digit(*p))
      ++p;
  }
  return p;
}

/// Skips one scalar — a string, a literal or a number — that starts exactly at `p != end`.
/// Returns the position right after it, or nullptr when the bytes are not a valid scalar.
inline const char* skip_scalar(const char* p, const char* end, mode m) {
  switch (*p) {
    case '"': {
      bool esc = false;
      return skip_string_body(p + 1, end, esc);
    }
    case 't':
      return skip_literal(p, end, "true");
    case 'f':
      return skip_literal(p, end, "false");
    case 'n':
      return skip_literal(p, end, "null");
    case 'N':
      return m == mode::lenient ? skip_literal(p, end, "NaN") : nullptr;
    case 'I':
      return m == mode::lenient ? skip_literal(p, end, "Infinity") : nullptr;
    default:
      return skip_number(p, end, m);
  }
}

/// Skips one JSON value that starts exactly at `p` (no leading whitespace; whitespace inside
/// containers is allowed). Returns the position right after the value, or nullptr when the
/// bytes are not a valid value.
inline const char* skip_value(const char* p, const char* end, mode m) {
  std::string stack;  // open containers: '{' or '['
  enum class state { value, key, after };
  state s = state::value;
  for (;;) {
    switch (s) {
      case state::value: {
        if (p == end) return nullptr;
        switch (*p) {  // strings, the most frequent values, in this one dispatch
          case '{':
          case '[': {
            const char open = *p;
            p = skip_ws(p + 1, end);
            if (p != end && *p == (open == '{' ? '}' : ']')) {
              ++p;
              s = state::after;
            } else {
              stack.push_back(open);
              s = open == '{' ? state::key : state::value;
            }
            continue;
          }
          case '"': {
            bool esc = false;
            p = skip_string_body(p + 1, end, esc);
            break;
          }
          default:
            p = skip_scalar(p, end, m);
            break;
        }
        if (p == nullptr) return nullptr;
        s = state::after;
        continue;
      }
      case state::key: {
        if (p == end || *p != '"') return nullptr;
        bool esc = false;
        p = skip_string_body(p + 1, end, esc);
        if (p == nullptr) return nullptr;
        p = skip_ws(p, end);
        if (p == end || *p != ':') return nullptr;
        p = skip_ws(p + 1, end);
        s = state::value;
        continue;
      }
      case state::after: {
        if (stack.empty()) return p;
        p = skip_ws(p, end);
        if (p == end) return nullptr;
        if (*p == ',') {
          p = skip_ws(p + 1, end);
          s = stack.back() == '{' ? state::key : state::value;
          continue;
        }
        if ((*p == '}' && stack.back() == '{') || (*p == ']' && stack.back() == '[')) {
          stack.pop_back();
          ++p;
          continue;
        }
        return nullptr;
      }
    }
  }
}

/// True when `text` is exactly one JSON value with no surrounding whitespace.
inline bool is_exact_value(std::string_view text, mode m = mode::strict) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const char* after = skip_value(text.data(), end, m);
  return after == end;
}

/// Calls `on_field(key_inner, key_has_escape, value_span)` for each member of the JSON object
/// `text` (whitespace allowed around tokens), in order. `key_inner` is the key between its
/// quotes (still escaped); `value_span` is the value's exact bytes. Returns false when `text`
/// is not exactly one valid JSON object (callbacks made until then stand).
template <class OnField>
bool scan_object(std::string_view text, mode m, OnField&& on_field) {
  const char* p = text.data();
  const char* const end = p + text.size();
  p = skip_ws(p, end);
  if (p == end || *p != '{') return false;
  p = skip_ws(p + 1, end);
  if (p != end && *p == '}') return skip_ws(p + 1, end) == end;
  for (;;) {
    if (p == end || *p != '"') return false;
    const char* key_begin = p + 1;
    bool esc = false;
    p = skip_string_body(key_begin, end, esc);
    if (p == nullptr) return false;
    const std::string_view key(key_begin, static_cast<std::size_t>(p - 1 - key_begin));
    p = skip_ws(p, end);
    if (p == end || *p != ':') return false;
    p = skip_ws(p + 1, end);
    const char* value_begin = p;
    p = skip_value(p, end, m);
    if (p == nullptr) return false;
    on_field(key, esc, std::string_view(value_begin, static_cast<std::size_t>(p - value_begin)));
    p = skip_ws(p, end);
    if (p == end) return false;
    if (*p == ',') {
      p = skip_ws(p + 1, end);
      continue;
    }
    if (*p == '}') return skip_ws(p + 1, end) == end;
    return false;
  }
}

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// The four hex digits of a `\u` escape at `h` (the caller checked that four characters
/// are there) as a code unit in `v`; false when one is not a hex digit.
inline bool hex4(const char* h, std::uint32_t& v) noexcept {
  v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = h[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= static_cast<std::uint32_t>(c - 'A' + 10);
    else
      return false;
  }
  return true;
}

/// What the one-character escape `\c` stands for (`"`, `\`, `/`, b, f, n, r, t), or 0
/// when `c` is not one of JSON's eight (`u` included: its four hex digits follow).
inline char simple_escape(char c) noexcept {
  switch (c) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '/':
      return '/';
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return 0;
  }
}

/// Decodes the inside of a JSON string (between the quotes, already validated by the
/// scanner) into UTF-8. A lone surrogate escape becomes U+FFFD. Returns false on a
/// malformed escape.
inline bool unescape(std::string_view inner, std::string& out) {
  out.clear();
  out.reserve(inner.size());
  for (std::size_t i = 0; i < inner.size(); ++i) {
    const char c = inner[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == inner.size()) return false;
    if (const char e = simple_escape(inner[i])) {
      out.push_back(e);
      continue;
    }
    if (inner[i] != 'u') return false;
    std::uint32_t cp = 0;
    if (inner.size() - i < 5 || !hex4(inner.data() + i + 1, cp)) return false;
    i += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      std::uint32_t low = 0;
      if (inner.size() - i >= 7 && inner[i + 1] == '\\' && inner[i + 2] == 'u' &&
          hex4(inner.data() + i + 3, low) && low >= 0xDC00 && low <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        i += 6;
      } else {
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    append_utf8(out, cp);
  }
  return true;
}

/// Decodes a string value span (with its quotes). Returns false if `span` is not a string.
inline bool string_value(std::string_view span, std::string& out) {
  if (span.size() < 2 || span.front() != '"' || span.back() != '"') return false;
  const std::string_view inner = span.substr(1, span.size() - 2);
  if (inner.find('\\') == std::string_view::npos) {
    out.assign(inner.data(), inner.size());
    return true;
  }
  return unescape(inner, out);
}

/// What append_string writes for bytes that are not well-formed UTF-8: always U+FFFD (so the
/// output is valid JSON that Python's json.loads reads), once per byte (`per_byte`, dlq's
/// envelopes) or once per maximal ill-formed subpart (`per_subpart`: the bytes of a
/// cut-short sequence together, the byte that broke it read again — what nlohmann's
/// dump(…, error_handler_t::replace) writes, which the audit trail reproduces byte for byte).
enum class invalid_utf8 { per_byte, per_subpart };

/// The most bytes write_string() writes for `n` bytes of text: 6 for a control byte
/// ("\u00xx"), at most 3 for an invalid UTF-8 byte, and the quotes.
constexpr std::size_t max_string_size(std::size_t n) noexcept {
  return 2 + 6 * n;
}

/// Writes `text` as a JSON string literal (with quotes) at `dst`, which has room for
/// max_string_size(text.size()) bytes; returns the end of what it wrote. `"` and `\` are
/// escaped, \b \f \n \r \t, other control characters written as \u00xx (lower-case hex),
/// UTF-8 kept as it is, invalid bytes replaced by U+FFFD as `invalid` says: byte for byte
/// how nlohmann's dump(-1, ' ', false, …) writes a string. The one escape routine of dlq's
/// writers (envelopes, the audit trail).
inline char* write_string(char* dst, std::string_view text,
                          invalid_utf8 invalid = invalid_utf8::per_byte) noexcept {
  static constexpr char hexdigits[] = "0123456789abcdef";
  *dst++ = '"';
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p != end) {
    const char* run = p;
    while (p != end) {
      const auto c = static_cast<unsigned char>(*p);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++p;
    }
    std::memcpy(dst, run, static_cast<std::size_t>(p - run));
    dst += p - run;
    if (p == end) break;
    const auto c = static_cast<unsigned char>(*p);
    if (c >= 0x80) {
      bool whole = false;
      const std::size_t len = utf8_prefix(p, end, whole);
      if (whole) {
        std::memcpy(dst, p, len);
        dst += len;
      } else {
        std::memcpy(dst, "\xEF\xBF\xBD", 3);  // U+FFFD
        dst += 3;
      }
      p += whole || invalid == invalid_utf8::per_subpart ? len : 1;
      continue;
    }
    *dst++ = '\\';
    switch (c) {
      case '"':
        *dst++ = '"';
        break;
      case '\\':
        *dst++ = '\\';
        break;
      case '\n':
        *dst++ = 'n';
        break;
      case '\r':
        *dst++ = 'r';
        break;
      case '\t':
        *dst++ = 't';
        break;
      case '\b':
        *dst++ = 'b';
        break;
      case '\f':
        *dst++ = 'f';
        break;
      default:
        *dst++ = 'u';
        *dst++ = '0';
        *dst++ = '0';
        *dst++ = hexdigits[c >> 4];
        *dst++ = hexdigits[c & 0xF];
    }
    ++p;
  }
  *dst++ = '"';
  return dst;
}

/// Appends `text` as write_string() writes it (the string grows by the bound, then shrinks
/// to what was written).
inline void append_string(std::string& out, std::string_view text,
                          invalid_utf8 invalid = invalid_utf8::per_byte) {
  const std::size_t at = out.size();
  out.resize(at + max_string_size(text.size()));
  char* const begin = &out[0];
  out.resize(static_cast<std::size_t>(write_string(begin + at, text, invalid) - begin));
}

}  // namespace dlq::detail::json
