// SiLU and GELU-tanh (include/attn/core/activation.hpp) against an 80-bit long double
// evaluation of their definitions over the range an MLP sees and beyond, and at the
// special values PyTorch's float32 functions were run on (torch 2.x, CPU). The Full
// configuration runs it again on every other kernel path (ctest isa_suite_*_full).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "attn/core/activation.hpp"
#include "ulp.hpp"

using attn_test::ulp_error;

namespace {

long double silu_exact(long double x) { return x / (1.0L + expl(-x)); }
// GELU-tanh by its definition ½x(1 + tanh u); for u < −4, where 1 + tanh u cancels even in
// long double, by the identity 1 + tanh u = 2 / (1 + e^{−2u}).
long double gelu_tanh_exact(long double x) {
    const long double u = sqrtl(2.0L / 3.14159265358979323846264338327950288L) * (x + 0.044715L * x * x * x);
    return u < -4 ? x / (1.0L + expl(-2 * u)) : 0.5L * x * (1.0L + tanhl(u));
}

template <class T>
std::vector<T> sweep() {
    std::vector<T> x;
    for (int i = -9000; i <= 3000; ++i) x.push_back(static_cast<T>(i) / T(100) + T(0.0037));
    for (T v : {T(0), T(-0.0), T(1e-30), T(-1e-30), T(1e-6), T(-1e-6)}) x.push_back(v);
    return x;
}

}  // namespace

TEST_CASE_TEMPLATE("silu and gelu_tanh: float32 within one ulp of long double from -90 to 30, float64 within 4 (+ 4|z|) ulp, -0 past exp's overflow", T, float, double) {
    for (bool gelu : {false, true}) {
        CAPTURE(gelu);
        std::vector<T> x = sweep<T>(), y = x;
        if (gelu) attn::core::gelu_tanh(y.data(), y.size());
        else attn::core::silu(y.data(), y.size());
        double worst = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const long double exact = gelu ? gelu_tanh_exact(x[i]) : silu_exact(x[i]);
            CAPTURE(x[i]);
            // Computed in double and rounded once: float32 within one ulp of the exact
            // value. In float64, GELU's z is rounded (a few roundings: x³, the sum, the
            // products) before exp, whose condition number |z| turns each half ulp into
            // |z|/2 ulp of the result: 4|z| bounds them; SiLU's exp argument is exact.
            const long double z = gelu ? 2 * sqrtl(2.0L / 3.14159265358979323846L) * (x[i] + 0.044715L * x[i] * x[i] * x[i]) : x[i];
            if (-z > logl(std::numeric_limits<double>::max())) {  // exp(−z) is +∞ in double: −0
                CHECK((y[i] == 0 && std::signbit(y[i])));
                CHECK(fabsl(exact) < 1e-300L);
                continue;
            }
            const double e = ulp_error(y[i], exact);
            CHECK(e <= (std::is_same_v<T, float> ? 1.0 : 4.0 + (gelu ? 4 * static_cast<double>(fabsl(z)) : 0.0)));
            worst = std::max(worst, e);
        }
        CHECK(worst > 0.0);  // the sweep reaches values that are not exact
    }
}

TEST_CASE("silu and gelu_tanh in float32 give PyTorch's values at its special points, but where its exp overflows") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> s = {-inf, -100.0f, -88.0f, 0.0f, inf, nan, -1e-30f}, g = s;
    attn::core::silu(s.data(), s.size());
    attn::core::gelu_tanh(g.data(), g.size());
    // torch.nn.functional.silu / gelu(approximate="tanh") on the same float32 values.
    CHECK(std::isnan(s[0]));
    // silu(−100): PyTorch's float32 exp(100) overflows and it gives −0; computed in double,
    // attn gives the correctly rounded subnormal −100·e^−100 = −3.7200759760208e−42.
    CHECK(std::fabs(static_cast<double>(s[1]) + 3.7200759760208e-42) <= static_cast<double>(std::numeric_limits<float>::denorm_min()) / 2);
    CHECK(s[2] == doctest::Approx(-5.328049755387946e-37).epsilon(1e-6));
    CHECK(s[3] == 0.0f);
    CHECK(s[4] == inf);
    CHECK(std::isnan(s[5]));
    CHECK(s[6] == doctest::Approx(-5.000000015855384e-31).epsilon(1e-7));
    CHECK(std::isnan(g[0]));
    CHECK((g[1] == 0.0f && std::signbit(g[1])));
    CHECK((g[2] == 0.0f && std::signbit(g[2])));
    CHECK(g[3] == 0.0f);
    CHECK(g[4] == inf);
    CHECK(std::isnan(g[5]));
    CHECK(g[6] == doctest::Approx(-5.000000015855384e-31).epsilon(1e-7));
}

TEST_CASE("silu over a length that is not a multiple of the block leaves no element out") {
    std::vector<float> x(1029, 2.0f);
    attn::core::silu(x.data(), x.size());
    for (float v : x) CHECK(v == doctest::Approx(2.0 / (1.0 + std::exp(-2.0))).epsilon(1e-6));
}
