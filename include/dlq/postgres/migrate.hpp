// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/migrate.hpp
/// dlq::postgres::migrate — creates or upgrades the dlq tables in a PostgreSQL database.
/// Explicit and versioned: a store never creates tables itself, so that production runs
/// the schema change as a deployment step, with a role allowed to make it.
#pragma once

#include <memory>
#include <string>

#include "dlq/postgres/detail/database.hpp"
#include "dlq/postgres/detail/schema.hpp"
#include "dlq/postgres/options.hpp"
#include "dlq/redact.hpp"

namespace dlq {
namespace postgres {

/// What migrate() did.
struct Migration {
  int from = 0;  ///< the schema version before (0: there were no dlq tables)
  int to = 0;    ///< the version now: detail::schema_version
};

/// Brings the dlq tables in schema `options.schema` of the database at `url` to this
/// library's version, creating the schema and the tables when missing, in one transaction
/// (all or nothing) under an advisory lock (concurrent calls run one after the other; the
/// second finds nothing to do). Safe to run at every deployment.
/// @throws dlq::invalid_argument (URL, schema name); dlq::connection_error;
///         dlq::postgres::schema_error when the tables were written by a newer dlq;
///         dlq::reply_error (e.g. SQLSTATE 42501: the role may not create the schema).
inline Migration migrate(const std::string& url, const Options& options = {}) {
  const std::string where = detail::redact_conninfo(url);
  detail::check_url(url, where);
  std::unique_ptr<detail::pg_connection> c = detail::pg_connect(url, options, where);
  Migration m;
  m.from = detail::migrate_schema(*c, options.schema);
  m.to = detail::schema_version;
  return m;
}

}  // namespace postgres
}  // namespace dlq
