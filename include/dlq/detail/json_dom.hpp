// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/json_dom.hpp
/// JSON values as nlohmann::json documents, read and written the way nlohmann's own parser
/// and dump() do, byte for byte, without compiling nlohmann's lexer, parser or serializer in
/// every unit that reads an entry: the nesting limit that keeps dump() off a deep stack, a
/// DOM reader (read_json_dom) and a writer (append_dumped_value). dlq::Entry (dlq/entry.hpp)
/// and the audit trail (dlq/audit.hpp) use them; tests/test_json_scan.cpp compares them with
/// nlohmann on edge cases and generated documents.
#pragma once

#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "dlq/detail/json_scan.hpp"

namespace dlq {
namespace detail {

/// Deepest nesting of arrays and objects that Entry turns into nlohmann::json values.
/// nlohmann's dump() recurses once per level, so a value nested 100 000 deep (a hostile job
/// payload, a crafted entry) would overflow the stack of whoever prints it; deeper parts are
/// kept as raw text instead (see Entry). 256 is far beyond real payloads and fits small
/// thread stacks, sanitizers included.
inline constexpr std::size_t max_json_depth = 256;

/// True when the JSON text `text` nests arrays/objects deeper than `limit` (strings are
/// skipped; the text need not be valid). Iterative.
inline bool nests_deeper_than(std::string_view text, std::size_t limit) noexcept {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

/// `Json::parse(text, nullptr, false)`: the same nlohmann parser and DOM builder, the same
/// result (a discarded value when `text` is not exactly one valid JSON value), without the
/// callback-driven parser that parse() compiles too (for a callback this code never passes).
template <class Json>
Json parse_json_or_discarded(std::string_view text) {
  Json result;
  nlohmann::detail::json_sax_dom_parser<Json> dom(result, false);
  auto adapter = nlohmann::detail::input_adapter(text);
  nlohmann::detail::parser<Json, decltype(adapter)> parser(std::move(adapter), nullptr, false);
  parser.sax_parse(&dom, true);
  if (dom.is_errored()) result = nlohmann::detail::value_t::discarded;
  return result;
}

/// What read_json_dom reads: one JSON value from `p`, nlohmann's parser's grammar and
/// numbers (see read_json_dom). Returns false where that parser reports an error.
template <class Json>
class json_dom_reader {
 public:
  json_dom_reader(const char* p, const char* end) noexcept : p_(p), end_(end) {}

  bool document(Json& out) {
    // nlohmann skips a UTF-8 byte order mark at the start of its input.
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;
    if (!value(out, 0)) return false;
    ws();
    // nlohmann's lexer reads a NUL byte outside a string as the end of its input.
    return p_ == end_ || *p_ == '\0';
  }

 private:
  void ws() noexcept { p_ = json::skip_ws(p_, end_); }

  bool literal(std::string_view word) noexcept {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0)
      return false;
    p_ += word.size();
    return true;
  }

  bool hex4(std::uint32_t& v) noexcept {
    if (end_ - p_ < 4) return false;
    const char* h = p_;
    p_ += 4;
    return json::hex4(h, v);
  }

  // After the opening quote: control characters refused, escapes decoded (a surrogate escape
  // must be one half of a pair), UTF-8 well-formed.
  bool string(std::string& out) {
    while (p_ != end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        const std::size_t len = json::utf8_sequence_length(p_, end_);
        if (len == 0) return false;
        out.append(p_, len);
        p_ += len;
        continue;
      }
      ++p_;
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        continue;
      }
      if (p_ == end_) return false;
      const char escape = *p_++;
      if (const char e = json::simple_escape(escape)) {
        out.push_back(e);
        continue;
      }
      if (escape != 'u') return false;
      std::uint32_t cp = 0;
      if (!hex4(cp)) return false;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        std::uint32_t low = 0;
        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
        p_ += 2;
        if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
      json::append_utf8(out, cp);
    }
    return false;
  }

  bool digits() noexcept {
    const char* const start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9')
      ++p_;
    return p_ != start;
  }

  // nlohmann's lexer: an integer is tried as std::strtoull (no sign) or std::strtoll, and
  // read with std::strtod when it does not fit; a fraction or exponent is read with
  // std::strtod, its '.' replaced by the locale's decimal point; a non-finite result is an
  // error (the parser's "number overflow").
  bool number(Json& out) {
    const char* const start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0')
      ++p_;
    else if (!digits())
      return false;
    bool is_float = false;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!digits()) return false;
      is_float = true;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return false;
      is_float = true;
    }
    std::string text(start, p_);
    char* text_end = nullptr;
    if (!is_float) {
      errno = 0;
      if (negative) {
        const long long x = std::strtoll(text.c_str(), &text_end, 10);
        if (errno == 0) {
          out = static_cast<typename Json::number_integer_t>(x);
          return true;
        }
      } else {
        const unsigned long long x = std::strtoull(text.c_str(), &text_end, 10);
        if (errno == 0) {
          out = static_cast<typename Json::number_unsigned_t>(x);
          return true;
        }
      }
    }
    const lconv* loc = std::localeconv();
    const char point = loc == nullptr || loc->decimal_point == nullptr ? '.' : *loc->decimal_point;
    if (point != '.')
      for (char& c : text)
        if (c == '.') c = point;
    const double x = std::strtod(text.c_str(), &text_end);
    if (!std::isfinite(x)) return false;
    out = static_cast<typename Json::number_float_t>(x);
    return true;
  }

  bool value(Json& out, std::size_t depth) {
    ws();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': {
        if (depth >= max_json_depth) return false;
        ++p_;
        out = Json(Json::value_t::object);
        ws();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          return true;
        }
        std::string key;
        for (;;) {
          ws();
          if (p_ == end_ || *p_ != '"') return false;
          ++p_;
          key.clear();
          if (!string(key)) return false;
          ws();
          if (p_ == end_ || *p_ != ':') return false;
          ++p_;
          // Like nlohmann's DOM builder: a repeated member name keeps the last value.
          if (!value(out[key], depth + 1)) return false;
          ws();
          if (p_ == end_) return false;
          if (*p_ == '}') {
            ++p_;
            return true;
          }
          if (*p_++ != ',') return false;
        }
      }
      case '[': {
        if (depth >= max_json_depth) return false;
        ++p_;
        out = Json(Json::value_t::array);
        ws();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          return true;
        }
        auto& items = *out.template get_ptr<typename Json::array_t*>();
        for (;;) {
          items.emplace_back();
          if (!value(items.back(), depth + 1)) return false;
          ws();
          if (p_ == end_) return false;
          if (*p_ == ']') {
            ++p_;
            return true;
          }
          if (*p_++ != ',') return false;
        }
      }
      case '"': {
        ++p_;
        std::string text;
        if (!string(text)) return false;
        out = std::move(text);
        return true;
      }
      case 't':
        out = true;
        return literal("true");
      case 'f':
        out = false;
        return literal("false");
      case 'n':
        out = nullptr;
        return literal("null");
      default:
        if (*p_ == '-' || (*p_ >= '0' && *p_ <= '9')) return number(out);
        return false;
    }
  }

  const char* p_;
  const char* const end_;
};

/// `Json::parse(text, nullptr, false)` for text that nests arrays and objects at most
/// max_json_depth deep (deeper text gives a discarded value): the same value, or a discarded
/// one where nlohmann's parser fails, read by json_dom_reader instead of nlohmann's parser
/// (its lexer and parser are the larger part of what a unit compiles to read an entry's
/// context). tests/test_json_scan.cpp compares the two on edge cases and random text.
template <class Json>
Json read_json_dom(std::string_view text) {
  Json result;
  if (!json_dom_reader<Json>(text.data(), text.data() + text.size()).document(result))
    return Json(nlohmann::detail::value_t::discarded);
  return result;
}

/// Appends `value` as nlohmann's `value.dump(-1, ' ', false, error_handler_t::replace)`
/// writes it, byte for byte (strings through json::append_string's per-subpart U+FFFD
/// replacement, floats through nlohmann's own to_chars), for any basic_json
/// specialization, without compiling nlohmann's serializer for it.
template <class Json>
void append_dumped_value(std::string& out, const Json& value) {
  using value_t = typename Json::value_t;
  switch (value.type()) {
    case value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, v] : *value.template get_ptr<const typename Json::object_t*>()) {
        if (!first) out.push_back(',');
        first = false;
        json::append_string(out, key, json::invalid_utf8::per_subpart);
        out.push_back(':');
        append_dumped_value(out, v);
      }
      out.push_back('}');
      return;
    }
    case value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& v : *value.template get_ptr<const typename Json::array_t*>()) {
        if (!first) out.push_back(',');
        first = false;
        append_dumped_value(out, v);
      }
      out.push_back(']');
      return;
    }
    case value_t::string:
      json::append_string(out, *value.template get_ptr<const typename Json::string_t*>(),
                          json::invalid_utf8::per_subpart);
      return;
    case value_t::binary: {
      const auto& b = *value.template get_ptr<const typename Json::binary_t*>();
      out.append("{\"bytes\":[");
      for (std::size_t i = 0; i < b.size(); ++i) {
        if (i != 0) out.push_back(',');
        out.append(std::to_string(static_cast<unsigned>(b[i])));
      }
      out.append("],\"subtype\":");
      out.append(b.has_subtype() ? std::to_string(b.subtype()) + "}" : std::string("null}"));
      return;
    }
    case value_t::boolean:
      out.append(*value.template get_ptr<const typename Json::boolean_t*>() ? "true" : "false");
      return;
    case value_t::number_integer:
      out.append(std::to_string(*value.template get_ptr<const typename Json::number_integer_t*>()));
      return;
    case value_t::number_unsigned:
      out.append(
          std::to_string(*value.template get_ptr<const typename Json::number_unsigned_t*>()));
      return;
    case value_t::number_float: {
      const double x = *value.template get_ptr<const typename Json::number_float_t*>();
      if (!std::isfinite(x)) {
        out.append("null");
        return;
      }
      char buf[64];
      const char* e = nlohmann::detail::to_chars(buf, buf + sizeof buf, x);
      out.append(buf, static_cast<std::size_t>(e - buf));
      return;
    }
    case value_t::discarded:
      out.append("<discarded>");
      return;
    case value_t::null:
    default:
      out.append("null");
      return;
  }
}

}  // namespace detail
}  // namespace dlq
