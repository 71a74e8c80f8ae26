// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file health_probe.hpp
/// One reachability probe for many /healthz requests (Console): a request that comes while a
/// probe runs waits for that probe's answer, and one that comes within `reuse` after a probe
/// failed takes that failure, instead of sending its own probe. A success is not reused: a
/// store that goes down shows at the next request. Why: against a frozen store (a
/// SIGSTOPped Redis) each probe hangs for the store's timeout; 16 probes at once were
/// answered after 5, 10, 15 and 20 s, each holding a worker. Now an answer comes within the
/// probe running when it came plus at most one more. No I/O of its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace dlq::http::detail {

/// Shares probes between concurrent callers (see the file comment). Thread-safe.
class HealthProbe {
 public:
  explicit HealthProbe(std::chrono::milliseconds reuse = std::chrono::milliseconds(1000))
      : reuse_(reuse) {}

  /// Runs `probe` (it throws when the store is unreachable), or waits for the probe another
  /// caller runs, or takes the failure of one that failed less than `reuse` ago. Returns the
  /// probe's failure (nullptr: reachable).
  std::exception_ptr check(const std::function<void()>& probe) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (running_) {
      const unsigned long long round = round_;
      done_.wait(lock, [&] { return round_ != round; });
      return last_;
    }
    if (last_ && now - ended_ < reuse_) return last_;
    running_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      probe();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    last_ = failure;
    ended_ = std::chrono::steady_clock::now();
    running_ = false;
    ++round_;
    done_.notify_all();
    return failure;
  }

 private:
  std::chrono::milliseconds reuse_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool running_ = false;
  unsigned long long round_ = 0;  // probes ended
  std::exception_ptr last_;
  std::chrono::steady_clock::time_point ended_;
};

}  // namespace dlq::http::detail
