# Configures dlq's source tree the way the README's "Install" section does (no tests,
# examples or benchmarks) with EXTRA options, and checks that configure says which components
# it provides and why one is off.
#   cmake -DSOURCE_DIR=… -DBINARY_DIR=… -DGENERATOR=… -DEXTRA=<;-list> -DEXPECT=<;-list of regexes> -P this
file(REMOVE_RECURSE "${BINARY_DIR}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}"
          -DDLQ_BUILD_TESTS=OFF -DDLQ_BUILD_EXAMPLES=OFF -DDLQ_BUILD_BENCHMARKS=OFF ${EXTRA}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(REMOVE_RECURSE "${BINARY_DIR}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure failed (${rc}):\n${out}\n${err}")
endif()
foreach(re IN LISTS EXPECT)
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "configure output does not match '${re}':\n${out}")
  endif()
endforeach()
message(STATUS "configure output has every expected line")
