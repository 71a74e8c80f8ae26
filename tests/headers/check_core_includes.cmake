# Fails when a core header (anything outside the Redis, SQLite, HTTP and Asio parts) includes hiredis,
# sqlite3, cpp-httplib or a backend header: users of the core must never need those installed.
# Also when a dlq/asio header includes hiredis, or the Redis Cluster decision headers
# (dlq/redis/detail/slot_map.hpp, cluster_fsm.hpp) include anything but the standard library.
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
  if(h MATCHES "^dlq/(redis/|redis\\.hpp|sqlite/|sqlite\\.hpp|http/|http\\.hpp|asio/redis|asio/detail/redis_)")
    continue()
  endif()
  foreach(line IN LISTS lines)
    if(line MATCHES "hiredis|sqlite3|httplib|dlq/redis/|dlq/redis\\.hpp|dlq/sqlite/|dlq/sqlite\\.hpp|dlq/http/|dlq/http\\.hpp")
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
