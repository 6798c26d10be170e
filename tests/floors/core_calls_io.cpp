// A core-floor file that calls an io function, declared by hand (the include check would
// refuse io's header). tests/CMakeLists.txt links it into the core floor's link check,
// attn_floor_link_core_calls_io; tests/check_floors.sh builds that target and expects the
// link to fail with an undefined reference: core may call base and core only.
#include <string_view>

namespace attn::io {
bool is_npy(std::string_view bytes);
}

namespace attn::core {
bool looks_like_npy(std::string_view bytes) { return attn::io::is_npy(bytes); }
}  // namespace attn::core
