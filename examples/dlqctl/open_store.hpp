// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/open_store.hpp
/// Opens the store a dlqctl URL names: Redis (dlq::RedisListStorage) or the embedded SQLite
/// store (dlq::KeyValueStorage over dlq::kv::SqliteStore), whichever this build has.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <dlq/errors.hpp>

#include "store.hpp"

namespace dlqctl {

/// The scheme of a store URL ("redis", "unix", "redis+unix", "sqlite", …), lower-case;
/// "" when `url` has none.
inline std::string url_scheme(std::string_view url) {
  const auto p = url.find("://");
  if (p == std::string_view::npos) return {};
  std::string s(url.substr(0, p));
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

/// Opens the store `settings.url` names.
/// @throws dlq::invalid_argument for a URL this build cannot open (says which forms it can);
///         dlq::storage_error subclasses when the store cannot be reached.
inline std::unique_ptr<Store> open_store(const StoreSettings& settings) {
  const std::string scheme = url_scheme(settings.url);
  if (scheme == "redis" || scheme == "unix" || scheme == "redis+unix") {
    throw dlq::invalid_argument(
        dlq::detail::message("dlqctl", "--store", "this dlqctl was built without Redis support",
                             "rebuild with hiredis installed (apt-get install libhiredis-dev)"));
  }
  if (scheme == "sqlite") {
    throw dlq::invalid_argument(
        dlq::detail::message("dlqctl", "--store", "this dlqctl was built without SQLite support",
                             "rebuild with SQLite installed (apt-get install libsqlite3-dev)"));
  }
  throw dlq::invalid_argument(dlq::detail::message(
      "dlqctl", "--store '" + redact_url(settings.url) + "'", "not a store URL this dlqctl knows",
      "use redis://host:port/db, unix:///path/redis.sock?db=N or sqlite:///path/file.db"));
}

}  // namespace dlqctl
