# Locates standalone Asio (header-only, `asio.hpp`; Debian: libasio-dev, 1.22) and provides
# the imported target `dlq_asio_headers` (defines ASIO_STANDALONE; dlq's headers also compile
# with ASIO_NO_DEPRECATED, which is left to the application). Asio 1.22 or later is required
# (any_io_executor, asio::async_initiate, C++20 awaitables). Used by dlq's CMakeLists.txt and
# dlqConfig.cmake.
include_guard(GLOBAL)

function(_dlq_find_asio)
  if(TARGET dlq_asio_headers)
    return()
  endif()
  find_path(DLQ_ASIO_INCLUDE_DIR NAMES asio.hpp asio/version.hpp DOC "standalone Asio headers")
  if(NOT DLQ_ASIO_INCLUDE_DIR OR NOT EXISTS "${DLQ_ASIO_INCLUDE_DIR}/asio/version.hpp")
    return()
  endif()
  file(STRINGS "${DLQ_ASIO_INCLUDE_DIR}/asio/version.hpp" _line
       REGEX "^#define ASIO_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+" _v "${_line}")
  if(NOT _v OR _v LESS 102200)
    set(DLQ_ASIO_TOO_OLD "${_v}" PARENT_SCOPE)
    return()
  endif()
  add_library(dlq_asio_headers INTERFACE IMPORTED GLOBAL)
  set_target_properties(dlq_asio_headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${DLQ_ASIO_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "ASIO_STANDALONE")
endfunction()

_dlq_find_asio()
if(TARGET dlq_asio_headers)
  set(dlq_asio_FOUND TRUE)
else()
  set(dlq_asio_FOUND FALSE)
endif()
