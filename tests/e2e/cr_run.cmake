# cr_run.sh: the cr_run launcher with a real job (tests/e2e/programs/cr_work.c),
# run under helpers/subreaper, which reaps the job once its launcher is killed.
add_executable(e2e_cr_work programs/cr_work.c)
add_executable(e2e_subreaper helpers/subreaper.c)
set_target_properties(e2e_cr_work e2e_subreaper PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/e2e)
set_target_properties(e2e_cr_work PROPERTIES OUTPUT_NAME cr_work)
set_target_properties(e2e_subreaper PROPERTIES OUTPUT_NAME subreaper)
add_dependencies(e2e_programs e2e_cr_work e2e_subreaper)
foreach(mode restart usr1 no-restarts resume-alive resume-dead stop levels levels-full levels-partner levels-partner-full auto)
  add_test(NAME e2e.cr_run.${mode}
           COMMAND ${CMAKE_BINARY_DIR}/bin/e2e/subreaper
                   bash ${CMAKE_CURRENT_SOURCE_DIR}/cr_run.sh ${CMAKE_BINARY_DIR}/bin ${mode})
  set_tests_properties(e2e.cr_run.${mode} PROPERTIES
    LABELS e2e SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 120)
endforeach()
