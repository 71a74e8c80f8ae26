# The ctest fixture `redis`: a private redis-server for the tests that need one.
set(DLQ_TEST_REDIS_DIR "${CMAKE_BINARY_DIR}/redis-test-server")
add_test(NAME redis_server_start
         COMMAND "${CMAKE_CURRENT_LIST_DIR}/redis_server.sh" start "${DLQ_TEST_REDIS_DIR}")
add_test(NAME redis_server_stop
         COMMAND "${CMAKE_CURRENT_LIST_DIR}/redis_server.sh" stop "${DLQ_TEST_REDIS_DIR}")
set_tests_properties(redis_server_start PROPERTIES FIXTURES_SETUP redis LABELS redis)
set_tests_properties(redis_server_stop PROPERTIES FIXTURES_CLEANUP redis LABELS redis)
# Tests in the fixture read the server's URL from this file.
set(DLQ_TEST_REDIS_ENV "DLQ_TEST_REDIS_URL_FILE=${DLQ_TEST_REDIS_DIR}/url" CACHE INTERNAL "")
