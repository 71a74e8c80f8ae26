// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/detail/database.hpp
/// What a PostgresStore and its copies share: the connection string, the options, a pool of
/// idle connections, and how a call runs — a read as one statement, a write as one
/// transaction run again after a deadlock or serialization failure. Or, for a store on the
/// application's connection, every call on that connection inside its open transaction.
#pragma once

#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/postgres/detail/connection.hpp"
#include "dlq/postgres/detail/schema.hpp"
#include "dlq/postgres/detail/sql.hpp"
#include "dlq/postgres/options.hpp"
#include "dlq/redact.hpp"

namespace dlq {
namespace postgres {
namespace detail {

/// Opens a connection to `url` (a postgres:// or postgresql:// URL, or a libpq key=value
/// string: libpq reads it, so sslmode, PGPASSFILE, service files and the PG* variables work).
/// `where` is the URL redacted, for messages. @throws dlq::connection_error.
inline std::unique_ptr<pg_connection> pg_connect(const std::string& url, const Options& o,
                                                 const std::string& where) {
  const std::string timeout =
      std::to_string(std::max<long long>(2, static_cast<long long>(o.connect_timeout.count())));
  // expand_dbname: the URL's own parameters override the defaults before it.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), "dlq", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, 1);
  if (conn == nullptr)
    throw connection_error(dlq::detail::message("postgres", where, "libpq is out of memory"));
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = dlq::redact_secrets(PQerrorMessage(conn));
    PQfinish(conn);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw connection_error(dlq::detail::message("postgres", where, "cannot connect: " + why,
                                                "check the URL, the server and pg_hba.conf"));
  }
  // The server's notices ("schema … already exists, skipping") are not for the
  // application's stderr.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return std::make_unique<pg_connection>(conn, true, where);
}

/// `url` as messages show it: a postgres:// or postgresql:// URL redacted (dlq::redact_url);
/// libpq's key=value form rebuilt from what libpq reads of it, the password and every value
/// whose key names a secret as "***" (libpq allows spaces around '=', `password = x`, which
/// dlq::redact_url would not see); a string libpq cannot read as a placeholder (where it
/// stops reading, a password with a space may go on).
inline std::string redact_conninfo(const std::string& url) {
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0)
    return dlq::redact_url(url);
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  PQfreemem(err);
  if (opts == nullptr) return "(a libpq key=value string)";
  std::string out;
  for (const PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const bool secret = (o->dispchar != nullptr && std::strchr(o->dispchar, '*') != nullptr) ||
                        dlq::detail::is_secret_parameter(o->keyword);
    out += (out.empty() ? "" : " ") + std::string(o->keyword) + "=" +
           (secret ? std::string("***") : dlq::redact_secrets(o->val));
  }
  PQconninfoFree(opts);
  return out;
}

/// libpq's message `why` about a URL shown as `where` (redacted), each "quoted" token of it
/// kept only when `where` shows it: libpq quotes the piece it cannot decode, which may be
/// the password ('invalid percent-encoded token: "pa%ss"').
inline std::string mask_quoted_tokens(std::string why, const std::string& where) {
  for (std::size_t open = why.find('"'); open != std::string::npos;) {
    const std::size_t close = why.find('"', open + 1);
    if (close == std::string::npos) {
      why.replace(open + 1, std::string::npos, "***");
      break;
    }
    const std::string token = why.substr(open + 1, close - open - 1);
    std::size_t next = close + 1;
    if (where.find(token) == std::string::npos) {
      why.replace(open + 1, close - open - 1, "***");
      next = open + 5;
    }
    open = why.find('"', next);
  }
  return why;
}

/// Checks that libpq can read `url` (shown as `where`). @throws dlq::invalid_argument saying
/// why not.
inline void check_url(const std::string& url, const std::string& where) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (opts == nullptr) {
    std::string why = err != nullptr ? err : "out of memory";
    PQfreemem(err);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    throw invalid_argument(dlq::detail::message(
        "postgres", "URL '" + where + "'",
        mask_quoted_tokens(dlq::redact_secrets(why), where),
        "expected postgres://[user[:password]@]host[:port]/database[?param=value…] or "
        "libpq's key=value form"));
  }
  PQconninfoFree(opts);
}

/// The state a PostgresStore and its copies share.
class pg_database {
 public:
  /// A pool on `url`. @throws dlq::invalid_argument for a URL libpq cannot read or a bad
  /// schema name.
  pg_database(std::string url, Options options)
      : url_(std::move(url)),
        where_(redact_conninfo(url_)),
        options_(std::move(options)),
        schema_(quote_identifier(options_.schema)),
        statements_(schema_) {
    check_url(url_, where_);
  }
  /// The application's connection `conn` (not owned), used inside its open transaction.
  pg_database(PGconn* conn, Options options)
      : where_("the application's connection"),
        options_(std::move(options)),
        schema_(quote_identifier(options_.schema)),
        statements_(schema_),
        borrowed_(std::make_unique<pg_connection>(conn, false, where_)) {}

  const std::string& url() const noexcept { return url_; }
  const std::string& where() const noexcept { return where_; }
  const Options& options() const noexcept { return options_; }
  const statements& sql() const noexcept { return statements_; }
  bool borrowed() const noexcept { return borrowed_ != nullptr; }

  /// Runs `f(connection)`: one or more statements outside any transaction (each statement
  /// sees one snapshot). A pooled connection found closed (a server restart, an idle
  /// timeout, a proxy) is dropped with the whole pool and the read runs once more on a new
  /// one.
  template <class F>
  auto read(F&& f) -> decltype(f(std::declval<pg_connection&>())) {
    if (borrowed_) return f(*in_transaction());
    for (bool again = true;; again = false) {
      bool reused = false;
      std::unique_ptr<pg_connection> c = lease(&reused);
      try {
        auto out = f(*c);
        release(std::move(c));
        return out;
      } catch (const connection_error&) {
        if (!(again && reused)) throw;
        drop_idle();
      }
    }
  }

  /// Runs `f(connection)` in one READ COMMITTED transaction (whatever the database's
  /// default_transaction_isolation), run again (up to Options::max_attempts) after a
  /// deadlock or serialization failure. On the application's connection: inside its open
  /// transaction, once (its COMMIT or ROLLBACK decides). @throws what f throws;
  /// dlq::conflict_error when the attempts are used up; a storage_error with
  /// outcome_unknown() when the COMMIT's answer was lost.
  template <class F>
  auto write(const char* what, F&& f) -> decltype(f(std::declval<pg_connection&>())) {
    if (borrowed_) return f(*in_transaction());
    bool fresh_tried = false;
    for (int attempt = 1;; ++attempt) {
      bool reused = false;
      std::unique_ptr<pg_connection> c = lease(&reused);
      try {
        // READ COMMITTED whatever the database's default: each statement after the
        // collection's lock then reads what the previous holder committed.
        c->exec("BEGIN ISOLATION LEVEL READ COMMITTED", what);
        auto out = f(*c);
        c->exec("COMMIT", std::string(what) + " (COMMIT)", true);
        release(std::move(c));
        return out;
      } catch (const pg_retryable& e) {
        rollback(std::move(c));
        if (attempt >= std::max(1, options_.max_attempts))
          throw conflict_error(std::string(e.what()) + " (" + std::to_string(attempt) +
                               " attempts)");
      } catch (const connection_error& e) {
        // A pooled connection found closed before COMMIT: the server rolled the
        // transaction back, nothing was applied; run it once more on a new connection.
        const bool stale = reused && !e.outcome_unknown() && !fresh_tried;
        rollback(std::move(c));
        if (!stale) throw;
        fresh_tried = true;
        drop_idle();
      } catch (...) {
        rollback(std::move(c));
        throw;
      }
    }
  }

  /// Takes the transaction-scoped advisory lock of each collection, in key order (no
  /// deadlock between two writers): the writers of one collection run one after the other,
  /// so versions are assigned in commit order and a count checked is still true at COMMIT.
  void lock(pg_connection& c, std::vector<std::string_view> collections) const {
    std::vector<std::int64_t> keys;
    for (std::string_view coll : collections) keys.push_back(lock_key(options_.schema, coll));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (std::int64_t k : keys) {
      pg_params p;
      p.int8(k);
      c.exec("SELECT pg_advisory_xact_lock($1::int8)", p, "locking a collection");
    }
  }

  /// Checks that a count read after a collection's lock sees every commit before it: on
  /// the application's connection, that its transaction is not REPEATABLE READ (its
  /// snapshot predates the lock, and nothing would detect the stale count; READ COMMITTED
  /// reads afresh, SERIALIZABLE fails one of the two). Nothing to do on the pool's (READ
  /// COMMITTED) connections. @throws dlq::invalid_argument (no statement failed: the
  /// application's transaction is not aborted).
  void check_bound_exact(pg_connection& c) const {
    if (!borrowed_) return;
    pg_result r = c.exec("SELECT current_setting('transaction_isolation')",
                         "reading the transaction's isolation level");
    if (column_bytes(r.get(), 0, 0) != "repeatable read") return;
    throw invalid_argument(dlq::detail::message(
        "postgres", where_,
        "its transaction is REPEATABLE READ: a queue's bound (Retention::max_length) cannot "
        "be checked exactly in it (its snapshot misses what others commit meanwhile)",
        "send in a READ COMMITTED or SERIALIZABLE transaction, or to a queue without "
        "max_length"));
  }

  /// Opens a connection (or checks the application's) and checks the schema's version.
  /// @throws dlq::connection_error, dlq::postgres::schema_error.
  void open() {
    if (borrowed_) {
      check_schema(*in_transaction(), statements_, options_.schema);
      return;
    }
    release(lease());
  }

  /// A connection from the pool (`*reused` set), or a new one (its schema checked).
  std::unique_ptr<pg_connection> lease(bool* reused = nullptr) {
    {
      std::lock_guard<std::mutex> g(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<pg_connection> c = std::move(idle_.back());
        idle_.pop_back();
        if (reused != nullptr) *reused = true;
        return c;
      }
    }
    std::unique_ptr<pg_connection> c = pg_connect(url_, options_, where_);
    check_schema(*c, statements_, options_.schema);
    return c;
  }

 private:
  pg_connection* in_transaction() {
    const PGTransactionStatusType s = PQtransactionStatus(borrowed_->handle());
    if (s == PQTRANS_INTRANS) return borrowed_.get();
    throw invalid_argument(dlq::detail::message(
        "postgres", where_,
        s == PQTRANS_INERROR ? "its transaction has failed (a statement in it failed)"
                             : "it has no open transaction",
        "run BEGIN on it before sending, COMMIT or ROLLBACK after"));
  }

  /// Closes every idle connection (one was found closed by the server: so are the others).
  void drop_idle() {
    std::vector<std::unique_ptr<pg_connection>> gone;
    std::lock_guard<std::mutex> g(mutex_);
    gone.swap(idle_);
  }

  void release(std::unique_ptr<pg_connection> c) {
    if (!c->healthy() || PQtransactionStatus(c->handle()) != PQTRANS_IDLE) return;
    std::lock_guard<std::mutex> g(mutex_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(c));
  }

  void rollback(std::unique_ptr<pg_connection> c) {
    if (c->healthy()) PQclear(PQexec(c->handle(), "ROLLBACK"));
    release(std::move(c));
  }

  std::string url_;
  std::string where_;
  Options options_;
  std::string schema_;
  statements statements_;
  std::unique_ptr<pg_connection> borrowed_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<pg_connection>> idle_;
};

}  // namespace detail
}  // namespace postgres
}  // namespace dlq
