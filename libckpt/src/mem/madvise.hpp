// madvise() advice newer than some C library headers; the values are the
// kernel's (include/uapi/asm-generic/mman-common.h). An older kernel
// refuses them with EINVAL.
#pragma once

#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1
#endif
