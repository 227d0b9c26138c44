/* Software prefetch, shared by the Cython modules (declared in _kernels.pxd).

   On x86-64 it is a volatile asm: GCC would otherwise see a prefetch inside a small
   helper as side-effect free and delete the helper's calls. */
#ifndef POLYLITE_PREFETCH_H
#define POLYLITE_PREFETCH_H

#include <stddef.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define POLYLITE_PREFETCH(p) \
    __asm__ __volatile__("prefetcht0 %0" : : "m"(*(const char *)(p)))
#define POLYLITE_PREFETCH_L2(p) \
    __asm__ __volatile__("prefetcht1 %0" : : "m"(*(const char *)(p)))
#elif defined(__GNUC__) || defined(__clang__)
#define POLYLITE_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#define POLYLITE_PREFETCH_L2(p) __builtin_prefetch((const void *)(p), 0, 2)
#else
#define POLYLITE_PREFETCH(p) ((void)0)
#define POLYLITE_PREFETCH_L2(p) ((void)0)
#endif

/* Every cache line of a block of memory (the rows of P that a later CSR row needs). */
static inline void polylite_prefetch_block(const void *p, size_t nbytes) {
    const char *c = (const char *)p;
    const char *last = c + nbytes - 1;
    for (; c < last; c += 64) POLYLITE_PREFETCH(c);
    POLYLITE_PREFETCH(last);
}

/* The same into the second-level cache only: for blocks too large for the first level
   beside the data in use (a field-aware row reads tens of kilobytes of factors: fetched
   into the first level one row ahead, they would evict the current row's). */
static inline void polylite_prefetch_block_l2(const void *p, size_t nbytes) {
    const char *c = (const char *)p;
    const char *last = c + nbytes - 1;
    for (; c < last; c += 64) POLYLITE_PREFETCH_L2(c);
    POLYLITE_PREFETCH_L2(last);
}

#endif
