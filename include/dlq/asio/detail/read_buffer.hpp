// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/read_buffer.hpp
/// Internal to dlq::asio: the input buffer of a dlq::asio::RedisConnection — bytes read and
/// not parsed yet, one allocation reused, grown for a big reply without trusting its
/// announced length. Not part of the API.
#pragma once

#include <asio/buffer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

namespace dlq::asio::detail {

/// Bytes [data(), data() + size()) read and not parsed yet; prepare() gives the room for
/// the next read, commit() adds what it read, consume() drops what was parsed.
class read_buffer {
 public:
  /// At least this many bytes, from data(), are needed before the incomplete reply at the
  /// front is worth parsing again (a hint from the parser; 0: none).
  std::size_t need = 0;

  const char* data() const noexcept { return in_.get() + begin_; }
  std::size_t size() const noexcept { return end_ - begin_; }

  /// Room for 16 KB more, or for the incomplete reply's announced length (`need`) — grown
  /// by doubling at most, so that a length announced by a hostile server is not allocated
  /// before its bytes arrive. Moves the unparsed bytes to the front, or into a bigger
  /// allocation, first: call it only while no read into the previous room is in flight.
  ::asio::mutable_buffer prepare() {
    if (begin_ == end_) begin_ = end_ = 0;
    const std::size_t have = end_ - begin_;
    std::size_t want = have + 16384;
    if (need > want) want = std::min(need, std::max(want, have * 2));
    if (cap_ - begin_ < want) {
      if (cap_ >= want) {  // room at the front
        std::memmove(in_.get(), in_.get() + begin_, end_ - begin_);
      } else {
        const std::size_t cap = std::max(want, cap_ * 2);
        std::unique_ptr<char[]> bigger(new char[cap]);
        if (end_ > begin_) std::memcpy(bigger.get(), in_.get() + begin_, end_ - begin_);
        in_ = std::move(bigger);
        cap_ = cap;
      }
      end_ -= begin_;
      begin_ = 0;
    }
    return ::asio::buffer(in_.get() + end_, cap_ - end_);
  }

  /// `n` bytes were read into the room prepare() gave.
  void commit(std::size_t n) noexcept { end_ += n; }
  /// `n` bytes at the front were parsed.
  void consume(std::size_t n) noexcept { begin_ += n; }
  /// Forgets every byte (a new connection).
  void clear() noexcept { begin_ = end_ = need = 0; }

 private:
  std::unique_ptr<char[]> in_;
  std::size_t cap_ = 0, begin_ = 0, end_ = 0;
};

}  // namespace dlq::asio::detail
