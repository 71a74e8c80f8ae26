// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/redis_source_queue.hpp
/// The Redis backend of dlq::asio::AsyncSourceQueue<dlq::asio::RedisListStorage>: the I/O
/// around dlq/redis/source_protocol.hpp (keys, scripts, arguments, bounds, name checks — the
/// blocking dlq::RedisSourceQueue's, written once). Each call is one EVAL through the
/// storage's router (the URL's connection on one server, the queue's master on a cluster),
/// pipelined with the storage's other commands; recover repeats its step while a step moved
/// a full chunk. CMake: dlq::asio and dlq::redis.
///
/// EVAL rather than EVALSHA: the script travels with each call (the take script is 330
/// bytes), so a server that lost its script cache (restart, SCRIPT FLUSH, a failover) needs
/// no NOSCRIPT round trip, and nothing is loaded per node of a cluster; Redis caches the
/// compiled script by its body.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/asio/detail/completion.hpp"
#include "dlq/asio/detail/resp.hpp"
#include "dlq/asio/redis_list_storage.hpp"
#include "dlq/asio/source_queue.hpp"
#include "dlq/errors.hpp"
#include "dlq/redis/source_protocol.hpp"

namespace dlq::asio::detail {

// A reader of an integer reply (a count), completing `done` with it.
template <class Done>
struct count_reader {
  Done done;
  void operator()(std::exception_ptr e, RedisReply&& r, const std::string& label,
                  const std::string& endpoint);
};

template <>
class source_backend<RedisListStorage>
    : public std::enable_shared_from_this<source_backend<RedisListStorage>> {
 public:
  source_backend(::asio::any_io_executor ex, RedisListStorage& storage)
      : ex_(std::move(ex)), storage_(storage) {}

  void take(const std::string& q, const std::string& c, std::size_t max,
            done_fn<std::vector<SourceJob>> done) {
    if (refused(done, [&] { redis::source::check(q, c, "take"); })) return;
    const redis::source::Keys k = redis::source::keys(storage_.source_key(q), c);
    const std::string count = redis::source::take_count_arg(max);
    eval(
        k.source, redis::source::take_script, redis::source::take_arg_count,
        [&](auto&& arg) { redis::source::take_args(k, c, count, arg); },
        redis::source::label("take", k.source),
        [done = std::move(done)](std::exception_ptr e, RedisReply&& r, const std::string& label,
                                 const std::string& endpoint) {
          std::vector<std::string> payloads;
          if (!e && r.type != reply_type::array) e = unexpected(endpoint, label, r.type);
          for (std::size_t i = 0; !e && i < r.elements.size(); ++i) {
            if (r.elements[i].type != reply_type::string)
              e = unexpected(endpoint, label, r.elements[i].type);
            else
              payloads.push_back(std::move(r.elements[i].str));
          }
          done(e, e ? std::vector<SourceJob>{} : redis::source::jobs_of(std::move(payloads)));
        });
  }

  void settle(const std::string& q, const std::string& c, const std::vector<SourceJob>& jobs,
              bool requeue, done_fn<std::size_t> done) {
    const char* where = requeue ? "nack" : "ack";
    if (refused(done, [&] { redis::source::check(q, c, where); })) return;
    if (jobs.empty()) return ::asio::post(ex_, [done = std::move(done)] { done(nullptr, 0); });
    const redis::source::Keys k = redis::source::keys(storage_.source_key(q), c);
    eval(
        k.source, redis::source::settle_script, redis::source::settle_arg_count(jobs.size()),
        [&](auto&& arg) { redis::source::settle_args(k, c, jobs, requeue, arg); },
        redis::source::label(where, k.in_flight),
        count_reader<done_fn<std::size_t>>{std::move(done)});
  }

  void recover(const std::string& q, const std::string& c, done_fn<std::size_t> done) {
    if (refused(done, [&] { redis::source::check(q, c, "recover"); })) return;
    recover_step(
        std::make_shared<redis::source::Keys>(redis::source::keys(storage_.source_key(q), c)), c, 0,
        std::move(done));
  }

  void size(const std::string& q, done_fn<std::size_t> done) {
    if (refused(done, [&] { redis::source::check(q, "size"); })) return;
    length(storage_.source_key(q), std::move(done));
  }

  void in_flight(const std::string& q, const std::string& c, done_fn<std::size_t> done) {
    if (refused(done, [&] { redis::source::check(q, c, "in_flight"); })) return;
    length(redis::source::in_flight_key(storage_.source_key(q), c), std::move(done));
  }

  void close() noexcept { storage_.close(); }

 private:
  // Runs `check`; when it throws, posts its exception to `done` and returns true.
  template <class T, class Check>
  bool refused(done_fn<T>& done, Check&& check) {
    try {
      check();
      return false;
    } catch (...) {
      ::asio::post(ex_, [done = std::move(done), e = std::current_exception()] { done(e, T{}); });
      return true;
    }
  }

  // One step of at most recover_chunk jobs; the next while a step moved a full chunk.
  void recover_step(std::shared_ptr<redis::source::Keys> k, std::string c, std::size_t moved,
                    done_fn<std::size_t> done) {
    eval(
        k->source, redis::source::recover_script, redis::source::recover_arg_count,
        [&](auto&& arg) { redis::source::recover_args(*k, c, arg); },
        redis::source::label("recover", k->in_flight),
        count_reader<done_fn<std::size_t>>{
            [self = shared_from_this(), k, c, moved, done](std::exception_ptr e, std::size_t n) {
              if (e) return done(e, moved);
              if (!redis::source::recover_again(static_cast<long long>(n)))
                return done(nullptr, moved + n);
              self->recover_step(k, c, moved + n, done);
            }});
  }

  void length(const std::string& key, done_fn<std::size_t> done) {
    storage_.execute_inline(
        key,
        [&](std::string& out) {
          resp_command(out, 2);
          resp_arg(out, "LLEN");
          resp_arg(out, key);
        },
        false, "LLEN ", key,
        [read = count_reader<done_fn<std::size_t>>{std::move(done)}, label = "LLEN " + key,
         endpoint = storage_.connection().endpoint()](std::exception_ptr e,
                                                      RedisReply&& r) mutable {
          read(e, std::move(r), label, endpoint);
        });
  }

  // EVAL of `script` with the arguments `args(arg)` hands over (`nargs` of them), a write
  // routed by `key`'s slot; `read(e, reply, label, endpoint)` runs on the executor.
  template <class Args, class Read>
  void eval(const std::string& key, std::string_view script, std::size_t nargs, Args&& args,
            std::string label, Read read) {
    storage_.execute_inline(
        key,
        [&](std::string& out) {
          resp_command(out, 2 + nargs);
          resp_arg(out, "EVAL");
          resp_arg(out, script);
          args([&out](std::string_view a) { resp_arg(out, a); });
        },
        true, "", label,
        [read = std::move(read), label, endpoint = storage_.connection().endpoint()](
            std::exception_ptr e, RedisReply&& r) mutable {
          read(e, std::move(r), label, endpoint);
        });
  }

  template <class Done>
  friend struct count_reader;

  static std::exception_ptr unexpected(const std::string& endpoint, const std::string& label,
                                       int type) {
    return std::make_exception_ptr(dlq::protocol_error(
        dlq::detail::message("redis", endpoint,
                             label + ": unexpected reply of type " + std::to_string(type),
                             "is this a Redis server of version 6.2 or later?"),
        false));
  }

  ::asio::any_io_executor ex_;
  RedisListStorage storage_;  // a handle: shares the connection with the caller's
};

template <class Done>
void count_reader<Done>::operator()(std::exception_ptr e, RedisReply&& r, const std::string& label,
                                    const std::string& endpoint) {
  if (!e && r.type != reply_type::integer)
    e = source_backend<RedisListStorage>::unexpected(endpoint, label, r.type);
  done(e, e ? std::size_t{0} : static_cast<std::size_t>(r.integer));
}

}  // namespace dlq::asio::detail
