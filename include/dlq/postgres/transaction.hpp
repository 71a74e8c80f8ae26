// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/transaction.hpp
/// Sending dead letters inside the application's own PostgreSQL transaction, so that "mark
/// the job failed" and "store the dead letter" commit or roll back together — no dual
/// write, nothing lost or doubled by a crash between the two:
///
///     PQexec(conn, "BEGIN");
///     PQexec(conn, "UPDATE jobs SET state = 'failed' WHERE id = 42");
///     dlq::postgres::send_to_dlq(conn, "orders", payload, failure);
///     PQexec(conn, "COMMIT");      // both, or (ROLLBACK) neither
///
/// The dead letters go to the same tables as dlq::kv::PostgresStore's (migrate() first), in
/// the schema Options::schema, in the format every dlq tool reads.
#pragma once

#include <libpq-fe.h>

#include <string>
#include <string_view>
#include <vector>

#include "dlq/dead_letter_queue.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/postgres/kv_store.hpp"
#include "dlq/postgres/options.hpp"

namespace dlq {
namespace postgres {

namespace detail {

/// Runs `f()`; when it throws while the transaction on `conn` is still open and healthy (a
/// refusal that ran no failing statement: a full queue, an exception from an event
/// callback), first aborts that transaction with a failing statement, so that every failure
/// leaves it aborted, as the documentation promises: the application's COMMIT then rolls
/// back its own changes too, never keeping them without the dead letter.
template <class F>
auto abort_on_failure(PGconn* conn, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    if (conn != nullptr && PQtransactionStatus(conn) == PQTRANS_INTRANS)
      PQclear(PQexec(conn, "DO $$BEGIN RAISE EXCEPTION 'dlq: the dead letter was not stored; "
                           "this transaction is aborted'; END$$"));
    throw;
  }
}

}  // namespace detail

/// DeadLetterQueue::send_to_dlq inside the transaction open on the application's
/// connection `conn` (BEGIN run by the application; its COMMIT or ROLLBACK decides the dead
/// letter). The front end's policies apply as with a store of its own (`queue_options`:
/// retention, poison guard, redaction…); every statement runs on `conn`, nothing on another
/// connection. Every failure aborts the application's transaction (a refusal without a failed
/// statement — a full queue, a bad name — too), so its COMMIT rolls back its own changes.
/// @returns the entry's id.
/// @throws dlq::invalid_argument when no transaction is open on `conn` (nothing written);
///         dlq::postgres::schema_error when the tables are missing; as send_to_dlq.
inline std::string send_to_dlq(PGconn* conn, std::string_view queue, std::string_view payload,
                               const Failure& failure, const Options& options = {},
                               dlq::Options queue_options = {}) {
  return detail::abort_on_failure(conn, [&] {
    KeyValueStorage<kv::PostgresStore> storage(kv::PostgresStore::in_transaction(conn, options));
    DeadLetterQueue<KeyValueStorage<kv::PostgresStore>&> dlq(storage, std::move(queue_options));
    return dlq.send_to_dlq(queue, payload, failure);
  });
}

/// DeadLetterQueue::send_batch inside the transaction open on `conn` (as send_to_dlq above).
/// @returns the entries' ids, in order. @throws as send_to_dlq above.
inline std::vector<std::string> send_batch(PGconn* conn, const std::vector<FailedJob>& jobs,
                                           const Options& options = {},
                                           dlq::Options queue_options = {}) {
  return detail::abort_on_failure(conn, [&] {
    KeyValueStorage<kv::PostgresStore> storage(kv::PostgresStore::in_transaction(conn, options));
    DeadLetterQueue<KeyValueStorage<kv::PostgresStore>&> dlq(storage, std::move(queue_options));
    return dlq.send_batch(jobs);
  });
}

}  // namespace postgres
}  // namespace dlq
