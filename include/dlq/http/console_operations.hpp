// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/console_operations.hpp
/// The console's background operations (a replay, a delete by filter): the part of
/// dlq::http::Console that owns threads. One thread each, at most
/// ConsoleOptions::max_operations running at once, finished ones kept for polling up to
/// ConsoleOptions::keep_operations; shutdown() cancels the running ones between batches and
/// joins them. Their JSON shape is here too, as it reads an operation under its lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <dlq/dlq.hpp>
#include <dlq/http/backend.hpp>
#include <dlq/http/console_guard.hpp>
#include <dlq/http/console_options.hpp>
#include <dlq/http/console_views.hpp>
#include <nlohmann/json.hpp>

namespace dlq {
namespace http {
namespace detail {

using log_sink = std::function<void(LogLevel, std::string_view)>;

// One background operation (a replay, or a delete by filter).
struct operation {
  std::string id;
  std::string kind = "replay";
  std::string queue;
  std::string to;
  std::string mode;  // ids | filter | all
  std::string actor;  // the caller's token name ("" = the backend's own actor)
  bool dry_run = false;
  double rate = 0;
  std::size_t requested = 0;  // ids named, or the depth when it started
  std::atomic<bool> cancel{false};
  std::chrono::system_clock::time_point started, finished;
  mutable std::mutex m;
  std::string state = "running";  // running | done | cancelled | failed
  ReplayProgress progress;
  std::optional<ReplayReport> report;
  DiscardReport discarded;  // kind "delete": progress, then the report
  std::optional<http_error> error;
  std::thread thread;
};

inline nlohmann::json op_json(const operation& op) {
  std::lock_guard<std::mutex> lock(op.m);
  nlohmann::json j = {{"id", op.id},
                      {"kind", op.kind},
                      {"queue", op.queue},
                      {"to", op.to.empty() ? nlohmann::json(nullptr) : nlohmann::json(op.to)},
                      {"mode", op.mode},
                      {"actor", op.actor},
                      {"dry_run", op.dry_run},
                      {"rate", op.rate},
                      {"requested", op.requested},
                      {"state", op.state},
                      {"cancel_requested", op.cancel.load()},
                      {"started_at", iso(op.started)}};
  j["finished_at"] =
      op.state == "running" ? nlohmann::json(nullptr) : nlohmann::json(iso(op.finished));
  if (op.kind == "delete") {
    const auto& d = op.discarded;
    j["progress"] = {{"examined", d.examined}, {"matched", d.matched}, {"deleted", d.deleted}};
    j["report"] = op.state == "running" || op.error ? nlohmann::json(nullptr)
                                                    : nlohmann::json({{"examined", d.examined},
                                                                      {"matched", d.matched},
                                                                      {"deleted", d.deleted},
                                                                      {"dry_run", d.dry_run},
                                                                      {"cancelled", d.cancelled}});
    j["error"] = op.error ? nlohmann::json({{"code", op.error->code},
                                            {"message", redact_secrets(op.error->message)}})
                          : nlohmann::json(nullptr);
    return j;
  }
  j["progress"] = {{"examined", op.progress.examined},
                   {"replayed", op.progress.replayed},
                   {"set_aside", op.progress.set_aside},
                   {"remaining", op.progress.remaining}};
  j["report"] = op.report ? report_json(*op.report) : nlohmann::json(nullptr);
  j["error"] = op.error ? nlohmann::json({{"code", op.error->code},
                                          {"message", redact_secrets(op.error->message)}})
                        : nlohmann::json(nullptr);
  return j;
}

// The operations of one Console: registers and starts them, finds them, forgets the oldest
// finished ones, and cancels and joins them all at shutdown.
class operation_registry {
 public:
  explicit operation_registry(const ConsoleOptions& opts) : opts_(opts) {}
  operation_registry(const operation_registry&) = delete;
  operation_registry& operator=(const operation_registry&) = delete;
  ~operation_registry() { shutdown(); }

  /// Cancels every running operation and waits until they have stopped. Idempotent.
  void shutdown() {
    std::vector<std::shared_ptr<operation>> ops;
    {
      std::lock_guard<std::mutex> lock(ops_mutex_);
      stopping_ = true;
      for (auto& op : ops_)
        ops.push_back(op);
    }
    for (auto& op : ops)
      op->cancel.store(true);
    for (auto& op : ops)
      if (op->thread.joinable()) op->thread.join();
  }

  std::shared_ptr<operation> find(const std::string& id) {
    std::lock_guard<std::mutex> lock(ops_mutex_);
    for (auto& op : ops_)
      if (op->id == id) return op;
    throw bad("unknown_operation", "operation '" + printable(id) + "'", "no such operation",
              "see /api/operations (finished ones are kept for a while)", 404);
  }

  // Every operation kept, the newest first (/api/operations).
  nlohmann::json list_json() {
    nlohmann::json list = nlohmann::json::array();
    std::lock_guard<std::mutex> lock(ops_mutex_);
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it)
      list.push_back(op_json(**it));
    return list;
  }

  // Registers `op` and starts `body` on its own thread (429 beyond max_operations).
  template <class F>
  void launch(const std::shared_ptr<operation>& op, F body) {
    {
      std::lock_guard<std::mutex> lock(ops_mutex_);
      if (stopping_)
        throw bad("shutting_down", op->kind, "the console is stopping", "try again later", 503);
      std::size_t running = 0;
      for (const auto& o : ops_) {
        std::lock_guard<std::mutex> l(o->m);
        if (o->state == "running") ++running;
      }
      if (running >= opts_.max_operations)
        throw bad("too_many_operations", op->kind,
                  std::to_string(running) + " operations are running (the limit is " +
                      std::to_string(opts_.max_operations) + ")",
                  "wait for one to finish or cancel it", 429);
      op->id = "op-" + std::to_string(++next_op_);
      op->started = std::chrono::system_clock::now();
      forget_finished_locked();
      ops_.push_back(op);
      op->thread = std::thread(std::move(body));
    }
  }

 private:
  // Drops the oldest finished operations beyond keep_operations (joins their threads).
  void forget_finished_locked() {
    std::size_t finished = 0;
    for (const auto& o : ops_) {
      std::lock_guard<std::mutex> l(o->m);
      if (o->state != "running") ++finished;
    }
    for (auto it = ops_.begin(); it != ops_.end() && finished > opts_.keep_operations;) {
      bool done = false;
      {
        std::lock_guard<std::mutex> l((*it)->m);
        done = (*it)->state != "running";
      }
      if (done) {
        if ((*it)->thread.joinable()) (*it)->thread.join();
        it = ops_.erase(it);
        --finished;
      } else {
        ++it;
      }
    }
  }

  const ConsoleOptions& opts_;
  std::mutex ops_mutex_;
  std::deque<std::shared_ptr<operation>> ops_;
  std::uint64_t next_op_ = 0;
  bool stopping_ = false;
};

// Runs a delete by filter on the operation's thread and records how it ended.
inline void run_discard(operation& op, const EntryQuery& query, ConsoleBackend& backend,
                        const log_sink& log) {
  std::optional<http_error> error;
  DiscardReport report;
  try {
    const auto progress = [&op](const DiscardReport& d) {
      std::lock_guard<std::mutex> lock(op.m);
      op.discarded = d;
    };
    report = op.actor.empty()  // no named caller: the backend's own actor
                 ? backend.discard(op.queue, query, op.dry_run, &op.cancel, progress)
                 : backend.discard_as(op.queue, query, op.dry_run, &op.cancel, progress, op.actor);
  } catch (const dlq::storage_error& e) {
    error = http_error{502, "store_error", e.what()};
  } catch (const std::exception& e) {
    error = http_error{500, "internal", std::string("[dlq.http] delete: ") + e.what()};
  }
  std::string line;
  {
    std::lock_guard<std::mutex> lock(op.m);
    op.finished = std::chrono::system_clock::now();
    op.error = error;
    if (!error) op.discarded = report;
    op.state = error ? "failed" : report.cancelled ? "cancelled" : "done";
    line = "operation " + op.id + ": " + op.state + ", deleted " +
           std::to_string(op.discarded.deleted) + " of " + std::to_string(op.discarded.examined) +
           " examined" + (error ? ", " + error->message : "");
  }
  log_line(log, error ? LogLevel::error : LogLevel::info, line);
}

// Runs a replay on the operation's thread and records how it ended.
inline void run_replay(operation& op, const ReplayOptions& ro, ConsoleBackend& backend,
                       const log_sink& log) {
  std::optional<ReplayReport> report;
  std::optional<http_error> error;
  try {
    report = backend.replay(op.queue, ro);
  } catch (const dlq::invalid_argument& e) {
    error = http_error{400, "invalid_argument", e.what()};
  } catch (const dlq::conflict_error& e) {
    error = http_error{409, "conflict", e.what()};
  } catch (const dlq::storage_error& e) {
    error = http_error{502, "store_error", e.what()};
  } catch (const std::exception& e) {
    error = http_error{500, "internal", std::string("[dlq.http] replay: ") + e.what()};
  }
  std::string line;
  {
    std::lock_guard<std::mutex> lock(op.m);
    op.finished = std::chrono::system_clock::now();
    op.report = report;
    op.error = error;
    if (error) {
      op.state = "failed";
    } else if (report->cancelled) {
      op.state = "cancelled";
    } else {
      op.state = "done";
    }
    if (report) {
      op.progress.examined = report->examined;
      op.progress.replayed = report->replayed;
      op.progress.set_aside = report->set_aside;
    }
    line = "operation " + op.id + ": " + op.state +
           (report ? ", replayed " + std::to_string(report->replayed) + " of " +
                         std::to_string(report->examined) + " examined"
                   : ", " + error->message);
  }
  log_line(log, error ? LogLevel::error : LogLevel::info, line);
}

}  // namespace detail
}  // namespace http
}  // namespace dlq
