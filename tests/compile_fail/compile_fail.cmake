# Compile-fail tests: each source must fail to compile with a message naming the missing
# member; missing_push.cpp with -DDLQ_POSITIVE_CONTROL must compile (so the failures are
# caused by the missing member, not by a broken test).
get_target_property(_json_inc nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)
set(_cf_flags -std=c++${CMAKE_CXX_STANDARD} -fsyntax-only -I${PROJECT_SOURCE_DIR}/include)
if(NOT CMAKE_CXX_STANDARD)
  set(_cf_flags -std=c++17 -fsyntax-only -I${PROJECT_SOURCE_DIR}/include)
endif()
foreach(dir IN LISTS _json_inc)
  if(NOT dir MATCHES "\\$<")
    list(APPEND _cf_flags -I${dir})
  endif()
endforeach()

function(dlq_compile_fail name source regex)
  add_test(NAME ${name} COMMAND ${CMAKE_CXX_COMPILER} ${_cf_flags} ${ARGN}
                                "${CMAKE_CURRENT_LIST_DIR}/${source}")
  set_tests_properties(${name} PROPERTIES WILL_FAIL ON LABELS "core;compile-fail")
  add_test(NAME ${name}_says_why COMMAND ${CMAKE_CXX_COMPILER} ${_cf_flags} ${ARGN}
                                         "${CMAKE_CURRENT_LIST_DIR}/${source}")
  set_tests_properties(${name}_says_why PROPERTIES PASS_REGULAR_EXPRESSION "${regex}"
                                                   LABELS "core;compile-fail")
endfunction()

dlq_compile_fail(compile_fail_missing_push missing_push.cpp
                 "Storage is missing `void push\\(const dlq::Record&\\)`")
dlq_compile_fail(compile_fail_missing_replay_step missing_replay_step.cpp
                 "Storage is missing `dlq::StepResult replay_step")
add_test(NAME compile_fail_positive_control
         COMMAND ${CMAKE_CXX_COMPILER} ${_cf_flags} -DDLQ_POSITIVE_CONTROL
                 "${CMAKE_CURRENT_LIST_DIR}/missing_push.cpp")
set_tests_properties(compile_fail_positive_control PROPERTIES LABELS "core;compile-fail")
