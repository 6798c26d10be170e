#pragma once
/// \file threads.hpp
/// The one thread policy: how many threads the parallel work started by the calling
/// thread may use — the attention kernel's OpenMP tasks and the text writers' row
/// blocks alike. A batch worker sets its budget to 1, so that one level of parallelism
/// (over inputs) is all there is (docs/toolchain.md §4).

namespace attn {

/// The calling thread's budget: what set_thread_budget gave this thread, else OpenMP's
/// setting (OMP_NUM_THREADS, or the cores), and 1 inside an active parallel region.
int thread_budget();

/// Sets the calling thread's budget (n ≥ 1); 0 goes back to OpenMP's setting. Other
/// threads are not affected.
void set_thread_budget(int n) noexcept;

}  // namespace attn
