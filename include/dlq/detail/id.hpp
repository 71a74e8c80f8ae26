// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// Entry ids.
// - New entries get a UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a 12-bit sequence,
//   then 62 random bits. Ids from one process are strictly increasing even across threads
//   (a lock-free counter carries the millisecond and sequence), so sorting ids sorts entries
//   by the time they were dead-lettered; ids from different processes are unique by the
//   random bits.
// - Entries stored without an id (written by the Python seed) get one derived from their
//   bytes, "raw-" + 16 hex digits of a 64-bit FNV-1a hash, so that every entry can be
//   addressed. Byte-identical entries share that id; removing or replaying by it takes one
//   of them, which is indistinguishable from the other.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlq/detail/compiled.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <unistd.h>
#define DLQ_DETAIL_HAVE_ATFORK 1
#endif

namespace dlq::detail {

inline void append_hex(std::string& out, std::uint64_t v, int digits) {
  static constexpr char hex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i)
    out.push_back(hex[(v >> (i * 4)) & 0xF]);
}

/// 64-bit FNV-1a.
inline std::uint64_t fnv1a64(std::string_view bytes) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

/// True when `text` is a UUID in canonical form (8-4-4-4-12 hex digits), as ids dlq writes.
inline bool is_canonical_uuid(std::string_view text) noexcept {
  if (text.size() != 36) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

/// True when `id` is stored verbatim in an entry's bytes (plain characters, not a derived
/// "raw-" id), so that a search may skip the items that do not contain it. A derived id or
/// one with characters JSON may escape must be compared after reading each item's id.
inline bool id_stored_verbatim(std::string_view id) noexcept {
  if (id.rfind("raw-", 0) == 0) return false;
  for (const char c : id) {
    const bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '-' || c == '_' || c == '.';
    if (!plain) return false;
  }
  return true;
}

/// The id of an entry stored without one: derived from its exact bytes.
inline std::string derived_id(std::string_view raw) {
  std::string id = "raw-";
  append_hex(id, fnv1a64(raw), 16);
  return id;
}

inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Counts fork()s, so that a forked child reseeds its random state instead of repeating the
/// parent's random bits (prefork servers would otherwise mint identical ids).
inline std::atomic<unsigned>& fork_generation() noexcept {
  static std::atomic<unsigned> generation{0};
#if defined(DLQ_DETAIL_HAVE_ATFORK)
  static const int registered = pthread_atfork(
      nullptr, nullptr, [] { fork_generation().fetch_add(1, std::memory_order_relaxed); });
  (void)registered;
#endif
  return generation;
}

/// 64 bits from the operating system's random source (getentropy() where there is one, else
/// /dev/urandom, else std::random_device): what seeds the random bits of ids and other
/// per-process random state. Without <random>, whose distributions every unit that includes
/// dlq compiled for one std::random_device.
std::uint64_t os_random64();

/// Generates UUIDv7 ids; thread-safe and lock-free.
class id_generator {
 public:
  /// A new id for an entry dead-lettered at `now`.
  std::string next(std::chrono::system_clock::time_point now);

 private:
  static std::uint64_t random64();

  std::atomic<std::uint64_t> last_{0};
};

}  // namespace dlq::detail

#if defined(DLQ_HEADER_ONLY)
#include "dlq/detail/id-inl.hpp"
#endif
