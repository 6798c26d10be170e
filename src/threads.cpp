#include "attn/threads.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attn {

namespace {
thread_local int budget = 0;  // 0: not set
}

int thread_budget() {
#ifdef _OPENMP
    if (omp_in_parallel()) return 1;
    return budget > 0 ? budget : omp_get_max_threads();
#else
    return 1;
#endif
}

void set_thread_budget(int n) noexcept { budget = n > 0 ? n : 0; }

}  // namespace attn
