// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A non-owning reference to a callable (like C++26 std::function_ref): no allocation, one
// indirect call. The referenced callable must outlive the function_ref.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace dlq::detail {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, function_ref> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): implicit by design
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace dlq::detail
