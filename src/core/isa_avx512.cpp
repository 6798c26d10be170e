// The kernels' row loops for the avx512 path (rowops.hpp); CMakeLists.txt sets this file's
// instruction-set flags.
#define ATTN_ISA_NAME avx512
#define ATTN_ISA_LEVEL 2
#include "rowops.hpp"
