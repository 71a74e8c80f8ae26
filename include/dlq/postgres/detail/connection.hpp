// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file postgres/detail/connection.hpp
/// One libpq connection (dlq::postgres::detail::pg_connection): statements with binary
/// parameters and results, and the mapping of libpq's failures to dlq's error types
/// (SQLSTATE classes: 40001/40P01 retryable, 42P01/3F000 the missing schema, 57014 a timeout,
/// 08 and 57P01-57P03 a lost connection; any other a dlq::reply_error carrying the SQLSTATE).
#pragma once

#include <libpq-fe.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlq/errors.hpp"
#include "dlq/postgres/detail/sql.hpp"
#include "dlq/postgres/errors.hpp"

namespace dlq {
namespace postgres {
namespace detail {

/// A deadlock or serialization failure: the transaction may succeed when run again. A
/// conflict_error, so that where it is not retried (the caller's own transaction) it
/// reaches the caller as one.
class pg_retryable : public conflict_error {
 public:
  using conflict_error::conflict_error;
};

struct pg_result_free {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
/// A statement's result, cleared when it goes.
using pg_result = std::unique_ptr<PGresult, pg_result_free>;

/// The parameters of one statement, all in binary format (bytea as its bytes, bigint as 8
/// big-endian bytes); the statement casts each ($1::bytea, $2::int8).
class pg_params {
 public:
  /// Adds bytes (a bytea parameter). The bytes must outlive the statement.
  pg_params& bytes(std::string_view b) {
    if (b.size() > static_cast<std::size_t>(INT_MAX))
      throw invalid_argument(dlq::detail::message("postgres", "a value",
                                                  "is larger than 2 GiB", "store less"));
    values_.push_back(b.data() != nullptr ? b.data() : "");
    lengths_.push_back(static_cast<int>(b.size()));
    return *this;
  }
  /// Adds a bigint.
  pg_params& int8(std::int64_t v) {
    owned_.push_back(int8_bytes(v));
    values_.push_back(owned_.back().data());
    lengths_.push_back(8);
    return *this;
  }
  /// Adds SQL NULL.
  pg_params& null() {
    values_.push_back(nullptr);
    lengths_.push_back(0);
    return *this;
  }
  int size() const noexcept { return static_cast<int>(values_.size()); }
  const char* const* values() const noexcept { return values_.data(); }
  const int* lengths() const noexcept { return lengths_.data(); }
  /// All 1 (binary), one per parameter.
  const int* formats() {
    formats_.assign(values_.size(), 1);
    return formats_.data();
  }

 private:
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
  std::deque<std::string> owned_;
};

/// Column `col` of row `row` as bytes (a bytea or text column in binary format).
inline std::string column_bytes(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
}
/// Column `col` of row `row` as a bigint (binary format); 0 for NULL.
inline std::int64_t column_int8(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return int8_value(std::string_view(PQgetvalue(r, row, col),
                                     static_cast<std::size_t>(PQgetlength(r, row, col))));
}

/// Throws the dlq error for a failed statement (`r` may be null: the connection failed).
/// `where` names the database (URL redacted); `outcome_unknown` marks a COMMIT whose answer
/// was lost.
[[noreturn]] inline void raise_failure(PGconn* conn, const PGresult* r, const std::string& where,
                                       const std::string& what, bool outcome_unknown) {
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state != nullptr ? state : "";
  std::string text = r != nullptr ? PQresultErrorMessage(r) : "";
  if (text.empty() && conn != nullptr) text = PQerrorMessage(conn);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::string failed = what + " failed: " + text;
  if (code == "40001" || code == "40P01")
    throw pg_retryable(dlq::detail::message("postgres", where, failed, "run it again"));
  if (code == "42P01" || code == "3F000")
    throw schema_error(dlq::detail::message(
        "postgres", where, failed,
        "the dlq tables are missing: run dlq::postgres::migrate(url, options) once"));
  if (code == "57014")
    throw timeout_error(dlq::detail::message("postgres", where, failed), outcome_unknown);
  // 08: connection exceptions; 57P01-57P03: the server shutting down or starting.
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK || code.compare(0, 2, "08") == 0 ||
      code.compare(0, 4, "57P0") == 0 || code.empty())
    throw connection_error(
        dlq::detail::message("postgres", where, failed,
                             outcome_unknown ? "the commit's outcome is unknown" : ""),
        outcome_unknown);
  throw reply_error(dlq::detail::message("postgres", where, failed), code, outcome_unknown);
}

/// One libpq connection, owned (closed when it goes) or borrowed (the application's).
class pg_connection {
 public:
  pg_connection(PGconn* conn, bool owned, std::string where)
      : conn_(conn), owned_(owned), where_(std::move(where)) {}
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;
  ~pg_connection() {
    if (owned_ && conn_ != nullptr) PQfinish(conn_);
  }

  PGconn* handle() const noexcept { return conn_; }
  const std::string& where() const noexcept { return where_; }
  /// False once the connection was lost: it is not put back in the pool.
  bool healthy() const noexcept { return PQstatus(conn_) == CONNECTION_OK; }

  /// Runs `sql` with `params`; results in binary format. On a connection of the pool, each
  /// statement is prepared once (server-side parse and plan saved: about half the time of a
  /// one-row statement on loopback); never on the application's connection (the names
  /// would be left there).
  /// @throws as raise_failure.
  pg_result exec(const std::string& sql, pg_params& params, const std::string& what,
                 bool outcome_unknown = false) {
    pg_result r;
    if (owned_) {
      const std::string& name = prepared(sql, params.size(), what);
      r.reset(PQexecPrepared(conn_, name.c_str(), params.size(), params.values(),
                             params.lengths(), params.formats(), 1));
    } else {
      r.reset(PQexecParams(conn_, sql.c_str(), params.size(), nullptr, params.values(),
                           params.lengths(), params.formats(), 1));
    }
    const ExecStatusType s = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
      raise_failure(conn_, r.get(), where_, what, outcome_unknown);
    return r;
  }
  /// Runs `sql` without parameters.
  pg_result exec(const std::string& sql, const std::string& what, bool outcome_unknown = false) {
    pg_params none;
    return exec(sql, none, what, outcome_unknown);
  }
  /// Rows affected by the statement of `r` (DELETE, INSERT, UPDATE).
  static std::size_t affected(const pg_result& r) {
    const char* n = PQcmdTuples(r.get());
    return n != nullptr && *n != '\0' ? static_cast<std::size_t>(std::strtoull(n, nullptr, 10)) : 0;
  }

 private:
  /// The name `sql` is prepared under on this connection, preparing it the first time.
  const std::string& prepared(const std::string& sql, int params, const std::string& what) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return it->second;
    std::string name = "dlq_" + std::to_string(prepared_.size());
    pg_result r(PQprepare(conn_, name.c_str(), sql.c_str(), params, nullptr));
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      raise_failure(conn_, r.get(), where_, what, false);
    return prepared_.emplace(sql, std::move(name)).first->second;
  }

  PGconn* conn_;
  bool owned_;
  std::string where_;
  std::map<std::string, std::string> prepared_;
};

}  // namespace detail
}  // namespace postgres
}  // namespace dlq
