// Peak memory of `attn compute` counts the data it holds (docs/design.md §5.4): an .npz
// or .npy input is read into the arrays' own buffers (each byte once, not also in a copy
// of the whole file and of each member), and q, k, v are held once while computing.
// Each run's peak RSS is measured alone (attn_test::run_attn_measured) against q, k, v
// and the output: 4 x 32 MiB here, large enough for a copy of any of them to show.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"

namespace {

constexpr std::size_t B = 2048, T = 16, D = 256;  // 32 MiB of float32 per array
constexpr double array_mb = B * T * D * 4 / 1048576.0;
// q, k, v and the output; the rest of the process (code, libraries, the kernel's tiles)
// took 15 MB when measured. Before the readers and compute held each byte once, the .npz
// run peaked at 239 MB and the .npy one at 271 MB.
constexpr double data_mb = 4 * array_mb;
constexpr double margin_mb = 32;

/// A (B, T, D) float32 array of values in (-1, 1), different for each seed.
attn::array make_array(unsigned seed) {
    std::vector<float> v(B * T * D);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i) * (seed + 1)));
    return attn::array::from<float>({B, T, D}, v.data());
}

/// Writes q.npy, k.npy, v.npy and qkv.npz (stored, np.savez's layout) into `dir`, holding
/// one array at a time; everything the test made is freed before attn runs (a forked child
/// starts with its parent's resident pages).
void write_inputs(const std::string& dir) {
    std::vector<attn::named_array> arrays;
    for (unsigned i = 0; i < 3; ++i) {
        const std::string name(1, "qkv"[i]);
        attn::array a = make_array(i);
        std::ofstream f(dir + "/" + name + ".npy", std::ios::binary);
        attn::io::write_npy(f, a);
        arrays.push_back({name, std::move(a)});
    }
    std::ofstream z(dir + "/qkv.npz", std::ios::binary);
    attn::io::write_npz(z, arrays);
}

void check_peak(const std::string& args) {
    const auto m = attn_test::run_attn_measured(args);
    REQUIRE(m.code == 0);
    const double peak_mb = static_cast<double>(m.peak_kb) / 1024.0;
    INFO("peak " << peak_mb << " MB for " << data_mb << " MB of q, k, v and output: " << args);
    CHECK(peak_mb <= attn_test::peak_bound_mb(data_mb + margin_mb));
}

}  // namespace

TEST_CASE("compute on an .npz of q, k, v peaks within 32 MB of the inputs and the output") {
    attn_test::scratch_dir dir;
    write_inputs(dir.path);
    check_peak("compute '" + dir.path + "/qkv.npz' --dump output -o '" + dir.path + "/out.npy'");
    // One member at a time (load_array), as --q FILE.npz:NAME reads it.
    check_peak("compute --q '" + dir.path + "/qkv.npz:q' --k '" + dir.path + "/qkv.npz:k' --v '" + dir.path +
               "/qkv.npz:v' --dump output -o '" + dir.path + "/out.npy'");
}

TEST_CASE("compute on .npy files of q, k, v peaks within 32 MB of the inputs and the output") {
    attn_test::scratch_dir dir;
    write_inputs(dir.path);
    check_peak("compute --q '" + dir.path + "/q.npy' --k '" + dir.path + "/k.npy' --v '" + dir.path +
               "/v.npy' --dump output -o '" + dir.path + "/out.npy'");
}
