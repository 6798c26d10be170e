// attn — scaled dot-product attention with every stage dumped. All wiring is in src/cli.
#include "attn/core/blas_core.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
    // First, before any handler or thread exists: OpenBLAS fell back to kernels below this
    // CPU's (attn/core/blas_core.hpp)? Then run again, once, with OPENBLAS_CORETYPE set.
    // Here, not in attn::cli::main, which the fuzz target calls in its own process.
    // Test-only: ATTN_TEST_BLAS_CORE=<core> makes the detection see that core (blas_core()).
    attn::core::select_blas_core(argv);
    return attn::cli::main(argc, argv);
}
