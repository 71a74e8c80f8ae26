// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/errors.hpp
/// The PostgreSQL backend's own error type: the database has no dlq schema, or one this
/// library cannot use. Every other failure is one of dlq/errors.hpp's types.
#pragma once

#include <string>

#include "dlq/errors.hpp"

namespace dlq {
namespace postgres {

/// The dlq tables are missing from the database (or from the schema the options name), or
/// were written by a newer dlq. The library never creates them on first use: run
/// dlq::postgres::migrate(url) once (a deployment step, with a role allowed to create
/// tables); the message names that call, the database and the schema. Nothing was written.
class schema_error : public storage_error {
 public:
  using storage_error::storage_error;
};

}  // namespace postgres
}  // namespace dlq
