# cr_plan's command line: every subcommand's output and its refusals
# (included from tests/unit/CMakeLists.txt; needs no root and no target process).
add_test(NAME cli.cr_plan
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cr_plan_cli.sh $<TARGET_FILE:cr_plan>)
set_tests_properties(cli.cr_plan PROPERTIES LABELS "unit;plan" TIMEOUT 60)

# The C header from a C program (a launcher's view): compiles as C11, links,
# and answers. The library is C++, so the C++ driver links it.
add_executable(plan_c_api ${CMAKE_CURRENT_LIST_DIR}/plan_c_api.c)
target_link_libraries(plan_c_api PRIVATE ckpt m)
set_target_properties(plan_c_api PROPERTIES LINKER_LANGUAGE CXX)
add_test(NAME cli.plan_c_api COMMAND plan_c_api)
set_tests_properties(cli.plan_c_api PROPERTIES LABELS "unit;plan" TIMEOUT 30)
