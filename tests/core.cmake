# The core suite: wire format, front end, in-memory backend, header hygiene, compile-fail
# checks and the CMake consumer tests.
dlq_add_test(test_core SOURCES
  test_errors.cpp test_json_scan.cpp test_base64.cpp test_time.cpp test_id.cpp test_entry.cpp
  test_dead_letter_queue.cpp test_find_while_removing.cpp test_deeply_nested_entries.cpp
  LABELS core)
dlq_add_test(test_memory SOURCES test_memory.cpp LABELS "core;memory")
dlq_add_test(test_contract_memory SOURCES contract/contract_memory.cpp LABELS "core;memory;contract")
dlq_add_test(test_source_queue_memory SOURCES contract/source_queue_memory.cpp
             LABELS "core;memory;contract;source")

include(headers/headers.cmake)
include(compile_fail/compile_fail.cmake)
include(consumer/consumer.cmake)
include(fuzz/fuzz.cmake)
