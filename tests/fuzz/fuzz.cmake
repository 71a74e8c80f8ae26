# A libFuzzer run of tests/fuzz/fuzz_entry.cpp, when the compiler is clang (libFuzzer comes
# with Debian's libclang-rt-14-dev). Bounded: 30 seconds or 2 million inputs.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
  check_cxx_source_compiles(
    "#include <cstdint>\n#include <cstddef>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
    DLQ_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(DLQ_HAVE_LIBFUZZER)
    add_executable(fuzz_entry fuzz/fuzz_entry.cpp)
    target_link_libraries(fuzz_entry PRIVATE dlq::dlq)
    dlq_dev_target(fuzz_entry)
    target_compile_options(fuzz_entry PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_entry PRIVATE -fsanitize=fuzzer)
    file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/fuzz-corpus")
    add_test(NAME fuzz_entry
             COMMAND fuzz_entry -max_total_time=30 -runs=2000000 -max_len=4096 -rss_limit_mb=2048
                     "${CMAKE_CURRENT_BINARY_DIR}/fuzz-corpus" "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus")
    set_tests_properties(fuzz_entry PROPERTIES LABELS "core;fuzz")
  endif()
endif()
