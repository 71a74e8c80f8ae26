// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/open_store.hpp
/// Opens the store a dlqctl URL names, with whichever backends this build has:
///  - every URL dlq::redis::parse_url takes (redis://, rediss:// for TLS, redis+sentinel://,
///    unix://, redis+unix://, as dlq::redis::is_url tells)  dlq::RedisListStorage (key patterns
///    from
///    --dlq-key/--queue-key/--corrupt-key); replay pushes to the source lists; `waiting` is
///    the source list's length.
///  - sqlite:///path/file.db              dlq::KeyValueStorage over dlq::kv::SqliteStore,
///    replaying into the dlq::kv::JobQueue in the same file (what examples/05-worker.cpp
///    takes jobs from); `waiting` is the job queue's length. Only `send` creates a missing
///    file: every other command says the file does not exist (a typo must not look like an
///    empty queue).
///  - postgres://… / postgresql://… (libpq's URL, every libpq parameter)  dlq::KeyValueStorage
///    over dlq::kv::PostgresStore (schema "dlq"), replaying into a dlq::kv::JobQueue in the
///    same database (exactly-once: one transaction per step); `waiting` is its length. The
///    tables are made by `dlqctl migrate --store URL` (migrate_postgres), never on first use.
///    Built when dlqctl has dlq::postgres (JobQueue is in the core, dlq/kv/job_queue.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlq/errors.hpp>
#include <dlq/redis/options.hpp>  // which URLs are Redis ones (I/O-free, in every build)

#include "store.hpp"

// The umbrellas, not the backend headers alone: in compiled mode they declare the
// instantiations the libraries hold (dlqctl's among them), so dlqctl compiles none of them.
#if DLQCTL_WITH_REDIS
#include <dlq/redis.hpp>
#endif
#if DLQCTL_WITH_SQLITE
#include <sys/stat.h>

#include <dlq/sqlite.hpp>
#endif
#if DLQCTL_WITH_POSTGRES
#include <dlq/postgres.hpp>
#endif

namespace dlqctl {

/// The scheme of a store URL ("redis", "rediss", "sqlite", …), lower-case;
/// "" when `url` has none.
inline std::string url_scheme(std::string_view url) {
  const auto p = url.find("://");
  if (p == std::string_view::npos) return {};
  std::string s(url.substr(0, p));
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

/// The store URL forms dlqctl takes, for errors and help: dlq::redis::url_forms (every
/// Redis form, TLS included) and SQLite's.
inline std::string store_url_forms() {
  return "a Redis URL (" + std::string(dlq::redis::url_forms) +
         "), sqlite:///path/file.db or postgres://user@host/database";
}

/// True for a PostgreSQL store URL: postgres:// or postgresql:// (any case).
inline bool is_postgres_url(std::string_view url) {
  const std::string s = url_scheme(url);
  return s == "postgres" || s == "postgresql";
}

/// The command that creates the dlq tables of the PostgreSQL store `url` (password masked):
/// what every schema_error dlqctl reports tells the user to run.
inline std::string migrate_command(const std::string& url) {
  return "dlqctl migrate --store '" + dlq::redact_url(url) + "'";
}

namespace detail {

inline dlq::invalid_argument not_built(const char* what, const char* package) {
  return dlq::invalid_argument(dlq::detail::message(
      "dlqctl", "--store", std::string("this dlqctl was built without ") + what + " support",
      std::string("rebuild it with ") + package + " installed"));
}

#if DLQCTL_WITH_REDIS
inline std::unique_ptr<Store> open_redis(const StoreSettings& s) {
  dlq::redis::ConnectionOptions c = dlq::redis::parse_url(s.url);
  c.connect_timeout = s.timeout;
  c.command_timeout = s.timeout;
  c.reconnect_attempts = 1;  // one quick retry: an operator wants the answer, or the error
  dlq::RedisListOptions o;
  if (!s.dlq_key.empty()) o.dead_key = s.dlq_key;
  if (!s.queue_key.empty()) o.source_key = s.queue_key;
  if (!s.corrupt_key.empty()) o.corrupt_key = s.corrupt_key;
  o.pool.size = s.pool_size;
  o.pool.wait_timeout = s.timeout;
  o.audit_retention = s.audit_retention;
  dlq::Options options;
  options.actor = s.actor;  // the audit trail's "who"
  options.log = s.log;
  auto store = std::make_unique<DlqStore<dlq::RedisListStorage>>(
      "redis " + c.endpoint(), dlq::RedisListStorage(c, std::move(o)), std::move(options));
  dlq::RedisListStorage* storage = &store->dlq().storage();  // owned by the store
  store->set_destination(
      [storage](std::string_view queue) { return "the Redis list " + storage->source_key(queue); });
  // Dead letters under the other known layout: the Python service's dlq:* / queue:* when
  // the default dlq:{*} is configured (or none), and the reverse.
  const std::string dead_pattern = storage->options().dead_key;
  if (dead_pattern == "dlq:{*}" || dead_pattern == "dlq:*") {
    const bool seed = dead_pattern == "dlq:{*}";  // configured: default; look at the seed's
    store->set_other_layout([c, seed]() -> std::optional<Store::OtherLayout> {
      dlq::RedisListOptions layout;
      if (seed) {
        layout.dead_key = "dlq:*";
        layout.source_key = "queue:*";
        layout.corrupt_key = "dlq:*:corrupt";
      }
      layout.pool.size = 1;
      try {
        dlq::RedisListStorage other(c, layout);
        std::vector<std::string> found = other.queues();
        if (found.empty()) return std::nullopt;
        return Store::OtherLayout{seed ? "the Python service's layout dlq:* / queue:*"
                                       : "dlq's default layout dlq:{*} / queue:{*}",
                                  seed ? "--dlq-key 'dlq:*' --queue-key 'queue:*'"
                                       : "--dlq-key 'dlq:{*}' --queue-key 'queue:{*}'",
                                  std::move(found)};
      } catch (const dlq::error&) {  // e.g. the seed layout on a Redis Cluster: no hint
        return std::nullopt;
      }
    });
  }
  dlq::RedisSourceQueue jobs(store->dlq().storage());
  store->set_waiting([jobs](std::string_view queue) mutable -> std::optional<std::size_t> {
    try {
      return jobs.size(queue);
    } catch (const dlq::reply_error&) {  // e.g. the key is not a list
      return std::nullopt;
    }
  });
  return store;
}
#endif

#if DLQCTL_WITH_SQLITE
inline std::unique_ptr<Store> open_sqlite(const StoreSettings& s) {
  const std::string path = s.url.substr(s.url.find("://") + 3);  // sqlite:///a/b -> /a/b
  if (path.empty())
    throw dlq::invalid_argument(
        dlq::detail::message("dlqctl", "--store '" + s.url + "'", "no file path",
                             "use sqlite:///absolute/path/file.db or sqlite://relative.db"));
  if (!s.dlq_key.empty() || !s.queue_key.empty() || !s.corrupt_key.empty())
    throw dlq::invalid_argument(dlq::detail::message(
        "dlqctl", "--store " + s.url, "--dlq-key, --queue-key and --corrupt-key are for Redis",
        "drop them for a sqlite:// store"));
  struct stat st {};
  if (!s.create_if_missing && ::stat(path.c_str(), &st) != 0)
    throw dlq::connection_error(dlq::detail::message(
        "dlqctl", "sqlite " + path, "no such database file",
        "check the path (dead letters are created there by the workers, or by dlqctl send)"));
  dlq::kv::SqliteOptions so;
  so.busy_timeout = s.timeout;
  so.create = s.create_if_missing;
  dlq::kv::SqliteStore sqlite(path, so);
  dlq::kv::JobQueue<> jobs(sqlite);
  using storage_t = dlq::KeyValueStorage<dlq::kv::SqliteStore, dlq::kv::JobQueue<>>;
  dlq::Options options;
  options.actor = s.actor;  // the audit trail's "who"
  options.log = s.log;
  dlq::KeyValueOptions kv_options;
  kv_options.audit_retention = s.audit_retention;
  auto store = std::make_unique<DlqStore<storage_t>>(
      "sqlite " + path, storage_t(sqlite, jobs, std::move(kv_options)), std::move(options));
  store->set_waiting([jobs](std::string_view queue) mutable -> std::optional<std::size_t> {
    return jobs.size(queue);
  });
  store->set_destination([jobs, path](std::string_view queue) {
    return "the job queue " + jobs.ready_collection(queue) + " in " + path +
           " (dlq::kv::JobQueue: workers read it with JobQueue::take; an application that "
           "reads its own queue replays from its own code with its own sink, see the README)";
  });
  return store;
}
#endif

#if DLQCTL_WITH_POSTGRES
inline dlq::postgres::Options postgres_options(const StoreSettings& s) {
  if (!s.dlq_key.empty() || !s.queue_key.empty() || !s.corrupt_key.empty())
    throw dlq::invalid_argument(dlq::detail::message(
        "dlqctl", "--store " + dlq::redact_url(s.url),
        "--dlq-key, --queue-key and --corrupt-key are for Redis", "drop them for a postgres:// store"));
  dlq::postgres::Options o;
  o.connect_timeout = std::max(std::chrono::seconds(2),  // libpq's unit and minimum
                               std::chrono::duration_cast<std::chrono::seconds>(s.timeout));
  o.max_idle_connections = s.pool_size;
  return o;
}

// The library's schema_error names its C++ call; a dlqctl user runs `dlqctl migrate`.
[[noreturn]] inline void rethrow_for_cli(const dlq::postgres::schema_error& e, const std::string& url) {
  std::string what = e.what();
  const auto call = what.find("run dlq::postgres::migrate");
  const auto hint = call == std::string::npos ? call : what.rfind("; ", call);
  if (hint != std::string::npos)
    what = what.substr(0, hint) + "; run: " + migrate_command(url) +
           (dlq::redact_url(url) != url ? " (the same --store URL; its credentials are masked here)"
                                        : "") +
           " once, a deployment step (the store never creates tables)";
  throw dlq::postgres::schema_error(what);
}

inline std::unique_ptr<Store> open_postgres(const StoreSettings& s) {
  const dlq::postgres::Options po = postgres_options(s);
  std::optional<dlq::kv::PostgresStore> pg;
  try {
    pg.emplace(s.url, po);
  } catch (const dlq::postgres::schema_error& e) {
    rethrow_for_cli(e, s.url);
  }
  dlq::kv::JobQueue<dlq::kv::PostgresStore> jobs(*pg);
  using storage_t = dlq::KeyValueStorage<dlq::kv::PostgresStore, decltype(jobs)>;
  dlq::Options options;
  options.actor = s.actor;  // the audit trail's "who"
  options.log = s.log;
  dlq::KeyValueOptions kv_options;
  kv_options.audit_retention = s.audit_retention;
  const std::string where = dlq::redact_url(s.url);
  auto store = std::make_unique<DlqStore<storage_t>>(
      "postgres " + where, storage_t(*pg, jobs, std::move(kv_options)), std::move(options));
  store->set_waiting([jobs](std::string_view queue) mutable -> std::optional<std::size_t> {
    return jobs.size(queue);
  });
  store->set_destination([jobs, where](std::string_view queue) {
    return "the job queue " + jobs.ready_collection(queue) + " in " + where +
           " (dlq::kv::JobQueue<PostgresStore>, schema \"dlq\": workers read it with "
           "JobQueue::take; an application that reads its own queue replays from its own code "
           "with its own sink, see the README)";
  });
  return store;
}
#endif

}  // namespace detail

#if DLQCTL_WITH_POSTGRES
/// `dlqctl migrate`: creates or upgrades the dlq tables of the PostgreSQL store
/// `settings.url` (dlq::postgres::migrate: one transaction, idempotent) and prints the
/// schema version it left, and the one it found, on `out`.
inline int migrate_postgres(const StoreSettings& settings, std::ostream& out) {
  if (!is_postgres_url(settings.url))
    throw dlq::invalid_argument(dlq::detail::message(
        "dlqctl", "migrate --store '" + dlq::redact_url(settings.url) + "'",
        "migrate creates the tables of a PostgreSQL store",
        "give postgres://… or postgresql://… (Redis and SQLite need no migration)"));
  const dlq::postgres::Migration m =
      dlq::postgres::migrate(settings.url, detail::postgres_options(settings));
  out << "schema version " << m.to
      << (m.from == m.to ? " (already current)"
                         : " (was " + (m.from == 0 ? std::string("none") : std::to_string(m.from)) + ")")
      << '\n';
  return 0;
}
#endif

/// Opens the store `settings.url` names (see the file comment).
/// @throws dlq::invalid_argument for a URL this build cannot open (says which forms it can);
///         dlq::storage_error subclasses when the store cannot be reached.
inline std::unique_ptr<Store> open_store(const StoreSettings& settings) {
  if (dlq::redis::is_url(settings.url)) {  // the parser's list of schemes, not a second one
#if DLQCTL_WITH_REDIS
    return detail::open_redis(settings);
#else
    throw detail::not_built("Redis", "hiredis (apt-get install libhiredis-dev)");
#endif
  }
  if (url_scheme(settings.url) == "sqlite") {
#if DLQCTL_WITH_SQLITE
    return detail::open_sqlite(settings);
#else
    throw detail::not_built("SQLite", "SQLite (apt-get install libsqlite3-dev)");
#endif
  }
  if (is_postgres_url(settings.url)) {
#if DLQCTL_WITH_POSTGRES
    return detail::open_postgres(settings);
#else
    throw detail::not_built("PostgreSQL", "libpq (apt-get install libpq-dev)");
#endif
  }
  throw dlq::invalid_argument(
      dlq::detail::message("dlqctl", "--store '" + dlq::redact_url(settings.url) + "'",
                           "not a store URL dlqctl knows", "use " + store_url_forms()));
}

}  // namespace dlqctl
