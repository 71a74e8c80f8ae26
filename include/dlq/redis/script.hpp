// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file redis/script.hpp
/// dlq::redis::Script: a Lua script run with EVALSHA. It is loaded once (SCRIPT LOAD, on
/// first use) and loaded again when the server answers NOSCRIPT (after a restart or a
/// SCRIPT FLUSH); NOSCRIPT means the script did not run, so running it again is safe.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/function_ref.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/connection.hpp"

namespace dlq::redis {

/// A Lua script and its SHA1 as the server reported it. Thread-safe.
class Script {
 public:
  /// @param name   short name for messages ("replay script")
  /// @param source the Lua source
  Script(std::string name, std::string source)
      : name_(std::move(name)), source_(std::move(source)) {}

  /// The name used in messages.
  const std::string& name() const noexcept { return name_; }
  /// The Lua source.
  const std::string& source() const noexcept { return source_; }

  /// The SHA1 to pass to EVALSHA; loads the script on `conn` the first time.
  /// @throws the dlq::storage_error subclasses of Connection::run, dlq::reply_error.
  std::string sha(Connection& conn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!sha_.empty()) return sha_;
    }
    return load(conn);
  }

  /// Loads the script (SCRIPT LOAD) on `conn` and remembers its SHA1.
  std::string load(Connection& conn) {
    Command c("SCRIPT");
    c.arg("LOAD").arg(std::string_view(source_)).label("SCRIPT LOAD (" + name_ + ")");
    Reply r = conn.run(c, Effect::read);  // loading is idempotent: safe to retry
    check(r, conn, c.label());
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
      detail::throw_unexpected_reply(*r, conn.endpoint(), c.label());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    sha_.assign(r->str, r->len);
    return sha_;
  }

  /// Runs a pipeline that contains this script's EVALSHA at position `script_at`.
  /// `build(sha)` must return the commands; it is called again (and the pipeline re-sent,
  /// once) when the server answered NOSCRIPT — the other commands must be safe to repeat
  /// (reads), as NOSCRIPT guarantees only that the script itself did not run.
  /// A pipeline builder: the script's SHA1 in, the commands out (referenced, not owned).
  using Build = dlq::detail::function_ref<std::vector<Command>(const std::string&)>;

  std::vector<Reply> run_pipeline(Connection& conn, std::size_t script_at, Build build,
                                  Effect effect) {
    for (int pass = 0;; ++pass) {
      std::vector<Command> cmds = build(sha(conn));
      std::vector<Reply> replies = conn.run(cmds, effect);
      const redisReply& r = *replies.at(script_at);
      if (pass == 0 && r.type == REDIS_REPLY_ERROR && detail::reply_code(view(r)) == "NOSCRIPT") {
        load(conn);
        continue;
      }
      return replies;
    }
  }

 private:
  std::string name_;
  std::string source_;
  std::mutex mutex_;
  std::string sha_;
};

}  // namespace dlq::redis
