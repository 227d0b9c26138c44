/* Software prefetch, shared by the Cython modules (declared in _kernels.pxd).

   On x86-64 it is a volatile asm: GCC would otherwise see a prefetch inside a small
   helper as side-effect free and delete the helper's calls. */
#ifndef POLYLITE_PREFETCH_H
#define POLYLITE_PREFETCH_H

#include <stddef.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define POLYLITE_PREFETCH(p) \
    __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char *)(p)))
#elif defined(__GNUC__) || defined(__clang__)
#define POLYLITE_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#else
#define POLYLITE_PREFETCH(p) ((void)0)
#endif

/* Every cache line of a block of memory (the rows of P that a later CSR row needs). */
static inline void polylite_prefetch_block(const void *p, size_t nbytes) {
    const char *c = (const char *)p;
    const char *last = c + nbytes - 1;
    for (; c < last; c += 64) POLYLITE_PREFETCH(c);
    POLYLITE_PREFETCH(last);
}

#endif
