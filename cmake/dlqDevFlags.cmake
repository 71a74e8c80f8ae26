# Flags for dlq's own tests, examples and benchmarks. Applied per target by these functions;
# never to the library targets, never to a consumer's build.
include_guard(GLOBAL)

set(DLQ_SANITIZE "" CACHE STRING
    "Sanitizers for dlq's tests and examples, e.g. address,undefined (empty: none)")
option(DLQ_WERROR "Treat warnings as errors in dlq's tests and examples" ON)

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
