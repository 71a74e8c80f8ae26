// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres.hpp
/// Umbrella header for the PostgreSQL backend (CMake target dlq::postgres, needs libpq):
/// the core, the key-value backend (dlq/kv.hpp), dlq::kv::PostgresStore and
/// dlq::postgres::migrate and send_to_dlq / send_batch inside the application's own
/// transaction (transaction.hpp). Everything that includes libpq-fe.h lives under dlq/postgres/.
/// Header-only in every mode (compiled mode builds none of its instantiations).
#pragma once
#include "dlq/kv.hpp"
#include "dlq/postgres/errors.hpp"
#include "dlq/postgres/kv_store.hpp"
#include "dlq/postgres/migrate.hpp"
#include "dlq/postgres/options.hpp"
#include "dlq/postgres/transaction.hpp"
