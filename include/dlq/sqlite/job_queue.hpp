// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite/job_queue.hpp
/// dlq::kv::JobQueue on the embedded SQLite store: dlq/kv/job_queue.hpp (the queue, generic
/// over the store — see there for what it guarantees) with `JobQueue<>` meaning
/// `JobQueue<SqliteStore>`. Link `dlq::sqlite`.
///
///     dlq::kv::SqliteStore store("/var/lib/orders/jobs.db");
///     dlq::kv::JobQueue<> jobs(store);
///     jobs.push("orders", R"({"order":42})");
#pragma once

#include "dlq/kv/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"

namespace dlq {
namespace kv {

/// `JobQueue<>` is the queue on SQLite (a default added to the declaration of
/// dlq/kv/job_queue.hpp, which has none: the core does not know SQLite).
template <class Store = SqliteStore>
class JobQueue;

}  // namespace kv
}  // namespace dlq
