#include "attn/core/generate.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "attn/error.hpp"

namespace attn::core {

double normal_stream::uniform() {
    return static_cast<double>(engine_() >> 11) * 0x1.0p-52 - 1.0;
}

double normal_stream::next() {
    if (has_spare_) {
        has_spare_ = false;
        return spare_;
    }
    double u, v, s;
    do {
        u = uniform();
        v = uniform();
        // One rounding, spelled out: a plain u·u + v·v may or may not be contracted
        // into an FMA depending on the compiler and -march, which would change the
        // stream between builds.
        s = std::fma(u, u, v * v);
    } while (s >= 1.0 || s == 0.0);
    const double m = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * m;
    has_spare_ = true;
    return u * m;
}

namespace {

constexpr std::size_t max_elements = std::size_t{1} << 31;

/// An array of `shape` filled from `normals` in C order, each value times `factor`.
array draw(normal_stream& normals, shape_t shape, dtype type, double factor) {
    array a;
    a.type = type;
    a.shape = std::move(shape);
    const std::size_t n = a.size();
    a.data.resize(n * dtype_size(type));
    for (std::size_t i = 0; i < n; ++i) {
        const double v = normals.next() * factor;
        if (type == dtype::f4) {
            const float f = static_cast<float>(v);
            std::memcpy(a.data.data() + i * sizeof f, &f, sizeof f);
        } else {
            std::memcpy(a.data.data() + i * sizeof v, &v, sizeof v);
        }
    }
    return a;
}

void require_positive(std::size_t v, const char* option) {
    if (v == 0) throw usage_error(option, "must be at least 1 " + expected_got("≥ 1", "0"));
}

}  // namespace

std::vector<named_array> generate_inputs(const generate_options& o) {
    require_positive(o.len, "`len`");
    if (o.type != dtype::f4 && o.type != dtype::f8)
        throw usage_error("`dtype`", "unsupported " + expected_got("float32 or float64", std::string(dtype_name(o.type))));
    const std::size_t L = o.len, S = o.len_kv ? o.len_kv : o.len;
    const std::size_t H = o.heads ? o.heads : 1;

    // Shapes first, so that a bad request fails before any drawing.
    std::vector<std::pair<std::string, shape_t>> plan;
    std::vector<double> factors;
    if (o.embed == 0) {
        if (o.dk == 0) throw usage_error("`dk`", "is required without `embed` " + expected_got("`dk` D", "none"));
        if (o.weights) throw usage_error("`projection_weights`", "needs `embed` " + expected_got("`embed` E", "none"));
        const std::size_t dk = o.dk, dv = o.dv ? o.dv : o.dk;
        const auto shape = [&](std::size_t t, std::size_t d) -> shape_t {
            if (o.heads) return {o.batch ? o.batch : 1, H, t, d};
            if (o.batch) return {o.batch, t, d};
            return {t, d};
        };
        plan = {{"q", shape(L, dk)}, {"k", shape(S, dk)}, {"v", shape(S, dv)}};
        factors.assign(3, 1.0);
    } else {
        const std::size_t E = o.embed;
        const auto shape = [&](std::size_t t) -> shape_t {
            if (o.batch) return {o.batch, t, E};
            return {t, E};
        };
        plan.push_back({"x", shape(L)});
        if (S != L) plan.push_back({"x_kv", shape(S)});
        factors.assign(plan.size(), 1.0);
        if (o.weights) {
            std::size_t dk = o.dk;
            if (dk == 0) {
                if (E % H != 0)
                    throw usage_error("`heads`", "does not divide `embed`, so `dk` has no default " +
                                                     expected_got("E % H == 0 or `dk`", std::to_string(E) + " % " +
                                                                                            std::to_string(H)));
                dk = E / H;
            }
            const std::size_t dv = o.dv ? o.dv : dk;
            const double scale = 1.0 / std::sqrt(static_cast<double>(E));
            plan.push_back({"w_q", {H * dk, E}});
            plan.push_back({"w_k", {H * dk, E}});
            plan.push_back({"w_v", {H * dv, E}});
            factors.insert(factors.end(), 3, scale);
        } else {
            for (auto [given, option] : {std::pair{o.heads, "`heads`"}, {o.dk, "`dk`"}, {o.dv, "`dv`"}})
                if (given)
                    throw usage_error(option, "shapes the projection weights, which need `projection_weights` " +
                                                  expected_got("`embed` E `projection_weights`", "`embed` without `projection_weights`"));
        }
    }
    std::size_t total = 0;
    for (const auto& [name, shape] : plan) {
        std::size_t n = 1;
        for (std::size_t d : shape)
            if (__builtin_mul_overflow(n, d, &n)) n = max_elements + 1;
        total = n > max_elements ? max_elements + 1 : total + n;
        if (total > max_elements)
            throw usage_error("attn generate", "too many elements " +
                                                   expected_got("at most 2^31 in all", "more, at " + name + " " + shape_string(shape)));
    }

    normal_stream normals(o.seed);
    std::vector<named_array> out;
    for (std::size_t i = 0; i < plan.size(); ++i)
        out.push_back({plan[i].first, draw(normals, plan[i].second, o.type, factors[i])});
    return out;
}

}  // namespace attn::core
