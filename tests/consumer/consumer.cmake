# Consumer tests: a project that uses dlq through find_package against a staged install
# (catches broken install rules), and one that uses it through add_subdirectory (catches a
# library that changes its parent's build). Both use only the core with hiredis hidden, so
# they prove a user of the in-memory backend never needs hiredis. Both modes are built: the
# mode of this build (DLQ_COMPILED), and the other one through a second, minimal build of
# dlq installed to its own stage (consumer_stage_install_<mode>) and a second subproject.
option(DLQ_CONSUMER_TESTS "Run the CMake consumer tests (configure and build small projects)" ON)
if(NOT DLQ_CONSUMER_TESTS)
  return()
endif()

set(_stage "${CMAKE_BINARY_DIR}/consumer-stage")
set(_hide_hiredis -DCMAKE_DISABLE_FIND_PACKAGE_hiredis=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
                  "-DCMAKE_IGNORE_PATH=/usr/include/hiredis\\;/usr/include\\;/usr/lib/x86_64-linux-gnu\\;/usr/local/include\\;/usr/local/lib")
set(_common --build-generator "${CMAKE_GENERATOR}" --build-makeprogram "${CMAKE_MAKE_PROGRAM}")

if(DLQ_INSTALL)
  add_test(NAME consumer_stage_install
           COMMAND "${CMAKE_COMMAND}" -E env "DESTDIR=" "${CMAKE_COMMAND}" --install "${CMAKE_BINARY_DIR}"
                   --prefix "${_stage}")
  set_tests_properties(consumer_stage_install PROPERTIES FIXTURES_SETUP dlq_staged LABELS consumer)

  add_test(NAME consumer_find_package
           COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                   "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package"
                   ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage}"
                   "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_EXPECT_NO_HIREDIS=ON ${_hide_hiredis}
                   -DDLQ_EXPECT_COMPILED=${DLQ_COMPILED}
                   --test-command consumer_find_package)
  set_tests_properties(consumer_find_package PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)

  if(DLQ_HAVE_REDIS)
    add_test(NAME consumer_find_package_redis
             COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                     "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-redis"
                     ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage}"
                     "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_WANT_REDIS=ON
                     -DDLQ_EXPECT_COMPILED=${DLQ_COMPILED}
                     --test-command consumer_find_package)
    set_tests_properties(consumer_find_package_redis PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)
  endif()

  if(DLQ_HAVE_HTTP)
    add_test(NAME consumer_find_package_http
             COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                     "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-http"
                     ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage}"
                     "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_WANT_HTTP=ON
                     --test-command consumer_find_package)
    set_tests_properties(consumer_find_package_http PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)
  endif()

  if(DLQ_HAVE_ASIO)
    add_test(NAME consumer_find_package_asio
             COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                     "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-asio"
                     ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage}"
                     "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_WANT_ASIO=ON
                     --test-command consumer_find_package)
    set_tests_properties(consumer_find_package_asio PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)
  endif()

  add_test(NAME consumer_pkg_config
           COMMAND sh -c "${CMAKE_CXX_COMPILER} -std=c++17 '${CMAKE_CURRENT_LIST_DIR}/find_package/main.cpp' -o '${CMAKE_BINARY_DIR}/consumer-pkg-config' $(PKG_CONFIG_PATH='${_stage}/share/pkgconfig' pkg-config --cflags --libs dlq) && '${CMAKE_BINARY_DIR}/consumer-pkg-config'")
  set_tests_properties(consumer_pkg_config PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)

  # The other mode: dlq configured again (no tests, examples or benchmarks), installed to its
  # own stage, and the same consumer built against it.
  if(DLQ_COMPILED)
    set(_other header_only)
    set(_other_compiled OFF)
  else()
    set(_other compiled)
    set(_other_compiled ON)
  endif()
  set(_stage_other "${CMAKE_BINARY_DIR}/consumer-stage-${_other}")
  add_test(NAME consumer_stage_install_${_other}
           COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                   "${PROJECT_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/consumer-dlq-${_other}"
                   ${_common} --build-target install
                   --build-options "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
                   -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_INSTALL_PREFIX=${_stage_other}"
                   -DDLQ_COMPILED=${_other_compiled} -DDLQ_INSTALL=ON -DDLQ_BUILD_TESTS=OFF
                   -DDLQ_BUILD_EXAMPLES=OFF -DDLQ_BUILD_BENCHMARKS=OFF)
  set_tests_properties(consumer_stage_install_${_other} PROPERTIES
                       FIXTURES_SETUP dlq_staged_${_other} LABELS consumer)

  add_test(NAME consumer_find_package_${_other}
           COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                   "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-${_other}"
                   ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage_other}"
                   "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_EXPECT_NO_HIREDIS=ON
                   -DDLQ_EXPECT_COMPILED=${_other_compiled} ${_hide_hiredis}
                   --test-command consumer_find_package)
  set_tests_properties(consumer_find_package_${_other} PROPERTIES
                       FIXTURES_REQUIRED dlq_staged_${_other} LABELS consumer)

  if(DLQ_HAVE_REDIS)
    add_test(NAME consumer_find_package_redis_${_other}
             COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                     "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-redis-${_other}"
                     ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage_other}"
                     "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_WANT_REDIS=ON
                     -DDLQ_EXPECT_COMPILED=${_other_compiled}
                     --test-command consumer_find_package)
    set_tests_properties(consumer_find_package_redis_${_other} PROPERTIES
                         FIXTURES_REQUIRED dlq_staged_${_other} LABELS consumer)
  endif()
endif()

# As a subproject, both modes (DLQ_COMPILED set by the parent project).
foreach(_compiled OFF ON)
  set(_name consumer_add_subdirectory)
  set(_more "")
  if(_compiled)
    set(_name consumer_add_subdirectory_compiled)
    set(_more -DDLQ_WITH_SQLITE=OFF)  # the core's library is enough to prove the point
  endif()
  add_test(NAME ${_name}
           COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                   "${CMAKE_CURRENT_LIST_DIR}/add_subdirectory" "${CMAKE_BINARY_DIR}/${_name}"
                   ${_common} --build-options "-DDLQ_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                   "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_COMPILED=${_compiled}
                   ${_more} ${_hide_hiredis}
                   --test-command consumer_add_subdirectory)
  set_tests_properties(${_name} PROPERTIES LABELS consumer)
endforeach()

# Compiled mode without CMake: src/*.cpp and the consumer's unit compiled by hand with the
# DLQ_COMPILED_* definitions (README "Compiled mode without CMake").
if(DLQ_HAVE_REDIS)
  add_test(NAME consumer_no_build_system_compiled
           COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/no_build_system/run.sh" "${CMAKE_CXX_COMPILER}"
                   "${PROJECT_SOURCE_DIR}" "${CMAKE_BINARY_DIR}/consumer-no-build-system")
  set_tests_properties(consumer_no_build_system_compiled PROPERTIES LABELS consumer)
endif()
