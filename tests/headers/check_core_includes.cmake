# Fails when a core header (anything outside the backends' folders — Redis, SQLite, HTTP, the
# list BACKENDS — and the Asio part) includes a backend's library (hiredis, sqlite3,
# cpp-httplib) or header: users of the core must never need those installed.
# Also when a dlq/asio header includes hiredis, or the Redis Cluster decision headers
# (dlq/redis/detail/slot_map.hpp, cluster_fsm.hpp) include anything but the standard library.
# BACKENDS: `<name>=<regex of its library's includes>`, comma-separated (DLQ_BACKENDS of the
# top-level CMakeLists.txt): the folders and umbrellas the core must not include, and theirs.
string(REPLACE "," ";" backends "${BACKENDS}")
if(NOT backends)
  message(FATAL_ERROR "pass -DBACKENDS=name=regex,... (see tests/headers/headers.cmake)")
endif()
set(backend_headers "asio/redis|asio/detail/redis_")  # dlq::asio's Redis part may use dlq/redis
set(backend_includes "")
foreach(b IN LISTS backends)
  string(REGEX REPLACE "=.*" "" name "${b}")
  string(REGEX REPLACE "^[^=]*=" "" library "${b}")
  string(APPEND backend_headers "|${name}/|${name}\\.hpp")
  list(APPEND backend_includes "${library}" "dlq/${name}/" "dlq/${name}\\.hpp")
endforeach()
list(JOIN backend_includes "|" backend_includes)
file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/dlq/*.hpp")
set(bad "")
foreach(h IN LISTS headers)
  file(STRINGS "${INCLUDE_DIR}/${h}" lines REGEX "^[ \t]*#[ \t]*include")
  # Asio: only dlq::asio (dlq/asio/, dlq/asio.hpp) includes it — never the core, never a
  # blocking backend.
  if(NOT h MATCHES "^dlq/(asio/|asio\\.hpp)")
    foreach(line IN LISTS lines)
      if(line MATCHES "[<\"]asio[/.]|dlq/asio")
        list(APPEND bad "${h}: ${line}")
      endif()
    endforeach()
  endif()
  # dlq::asio never includes hiredis itself: its RESP codec (dlq/asio/detail/resp.hpp, checked
  # as the core below) is its own; its Redis part (dlq/asio/redis*, the connection's machinery
  # dlq/asio/detail/redis_*) uses dlq/redis headers.
  if(h MATCHES "^dlq/(asio/|asio\\.hpp)")
    foreach(line IN LISTS lines)
      if(line MATCHES "hiredis")
        list(APPEND bad "${h}: ${line}")
      endif()
    endforeach()
  endif()
  # The Redis Cluster routing decisions are I/O-free: the standard library and each other only
  # (both routers, blocking and asynchronous, share them).
  if(h MATCHES "^dlq/redis/detail/(slot_map|cluster_fsm)\\.hpp$")
    foreach(line IN LISTS lines)
      if(NOT line MATCHES "#[ \t]*include[ \t]*<[a-z_]+>" AND
         NOT line MATCHES "\"dlq/redis/detail/(slot_map|cluster_fsm)\\.hpp\"")
        list(APPEND bad "${h}: ${line}")
      endif()
    endforeach()
  endif()
  # dlq::asio's core part needs no backend; its Redis part (dlq/asio/redis*,
  # dlq/asio/detail/redis_*) may use dlq/redis.
  if(h MATCHES "^dlq/(${backend_headers})")
    continue()
  endif()
  foreach(line IN LISTS lines)
    if(line MATCHES "${backend_includes}")
      list(APPEND bad "${h}: ${line}")
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " msg)
  message(FATAL_ERROR "core headers include a backend dependency:\n  ${msg}")
endif()
list(LENGTH headers n)
message(STATUS "checked ${n} headers: the core includes no backend dependency, only dlq/asio includes Asio, dlq/asio no hiredis, the cluster decisions the standard library alone")
