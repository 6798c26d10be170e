// In-process timings for scripts/bench: core::attention on random inputs, and the
// machine's sgemm rate (the ceiling). Prints one JSON object per run on stdout.
// Timing is wall-clock median over --reps runs after one warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <omp.h>

#include "attn/core/attention.hpp"
#include "attn/core/blas_core.hpp"
#include "attn/memory.hpp"

extern "C" void openblas_set_num_threads(int);
extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);

namespace {

template <class F>
double median_ms(int reps, F&& f) {
    f();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto a = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <class T>
void run_attention(std::size_t B, std::size_t H, std::size_t T_, std::size_t D, bool causal, bool weights, int reps,
                   int threads, long long window) {
    using namespace attn::core;
    std::mt19937 gen(0);
    std::normal_distribution<T> dist;
    auto make = [&] {
        tensor4<T> t = tensor4<T>::from_shape({B, H, T_, D});
        for (auto& x : t) x = dist(gen);
        return t;
    };
    const auto q = make(), k = make(), v = make();
    mask<T> m;
    m.B = B, m.H = H, m.Tq = T_, m.Tk = T_;
    if (causal || window >= 0) m.position_offset.assign(B, 0);
    m.causal = causal;
    m.window_left = window;
    attention_options o;
    o.scale = 1.0 / std::sqrt(static_cast<double>(D));
    o.keep_weights = weights;
    o.threads = threads;
    const double ms = median_ms(reps, [&] { auto r = attention(q, k, v, m, o); });
    const double flops = 4.0 * B * H * T_ * T_ * D;
    std::printf("{\"kernel\":\"attn\",\"dtype\":\"%s\",\"T\":%zu,\"causal\":%s,\"window\":%lld,\"weights\":%s,"
                "\"ms\":%.3f,\"gflops\":%.2f}\n",
                sizeof(T) == 4 ? "float32" : "float64", T_, causal ? "true" : "false", window, weights ? "true" : "false",
                ms, flops / ms / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
    attn::core::select_blas_core(argv);  // the BLAS core this CPU supports, as the attn program runs
    attn::keep_freed_memory();  // repetitions reuse the last one's tensors, as a batch does
    CLI::App app{"attn in-process benchmark"};
    std::size_t B = 1, H = 8, T = 1024, D = 64, sgemm = 0;
    std::string dtype = "float32";
    bool causal = false, output_only = false;
    int reps = 5, threads = 2;
    app.add_option("--batch", B);
    app.add_option("--heads", H);
    app.add_option("--len", T);
    app.add_option("--dim", D);
    app.add_option("--dtype", dtype)->check(CLI::IsMember({"float32", "float64"}));
    app.add_flag("--causal", causal);
    long long window = -1;
    app.add_option("--window", window, "Left sliding window (ONNX left_window_size); -1 = none");
    app.add_flag("--output-only", output_only, "Streaming path: no weights kept");
    app.add_option("--reps", reps);
    app.add_option("--threads", threads);
    app.add_option("--sgemm", sgemm, "Instead: time an N×N×N sgemm on --threads OpenBLAS threads");
    bool isa = false;
    app.add_flag("--isa", isa, "Instead: print the kernel path (core::kernel_isa; ATTN_ISA forces one)");
    bool blas = false;
    app.add_flag("--blas-core", blas, "Instead: print OpenBLAS's core and who chose it (core::blas_core_summary)");
    CLI11_PARSE(app, argc, argv);
    if (isa) {
        std::printf("%s\n", attn::core::kernel_isa());
        return 0;
    }
    if (blas) {
        std::printf("%s\n", attn::core::blas_core_summary().c_str());
        return 0;
    }
    if (sgemm) {
        openblas_set_num_threads(threads);
        std::vector<float> a(sgemm * sgemm, 1.0f), b(sgemm * sgemm, 0.5f), c(sgemm * sgemm);
        const int n = static_cast<int>(sgemm);
        const double ms = median_ms(reps, [&] {
            cblas_sgemm(101, 111, 111, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        });
        std::printf("{\"kernel\":\"sgemm\",\"n\":%zu,\"threads\":%d,\"ms\":%.3f,\"gflops\":%.2f,\"core\":\"%s\"}\n", sgemm,
                    threads, ms, 2.0 * n * n * static_cast<double>(n) / ms / 1e6, attn::core::blas_core().running.c_str());
        return 0;
    }
    if (dtype == "float32")
        run_attention<float>(B, H, T, D, causal, !output_only, reps, threads, window);
    else
        run_attention<double>(B, H, T, D, causal, !output_only, reps, threads, window);
    return 0;
}
