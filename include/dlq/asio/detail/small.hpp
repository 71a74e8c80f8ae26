// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file asio/detail/small.hpp
/// Internal to dlq::asio: allocation-free containers for the hot path — a move-only callable
/// with inline storage (no allocation for a callable of up to `Inline` bytes) and a FIFO ring
/// buffer. Not part of the API.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace dlq::asio::detail {

template <class Sig, std::size_t Inline = 64>
class unique_fn;

/// A move-only std::function: callables of up to `Inline` bytes (nothrow movable) live in
/// the object itself, larger ones on the heap.
template <class R, class... A, std::size_t Inline>
class unique_fn<R(A...), Inline> {
 public:
  unique_fn() noexcept = default;
  template <
      class F, class D = std::decay_t<F>,
      class = std::enable_if_t<!std::is_same_v<D, unique_fn> && std::is_invocable_v<D&, A...>>>
  unique_fn(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    if constexpr (fits<D>()) {
      obj_ = ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
      vt_ = &inline_vt<D>;
    } else {
      obj_ = new D(std::forward<F>(f));
      vt_ = &heap_vt<D>;
    }
  }
  unique_fn(unique_fn&& o) noexcept { take(o); }
  unique_fn& operator=(unique_fn&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  unique_fn(const unique_fn&) = delete;
  unique_fn& operator=(const unique_fn&) = delete;
  ~unique_fn() { reset(); }

  explicit operator bool() const noexcept { return vt_ != nullptr; }
  R operator()(A... a) { return vt_->call(obj_, std::forward<A>(a)...); }
  void reset() noexcept {
    if (vt_ != nullptr) vt_->destroy(obj_);
    vt_ = nullptr;
    obj_ = nullptr;
  }

 private:
  struct vtable {
    R (*call)(void*, A&&...);
    void (*move_to)(void* from, void* to);  // null: on the heap, the pointer moves
    void (*destroy)(void*) noexcept;
  };
  template <class D>
  static constexpr bool fits() {
    return sizeof(D) <= Inline && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }
  template <class D>
  static R call_of(void* p, A&&... a) {
    return (*static_cast<D*>(p))(std::forward<A>(a)...);
  }
  template <class D>
  static void move_of(void* from, void* to) {
    ::new (to) D(std::move(*static_cast<D*>(from)));
    static_cast<D*>(from)->~D();
  }
  template <class D>
  static void destroy_inline(void* p) noexcept {
    static_cast<D*>(p)->~D();
  }
  template <class D>
  static void destroy_heap(void* p) noexcept {
    delete static_cast<D*>(p);
  }
  template <class D>
  static constexpr vtable inline_vt{&call_of<D>, &move_of<D>, &destroy_inline<D>};
  template <class D>
  static constexpr vtable heap_vt{&call_of<D>, nullptr, &destroy_heap<D>};

  void take(unique_fn& o) noexcept {
    vt_ = o.vt_;
    if (vt_ == nullptr) return;
    if (vt_->move_to == nullptr) {
      obj_ = o.obj_;
    } else {
      obj_ = buf_;
      vt_->move_to(o.obj_, buf_);
    }
    o.vt_ = nullptr;
    o.obj_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char buf_[Inline];
  const vtable* vt_ = nullptr;
  void* obj_ = nullptr;
};

/// A FIFO on a power-of-two ring of slots, grown by doubling; popped slots are reset.
template <class T>
class ring {
 public:
  ring() = default;
  ring(ring&& o) noexcept : slots_(std::move(o.slots_)), head_(o.head_), count_(o.count_) {
    o.slots_.clear();
    o.head_ = o.count_ = 0;
  }
  ring& operator=(ring&& o) noexcept {
    if (this != &o) {
      slots_ = std::move(o.slots_);
      head_ = o.head_;
      count_ = o.count_;
      o.slots_.clear();
      o.head_ = o.count_ = 0;
    }
    return *this;
  }
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  T& front() noexcept { return slots_[head_]; }
  T& back() noexcept { return (*this)[count_ - 1]; }
  T& operator[](std::size_t i) noexcept { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  void push_back(T&& v) {
    if (count_ == slots_.size()) grow();
    (*this)[count_] = std::move(v);
    ++count_;
  }
  T pop_front() {
    T v = std::move(slots_[head_]);
    slots_[head_] = T();
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
    return v;
  }
  void clear() {
    while (!empty())
      pop_front();
    head_ = 0;
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i)
      bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<T> slots_;
  std::size_t head_ = 0, count_ = 0;
};

}  // namespace dlq::asio::detail
