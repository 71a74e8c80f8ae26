// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/resp.hpp
/// dlq::asio::RedisReply and the RESP2 wire format of dlq::asio::RedisConnection: commands
/// are formatted straight into the connection's output buffer (detail::resp_command,
/// detail::resp_arg) and replies parsed straight from its input buffer (detail::parse_reply)
/// — no C client underneath. Internal except RedisReply and reply_type.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace dlq::asio {

/// The kinds of RedisReply::type. The numbers are those of the blocking connection's
/// reply_type::string, _ARRAY, _INTEGER, _NIL, _STATUS and _ERROR, so either name compares
/// alike.
namespace reply_type {
inline constexpr int string = 1;   ///< a bulk string
inline constexpr int array = 2;    ///< an array (`elements`)
inline constexpr int integer = 3;  ///< an integer (`integer`)
inline constexpr int nil = 4;      ///< a nil bulk string or array
inline constexpr int status = 5;   ///< a status ("+OK")
inline constexpr int error = 6;    ///< an error reply (its text in `str`)
}  // namespace reply_type

/// An owned Redis reply.
struct RedisReply {
  int type = reply_type::nil;        ///< one of reply_type
  long long integer = 0;             ///< for reply_type::integer
  std::string str;                   ///< for strings, status and error replies
  std::vector<RedisReply> elements;  ///< for arrays
};

namespace detail {

inline void resp_number(std::string& out, char type, std::size_t n) {
  char buf[24];
  buf[0] = type;
  char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(buf, static_cast<std::size_t>(end - buf));
}
/// Starts a command of `argc` arguments (a RESP array of bulk strings).
inline void resp_command(std::string& out, std::size_t argc) {
  resp_number(out, '*', argc);
}
/// Appends one argument (binary-safe).
inline void resp_arg(std::string& out, std::string_view arg) {
  resp_number(out, '$', arg.size());
  out.append(arg.data(), arg.size());
  out.append("\r\n", 2);
}

/// What parse_reply found.
enum class parse_status { complete, incomplete, bad };

/// Parses one RESP2 reply from [data, data + size). complete: `out` holds it and `used` the
/// bytes it took. incomplete: more bytes are needed — at least `need` in all, from `data`
/// (a hint: the buffer may grow to it before the next try). bad: the bytes are not RESP
/// (`why` says how); the connection cannot go on.
class reply_parser {
 public:
  static constexpr int max_depth = 32;                        // nested arrays
  static constexpr long long max_bulk = 512LL * 1024 * 1024;  // Redis's proto-max-bulk-len
  static constexpr long long max_elements = (1LL << 32) - 1;  // of one array

  parse_status parse(const char* data, std::size_t size, RedisReply& out) {
    begin_ = cur_ = data;
    end_ = data + size;
    need = size + 1;
    why.clear();
    const parse_status s = value(out, 0);
    used = s == parse_status::complete ? static_cast<std::size_t>(cur_ - begin_) : 0;
    return s;
  }

  std::size_t used = 0;
  std::size_t need = 0;
  std::string why;

 private:
  parse_status bad(std::string text) {
    why = std::move(text);
    return parse_status::bad;
  }
  // One line (without its CRLF) at cur_.
  parse_status line(std::string_view& text) {
    const char* p = cur_;
    for (;;) {
      const void* cr = std::memchr(p, '\r', static_cast<std::size_t>(end_ - p));
      if (cr == nullptr) return parse_status::incomplete;
      p = static_cast<const char*>(cr);
      if (p + 1 == end_) return parse_status::incomplete;
      if (p[1] == '\n') break;
      ++p;
    }
    text = std::string_view(cur_, static_cast<std::size_t>(p - cur_));
    cur_ = p + 2;
    return parse_status::complete;
  }
  parse_status number(long long& v) {
    std::string_view text;
    if (line(text) != parse_status::complete) return parse_status::incomplete;
    const char* first = text.data();
    const char* last = first + text.size();
    const auto r = std::from_chars(first, last, v);
    if (text.empty() || r.ec != std::errc() || r.ptr != last)
      return bad("bad number '" + std::string(text.substr(0, 32)) + "'");
    return parse_status::complete;
  }
  parse_status value(RedisReply& r, int depth) {
    if (cur_ == end_) return parse_status::incomplete;
    const char type = *cur_++;
    switch (type) {
      case '+':
      case '-': {
        std::string_view text;
        if (line(text) != parse_status::complete) return parse_status::incomplete;
        r.type = type == '+' ? reply_type::status : reply_type::error;
        r.str.assign(text.data(), text.size());
        return parse_status::complete;
      }
      case ':': {
        const parse_status s = number(r.integer);
        if (s == parse_status::complete) r.type = reply_type::integer;
        return s;
      }
      case '$': {
        long long len = 0;
        const parse_status s = number(len);
        if (s != parse_status::complete) return s;
        if (len == -1) {
          r.type = reply_type::nil;
          return parse_status::complete;
        }
        if (len < 0 || len > max_bulk) return bad("bad bulk length " + std::to_string(len));
        const auto n = static_cast<std::size_t>(len);
        if (static_cast<std::size_t>(end_ - cur_) < n + 2) {
          need = static_cast<std::size_t>(cur_ - begin_) + n + 2;
          return parse_status::incomplete;
        }
        if (cur_[n] != '\r' || cur_[n + 1] != '\n') return bad("bulk string without its CRLF");
        r.type = reply_type::string;
        r.str.assign(cur_, n);
        cur_ += n + 2;
        return parse_status::complete;
      }
      case '*': {
        long long count = 0;
        const parse_status s = number(count);
        if (s != parse_status::complete) return s;
        if (count == -1) {
          r.type = reply_type::nil;
          return parse_status::complete;
        }
        if (count < 0 || count > max_elements)
          return bad("bad array length " + std::to_string(count));
        if (depth >= max_depth) return bad("arrays nested too deep");
        r.type = reply_type::array;
        // Each element takes 3 bytes at least: no reservation beyond what has arrived.
        const auto n = static_cast<std::size_t>(count);
        r.elements.reserve(std::min(n, static_cast<std::size_t>(end_ - cur_) / 3 + 1));
        for (std::size_t i = 0; i < n; ++i) {
          r.elements.emplace_back();
          const parse_status e = value(r.elements.back(), depth + 1);
          if (e != parse_status::complete) return e;
        }
        return parse_status::complete;
      }
      default: {
        const auto byte = static_cast<unsigned char>(type);
        static const char hex[] = "0123456789abcdef";
        return bad(std::string("unknown reply type byte 0x") + hex[byte >> 4] + hex[byte & 15]);
      }
    }
  }

  const char* begin_ = nullptr;
  const char* cur_ = nullptr;
  const char* end_ = nullptr;
};

}  // namespace detail
}  // namespace dlq::asio
