# The structural check of issue 28 (check_structure.py says what it checks and how): headers
# at most 700 lines unless generated, functions at most 80 lines, an opening comment stating
# each file's concern. It reads the sources, compiles nothing and takes about a second, so it
# runs in every configuration that builds tests; its own tests run beside it.
find_package(Python3 3.6 REQUIRED COMPONENTS Interpreter)
add_test(NAME test_structure
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_structure.py
                 --root ${PROJECT_SOURCE_DIR})
add_test(NAME test_structure_scanner
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_check_structure.py)
set_tests_properties(test_structure test_structure_scanner PROPERTIES LABELS "core;structure")
