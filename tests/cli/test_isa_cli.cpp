// ATTN_ISA through the real binary: every kernel path this CPU has on the same inputs,
// both kernel paths (materialised: weights dumped; streaming: output and lse only).
// avx2 and avx512 must write the same bytes; generic (libm's exp) must be close. Also
// the one-line errors: an unknown ATTN_ISA (usage, exit 2) and a path the CPU lacks
// (data, exit 1; checked under qemu-x86_64 -cpu Haswell when qemu-user is installed).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "array_compare.hpp"
#include "attn/io/npz.hpp"
#include "cli_util.hpp"
#include "scratch_dir.hpp"
#include "skip.hpp"

using namespace attn_test;

namespace {

struct isa_case {
    std::string name, generate, compute;
};

/// Inputs with lengths that are not multiples of 16 (the row loops' block) and rows
/// long enough for the vector bodies; masks that skip work and masks that do not.
const std::vector<isa_case> cases = {
    {"f32 no mask", "--len 77 --len-kv 300 --dk 64 --dv 48 --heads 3 --seed 1", ""},
    {"f32 causal", "--len 300 --dk 64 --dv 64 --heads 2 --seed 2", "--mask causal"},
    {"f32 window softcap", "--len 200 --dk 32 --dv 16 --seed 3", "--mask causal --window 40 --softcap 5"},
    {"f64 causal", "--len 133 --dk 64 --dv 64 --heads 2 --seed 4 --dtype float64", "--mask causal"},
    {"f64 no mask", "--len 65 --len-kv 1000 --dk 16 --dv 8 --seed 5 --dtype float64", ""},
    {"notebook", "", "--mask causal"},
};

// Materialised with the scores shown (natural exp), materialised and streaming without
// (float32: exp2 with log2(e) folded into the GEMM).
const std::vector<std::string> dumps = {"qk,scaled,scores,weights,output,lse", "weights,output,lse", "output,lse"};

std::string env_isa(const std::string& isa_value) { return "ATTN_ISA=" + isa_value + " "; }

/// The kernel paths attn can take where it runs (under ATTN_TEST_WRAPPER, an emulated CPU).
std::vector<std::string> runnable_paths() {
    std::vector<std::string> paths;
    for (const std::string p : {"generic", "avx2", "avx512"})
        if (run_attn("compute data/notebook.npz", "", env_isa(p)).code == 0) paths.push_back(p);
    return paths;
}

/// For every case and dump, the bytes attn writes on each of `paths`, handed to `check`.
template <class Check>
void for_each_output(scratch_dir& dir, const std::vector<std::string>& paths, Check check) {
    for (const auto& c : cases) {
        const std::string in = c.generate.empty() ? "data/notebook.npz" : dir.path + "/in.npz";
        if (!c.generate.empty()) REQUIRE(run_attn("generate " + c.generate + " -o " + in).code == 0);
        for (const auto& dump : dumps) {
            CAPTURE(c.name);
            CAPTURE(dump);
            std::vector<std::string> outs;
            for (const auto& p : paths) {
                const std::string out = dir.path + "/" + p + ".npz";
                const auto r = run_attn(c.compute.empty() ? "compute " + in + " --dump " + dump + " -o " + out
                                                          : "compute " + in + " " + c.compute + " --dump " + dump +
                                                                " -o " + out,
                                        "", env_isa(p));
                CAPTURE(r.err);
                REQUIRE(r.code == 0);
                outs.push_back(slurp(out));
            }
            check(outs);
        }
    }
}

}  // namespace

TEST_CASE("ATTN_ISA=avx2 and avx512 write identical bytes, on both kernel paths") {
    const std::vector<std::string> paths = runnable_paths();
    if (paths.size() < 3) {
        ATTN_SKIP("attn's CPU lacks AVX-512: only one vector path, nothing to compare it with");
    }
    scratch_dir dir;
    for_each_output(dir, {"avx2", "avx512"}, [](const std::vector<std::string>& outs) { CHECK(outs[0] == outs[1]); });
}

TEST_CASE("ATTN_ISA=generic writes values close to the best vector path's, on both kernel paths") {
    const std::vector<std::string> paths = runnable_paths();
    REQUIRE(paths.size() >= 1);
    if (paths.size() < 2) {
        ATTN_SKIP("attn's CPU has no vector path (AVX2 and FMA) to compare generic with");
    }
    scratch_dir dir;
    for_each_output(dir, {paths.front(), paths.back()}, [](const std::vector<std::string>& outs) {
        // generic against the best vector path: exp within an ulp either way, so
        // weights and lse agree to a few ulp and the output to GEMM rounding.
        const auto generic = attn::io::read_npz(outs[0], "generic"), fast = attn::io::read_npz(outs[1], "fast");
        REQUIRE(generic.size() == fast.size());
        for (std::size_t i = 0; i < generic.size(); ++i) {
            CAPTURE(generic[i].name);
            const bool f32 = generic[i].value.type == attn::dtype::f4;
            const auto cmp = compare_arrays(generic[i].value, fast[i].value, f32 ? 1e-6 : 1e-14, f32 ? 1e-5 : 1e-13);
            CAPTURE(cmp.summary);
            CHECK(cmp.ok);
        }
    });
}

TEST_CASE("an unknown ATTN_ISA is a usage error, exit 2, one line, before any command runs") {
    const auto r = run_attn("compute data/notebook.npz", "", env_isa("avx3"));
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: ATTN_ISA: unknown kernel path (expected avx2, avx512 or generic, got 'avx3')\n");
    CHECK(run_attn("inspect data/notebook.npz", "", env_isa("AVX2")).code == 2);
    CHECK(run_attn("--help", "", env_isa("avx3")).code == 0);  // help still works
    CHECK(run_attn("compute data/notebook.npz", "", "ATTN_ISA= ").code == 0);  // empty: the CPU's best
}

TEST_CASE("a forced path the CPU lacks is a data error naming the missing features") {
    if (std::system("command -v qemu-x86_64 >/dev/null 2>&1") != 0 || std::getenv("ATTN_TEST_WRAPPER")) {
        ATTN_SKIP("qemu-x86_64 not installed (Debian qemu-user), or attn already runs wrapped");
    }
#if defined(__SANITIZE_ADDRESS__)
    // An ASan binary reserves terabytes of shadow memory; qemu-user tracks the guest's
    // pages itself and is killed for memory before attn starts (CI, exit 137).
    ATTN_SKIP("AddressSanitizer build: attn is not run under qemu-user");
#endif
    // AVX2 and FMA but no AVX-512; without the features TCG cannot emulate, which it
    // would warn about on stderr.
    const std::string haswell = "qemu-x86_64 -cpu Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm ";
    const auto r = run_attn("compute data/notebook.npz", "", env_isa("avx512") + haswell);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "attn: error: ATTN_ISA: this CPU lacks avx512f, avx512dq, avx512bw, avx512vl, which the avx512 "
                   "path needs\n");
    // Its default path is avx2: the same bits as this CPU's avx2 path when OpenBLAS
    // takes the same (Haswell) kernels.
    scratch_dir dir;
    REQUIRE(run_attn("generate --len 100 --dk 64 --dv 64 --seed 9 -o " + dir.path + "/in.npz").code == 0);
    for (const std::string dump : {"weights,output,lse", "output,lse"}) {
        const std::string args = "compute " + dir.path + "/in.npz --mask causal --dump " + dump + " -o ";
        REQUIRE(run_attn(args + dir.path + "/emulated.npz", "", "env -u ATTN_ISA " + haswell).code == 0);
        REQUIRE(run_attn(args + dir.path + "/host.npz", "", "OPENBLAS_CORETYPE=Haswell ATTN_ISA=avx2 ").code == 0);
        CHECK(slurp(dir.path + "/emulated.npz") == slurp(dir.path + "/host.npz"));
    }
}
