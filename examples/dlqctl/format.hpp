// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/format.hpp
/// Text helpers of dlqctl: printable one-line text, tables, durations, and the replay progress
/// bar. Nothing here talks to a store.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <dlq/redact.hpp>

namespace dlqctl {

/// Bad command-line input that CLI11 cannot check (a duration, conflicting options): the
/// command was not run. Exit code 1.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// Length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1Fu;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0Fu;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

}  // namespace detail

/// `s` as one printable line: control characters and bytes that are not UTF-8 are escaped
/// (`\n`, `\t`, `\xNN`), so a payload can never break a table or the terminal.
inline std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c != 0x7F && c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c >= 0x80) {
      const std::size_t n = detail::utf8_sequence(s, i);
      if (n > 0) {
        out.append(s.substr(i, n));
        i += n;
        continue;
      }
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
    ++i;
  }
  return out;
}

/// A name that may be any size (a queue name of a foreign key, up to 512 MB) for a message:
/// `'name'` through printable, or, when it is longer than `max_bytes`, its first bytes (cut
/// before a UTF-8 sequence, never inside one) then `…' (N bytes)`.
inline std::string printable_cut(std::string_view s, std::size_t max_bytes = 64) {
  if (s.size() <= max_bytes) return "'" + printable(s) + "'";
  std::size_t cut = max_bytes;
  for (std::size_t back = 0; back < 3 && cut > 0; ++back) {
    if ((static_cast<unsigned char>(s[cut]) & 0xC0) != 0x80) break;  // not a continuation
    --cut;
  }
  return "'" + printable(s.substr(0, cut)) + "…' (" + std::to_string(s.size()) + " bytes)";
}

/// One argument as a POSIX shell word: as is when no character needs quoting, else in single
/// quotes (a ' inside as '\''); an argument with a control byte goes through printable (the
/// line stays one line; such an argument must be retyped).
inline std::string shell_word(std::string_view s) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-./:=@%+,").find(c) != std::string_view::npos;
  };
  if (!s.empty() && std::all_of(s.begin(), s.end(), plain)) return std::string(s);
  if (printable(s) != s) return "'" + printable(s) + "'";
  std::string out = "'";
  for (const char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// `dlqctl` and `args` (a command line without the program name) as shell words, without
/// its --continuation (`--continuation T` or `--continuation=T`), then `--continuation
/// token`: the command that reads the next page. Each argument is redacted on its own
/// (dlq::redact_secrets): an argument is one whole word, whereas in the joined line a
/// password= value would run on to its end and mask the token (round 11 of issue 27).
inline std::string next_page_command(const std::vector<std::string>& args,
                                     const std::string& token) {
  std::string out = "dlqctl";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--continuation") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--continuation=", 0) == 0) continue;
    // an argument with a control byte is shown through printable (one line) before the
    // redaction, whose secret values run to the end of a line
    const bool control = printable(args[i]) != args[i];
    out += " " + shell_word(dlq::redact_secrets(control ? printable(args[i]) : args[i]));
  }
  return out + " --continuation " + shell_word(token);
}

/// Removes one final line ending ("\n" or "\r\n") from `s`; true when there was one.
inline bool strip_final_line_ending(std::string& s) {
  if (s.empty() || s.back() != '\n') return false;
  s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return true;
}

/// Display width of printable UTF-8 text, counting one column per code point.
inline std::size_t width(std::string_view s) {
  std::size_t w = 0;
  for (const char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++w;
  return w;
}

/// `s` (printable UTF-8) cut to at most `max` columns; a cut ends in "…".
inline std::string truncate(std::string_view s, std::size_t max) {
  if (width(s) <= max) return std::string(s);
  if (max == 0) return {};
  std::string out;
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    if (starts && ++w > max - 1) break;
    out.push_back(s[i]);
  }
  return out + "\xE2\x80\xA6";  // …
}

/// A left-aligned text table. Cells are made printable and cut to their column's maximum.
class Table {
 public:
  /// One column: its header, its widest width (0 = no limit) and whether it is right-aligned.
  struct Column {
    std::string header;
    std::size_t max = 0;
    bool right = false;
  };

  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  /// Adds a row (missing cells are empty; extra cells are ignored).
  void add(std::vector<std::string> cells) {
    cells.resize(columns_.size());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      cells[i] = printable(cells[i]);
      if (columns_[i].max > 0) cells[i] = truncate(cells[i], columns_[i].max);
    }
    rows_.push_back(std::move(cells));
  }

  /// Number of rows added.
  std::size_t rows() const noexcept { return rows_.size(); }

  /// Writes the header and the rows; columns are separated by two spaces, the last column
  /// is not padded.
  void print(std::ostream& out) const {
    std::vector<std::size_t> w(columns_.size());
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      w[i] = width(columns_[i].header);
      for (const auto& r : rows_)
        w[i] = std::max(w[i], width(r[i]));
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string s;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::size_t pad = w[i] - width(cells[i]);
        const bool last = i + 1 == cells.size();
        if (columns_[i].right) s.append(pad, ' ');
        s += cells[i];
        if (!columns_[i].right && !last) s.append(pad, ' ');
        if (!last) s += "  ";
      }
      while (!s.empty() && s.back() == ' ')
        s.pop_back();
      out << s << '\n';
    };
    std::vector<std::string> header;
    for (const auto& c : columns_)
      header.push_back(c.header);
    line(header);
    for (const auto& r : rows_)
      line(r);
  }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

/// The longest duration parse_duration accepts: 100 years (36500 days), as the console's
/// ages (dlq/http/console.hpp). 64-bit nanoseconds end at about 106751 days, and a time
/// point `now - duration` must stay representable, so a longer value is refused, never
/// wrapped or saturated: no retention, age filter or timeout needs more.
inline constexpr std::int64_t max_duration_seconds = std::int64_t{36500} * 86400;

/// Parses a duration: one or more `<number><unit>` parts, units ms, s, m, h, d, w
/// ("90s", "1h30m", "1.5d", "500ms"); a bare number is seconds. At most
/// max_duration_seconds (100 years).
/// @throws usage_error for anything else (names the text and the accepted forms) and for a
///         duration longer than 100 years.
inline std::chrono::nanoseconds parse_duration(std::string_view text) {
  auto fail = [&]() -> usage_error {
    return usage_error("'" + printable(text) +
                       "' is not a duration; use a number with a unit: 500ms, 90s, 15m, 2h, 7d, "
                       "1w, or a sum such as 1h30m (a bare number is seconds)");
  };
  if (text.empty()) throw fail();
  double total_s = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
      ++i;
    if (i == start) throw fail();
    const std::string number(text.substr(start, i - start));
    if (std::count(number.begin(), number.end(), '.') > 1 || number == ".") throw fail();
    double value = 0;
    try {
      value = std::stod(number);
    } catch (const std::exception&) {
      throw fail();
    }
    const std::size_t unit_start = i;
    while (i < text.size() && text[i] >= 'a' && text[i] <= 'z')
      ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    double scale = 0;
    if (unit.empty()) {
      if (start != 0 || i != text.size()) throw fail();  // a bare number stands alone
      scale = 1;
    } else if (unit == "ms") {
      scale = 1e-3;
    } else if (unit == "s") {
      scale = 1;
    } else if (unit == "m" || unit == "min") {
      scale = 60;
    } else if (unit == "h") {
      scale = 3600;
    } else if (unit == "d") {
      scale = 86400;
    } else if (unit == "w") {
      scale = 7 * 86400;
    } else {
      throw fail();
    }
    total_s += value * scale;
  }
  if (!std::isfinite(total_s)) throw fail();
  if (total_s > static_cast<double>(max_duration_seconds))
    throw usage_error("'" + printable(text) +
                      "' is longer than 100 years; use a duration of at most 36500d");
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(total_s * 1e9)));
}

/// A short human form of a duration: "45s", "12m", "3h", "5d" (whole units, rounded down).
inline std::string short_duration(std::chrono::system_clock::duration d) {
  using namespace std::chrono;
  const auto s = duration_cast<seconds>(d).count();
  if (s < 0) return "0s";
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

/// The stored timestamp shortened for a table: "2026-11-30 03:32:19" (UTC when stored so).
inline std::string short_time(std::string_view iso) {
  if (iso.size() < 19 || iso[10] != 'T') return std::string(iso);
  std::string out(iso.substr(0, 19));
  out[10] = ' ';
  return out;
}

/// The replay progress bar, drawn on one terminal line of stderr with `\r` and erased when
/// done. It stays hidden for runs shorter than `delay` and redraws at most ten times a second.
class ProgressBar {
 public:
  /// @param out    where to draw (stderr)
  /// @param enabled false draws nothing (stderr is not a terminal)
  /// @param delay  how long a run must last before the bar appears
  ProgressBar(std::ostream& out, bool enabled, std::chrono::milliseconds delay, std::string label)
      : out_(out),
        enabled_(enabled),
        delay_(delay),
        label_(std::move(label)),
        started_(std::chrono::steady_clock::now()) {}

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { finish(); }

  /// Redraws with `done` of `total` items handled and `moved` of them moved.
  void update(std::size_t done, std::size_t total, std::size_t moved) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - started_ < delay_) return;
    if (shown_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
    last_ = now;
    shown_ = true;
    out_ << '\r' << render(done, total, moved, now - started_) << "\x1b[K" << std::flush;
  }

  /// Erases the bar (if it was drawn).
  void finish() {
    if (shown_) out_ << "\r\x1b[K" << std::flush;
    shown_ = false;
  }

  /// True once the bar has been drawn (and not yet erased).
  bool shown() const noexcept { return shown_; }

  /// The bar's text for the given state (no control characters), e.g.
  /// `replay orders [##########----------]  50%  5000/10000  moved 5000  2500/s  ETA 2s`.
  std::string render(std::size_t done, std::size_t total, std::size_t moved,
                     std::chrono::steady_clock::duration elapsed) const {
    constexpr std::size_t cells = 24;
    const double fraction =
        total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    const auto filled = static_cast<std::size_t>(fraction * cells);
    const double secs = std::chrono::duration<double>(elapsed).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "] %3d%%  %zu/%zu  moved %zu  %.0f/s",
                  static_cast<int>(fraction * 100), done, total, moved, rate);
    std::string s =
        label_ + " [" + std::string(filled, '#') + std::string(cells - filled, '-') + buf;
    if (rate > 0 && done < total) {
      const auto eta = std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(static_cast<double>(total - done) / rate));
      s += "  ETA " + short_duration(eta);
    }
    return s;
  }

 private:
  std::ostream& out_;
  bool enabled_;
  std::chrono::milliseconds delay_;
  std::string label_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

}  // namespace dlqctl
