# Flags for dlq's own tests, examples and benchmarks. Applied per target by these functions;
# never to the library targets, never to a consumer's build.
include_guard(GLOBAL)

set(DLQ_SANITIZE "" CACHE STRING
    "Sanitizers for dlq's tests and examples, e.g. address,undefined (empty: none)")
option(DLQ_WERROR "Treat warnings as errors in dlq's tests and examples" ON)

# Targets that only prove they compile (no test runs them): the header self-containment
# objects (tests/headers) and the benchmarks without a smoke test. All of them are in the
# target dlq_compile_checks. With DLQ_COMPILE_CHECKS_LATER=ON they leave the default build:
# scripts/test.sh (gcc-17) sets it and builds dlq_compile_checks while that configuration's
# tests run, at nice 19, in the CPU they leave idle (docs/contributing.md, "How long CI takes").
option(DLQ_COMPILE_CHECKS_LATER "Leave the compile-only targets out of the default build (target dlq_compile_checks)" OFF)
mark_as_advanced(DLQ_COMPILE_CHECKS_LATER)
add_custom_target(dlq_compile_checks)
function(dlq_compile_check target)
  if(DLQ_COMPILE_CHECKS_LATER)
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  add_dependencies(dlq_compile_checks ${target})
endfunction()

function(dlq_dev_target target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${DLQ_WERROR}>:/WX>)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                             -Wno-sign-conversion $<$<BOOL:${DLQ_WERROR}>:-Werror>)
  endif()
  if(DLQ_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${DLQ_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${DLQ_SANITIZE})
  endif()
endfunction()

# Sets DLQ_ASIO_CO_AWAIT (cached) to whether Asio offers co_await with this compiler in
# C++20 (ASIO_HAS_CO_AWAIT: g++ 12 yes; clang 14 with Asio 1.22 no). The coroutine tests and
# examples build only where it does. Needs the dlq::asio target.
function(dlq_check_asio_co_await)
  include(CheckCXXSourceCompiles)
  # The check compiles as C++20 whatever the build's CMAKE_CXX_STANDARD (try_compile follows
  # it, and scripts/test.sh sets 17: with only -std=c++20 in the flags the check failed there,
  # so the coroutine example and tests were never built in that configuration).
  set(CMAKE_CXX_STANDARD 20)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  set(CMAKE_CXX_EXTENSIONS OFF)
  get_target_property(CMAKE_REQUIRED_INCLUDES dlq_asio_headers INTERFACE_INCLUDE_DIRECTORIES)
  set(CMAKE_REQUIRED_DEFINITIONS -DASIO_STANDALONE)
  check_cxx_source_compiles("#include <asio/awaitable.hpp>
#if !defined(ASIO_HAS_CO_AWAIT)
#error no co_await in Asio
#endif
int main() { return 0; }" DLQ_ASIO_CO_AWAIT)
endfunction()
