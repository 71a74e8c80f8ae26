# The translation units tests/benchmarks/compile_time.sh times, built here (not timed) against
# the targets as configured — header-only, or the libraries with DLQ_COMPILED=ON — and run:
# each sends one entry and replays it, and fails unless exactly that entry was replayed.
# (redis_construct only constructs: it proves the unit links.) They are compiled at -O0
# whatever the build type: these tests prove that the units compile, link and work;
# compile_time.sh times them at its own -O levels, and the code they reach is compiled at the
# build's -O level (and checked for its warnings) by the suites that test it. At -O3 (the
# gcc-17 configuration of scripts/test.sh) they cost 1.7× the CPU (docs/contributing.md).
set(_dlq_compile_time_dir "${CMAKE_CURRENT_LIST_DIR}")
function(dlq_compile_time_unit unit lib)
  add_executable(compile_time_${unit} "${_dlq_compile_time_dir}/${unit}.cpp")
  target_link_libraries(compile_time_${unit} PRIVATE ${lib})
  dlq_dev_target(compile_time_${unit})
  target_compile_options(compile_time_${unit} PRIVATE $<$<NOT:$<CXX_COMPILER_ID:MSVC>>:-O0>)
endfunction()

foreach(unit memory_send_replay kv_memory_send_replay)
  dlq_compile_time_unit(${unit} dlq::dlq)
  add_test(NAME compile_time_unit_${unit} COMMAND compile_time_${unit})
  set_tests_properties(compile_time_unit_${unit} PROPERTIES LABELS core)
endforeach()

if(TARGET dlq::sqlite)
  dlq_compile_time_unit(kv_sqlite_send_replay dlq::sqlite)
  add_test(NAME compile_time_unit_kv_sqlite_send_replay
           COMMAND compile_time_kv_sqlite_send_replay
                   "${CMAKE_CURRENT_BINARY_DIR}/compile_time_unit_kv_sqlite.db")
  set_tests_properties(compile_time_unit_kv_sqlite_send_replay PROPERTIES LABELS sqlite)
endif()

if(TARGET dlq::redis AND DEFINED DLQ_TEST_REDIS_ENV)
  foreach(unit redis_construct redis_send_replay kv_redis_send_replay)
    dlq_compile_time_unit(${unit} dlq::redis)
    add_test(NAME compile_time_unit_${unit}
             COMMAND sh -c "exec \"$0\" \"$(cat \"$DLQ_TEST_REDIS_URL_FILE\")\""
                     $<TARGET_FILE:compile_time_${unit}>)
    set_tests_properties(compile_time_unit_${unit} PROPERTIES LABELS redis FIXTURES_REQUIRED redis
                                                              ENVIRONMENT "${DLQ_TEST_REDIS_ENV}")
  endforeach()
endif()
