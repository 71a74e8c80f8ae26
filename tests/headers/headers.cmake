# Header hygiene:
# 1. every public header compiles on its own (one generated source file per header, built
#    with dlq's warnings as errors), and twice in a row (include guards);
# 2. the core never includes a backend's client library (hiredis, sqlite3, cpp-httplib: the
#    list DLQ_BACKENDS), directly or through a backend header (dlq/redis, dlq/sqlite, dlq/http).
# They are compile checks (dlq_compile_check, cmake/dlqDevFlags.cmake: in the target
# dlq_compile_checks, built during the gcc-17 tests by scripts/test.sh), at the build's flags:
# -O0 instead of -O3 saved nothing measurable (154 objects: 257 CPU-s at -O3, 275 at -O0;
# their time is parsing).
# dlq_header_objects(NAME SOURCES LIBS...): the object library dlq_headers_NAME.
function(dlq_header_objects name sources)
  add_library(dlq_headers_${name} OBJECT ${sources})
  target_link_libraries(dlq_headers_${name} PRIVATE ${ARGN})
  dlq_dev_target(dlq_headers_${name})
  dlq_compile_check(dlq_headers_${name})
endfunction()
file(GLOB_RECURSE _dlq_headers RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/include/dlq/*.hpp")
# The backends (DLQ_BACKENDS, in the top-level CMakeLists.txt: `<name>=<library regex>`).
set(_backends "")
foreach(_b IN LISTS DLQ_BACKENDS)
  string(REGEX REPLACE "=.*" "" _name "${_b}")
  list(APPEND _backends "${_name}")
  set(_${_name}_sources "")
endforeach()
set(_core_sources "")
set(_asio_sources "")
set(_asio_redis_sources "")
foreach(header IN LISTS _dlq_headers)
  # The OpenSSL transport is part of dlq::redis only when it was configured with TLS.
  if(header STREQUAL "dlq/redis/detail/tls_openssl.hpp" AND NOT DLQ_HAVE_REDIS_TLS)
    continue()
  endif()
  string(MAKE_C_IDENTIFIER "${header}" stem)
  set(src "${CMAKE_CURRENT_BINARY_DIR}/headers/${stem}.cpp")
  file(CONFIGURE OUTPUT "${src}" CONTENT "#include <${header}>\n#include <${header}>\n")
  set(_group core)
  if(header MATCHES "^dlq/asio/(redis|detail/redis_)")
    set(_group asio_redis)
  elseif(header MATCHES "^dlq/(asio/|asio\\.hpp)")
    set(_group asio)
  else()
    foreach(_name IN LISTS _backends)
      if(header MATCHES "^dlq/(${_name}/|${_name}\\.hpp)")
        set(_group ${_name})
      endif()
    endforeach()
  endif()
  list(APPEND _${_group}_sources "${src}")
endforeach()

dlq_header_objects(core "${_core_sources}" dlq::dlq)
foreach(_name IN LISTS _backends)
  if(_${_name}_sources AND TARGET dlq::${_name})
    dlq_header_objects(${_name} "${_${_name}_sources}" dlq::${_name})
  endif()
endforeach()

if(_asio_sources AND TARGET dlq::asio)
  dlq_header_objects(asio "${_asio_sources}" dlq::asio)
endif()
if(_asio_redis_sources AND TARGET dlq::asio AND TARGET dlq::redis)
  dlq_header_objects(asio_redis "${_asio_redis_sources}" dlq::asio dlq::redis)
endif()

# DLQ_BACKENDS joined with ',' (a ';' would split the argument).
string(REPLACE ";" "," _backends_arg "${DLQ_BACKENDS}")
add_test(NAME core_headers_do_not_include_backends
         COMMAND "${CMAKE_COMMAND}" -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include
                 "-DBACKENDS=${_backends_arg}"
                 -P "${CMAKE_CURRENT_LIST_DIR}/check_core_includes.cmake")
set_tests_properties(core_headers_do_not_include_backends PROPERTIES LABELS core)
