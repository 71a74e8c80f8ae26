// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// ISO-8601 timestamps as Python's datetime.isoformat() writes them for an aware UTC time:
// "2026-11-30T03:32:19.123456+00:00". Written always with microseconds; read with or without
// a fraction (1–9 digits), with "+00:00", "Z", any ±HH:MM offset, or none (taken as UTC),
// and with 'T' or ' ' between date and time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlq::detail::iso_time {

using sys_us = std::chrono::time_point<std::chrono::system_clock, std::chrono::microseconds>;

// Howard Hinnant's civil-date algorithms (public domain).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct civil {
  std::int64_t y;
  unsigned m, d;
};

constexpr civil civil_from_days(std::int64_t z) noexcept {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

/// Writes `t` as "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" (32 bytes) at `buf`.
inline void write(char* buf, std::chrono::system_clock::time_point t) noexcept {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::int64_t secs = us / 1000000;
  std::int64_t frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::int64_t days = secs / 86400;
  std::int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  const civil c = civil_from_days(days);
  auto put = [buf](int pos, std::int64_t v, int width) {
    for (int i = width - 1; i >= 0; --i) {
      buf[pos + i] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
  };
  put(0, c.y, 4);
  buf[4] = '-';
  put(5, c.m, 2);
  buf[7] = '-';
  put(8, c.d, 2);
  buf[10] = 'T';
  put(11, sod / 3600, 2);
  buf[13] = ':';
  put(14, sod / 60 % 60, 2);
  buf[16] = ':';
  put(17, sod % 60, 2);
  buf[19] = '.';
  put(20, frac, 6);
  const char tz[] = "+00:00";
  for (int i = 0; i < 6; ++i)
    buf[26 + i] = tz[i];
}

/// Appends `t` as "YYYY-MM-DDTHH:MM:SS.ffffff+00:00".
inline void append(std::string& out, std::chrono::system_clock::time_point t) {
  char buf[32];
  write(buf, t);
  out.append(buf, 32);
}

inline std::string format(std::chrono::system_clock::time_point t) {
  std::string s;
  append(s, t);
  return s;
}

/// Parses an ISO-8601 timestamp (see the file comment). nullopt when it is not one.
inline std::optional<std::chrono::system_clock::time_point> parse(std::string_view s) {
  std::size_t i = 0;
  auto digits = [&](std::size_t n, std::int64_t& v) {
    if (s.size() - i < n) return false;
    v = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const char c = s[i + k];
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    i += n;
    return true;
  };
  auto expect = [&](char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  std::int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!digits(4, y) || !expect('-') || !digits(2, mo) || !expect('-') || !digits(2, d)) return {};
  if (!(expect('T') || expect(' '))) return {};
  if (!digits(2, h) || !expect(':') || !digits(2, mi) || !expect(':') || !digits(2, sec)) return {};
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return {};
  std::int64_t us = 0;
  if (expect('.')) {
    std::size_t n = 0;
    std::int64_t scale = 100000;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (n < 6) {
        us += (s[i] - '0') * scale;
        scale /= 10;
      }
      ++i;
      ++n;
    }
    if (n == 0 || n > 9) return {};
  }
  std::int64_t offset_min = 0;
  if (i < s.size()) {
    if (s[i] == 'Z' || s[i] == 'z') {
      ++i;
    } else if (s[i] == '+' || s[i] == '-') {
      const bool neg = s[i] == '-';
      ++i;
      std::int64_t oh = 0, om = 0;
      if (!digits(2, oh) || !expect(':') || !digits(2, om) || oh > 23 || om > 59) return {};
      offset_min = (neg ? -1 : 1) * (oh * 60 + om);
    } else {
      return {};
    }
  }
  if (i != s.size()) return {};
  const std::int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const std::int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_min * 60;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::microseconds(secs * 1000000 + us)));
}

}  // namespace dlq::detail::iso_time
