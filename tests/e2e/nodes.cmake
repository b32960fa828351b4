# Jobs across nodes (docs/nodes.md): network namespaces stand for nodes.
# tcp_outside.sh: a client connected to a server outside the job,
# checkpointed with --tcp-established --kill and restored while the server
# keeps streaming; also refused where its local address does not exist.
add_executable(e2e_tcp_stream programs/tcp_stream.c)
set_target_properties(e2e_tcp_stream PROPERTIES
  OUTPUT_NAME tcp_stream RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/e2e)
add_dependencies(e2e_programs e2e_tcp_stream)
add_test(NAME e2e.nodes.tcp-outside
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tcp_outside.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(e2e.nodes.tcp-outside PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 180)
# mpi_nodes.sh: an Open MPI job across two namespaces (2 ranks each, btl
# tcp), coordinated checkpoints by cr_job/cr_noded, a round aborted by a
# node that fails, everything killed, cr_job restart, the exact result.
find_program(LIBCKPT_MPICC_OPENMPI mpicc.openmpi)
# "replace": node B is gone after the kill, spare C takes its address and
# restarts B's part from B's checkpoint set.
if(LIBCKPT_MPICC_OPENMPI)
  foreach(action restart replace)
    add_test(NAME e2e.nodes.mpi.cg_mpi.${action}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi_nodes.sh ${CMAKE_BINARY_DIR}/bin cg_mpi ${action})
    set_tests_properties(e2e.nodes.mpi.cg_mpi.${action} PROPERTIES
      LABELS "e2e;mpi" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 900)
  endforeach()
  # "move": B's part migrated to spare C (frozen) and back (live) while A's
  # part runs on; C takes over B's address (mpi_nodes_move.sh). Smaller job
  # than the other cases (CI time).
  add_test(NAME e2e.nodes.mpi.cg_mpi.move
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi_nodes.sh ${CMAKE_BINARY_DIR}/bin cg_mpi move)
  set_tests_properties(e2e.nodes.mpi.cg_mpi.move PROPERTIES
    LABELS "e2e;mpi" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 300
    ENVIRONMENT "E2E_MPI_MIB=32;E2E_MPI_ITERS=150;E2E_MPI_MIN_MS=100")
endif()
# nodes_bad_input.sh: cr_job/cr_noded refusals (node file, unreachable agent,
# wrong token, a node whose process is gone), the targets left running.
add_test(NAME e2e.nodes.bad-input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nodes_bad_input.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(e2e.nodes.bad-input PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 180)
# nodes_failure.sh: a node's agent killed, or its link cut, at an exact step
# of a coordinated checkpoint or of a move (the agent stops itself there:
# stop_at_frame.so, preloaded, never in the library): the round aborted,
# every process released and running, nothing left on any node.
add_library(e2e_stop_at_frame MODULE preload/stop_at_frame.c)
target_link_libraries(e2e_stop_at_frame PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(e2e_stop_at_frame PROPERTIES
  OUTPUT_NAME stop_at_frame PREFIX ""
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/e2e)
add_dependencies(e2e_programs e2e_stop_at_frame)
add_test(NAME e2e.nodes.failure
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nodes_failure.sh ${CMAKE_BINARY_DIR}/bin)
set_tests_properties(e2e.nodes.failure PROPERTIES
  LABELS e2e SKIP_RETURN_CODE 77 RUN_SERIAL TRUE TIMEOUT 420)
