# Header hygiene:
# 1. every public header compiles on its own (one generated source file per header, built
#    with dlq's warnings as errors), and twice in a row (include guards);
# 2. the core never includes hiredis, sqlite or cpp-httplib, directly or through a backend
#    header (dlq/redis, dlq/sqlite, dlq/http).
file(GLOB_RECURSE _dlq_headers RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/include/dlq/*.hpp")
set(_core_sources "")
set(_redis_sources "")
set(_sqlite_sources "")
set(_http_sources "")
foreach(header IN LISTS _dlq_headers)
  string(MAKE_C_IDENTIFIER "${header}" stem)
  set(src "${CMAKE_CURRENT_BINARY_DIR}/headers/${stem}.cpp")
  file(CONFIGURE OUTPUT "${src}" CONTENT "#include <${header}>\n#include <${header}>\n")
  if(header MATCHES "^dlq/(redis/|redis\\.hpp)")
    list(APPEND _redis_sources "${src}")
  elseif(header MATCHES "^dlq/(sqlite/|sqlite\\.hpp)")
    list(APPEND _sqlite_sources "${src}")
  elseif(header MATCHES "^dlq/(http/|http\\.hpp)")
    list(APPEND _http_sources "${src}")
  else()
    list(APPEND _core_sources "${src}")
  endif()
endforeach()

add_library(dlq_headers_core OBJECT ${_core_sources})
target_link_libraries(dlq_headers_core PRIVATE dlq::dlq)
dlq_dev_target(dlq_headers_core)
if(_redis_sources AND TARGET dlq::redis)
  add_library(dlq_headers_redis OBJECT ${_redis_sources})
  target_link_libraries(dlq_headers_redis PRIVATE dlq::redis)
  dlq_dev_target(dlq_headers_redis)
endif()
if(_sqlite_sources AND TARGET dlq::sqlite)
  add_library(dlq_headers_sqlite OBJECT ${_sqlite_sources})
  target_link_libraries(dlq_headers_sqlite PRIVATE dlq::sqlite)
  dlq_dev_target(dlq_headers_sqlite)
endif()
if(_http_sources AND TARGET dlq::http)
  add_library(dlq_headers_http OBJECT ${_http_sources})
  target_link_libraries(dlq_headers_http PRIVATE dlq::http)
  dlq_dev_target(dlq_headers_http)
endif()

add_test(NAME core_headers_do_not_include_backends
         COMMAND "${CMAKE_COMMAND}" -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include
                 -P "${CMAKE_CURRENT_LIST_DIR}/check_core_includes.cmake")
set_tests_properties(core_headers_do_not_include_backends PROPERTIES LABELS core)
