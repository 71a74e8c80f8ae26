# Consumer tests: a project that uses dlq through find_package against a staged install
# (catches broken install rules), and one that uses it through add_subdirectory (catches a
# library that changes its parent's build). Both use only the core with hiredis hidden, so
# they prove a user of the in-memory backend never needs hiredis.
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
                   --test-command consumer_find_package)
  set_tests_properties(consumer_find_package PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)

  if(DLQ_HAVE_REDIS)
    add_test(NAME consumer_find_package_redis
             COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                     "${CMAKE_CURRENT_LIST_DIR}/find_package" "${CMAKE_BINARY_DIR}/consumer-find-package-redis"
                     ${_common} --build-options "-DCMAKE_PREFIX_PATH=${_stage}"
                     "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" -DDLQ_WANT_REDIS=ON
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

  add_test(NAME consumer_pkg_config
           COMMAND sh -c "${CMAKE_CXX_COMPILER} -std=c++17 -fsyntax-only $(PKG_CONFIG_PATH='${_stage}/share/pkgconfig' pkg-config --cflags dlq) '${CMAKE_CURRENT_LIST_DIR}/find_package/main.cpp'")
  set_tests_properties(consumer_pkg_config PROPERTIES FIXTURES_REQUIRED dlq_staged LABELS consumer)
endif()

add_test(NAME consumer_add_subdirectory
         COMMAND "${CMAKE_CTEST_COMMAND}" --build-and-test
                 "${CMAKE_CURRENT_LIST_DIR}/add_subdirectory" "${CMAKE_BINARY_DIR}/consumer-add-subdirectory"
                 ${_common} --build-options "-DDLQ_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
                 "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" ${_hide_hiredis}
                 --test-command consumer_add_subdirectory)
set_tests_properties(consumer_add_subdirectory PROPERTIES LABELS consumer)
