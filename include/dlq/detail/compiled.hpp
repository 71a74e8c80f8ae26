// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file detail/compiled.hpp
/// DLQ_MEMBER_INLINE marks the definitions of the members of dlq's class templates that a
/// user's code calls (DeadLetterQueue's public members, KeyValueStorage's constructor), which
/// live below their class, not in its body. Header-only mode (the default): `inline`, the
/// same code as a definition in the class body. Compiled mode (CMake DLQ_COMPILED=ON, which
/// defines DLQ_COMPILED_LIB): empty. GCC instantiates an inline member of an `extern
/// template` specialization that a unit calls (at every -O level, `noinline` or not; it only
/// does not emit it), which compiles the member's body, and the nlohmann code it uses, again
/// in every translation unit; a member that is not inline is left to the library's explicit
/// instantiation (GCC and Clang). A specialization the library does not instantiate (over a
/// user's own storage) is instantiated where it is used, as any template.
#pragma once

#if defined(DLQ_COMPILED_LIB)
#define DLQ_MEMBER_INLINE
#else
#define DLQ_MEMBER_INLINE inline
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

/// DLQ_SQLITE_INLINE: DLQ_INLINE for the SQLite backend's definitions (dlq/sqlite/*-inl.hpp),
/// compiled into dlq::sqlite in compiled mode (DLQ_COMPILED_SQLITE).
#if defined(DLQ_COMPILED_SQLITE)
#define DLQ_SQLITE_INLINE
#else
#define DLQ_SQLITE_INLINE inline
#define DLQ_SQLITE_HEADER_ONLY 1
#endif
