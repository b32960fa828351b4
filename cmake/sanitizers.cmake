# Sanitizer and fuzzing builds (scripts/sanitize.sh; a build directory of
# their own, never the release one). Only the library, the tools, the unit
# tests and the fuzz targets are built this way: the end-to-end programs
# (the processes being checkpointed) stay ordinary.
option(CKPT_SANITIZE "AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(CKPT_FUZZ "libFuzzer targets in tests/fuzz (needs clang)" OFF)
set(CKPT_SANITIZE_FLAGS)
if(CKPT_SANITIZE)
  list(APPEND CKPT_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer)
endif()
if(CKPT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "CKPT_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  list(APPEND CKPT_SANITIZE_FLAGS -fsanitize=fuzzer-no-link)
endif()
# ckpt_sanitize(TARGET...): compile and link TARGETs with the flags above.
function(ckpt_sanitize)
  if(CKPT_SANITIZE_FLAGS)
    foreach(t ${ARGN})
      target_compile_options(${t} PRIVATE ${CKPT_SANITIZE_FLAGS})
      target_link_options(${t} PRIVATE ${CKPT_SANITIZE_FLAGS})
    endforeach()
  endif()
endfunction()
