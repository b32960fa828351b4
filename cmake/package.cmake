# The installable package (docs/guide.md, "Embedding"): libckpt.so.N next to
# the static libckpt.a, headers, tools, man pages, docs, libckpt.pc and
# libckptConfig.cmake. Included once from the top-level CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared library exports the C API of ckpt.h and plan.h, nothing else
# (libckpt/libckpt.map): its SONAME is the project's major version, which
# counts incompatible changes of that API. The C structs grow by appending
# fields behind their `size`, so they need no new SONAME. The C++ API of
# the public .hpp headers is not part of this ABI: C++ programs link
# libckpt.a (libckpt::ckpt_static), built with the same headers.
set(CKPT_ABI_VERSION ${PROJECT_VERSION_MAJOR})
target_compile_definitions(ckpt PRIVATE CKPT_VERSION_STRING="${PROJECT_VERSION}"
  CKPT_BUILD_VERSION_MAJOR=${PROJECT_VERSION_MAJOR}
  CKPT_BUILD_VERSION_MINOR=${PROJECT_VERSION_MINOR}
  CKPT_BUILD_VERSION_PATCH=${PROJECT_VERSION_PATCH})

# The shared library is the static one (built PIC) linked whole, so the
# sources are compiled once; the version script hides everything that is
# not the public API.
add_library(ckpt_shared SHARED ${PROJECT_SOURCE_DIR}/libckpt/shared/soname.c)
target_link_libraries(ckpt_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,ckpt>")
target_link_options(ckpt_shared PRIVATE
  -Wl,--version-script=${PROJECT_SOURCE_DIR}/libckpt/libckpt.map -Wl,--no-undefined)
set_target_properties(ckpt_shared PROPERTIES
  OUTPUT_NAME ckpt
  VERSION ${CKPT_ABI_VERSION}.${PROJECT_VERSION_MINOR}.${PROJECT_VERSION_PATCH}
  SOVERSION ${CKPT_ABI_VERSION}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/libckpt/libckpt.map)

install(TARGETS ckpt ckpt_shared
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/libckpt/include/ckpt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(CKPT_INSTALLED_TOOLS cr_full cr_incr cr_restart cr_info cr_check cr_compact cr_migrate
  cr_recv cr_pause cr_plan cr_run cr_untrack cr_noded cr_job)
foreach(tool ${CKPT_INSTALLED_TOOLS})
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}
  FILES_MATCHING PATTERN "*.[13]")
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/examples/launcher.c
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# pkg-config and CMake find their prefix relative to where they are
# installed, so `cmake --install --prefix ANY` works.
file(RELATIVE_PATH CKPT_PC_TO_PREFIX "/r/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/r")
configure_file(${PROJECT_SOURCE_DIR}/libckpt/package/libckpt.pc.in
  ${PROJECT_BINARY_DIR}/package/libckpt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/libckpt.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(CKPT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/libckpt)
file(RELATIVE_PATH CKPT_CMAKE_TO_PREFIX "/r/${CKPT_CMAKE_DIR}" "/r")
configure_file(${PROJECT_SOURCE_DIR}/libckpt/package/libckptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/libckptConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/libckptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/libckptConfig.cmake
  ${PROJECT_BINARY_DIR}/package/libckptConfigVersion.cmake DESTINATION ${CKPT_CMAKE_DIR})
