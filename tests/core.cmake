# The core suite: wire format, front end, in-memory backend, header hygiene, compile-fail
# checks and the CMake consumer tests.
dlq_add_test(test_core SOURCES
  test_errors.cpp test_json_scan.cpp test_base64.cpp test_time.cpp test_id.cpp test_entry.cpp
  test_dead_letter_queue.cpp test_find_while_removing.cpp test_deeply_nested_entries.cpp
  test_search_place.cpp test_redact.cpp test_audit_records.cpp test_text_search.cpp
  LABELS core)
dlq_add_test(test_memory SOURCES test_memory.cpp LABELS "core;memory")
dlq_add_test(test_contract_memory SOURCES contract/contract_memory.cpp LABELS "core;memory;contract")
dlq_add_test(test_source_queue_memory SOURCES contract/source_queue_memory.cpp
             LABELS "core;memory;contract;source")

# Header hygiene (each public header compiled on its own, ~80 objects): on by default; the
# test script runs it in one configuration (gcc-17).
option(DLQ_HEADER_TESTS "Compile every public header on its own as a test" ON)
if(DLQ_HEADER_TESTS)
  include(headers/headers.cmake)
endif()
include(compile_fail/compile_fail.cmake)
include(consumer/consumer.cmake)
include(fuzz/fuzz.cmake)

# Configure prints the components it provides and why one is off (README "Install").
foreach(_case all_on redis_off)
  if(_case STREQUAL "all_on")
    set(_extra "")
    set(_expect "dlq::dlq +on" "tests OFF, examples and dlqctl OFF, benchmarks OFF")
    if(DLQ_HAVE_REDIS)
      list(APPEND _expect "dlq::redis +on +Redis backends [(]hiredis found[)]")
    endif()
    if(DLQ_HAVE_SQLITE)
      list(APPEND _expect "dlq::sqlite +on")
    endif()
    if(DLQ_HAVE_HTTP)
      list(APPEND _expect "dlq::http +on +operator console")
    endif()
  else()
    set(_extra "-DDLQ_WITH_REDIS=OFF" "-DDLQ_WITH_SQLITE=OFF" "-DDLQ_WITH_HTTP=OFF")
    set(_expect "dlq::redis +OFF +DLQ_WITH_REDIS is OFF" "dlq::sqlite +OFF +DLQ_WITH_SQLITE is OFF"
                "dlq::http +OFF +DLQ_WITH_HTTP is OFF")
  endif()
  add_test(NAME configure_prints_components_${_case}
           COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DBINARY_DIR=${CMAKE_CURRENT_BINARY_DIR}/configure-summary-${_case}
                   "-DGENERATOR=${CMAKE_GENERATOR}" "-DEXTRA=${_extra}" "-DEXPECT=${_expect}"
                   -P "${CMAKE_CURRENT_LIST_DIR}/cmake/check_configure_summary.cmake")
  set_tests_properties(configure_prints_components_${_case} PROPERTIES LABELS "core;cmake")
endforeach()
