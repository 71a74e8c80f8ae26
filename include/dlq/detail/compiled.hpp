// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/compiled.hpp
/// DLQ_OUT_OF_LINE marks the public members of dlq's class templates that a user's code
/// calls. It is empty in header-only mode (the default). In compiled mode (CMake
/// DLQ_COMPILED=ON, which defines DLQ_COMPILED_LIB) it is `noinline` on GCC and Clang: when
/// optimizing, both compilers instantiate the inline members of an `extern template`
/// specialization anyway (to consider them for inlining), which would compile the whole
/// front end again in every translation unit; a member that cannot be inlined is not
/// instantiated, so the call goes to the library's copy.
#pragma once

#if defined(DLQ_COMPILED_LIB) && (defined(__GNUC__) || defined(__clang__))
#define DLQ_OUT_OF_LINE __attribute__((noinline))
#else
#define DLQ_OUT_OF_LINE
#endif

/// DLQ_INLINE marks the definitions of dlq's non-template functions that live in the
/// `*-inl.hpp` files next to their headers (the pattern of spdlog's compiled library).
/// Header-only mode (the default): each header includes its `-inl.hpp` at its end and the
/// definitions are `inline`. Compiled mode (DLQ_COMPILED_LIB): the headers carry the
/// declarations only, so a user's translation unit neither parses nor instantiates what those
/// functions use; the library's sources (src/*.cpp) include the `-inl.hpp` files once and
/// compile the definitions. Never include a `-inl.hpp` file in compiled mode yourself.
#if defined(DLQ_COMPILED_LIB)
#define DLQ_INLINE
#else
#define DLQ_INLINE inline
#define DLQ_HEADER_ONLY 1
#endif

/// DLQ_REDIS_INLINE: DLQ_INLINE for the Redis backend's definitions (dlq/redis/*-inl.hpp),
/// compiled into dlq::redis in compiled mode (DLQ_COMPILED_REDIS).
#if defined(DLQ_COMPILED_REDIS)
#define DLQ_REDIS_INLINE
#else
#define DLQ_REDIS_INLINE inline
#define DLQ_REDIS_HEADER_ONLY 1
#endif
