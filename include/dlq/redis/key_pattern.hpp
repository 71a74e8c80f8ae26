// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/key_pattern.hpp
/// dlq::redis::KeyPattern: a Redis key name with one `*` standing for the queue name
/// ("dlq:{*}", "queue:{*}"), as RedisListOptions and RedisListSinkOptions give them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dlq/errors.hpp"

namespace dlq::redis {

/// A key pattern split at its `*`: key = prefix + queue + suffix.
struct KeyPattern {
  std::string prefix;  ///< the text before the `*`
  std::string suffix;  ///< the text after the `*`

  /// Splits `pattern` at its one `*`.
  /// @param option the option that holds it, for the message ("RedisListOptions::dead_key")
  /// @throws dlq::invalid_argument when `pattern` has no `*` or more than one.
  static KeyPattern parse(const std::string& pattern, std::string_view option) {
    const auto star = pattern.find('*');
    if (star == std::string::npos || pattern.find('*', star + 1) != std::string::npos) {
      throw dlq::invalid_argument(
          dlq::detail::message("redis", std::string(option),
                               "key pattern '" + pattern + "' must contain exactly one '*'",
                               "use '*' where the queue name goes, e.g. \"dlq:{*}\""));
    }
    return KeyPattern{pattern.substr(0, star), pattern.substr(star + 1)};
  }

  /// The key of `queue`.
  std::string key(std::string_view queue) const {
    std::string k;
    k.reserve(prefix.size() + queue.size() + suffix.size());
    k += prefix;
    k += queue;
    k += suffix;
    return k;
  }

  /// The key's Redis Cluster hash tag as a pattern: with `*` for the queue when the tag
  /// holds it ("*" for `dlq:{*}`, "*.eu" for `dlq:{*.eu}`), the fixed tag when the prefix
  /// holds a whole one (`{dlq}:*`: every queue in one slot), nullopt when the key has no tag.
  std::optional<std::string> cluster_tag() const {
    const auto open = prefix.find('{');
    if (open == std::string::npos) return std::nullopt;
    const auto close = prefix.find('}', open + 1);
    if (close != std::string::npos) {  // a fixed tag; "{}" is none (the whole key is hashed)
      if (close == open + 1) return std::nullopt;
      return prefix.substr(open + 1, close - open - 1);
    }
    const auto end = suffix.find('}');
    if (end == std::string::npos) return std::nullopt;
    return prefix.substr(open + 1) + "*" + suffix.substr(0, end);
  }

  /// The SCAN MATCH glob: fixed parts escaped, `*` for the queue.
  std::string glob() const { return escape(prefix) + "*" + escape(suffix); }

  /// The queue name if `key` has this pattern's shape, else nullopt. An empty name (`dlq:{}`)
  /// is returned too: a listing counts it as a name dlq refuses (dlq/queue_names.hpp).
  std::optional<std::string> queue_of(std::string_view key) const {
    if (key.size() < prefix.size() + suffix.size()) return std::nullopt;
    if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
    if (key.substr(key.size() - suffix.size()) != suffix) return std::nullopt;
    return std::string(key.substr(prefix.size(), key.size() - prefix.size() - suffix.size()));
  }

  /// `s` with the glob characters `*?[]\` escaped by a backslash.
  static std::string escape(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }
};

}  // namespace dlq::redis
