// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file kv/detail/in_flight.hpp
/// The records a replay step of dlq::KeyValueStorage is pushing right now, so that remove(id)
/// and purge of the same adapter (or a copy) wait for the step instead of deleting a record
/// whose payload is being pushed.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlq/kv/store.hpp"

namespace dlq {
namespace kv {
namespace detail {

/// The records one replay step holds (one step at a time per adapter: its replay lock), and
/// the thread running it. remove and purge take lock(), look with held / holds_any, and
/// wait() for the step to let its records go — unless they run on the step's own thread
/// (inside the sink), where waiting would deadlock.
class in_flight {
 public:
  /// The lock remove and purge hold while they decide and apply (a step cannot start
  /// holding records meanwhile).
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }

  /// Under lock(): true when the record `id` of `collection` is being pushed.
  bool held(std::string_view collection, std::string_view id) const {
    return !records_.empty() && records_.find(key(collection, id)) != records_.end();
  }

  /// Under lock(): true when any record of `collection` is being pushed.
  bool holds_any(std::string_view collection) const {
    const std::string prefix = key(collection, {});
    auto it = records_.lower_bound(prefix);
    return it != records_.end() && it->compare(0, prefix.size(), prefix) == 0;
  }

  /// Under lock(): true when the calling thread is the one running the step (a remove or
  /// purge from inside the sink).
  bool on_step_thread() const { return step_thread_ == std::this_thread::get_id(); }

  /// Under lock(): waits until a step lets its records go.
  void wait(std::unique_lock<std::mutex>& lock) { done_.wait(lock); }

  /// Holds a replay step's records (its removals, all of `collection`) for its lifetime.
  class hold {
   public:
    hold(in_flight& f, std::string_view collection, const std::vector<Removal>& removals) : f_(f) {
      if (removals.empty()) return;
      std::lock_guard<std::mutex> lock(f_.mutex_);
      for (const Removal& r : removals)
        f_.records_.insert(key(collection, r.id));
      f_.step_thread_ = std::this_thread::get_id();
      active_ = true;
    }
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() {
      if (!active_) return;
      {
        std::lock_guard<std::mutex> lock(f_.mutex_);
        f_.records_.clear();  // one step at a time: all of them are this step's
        f_.step_thread_ = std::thread::id();
      }
      f_.done_.notify_all();
    }

   private:
    in_flight& f_;
    bool active_ = false;
  };

 private:
  static std::string key(std::string_view collection, std::string_view id) {
    std::string k;
    k.reserve(collection.size() + 1 + id.size());
    k.append(collection).push_back('\0');
    k.append(id);
    return k;
  }

  std::mutex mutex_;              // guards records_ and step_thread_
  std::condition_variable done_;  // notified when a step lets its records go
  std::set<std::string, std::less<>> records_;
  std::thread::id step_thread_;
};

}  // namespace detail
}  // namespace kv
}  // namespace dlq
