// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/job_queue.hpp
/// dlq::kv::JobQueue<Store> — a durable work queue on any key-value store (dlq/kv/store.hpp):
/// what workers take jobs from, and where replay puts dead letters back when the dead letters
/// live in the same store. Part of the core (no client library): on PostgreSQL it needs only
/// `dlq::postgres`, on SQLite `dlq::sqlite` (whose dlq/sqlite/job_queue.hpp also makes
/// `JobQueue<>` mean `JobQueue<SqliteStore>`).
///
///     dlq::kv::PostgresStore store("postgresql:///orders");        // or SqliteStore, MemoryStore
///     dlq::kv::JobQueue<dlq::kv::PostgresStore> jobs(store);
///     jobs.push("orders", R"({"order":42})");                 // a producer
///
///     for (auto& job : jobs.take("orders", "worker-1", 16)) {  // a worker
///       handle(job.payload);                                   // (or send_to_dlq on failure)
///       jobs.ack("orders", "worker-1", {job});
///     }
///
///     // Dead letters in the same store, replayed straight back into the job queue:
///     dlq::KeyValueStorage storage(store, jobs);
///     dlq::DeadLetterQueue<decltype(storage)> dlq(storage);
///
/// Delivery is at-least-once and nothing is lost:
/// - take() moves jobs from the queue's ready list to a list held by the named consumer, in
///   one atomic store call, so two consumers never take the same job: the store's
///   take_oldest where it has one (PostgresStore: `FOR UPDATE SKIP LOCKED`, concurrent
///   takers do not wait for each other), else a compare-and-move on each job's version
///   (takers of one queue then retry on each other's window); ack() removes them from it.
/// - A consumer that dies between take() and ack() leaves its jobs held under its name: the
///   next take() by the same consumer name returns them first (a restarted worker picks up
///   where it died), and release() puts them back in the ready list for anyone. There is no
///   time-based lease: a consumer's jobs stay held until it takes again or someone releases
///   them (docs/postgres.md, "Consumers that never come back").
/// - A job is at every instant in exactly one place: ready, held by one consumer, or acked.
/// - Replay of dead letters kept in the same store into this queue is exactly-once: each
///   replay step saves the jobs and removes the dead letters in one transaction (writes_for,
///   the store's remove_and_save), so a replayer killed at any point neither loses nor
///   doubles a job. Into a JobQueue on another store it is at-least-once.
/// - It implements the source-queue interface of dlq/source_queue.hpp (push, pop, take, ack,
///   nack, recover, size, in_flight), so a worker written against it runs unchanged on
///   dlq::MemorySourceQueue in a unit test and dlq::RedisSourceQueue.
///
/// Layout in the store (see dlq/kv/store.hpp for collections and versions): the
/// ready jobs of queue Q are the collection `<prefix>{Q}:ready`, those held by consumer C
/// `<prefix>{Q}:held:C` (a queue name has no brace, dlq/queue_names.hpp, so no queue's
/// ready list is another's held list); a job's id is a fresh time-ordered id, its value the
/// payload bytes, oldest first by version. Every member is thread-safe when the store is
/// (SqliteStore and PostgresStore are, across threads and processes).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlq/detail/id.hpp"
#include "dlq/errors.hpp"
#include "dlq/kv/sinks.hpp"
#include "dlq/kv/store.hpp"
#include "dlq/source_queue.hpp"

namespace dlq {
namespace kv {

/// Options of a JobQueue.
struct JobQueueOptions {
  /// Start of every collection name (see the file comment). Default "jobs:". Must differ
  /// from the KeyValueOptions::prefix of dead letters kept in the same store ("dlq:").
  std::string prefix = "jobs:";
};

/// One job taken from a JobQueue: its id in the queue (fresh, time-ordered), the payload
/// bytes exactly as pushed, and the store's version of the held record (used by ack).
using Job = dlq::SourceJob;

/// A durable at-least-once job queue on a key-value store `Store` (see the file comment).
/// Also a replay sink for dlq::KeyValueStorage (push_many). A handle when the store is one:
/// copies share the same jobs.
template <class Store>
class JobQueue {
  static_assert(detail::check_store<Store>::value, "");

 public:
  /// A queue over `store` (held by value: the shipped stores are handles).
  /// @throws dlq::invalid_argument when options.prefix is empty.
  explicit JobQueue(Store store, JobQueueOptions options = {})
      : store_(std::move(store)), prefix_(std::move(options.prefix)) {
    if (prefix_.empty())
      throw invalid_argument(dlq::detail::message("jobs", "JobQueueOptions::prefix", "is empty",
                                                  "use a non-empty prefix such as \"jobs:\""));
  }

  /// The store.
  Store& store() noexcept { return store_; }

  /// The collection of `queue`'s ready jobs.
  std::string ready_collection(std::string_view queue) const {
    return prefix_ + "{" + std::string(queue) + "}:ready";
  }
  /// The collection of the jobs `consumer` holds from `queue`.
  std::string held_collection(std::string_view queue, std::string_view consumer) const {
    return prefix_ + "{" + std::string(queue) + "}:held:" + std::string(consumer);
  }

  /// Appends a job to `queue` and returns its id. Durable when it returns.
  /// @throws dlq::invalid_argument for a refused queue name; what the store throws.
  std::string push(std::string_view queue, std::string_view payload) {
    validate(queue, "push");
    std::string id = next_id();
    const std::string coll = ready_collection(queue);
    store_.save({Write{coll, id, payload}});
    return id;
  }

  /// Appends several jobs, possibly to several queues, in one atomic store call (a replay
  /// step of KeyValueStorage calls this once per batch).
  /// @throws dlq::invalid_argument for a refused queue name; what the store throws.
  void push_many(const std::vector<Message>& messages) {
    if (messages.empty()) return;
    writes_for(messages, [this](const std::vector<Write>& writes) { store_.save(writes); });
  }

  /// Builds the store writes that push_many would save for `messages` (fresh ids, ready
  /// collections) and calls `use(writes)` once with them; the views stay valid during the
  /// call. dlq::KeyValueStorage uses it to save the jobs in the same transaction that removes
  /// the dead letters, when both live in one store (exactly-once replay).
  /// @throws dlq::invalid_argument for a refused queue name; what `use` throws.
  void writes_for(const std::vector<Message>& messages, detail::writes_callback use) {
    std::vector<std::string> ids;
    std::vector<std::string> colls;
    ids.reserve(messages.size());
    colls.reserve(messages.size());
    for (const Message& m : messages) {
      validate(m.queue, "push_many");
      ids.push_back(next_id());
      colls.push_back(ready_collection(m.queue));
    }
    std::vector<Write> writes;
    writes.reserve(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i)
      writes.push_back(Write{colls[i], ids[i], messages[i].payload});
    use(writes);
  }

  /// Number of jobs waiting (ready) in `queue`.
  /// @throws dlq::invalid_argument for a queue name the rule refuses; what the store throws.
  std::size_t size(std::string_view queue) {
    validate(queue, "size");
    return count(ready_collection(queue));
  }

  /// Number of jobs of `queue` that `consumer` holds (taken, not yet acked).
  /// @throws dlq::invalid_argument for a name the rule refuses; what the store throws.
  std::size_t held(std::string_view queue, std::string_view consumer) {
    validate(queue, consumer, "held");
    return count(held_collection(queue, consumer));
  }

  /// Takes up to `max` jobs (0 = 1) for `consumer`, oldest first. If the consumer still
  /// holds jobs (it died before acking them), returns those instead, oldest first. Returns
  /// nothing when the queue is empty (it does not wait). One atomic store call moves the
  /// jobs; jobs another consumer took in the meantime are skipped. With a store that has
  /// take_oldest (PostgresStore) it may also return nothing while the only ready jobs are
  /// being taken by other consumers; without it, after 16 rounds lost to other consumers.
  /// @throws dlq::invalid_argument for a refused queue name (dlq/queue_names.hpp) or an
  ///         empty consumer name; what the store throws.
  std::vector<Job> take(std::string_view queue, std::string_view consumer, std::size_t max = 1) {
    validate(queue, consumer, "take");
    if (max == 0) max = 1;
    const std::string held_coll = held_collection(queue, consumer);
    Window window;
    window.limit = max;
    std::vector<Item> mine = store_.list(held_coll, window);
    if (!mine.empty()) return jobs(std::move(mine));
    const std::string ready = ready_collection(queue);
    if constexpr (detail::has_take_oldest<Store>::value) {
      // The store skips the records other takers are moving (PostgreSQL's SKIP LOCKED):
      // one call, no retry. Empty only when every ready job is being taken by others.
      return jobs(store_.take_oldest(ready, held_coll, max));
    }
    // Another consumer may take the same window first; then move on to the next one. Bounded:
    // each round either takes something or sees jobs that someone else took.
    for (int round = 0; round < 16; ++round) {
      std::vector<Item> items = store_.list(ready, window);
      if (items.empty()) return {};
      std::vector<Removal> moves;
      moves.reserve(items.size());
      for (const Item& item : items)
        moves.push_back(Removal{ready, item.id, item.version, held_coll});
      if (store_.remove(moves) > 0) return jobs(store_.list(held_coll, window));
    }
    return {};
  }

  /// Acknowledges jobs `consumer` took and finished (done, or dead-lettered): removes them.
  /// Returns how many were removed (a job already acked or released is not counted).
  /// @throws dlq::invalid_argument for a refused queue name (dlq/queue_names.hpp) or an
  ///         empty consumer name; what the store throws.
  std::size_t ack(std::string_view queue, std::string_view consumer, const std::vector<Job>& done) {
    validate(queue, consumer, "ack");
    if (done.empty()) return 0;
    const std::string held_coll = held_collection(queue, consumer);
    std::vector<Removal> removals;
    removals.reserve(done.size());
    for (const Job& j : done)
      removals.push_back(Removal{held_coll, j.id, j.version, {}});
    return store_.remove(removals);
  }

  /// Removes and returns the oldest ready job (at-most-once: a worker that dies after pop()
  /// loses it); nullopt when the queue is empty.
  /// @throws dlq::invalid_argument for a refused queue name; what the store throws.
  std::optional<std::string> pop(std::string_view queue) {
    validate(queue, "pop");
    const std::string ready = ready_collection(queue);
    Window window;
    window.limit = 1;
    for (int round = 0; round < 64; ++round) {  // each round loses only to another consumer
      std::vector<Item> items = store_.list(ready, window);
      if (items.empty()) return std::nullopt;
      if (store_.remove({Removal{ready, items[0].id, items[0].version, {}}}) > 0)
        return std::move(items[0].value);
    }
    return std::nullopt;
  }

  /// Gives jobs `consumer` took back: moves them to the end of `queue`'s ready list. Returns
  /// how many were moved (a job already acked or released is not counted).
  /// @throws dlq::invalid_argument for a refused queue name (dlq/queue_names.hpp) or an
  ///         empty consumer name; what the store throws.
  std::size_t nack(std::string_view queue, std::string_view consumer,
                   const std::vector<Job>& jobs) {
    validate(queue, consumer, "nack");
    if (jobs.empty()) return 0;
    const std::string held_coll = held_collection(queue, consumer);
    const std::string ready = ready_collection(queue);
    std::vector<Removal> moves;
    moves.reserve(jobs.size());
    for (const Job& j : jobs)
      moves.push_back(Removal{held_coll, j.id, j.version, ready});
    return store_.remove(moves);
  }

  /// The source-queue interface's name of release() (dlq/source_queue.hpp).
  std::size_t recover(std::string_view queue, std::string_view consumer) {
    return release(queue, consumer);
  }

  /// The source-queue interface's name of held() (dlq/source_queue.hpp).
  std::size_t in_flight(std::string_view queue, std::string_view consumer) {
    return held(queue, consumer);
  }

  /// The consumers that hold jobs from `queue` (taken, not acked), sorted: the names to
  /// recover() when their workers are gone for good. Needs a store with the optional member
  /// `collections(prefix)` (PostgresStore; dlq/kv/store.hpp).
  /// @throws dlq::invalid_argument for an empty queue name; what the store throws.
  template <class S = Store>
  std::vector<std::string> consumers(std::string_view queue) {
    static_assert(detail::has_collections<S>::value,
                  "JobQueue::consumers needs a store with collections(prefix) (PostgresStore)");
    validate(queue, "consumers");
    const std::string prefix = held_collection(queue, "");
    std::vector<std::string> out;
    for (const std::string& coll : store_.collections(prefix))
      out.push_back(coll.substr(prefix.size()));
    return out;
  }

  /// Puts every job `consumer` holds back at the end of `queue`'s ready list (for a consumer
  /// that is gone for good). Returns how many were moved.
  /// @throws dlq::invalid_argument for a refused queue name (dlq/queue_names.hpp) or an
  ///         empty consumer name; what the store throws.
  std::size_t release(std::string_view queue, std::string_view consumer) {
    validate(queue, consumer, "release");
    const std::string held_coll = held_collection(queue, consumer);
    const std::string ready = ready_collection(queue);
    std::size_t moved = 0;
    Window window;
    window.limit = 1000;
    for (;;) {
      std::vector<Item> items = store_.list(held_coll, window);
      if (items.empty()) return moved;
      std::vector<Removal> moves;
      moves.reserve(items.size());
      for (const Item& item : items)
        moves.push_back(Removal{held_coll, item.id, item.version, ready});
      const std::size_t n = store_.remove(moves);
      moved += n;
      if (n == 0) return moved;  // someone else moved them (the same consumer name reused)
    }
  }

 private:
  // The name rule of every source queue (dlq/source_queue.hpp, dlq/queue_names.hpp).
  static void validate(std::string_view queue, const char* where) {
    dlq::detail::check_source_queue("jobs", queue, where);
  }
  static void validate(std::string_view queue, std::string_view consumer, const char* where) {
    dlq::detail::check_source_names("jobs", queue, consumer, where);
  }

  static std::string next_id() {
    static dlq::detail::id_generator generator;  // process-wide: ids increase
    return generator.next(std::chrono::system_clock::now());
  }

  static std::vector<Job> jobs(std::vector<Item> items) {
    std::vector<Job> out;
    out.reserve(items.size());
    for (Item& i : items)
      out.push_back(Job{std::move(i.id), std::move(i.value), i.version});
    return out;
  }

  std::size_t count(const std::string& coll) {
    if constexpr (detail::has_count<Store>::value) {
      return store_.count(coll);
    } else {
      return store_.list(coll, Window{}).size();
    }
  }

  Store store_;
  std::string prefix_;
};

}  // namespace kv
}  // namespace dlq
