// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file health_probe.hpp
/// One read of the store for many requests at once (Console: /healthz and /metrics): a
/// request that comes while a read runs waits for that read's answer, and one that comes
/// within `reuse` after a read failed takes that failure, instead of sending its own read. A
/// success is not reused: a store that goes down shows at the next request. Why: against a
/// frozen store (a SIGSTOPped Redis) each read hangs for the store's timeout; 16 /healthz at
/// once were answered after 5, 10, 15 and 20 s, and 8 /metrics after 2 and 4 s with a 2 s
/// timeout, each holding a worker. Now an answer comes within the read running when it came
/// plus at most one more. No I/O of its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>

namespace dlq::http::detail {

/// Shares reads between concurrent callers (see the file comment). Thread-safe. `Result`:
/// what a read returns (copied to every caller that shared it).
template <class Result>
class SharedRead {
 public:
  /// What a caller gets: the read's failure (nullptr: it succeeded) and, on success, its
  /// result.
  struct Outcome {
    std::exception_ptr failure;
    Result result{};
  };

  explicit SharedRead(std::chrono::milliseconds reuse = std::chrono::milliseconds(1000))
      : reuse_(reuse) {}

  /// Runs `read` (it throws when the store does not answer), or waits for the read another
  /// caller runs, or takes the failure of one that failed less than `reuse` ago.
  Outcome run(const std::function<Result()>& read) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (running_) {
      const unsigned long long round = round_;
      done_.wait(lock, [&] { return round_ != round; });
      return last_;
    }
    if (last_.failure && now - ended_ < reuse_) return last_;
    running_ = true;
    lock.unlock();
    Outcome got;
    try {
      got.result = read();
    } catch (...) {
      got.failure = std::current_exception();
    }
    lock.lock();
    last_ = got;
    ended_ = std::chrono::steady_clock::now();
    running_ = false;
    ++round_;
    done_.notify_all();
    return got;
  }

 private:
  std::chrono::milliseconds reuse_;
  std::mutex mutex_;
  std::condition_variable done_;
  bool running_ = false;
  unsigned long long round_ = 0;  // reads ended
  Outcome last_;
  std::chrono::steady_clock::time_point ended_;
};

/// The reachability probe of /healthz: a SharedRead without a result. Thread-safe.
class HealthProbe {
 public:
  explicit HealthProbe(std::chrono::milliseconds reuse = std::chrono::milliseconds(1000))
      : shared_(reuse) {}

  /// Runs `probe` (it throws when the store is unreachable), or shares another caller's (see
  /// SharedRead::run). Returns the probe's failure (nullptr: reachable).
  std::exception_ptr check(const std::function<void()>& probe) {
    return shared_
        .run([&] {
          probe();
          return true;
        })
        .failure;
  }

 private:
  SharedRead<bool> shared_;
};

}  // namespace dlq::http::detail
