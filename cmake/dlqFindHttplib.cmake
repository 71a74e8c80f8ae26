# Locates cpp-httplib and provides the imported target `dlq_httplib`. Prefers upstream's
# CMake package (httplib::httplib); Debian 12's libcpp-httplib-dev 0.11.4 ships a compiled
# library whose ABI depends on the feature macros in its cpp-httplib.pc, so pkg-config is
# the fallback (it carries those macros). Used by dlq's CMakeLists.txt and dlqConfig.cmake.
include_guard(GLOBAL)

function(_dlq_find_httplib)
  if(TARGET dlq_httplib)
    return()
  endif()
  if(NOT TARGET httplib::httplib)
    find_package(httplib CONFIG QUIET)
  endif()
  if(TARGET httplib::httplib)
    add_library(dlq_httplib INTERFACE IMPORTED GLOBAL)
    target_link_libraries(dlq_httplib INTERFACE httplib::httplib)
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(DLQ_PC_HTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
  endif()
  if(TARGET PkgConfig::DLQ_PC_HTTPLIB)
    add_library(dlq_httplib INTERFACE IMPORTED GLOBAL)
    target_link_libraries(dlq_httplib INTERFACE PkgConfig::DLQ_PC_HTTPLIB)
  endif()
endfunction()

_dlq_find_httplib()
if(TARGET dlq_httplib)
  set(dlq_httplib_FOUND TRUE)
else()
  set(dlq_httplib_FOUND FALSE)
endif()
