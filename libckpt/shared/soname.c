/* The shared library's own translation unit: everything else comes from the
 * static libckpt.a, linked whole (cmake/package.cmake). */
typedef int ckpt_shared_library_unit;
