// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/id-inl.hpp
/// The definitions of id.hpp's non-template functions (see DLQ_INLINE in
/// dlq/detail/compiled.hpp): included by id.hpp in header-only mode, compiled into the
/// library in compiled mode.
#pragma once

#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>

#include "dlq/detail/id.hpp"

#if defined(__linux__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/random.h>
#define DLQ_DETAIL_HAVE_GETENTROPY 1
#else
#include <random>
#endif

namespace dlq::detail {

DLQ_INLINE std::string id_generator::next(std::chrono::system_clock::time_point now) {
  const auto ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
  // (ms << 12 | sequence), strictly increasing: max(now, last + 1).
  const std::uint64_t floor = (ms & 0xFFFFFFFFFFFFull) << 12;
  std::uint64_t last = last_.load(std::memory_order_relaxed);
  std::uint64_t next_value = 0;
  do {
    next_value = floor > last ? floor : last + 1;
  } while (!last_.compare_exchange_weak(last, next_value, std::memory_order_relaxed));
  const std::uint64_t time_ms = next_value >> 12;
  const std::uint64_t seq = next_value & 0xFFF;
  const std::uint64_t rnd = random64();

  // Written into a buffer, then made a string at once: 8-4-4-4-12 hex digits.
  static constexpr char hex[] = "0123456789abcdef";
  char buf[36];
  const auto put = [&buf](int at, std::uint64_t v, int digits) {
    for (int i = digits - 1; i >= 0; --i)
      buf[at++] = hex[(v >> (i * 4)) & 0xF];
  };
  put(0, time_ms >> 16, 8);
  buf[8] = '-';
  put(9, time_ms & 0xFFFF, 4);
  buf[13] = '-';
  put(14, 0x7000 | seq, 4);
  buf[18] = '-';
  put(19, 0x8000 | ((rnd >> 48) & 0x3FFF), 4);
  buf[23] = '-';
  put(24, rnd & 0xFFFFFFFFFFFFull, 12);
  return std::string(buf, sizeof buf);
}

DLQ_INLINE std::uint64_t os_random64() {
  std::uint64_t v = 0;
#if defined(DLQ_DETAIL_HAVE_GETENTROPY)
  unsigned char bytes[sizeof v];
  bool got = ::getentropy(bytes, sizeof bytes) == 0;
  if (!got) {  // no getrandom system call (a kernel older than 3.17): the device itself
    const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      got = ::read(fd, bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes);
      ::close(fd);
    }
  }
  // (std::random_device throws too when it has no source)
  if (!got) throw std::runtime_error("dlq: no random source (getentropy, /dev/urandom)");
  std::memcpy(&v, bytes, sizeof v);
#else
  std::random_device rd;
  v = (std::uint64_t{rd()} << 32) ^ rd();
#endif
  return v;
}

DLQ_INLINE std::uint64_t id_generator::random64() {
  thread_local std::uint64_t state = 0;
  thread_local unsigned seeded_generation = ~0u;
  const unsigned generation = fork_generation().load(std::memory_order_relaxed);
  if (seeded_generation != generation) {
    seeded_generation = generation;
    state = os_random64();
    state ^= std::hash<std::thread::id>{}(std::this_thread::get_id());
    state ^=
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#if defined(DLQ_DETAIL_HAVE_ATFORK)
    state ^= static_cast<std::uint64_t>(::getpid()) << 40;
#endif
  }
  return splitmix64(state);
}

}  // namespace dlq::detail
