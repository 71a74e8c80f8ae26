// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file sqlite.hpp
/// Umbrella header for the SQLite backend (CMake target dlq::sqlite, needs SQLite 3): the
/// core, the key-value front end, dlq::kv::SqliteStore (durable records in one file) and
/// dlq::kv::JobQueue (a durable job queue in the same file). Everything that includes
/// sqlite3.h lives under dlq/sqlite/.
#pragma once
#include "dlq/dlq.hpp"
#include "dlq/kv/storage.hpp"
#include "dlq/sqlite/job_queue.hpp"
#include "dlq/sqlite/sqlite_store.hpp"
