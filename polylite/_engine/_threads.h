/* OpenMP team helpers for passes that keep one parallel region over many steps
   (declared in _kernels.pxd).  Without OpenMP a region has one thread and the
   barrier is a no-op. */
#ifndef POLYLITE_THREADS_H
#define POLYLITE_THREADS_H

#ifdef _OPENMP
#include <omp.h>
/* The threads the enclosing parallel region actually got (may be fewer than asked). */
static inline int polylite_team_size(void) { return omp_get_num_threads(); }
/* Every thread of the enclosing region waits here for the others (an orphaned barrier
   binds to the innermost enclosing region; outside one it is a no-op). */
static inline void polylite_barrier(void) { _Pragma("omp barrier") }
#else
static inline int polylite_team_size(void) { return 1; }
static inline void polylite_barrier(void) {}
#endif

#endif
