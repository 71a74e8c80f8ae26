// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/detail/sql.hpp
/// The PostgreSQL backend's I/O-free pieces, tested without a server
/// (tests/postgres/test_postgres_sql.cpp): quoting an identifier, the advisory-lock key of a
/// collection, and the binary wire form of a bigint. No libpq here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlq/errors.hpp"

namespace dlq {
namespace postgres {
namespace detail {

/// The longest identifier PostgreSQL keeps as written, in bytes (NAMEDATALEN - 1 in a
/// default build): it truncates longer ones, quoted or not.
constexpr std::size_t max_identifier_bytes = 63;

/// `name` as a quoted SQL identifier: "…" with every '"' doubled, so any name is kept as
/// written and can never end the identifier (no SQL injection through a schema name).
/// @throws dlq::invalid_argument for an empty name, one holding a NUL byte, or one longer
///         than max_identifier_bytes (PostgreSQL would truncate it: two names differing
///         only after that would share one schema).
inline std::string quote_identifier(std::string_view name) {
  if (name.empty())
    throw invalid_argument(dlq::detail::message("postgres", "schema name", "is empty",
                                                "name the schema, e.g. \"dlq\""));
  if (name.find('\0') != std::string_view::npos)
    throw invalid_argument(dlq::detail::message("postgres", "schema name", "holds a NUL byte"));
  if (name.size() > max_identifier_bytes)
    throw invalid_argument(dlq::detail::message(
        "postgres", "schema name",
        "is " + std::to_string(name.size()) + " bytes long; PostgreSQL keeps only the first " +
            std::to_string(max_identifier_bytes) + " (two names alike in them share a schema)",
        "use a schema name of at most 63 bytes (a schema made under this name before is "
        "named by its first 63 bytes, or fewer where a character would be cut)"));
  std::string out;
  out.reserve(name.size() + 2);
  out += '"';
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  out += '"';
  return out;
}

/// The key of the transaction-scoped advisory lock that serializes the writers of one
/// collection of one schema (FNV-1a, 64 bits, over schema, a NUL byte and the collection).
/// Two collections that collide only share a lock: writes wait, nothing else changes.
inline std::int64_t lock_key(std::string_view schema, std::string_view collection) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ull;
  };
  for (char c : schema) mix(static_cast<unsigned char>(c));
  mix(0);
  for (char c : collection) mix(static_cast<unsigned char>(c));
  return static_cast<std::int64_t>(h);
}

/// A bigint in PostgreSQL's binary format: 8 bytes, big-endian.
inline std::string int8_bytes(std::int64_t value) {
  std::string out(8, '\0');
  auto v = static_cast<std::uint64_t>(value);
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xffu);
    v >>= 8;
  }
  return out;
}

/// A bigint read from PostgreSQL's binary format (8 bytes, big-endian); 0 when `bytes`
/// is not 8 bytes long.
inline std::int64_t int8_value(std::string_view bytes) noexcept {
  if (bytes.size() != 8) return 0;
  std::uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<unsigned char>(c);
  return static_cast<std::int64_t>(v);
}

}  // namespace detail
}  // namespace postgres
}  // namespace dlq
