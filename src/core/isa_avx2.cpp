// The kernels' row loops for the avx2 path (rowops.hpp); CMakeLists.txt sets this file's
// instruction-set flags.
#define ATTN_ISA_NAME avx2
#define ATTN_ISA_LEVEL 1
#include "rowops.hpp"
