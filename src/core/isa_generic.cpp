// The kernels' row loops for the generic path (rowops.hpp); CMakeLists.txt sets this file's
// instruction-set flags.
#define ATTN_ISA_NAME generic
#define ATTN_ISA_LEVEL 0
#include "rowops.hpp"
