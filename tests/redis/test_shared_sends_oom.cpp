// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// ConnectionPool::run_shared when an allocation fails while a batch's outcome is handed back
// to its callers: the exception reaches the caller, and the pool keeps working — no batch
// slot stays taken, no caller is left waiting, no call stays queued after its caller left.
//
// This binary replaces the global operator new: it fails one chosen allocation (the k-th of a
// given size, on the arming thread) and is otherwise malloc.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "dlq/redis/pool.hpp"
#include "support/catch.hpp"
#include "support/redis_process.hpp"

namespace {
thread_local bool fail_armed = false;
thread_local std::size_t fail_size = 0;
thread_local int fail_skip = 0;

// Arms the failure of the (skip + 1)-th allocation of exactly `size` bytes on this thread.
void arm_failure(std::size_t size, int skip) {
  fail_size = size;
  fail_skip = skip;
  fail_armed = true;
}
void disarm_failure() {
  fail_armed = false;
}
}  // namespace

// The replacements below pair operator new with malloc and operator delete with free. When
// g++ 12 at -O2/-O3 inlines a `new` of the library into one of these `delete`s it sees
// `free` called on what `operator new` returned and warns (-Wmismatched-new-delete, a false
// positive for replaced global allocation functions). The pairs here match.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (fail_armed && n == fail_size && fail_skip-- == 0) {
    fail_armed = false;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

using namespace dlq;
using dlq::test::RedisProcess;
using std::chrono::milliseconds;

TEST_CASE(
    "shared sends: an allocation failing while a failure is handed back leaves the pool "
    "working",
    "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = redis::parse_url(server.url());
  o.connect_timeout = milliseconds(200);
  o.command_timeout = milliseconds(200);
  o.reconnect_attempts = 1;
  o.reconnect_backoff = milliseconds(5);
  redis::PoolOptions po;
  po.size = 2;
  po.send_batches = 1;  // one slot: a slot left taken stops every later send
  // Leaked on purpose when a send hangs: the hung thread still uses it.
  auto* pool = new redis::ConnectionPool(o, po);
  auto rpush = [](const std::string& v) {
    redis::Command c("RPUSH");
    c.arg("oom-list").arg_copy(v);
    return c;
  };
  pool->run_shared(rpush("warm-up"), redis::Effect::write);
  // A frozen server: the RPUSH times out, and hiredis describes that with strerror(EAGAIN);
  // copying that text is an allocation of its length + 1 bytes.
  const std::size_t text = std::strlen(std::strerror(EAGAIN)) + 1;
  REQUIRE(text > 16);  // beyond the small-string buffer: copying it allocates
  bool hung = false;
  for (int skip = 0; skip < 4 && !hung; ++skip) {
    CAPTURE(skip);
    server.freeze();
    const redis::Command c = rpush("frozen-" + std::to_string(skip));
    arm_failure(text, skip);
    try {
      pool->run_shared(c, redis::Effect::write);
      FAIL("a frozen server answered");
    } catch (const std::bad_alloc&) {      // the injected failure, reported to its caller
    } catch (const dlq::timeout_error&) {  // the injection hit nothing of the hand-back
    }
    disarm_failure();
    server.thaw();
    // The next send must go through: nothing of the failed batch may be left behind.
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread next([pool, done, rpush] {
      try {
        pool->run_shared(rpush("after"), redis::Effect::write);
      } catch (...) {
      }
      *done = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    while (!*done && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
      std::this_thread::sleep_for(milliseconds(10));
    if (*done) {
      next.join();
    } else {
      hung = true;
      next.detach();  // it waits forever on `pool`, which is never destroyed
    }
    CHECK_FALSE(hung);
  }
  if (!hung) delete pool;
}

TEST_CASE(
    "shared sends: an allocation failing after a batch was written leaves no reply behind "
    "for the next batch on that connection",
    "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = redis::parse_url(server.url());
  o.command_timeout = milliseconds(2000);
  redis::PoolOptions po;
  po.size = 1;  // the next batch uses the same connection
  po.send_batches = 1;
  redis::ConnectionPool pool(o, po);
  auto slow = [] {  // answered (nil) only after 300 ms: after the next batch was written
    redis::Command c("BLPOP");
    c.arg("oom-absent").arg("0.3");
    return c;
  };
  pool.run_shared(slow(), redis::Effect::write);  // warm-up: connected, buffers sized
  for (int skip = 0; skip < 4; ++skip) {
    CAPTURE(skip);
    const redis::Command c = slow();
    // The replies vector of a one-command batch: one allocation of sizeof(Reply) bytes.
    arm_failure(sizeof(redis::Reply), skip);
    try {
      pool.run_shared(c, redis::Effect::write);
    } catch (const std::bad_alloc&) {
    }
    disarm_failure();
    redis::Command echo("ECHO");
    echo.arg_copy("token-" + std::to_string(skip));
    const redis::Reply r = pool.run_shared(echo, redis::Effect::read);
    REQUIRE(r->type == REDIS_REPLY_STRING);  // its own answer, not the BLPOP's nil
    CHECK(redis::view(*r) == "token-" + std::to_string(skip));
    std::this_thread::sleep_for(milliseconds(350));  // any BLPOP answer has come by now
  }
}

#if defined(__GLIBCXX__)
TEST_CASE(
    "shared sends: an allocation failing while a batch's failure is recorded leaves the "
    "commands answered before it their answers",
    "[redis][shared_sends][faults]") {
  RedisProcess server;
  auto o = redis::parse_url(server.url());
  o.command_timeout = milliseconds(300);
  redis::PoolOptions po;
  po.size = 2;
  po.send_batches = 1;
  redis::ConnectionPool pool(o, po);
  auto blpop = [](const char* seconds) {
    redis::Command c("BLPOP");
    c.arg("oom-absent").arg(seconds);
    return c;
  };
  pool.run_shared(blpop("0.01"), redis::Effect::read);  // connected, buffers sized
  // The shared failure record of a batch: one make_shared<IoFailure> allocation.
  const std::size_t record = sizeof(
      std::_Sp_counted_ptr_inplace<redis::detail::IoFailure,
                                   std::allocator<redis::detail::IoFailure>, __gnu_cxx::_S_atomic>);
  // F's lone BLPOP is on the wire (answered after 150 ms) while A's RPUSH and then B's
  // BLPOP (answered after 1 s) queue; F, its batch answered, sends [A, B]: A is answered,
  // B times out, and recording that failure fails to allocate (on F's thread).
  std::thread f([&] {
    const redis::Command c = blpop("0.15");
    arm_failure(record, 0);
    try {
      pool.run_shared(c, redis::Effect::read);
    } catch (...) {
    }
    disarm_failure();
  });
  std::this_thread::sleep_for(milliseconds(50));
  std::atomic<int> a_outcome{0};  // 1 answered, 2 outcome unknown, 3 other dlq error, 4 bad_alloc
  long long a_length = -1;
  std::thread a([&] {
    redis::Command c("RPUSH");
    c.arg("oom-list2").arg("x");
    try {
      const redis::Reply r = pool.run_shared(c, redis::Effect::write);
      a_length = r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
      a_outcome = 1;
    } catch (const dlq::storage_error& e) {
      a_outcome = e.outcome_unknown() ? 2 : 3;
    } catch (const std::bad_alloc&) {
      a_outcome = 4;
    }
  });
  std::this_thread::sleep_for(milliseconds(30));
  std::thread b([&] {
    try {
      pool.run_shared(blpop("1"), redis::Effect::read);
    } catch (...) {
    }
  });
  f.join();
  a.join();
  b.join();
  redis::Command llen("LLEN");
  llen.arg("oom-list2");
  const redis::Reply n = pool.run_shared(llen, redis::Effect::read);
  REQUIRE(n->type == REDIS_REPLY_INTEGER);
  REQUIRE(n->integer == 1);  // A's RPUSH ran and was answered
  CHECK(a_outcome == 1);     // so A gets that answer, not the sender's allocation failure
  CHECK(a_length == 1);
}
#endif
