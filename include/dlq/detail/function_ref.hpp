// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// A non-owning reference to a callable (like C++26 std::function_ref): no allocation, one
// indirect call. Accepts function objects (lambdas: the object must outlive the reference)
// and plain functions.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace dlq::detail {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
  union target {
    void* object;
    void (*function)();
  };

 public:
  /// From a function object (a lambda, a functor).
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, function_ref> &&
                                              !std::is_function_v<std::remove_reference_t<F>> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  function_ref(F&& f) noexcept  // NOLINT(google-explicit-constructor): implicit by design
      : call_([](target t, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(t.object))(std::forward<Args>(args)...);
        }) {
    target_.object = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
  }

  /// From a plain function.
  template <class F, class = std::enable_if_t<std::is_function_v<F> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  function_ref(F& f) noexcept  // NOLINT(google-explicit-constructor): implicit by design
      : call_([](target t, Args... args) -> R {
          return reinterpret_cast<F*>(t.function)(std::forward<Args>(args)...);
        }) {
    target_.function = reinterpret_cast<void (*)()>(&f);
  }

  R operator()(Args... args) const { return call_(target_, std::forward<Args>(args)...); }

 private:
  target target_{};
  R (*call_)(target, Args...);
};

}  // namespace dlq::detail
