# cr_plan's command line: every subcommand's output and its refusals
# (included from tests/unit/CMakeLists.txt; needs no root and no target process).
add_test(NAME cli.cr_plan
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cr_plan_cli.sh $<TARGET_FILE:cr_plan>)
set_tests_properties(cli.cr_plan PROPERTIES LABELS "unit;plan" TIMEOUT 60)
