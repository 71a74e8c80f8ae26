// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file dlqctl/store.hpp
/// dlqctl::Store — the store a dlqctl command runs against, behind one type: the commands are
/// compiled once and run on any backend (MemoryStorage in the unit tests, Redis, SQLite).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlq/dlq.hpp>
#include <dlq/redact.hpp>

namespace dlqctl {

/// Everything a command needs from a dead-letter store (see dlq::DeadLetterQueue for each).
class Store {
 public:
  virtual ~Store() = default;

  /// Where the store is, for messages: "redis 127.0.0.1:6379 db 0", "sqlite /var/x.db".
  virtual std::string where() const = 0;

  virtual std::string send(std::string_view queue, std::string_view payload,
                           const dlq::Failure& failure) = 0;
  virtual std::vector<std::string> send_batch(const std::vector<dlq::FailedJob>& jobs) = 0;
  virtual std::size_t size(std::string_view queue) = 0;
  virtual std::vector<dlq::Entry> peek(std::string_view queue, std::size_t start,
                                       std::size_t count) = 0;
  /// A read bounded by bytes in the store (dlq::DeadLetterQueue::peek_bounded); nullopt
  /// when the backend cannot.
  virtual std::optional<dlq::PeekWindow> peek_bounded(dlq::ListKind kind, std::string_view queue,
                                                      std::size_t start, std::size_t count,
                                                      std::size_t min_count,
                                                      std::size_t max_bytes) = 0;
  virtual std::optional<dlq::Entry> get(std::string_view queue, std::string_view id) = 0;
  virtual bool remove(std::string_view queue, std::string_view id) = 0;
  /// Removes several entries by id with one audit record (dlq::DeadLetterQueue::remove_ids),
  /// by `actor` ("" = StoreSettings::actor).
  virtual dlq::RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids,
                                       const std::string& actor = {}) = 0;
  /// Purges (and recover, purge_corrupt below) by `actor` ("" = StoreSettings::actor).
  virtual std::size_t purge(std::string_view queue, const std::string& actor = {}) = 0;
  virtual std::vector<std::string> queues() = 0;
  /// The queue names found, split into those dlq serves (queues()) and those it refuses and
  /// listings skip (dlq::DeadLetterQueue::list_queues).
  virtual dlq::QueueNames list_queues() = 0;
  virtual std::map<std::string, std::size_t> summary(const std::vector<std::string>& queues) = 0;
  virtual dlq::ReplayReport replay(std::string_view queue, const dlq::ReplayOptions& options) = 0;
  virtual std::size_t recover(std::string_view queue, const std::string& actor = {}) = 0;
  /// Applies `retention` to `queue` now (dlq::DeadLetterQueue::trim with that retention).
  virtual dlq::TrimReport trim(std::string_view queue, const dlq::Retention& retention) = 0;
  virtual std::vector<dlq::Entry> corrupt(std::string_view queue, std::size_t start,
                                          std::size_t count) = 0;
  virtual std::size_t corrupt_size(std::string_view queue) = 0;
  virtual std::size_t purge_corrupt(std::string_view queue, const std::string& actor = {}) = 0;

  /// Jobs waiting in the source queue `queue` (where replay puts them back), when the backend
  /// can tell; nullopt otherwise.
  virtual std::optional<std::size_t> waiting(std::string_view /*queue*/) { return std::nullopt; }

  // Operator operations (ops_commands.hpp).
  virtual dlq::SearchPage search(std::string_view queue, const dlq::Filter& filter,
                                 std::string_view continuation, std::size_t limit,
                                 std::size_t max_examined) = 0;
  virtual dlq::DiscardReport discard(std::string_view queue,
                                     const dlq::DiscardOptions& options) = 0;
  virtual std::vector<dlq::AuditRecord> audit(std::string_view queue,
                                              std::chrono::system_clock::time_point since,
                                              std::size_t limit) = 0;
  /// Where replay puts the jobs of `queue`, in words ("the Redis list queue:{orders}"); ""
  /// when the backend cannot say.
  virtual std::string destination(std::string_view /*queue*/) { return {}; }

  /// Dead letters found under another known key layout than the configured one.
  struct OtherLayout {
    std::string name;                 ///< e.g. "the Python service's layout dlq:*"
    std::string flags;                ///< the options that select it
    std::vector<std::string> queues;  ///< the queues found there
  };
  /// Looks for dead letters under the other known key layout (Redis: the Python service's
  /// dlq:* when dlq:{*} is configured, and the reverse); nullopt when there are none or the
  /// backend has no such thing.
  virtual std::optional<OtherLayout> other_layout() { return std::nullopt; }

  /// Depths and end times of `queues` (dlq::DeadLetterQueue::stats).
  virtual std::vector<dlq::QueueStats> stats(const std::vector<std::string>& queues) = 0;
  /// The queue's dead letters grouped by error (dlq::DeadLetterQueue::errors).
  virtual dlq::ErrorsReport errors(std::string_view queue, const dlq::ErrorsOptions& options) = 0;
};

/// A Store over dlq::DeadLetterQueue<Storage>. `Storage` may be a reference type to share a
/// storage the caller owns (the unit tests do: `DlqStore<dlq::MemoryStorage&>`).
template <class Storage>
class DlqStore final : public Store {
 public:
  /// How to count the jobs waiting in a source queue (optional; see Store::waiting).
  using waiting_fn = std::function<std::optional<std::size_t>(std::string_view)>;

  /// @param where   what where() returns
  /// @param storage the storage (moved in, or a reference)
  /// @param options the front end's options
  DlqStore(std::string where, Storage storage, dlq::Options options = {}, waiting_fn waiting = {})
      : where_(std::move(where)),
        dlq_(std::forward<Storage>(storage), std::move(options)),
        waiting_(std::move(waiting)) {}

  /// Sets how to count the jobs waiting in a source queue (see Store::waiting).
  void set_waiting(waiting_fn waiting) { waiting_ = std::move(waiting); }
  /// Sets how to describe a replay's destination (see Store::destination).
  void set_destination(std::function<std::string(std::string_view)> f) {
    destination_ = std::move(f);
  }
  /// Sets how to look for another key layout (see Store::other_layout).
  void set_other_layout(std::function<std::optional<OtherLayout>()> f) {
    other_layout_ = std::move(f);
  }

  /// The front end, for backend-specific calls.
  dlq::DeadLetterQueue<Storage>& dlq() noexcept { return dlq_; }

  std::string where() const override { return where_; }
  std::string send(std::string_view queue, std::string_view payload,
                   const dlq::Failure& failure) override {
    return dlq_.send_to_dlq(queue, payload, failure);
  }
  std::vector<std::string> send_batch(const std::vector<dlq::FailedJob>& jobs) override {
    return dlq_.send_batch(jobs);
  }
  std::size_t size(std::string_view queue) override { return dlq_.size(queue); }
  std::vector<dlq::Entry> peek(std::string_view queue, std::size_t start,
                               std::size_t count) override {
    return dlq_.peek(queue, start, count);
  }
  std::optional<dlq::PeekWindow> peek_bounded(dlq::ListKind kind, std::string_view queue,
                                              std::size_t start, std::size_t count,
                                              std::size_t min_count,
                                              std::size_t max_bytes) override {
    return dlq_.peek_bounded(queue, kind, start, count, min_count, max_bytes);
  }
  std::optional<dlq::Entry> get(std::string_view queue, std::string_view id) override {
    return dlq_.get(queue, id);
  }
  bool remove(std::string_view queue, std::string_view id) override {
    return dlq_.remove(queue, id);
  }
  dlq::RemoveReport remove_ids(std::string_view queue, const std::vector<std::string>& ids,
                               const std::string& actor = {}) override {
    return dlq_.remove_ids(queue, ids, actor);
  }
  std::size_t purge(std::string_view queue, const std::string& actor = {}) override {
    return dlq_.purge(queue, actor);
  }
  std::vector<std::string> queues() override { return dlq_.queues(); }
  dlq::QueueNames list_queues() override { return dlq_.list_queues(); }
  std::map<std::string, std::size_t> summary(const std::vector<std::string>& queues) override {
    return dlq_.summary(queues);
  }
  dlq::ReplayReport replay(std::string_view queue, const dlq::ReplayOptions& options) override {
    return dlq_.replay(queue, options);
  }
  std::size_t recover(std::string_view queue, const std::string& actor = {}) override {
    return dlq_.recover(queue, actor);
  }
  dlq::TrimReport trim(std::string_view queue, const dlq::Retention& retention) override {
    dlq::Options o = dlq_.options();  // a view over the same storage with this retention
    o.retention = retention;
    o.retention_for.clear();
    dlq::DeadLetterQueue<std::remove_reference_t<Storage>&> view(dlq_.storage(), std::move(o));
    return view.trim(queue);
  }
  std::vector<dlq::Entry> corrupt(std::string_view queue, std::size_t start,
                                  std::size_t count) override {
    return dlq_.corrupt(queue, start, count);
  }
  std::size_t corrupt_size(std::string_view queue) override { return dlq_.corrupt_size(queue); }
  std::size_t purge_corrupt(std::string_view queue, const std::string& actor = {}) override {
    return dlq_.purge_corrupt(queue, actor);
  }
  std::vector<dlq::QueueStats> stats(const std::vector<std::string>& queues) override {
    return dlq_.stats(queues);
  }
  dlq::ErrorsReport errors(std::string_view queue, const dlq::ErrorsOptions& options) override {
    return dlq_.errors(queue, options);
  }
  std::optional<std::size_t> waiting(std::string_view queue) override {
    if (waiting_) return waiting_(queue);
    return std::nullopt;
  }
  dlq::SearchPage search(std::string_view queue, const dlq::Filter& filter,
                         std::string_view continuation, std::size_t limit,
                         std::size_t max_examined) override {
    return dlq_.search(queue, filter, continuation, limit, max_examined);
  }
  dlq::DiscardReport discard(std::string_view queue, const dlq::DiscardOptions& options) override {
    return dlq_.discard(queue, options);
  }
  std::vector<dlq::AuditRecord> audit(std::string_view queue,
                                      std::chrono::system_clock::time_point since,
                                      std::size_t limit) override {
    return dlq_.audit(queue, since, limit);
  }
  std::string destination(std::string_view queue) override {
    return destination_ ? destination_(queue) : std::string();
  }
  std::optional<OtherLayout> other_layout() override {
    return other_layout_ ? other_layout_() : std::nullopt;
  }

 private:
  std::string where_;
  dlq::DeadLetterQueue<Storage> dlq_;
  waiting_fn waiting_;
  std::function<std::string(std::string_view)> destination_;
  std::function<std::optional<OtherLayout>()> other_layout_;
};

/// Where and how to open a store: the global options of dlqctl.
struct StoreSettings {
  /// Store URL: any dlq::redis::parse_url takes (redis://, rediss:// for TLS, unix://,
  /// redis+unix://) or sqlite:///path/file.db.
  std::string url = "redis://127.0.0.1:6379/0";
  /// Redis key patterns (`*` = queue name); empty = the backend's default.
  std::string dlq_key;
  std::string queue_key;
  std::string corrupt_key;
  /// Connect/command timeout (Redis) or lock wait (SQLite).
  std::chrono::milliseconds timeout{5000};
  /// Who operates, written to the audit trail (Options::actor); dlqctl defaults to the OS user.
  std::string actor;
  /// Connections the Redis store may open at once (dlqctl serve raises it). Default 2.
  std::size_t pool_size = 2;
  /// Create the store when it does not exist (an embedded file); false = a missing store is
  /// an error. dlqctl sets it for `send` only.
  bool create_if_missing = false;
  /// The audit trail's retention this process applies when it writes a record
  /// (--audit-max-age, --audit-max-records). Every writer of a trail applies its own: give
  /// dlqctl what the services use (see dlq/audit.hpp).
  dlq::AuditRetention audit_retention;
  /// Where the library's own messages go (Options::log); empty = nowhere. `serve` sets its
  /// log.
  std::function<void(dlq::LogLevel, std::string_view)> log;
};

/// Opens the store `settings` name. Throws dlq::invalid_argument for a bad URL, a
/// dlq::storage_error subclass when the store cannot be reached.
using Opener = std::function<std::unique_ptr<Store>(const StoreSettings&)>;

}  // namespace dlqctl
