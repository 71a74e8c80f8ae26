// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// The detection idiom (Library Fundamentals TS v2, std::experimental::is_detected; the same
// shape as nlohmann/json's detail/meta/detected.hpp): whether an expression, written once as
// an alias template `Op<Args...>`, is well-formed, and what type it has. The storage contracts
// (dlq/storage.hpp, dlq/kv/store.hpp) state each member they check as one such alias.
#pragma once

#include <type_traits>

namespace dlq::detail::meta {

/// The type detected_t names when the expression is ill-formed: it converts to nothing.
struct nonesuch {
  nonesuch() = delete;
  ~nonesuch() = delete;
  nonesuch(const nonesuch&) = delete;
  void operator=(const nonesuch&) = delete;
};

template <class Default, class AlwaysVoid, template <class...> class Op, class... Args>
struct detector {
  using value_t = std::false_type;
  using type = Default;
};

template <class Default, template <class...> class Op, class... Args>
struct detector<Default, std::void_t<Op<Args...>>, Op, Args...> {
  using value_t = std::true_type;
  using type = Op<Args...>;
};

/// std::true_type when `Op<Args...>` is well-formed, else std::false_type.
template <template <class...> class Op, class... Args>
using is_detected = typename detector<nonesuch, void, Op, Args...>::value_t;

/// `Op<Args...>` when it is well-formed, else nonesuch.
template <template <class...> class Op, class... Args>
using detected_t = typename detector<nonesuch, void, Op, Args...>::type;

/// std::true_type when `Op<Args...>` is well-formed and its type converts to `To`.
template <class To, template <class...> class Op, class... Args>
using is_detected_convertible = std::is_convertible<detected_t<Op, Args...>, To>;

}  // namespace dlq::detail::meta
