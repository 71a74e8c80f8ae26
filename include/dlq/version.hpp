// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file version.hpp
/// The library version. CMake reads it from here; it is stated nowhere else.
#pragma once

#define DLQ_VERSION_MAJOR 0
#define DLQ_VERSION_MINOR 2
#define DLQ_VERSION_PATCH 0

/// The version as one number: major * 10000 + minor * 100 + patch.
#define DLQ_VERSION (DLQ_VERSION_MAJOR * 10000 + DLQ_VERSION_MINOR * 100 + DLQ_VERSION_PATCH)
