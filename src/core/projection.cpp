#include "attn/core/projection.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "attn/error.hpp"
#include "attn/tensor.hpp"
#include "attn/text.hpp"
#include "blas.hpp"

namespace attn::core {

std::vector<std::size_t> embedding_rows(const shape_t& table_shape, const array& ids) {
    if (table_shape.size() != 2)
        throw shape_error("embedding", "wrong rank " + expected_got("2-D (V, E)", shape_string(table_shape)));
    if (ids.rank() != 1 && ids.rank() != 2)
        throw shape_error("token_ids", "wrong rank " + expected_got("(T,) or (B, T)", shape_string(ids.shape)));
    if (!is_integer(ids.type) && ids.type != dtype::b1)
        throw value_error("token_ids", "not integers " + expected_got("an integer dtype", std::string(dtype_name(ids.type))));
    const std::size_t V = table_shape[0];
    if (V == 0) throw shape_error("embedding", "no rows " + expected_got("(V, E) with V ≥ 1", shape_string(table_shape)));
    std::vector<std::size_t> rows(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const double id = ids.value(i);
        if (!(id >= 0 && id < static_cast<double>(V)))
            throw value_error("token_ids", "id out of range at index " + std::to_string(i) + ": the embedding has " +
                                               std::to_string(V) + " rows " +
                                               expected_got("0 to " + std::to_string(V - 1), general_number(id, 17)));
        rows[i] = static_cast<std::size_t>(id);
    }
    return rows;
}

array embedding_lookup(const array& table, const array& ids) {
    const std::vector<std::size_t> rows = embedding_rows(table.shape, ids);
    const std::size_t row = table.shape[1] * dtype_size(table.type);
    array x;
    x.type = table.type;
    x.shape = ids.shape;
    x.shape.push_back(table.shape[1]);
    x.data.resize(ids.size() * row);
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (row) std::memcpy(x.data.data() + i * row, table.data.data() + rows[i] * row, row);
    return x;
}

template <class T>
tensor3<T> linear(const tensor3<T>& x, const tensor2<T>& w, const std::optional<tensor1<T>>& b,
                  weight_layout layout, const char* source) {
    const std::size_t B = x.shape(0), S = x.shape(1), in = x.shape(2);
    const bool out_in = layout == weight_layout::out_in;
    const std::size_t w_in = out_in ? w.shape(1) : w.shape(0);
    const std::size_t out = out_in ? w.shape(0) : w.shape(1);
    if (w_in != in) {
        const std::string want = out_in ? "(out, " + std::to_string(in) + ")" : "(" + std::to_string(in) + ", out)";
        throw shape_error(source, "weight does not fit the input's last axis " +
                                      expected_got(want, shape_string({w.shape(0), w.shape(1)})));
    }
    if (b && b->shape(0) != out)
        throw shape_error(std::string(source) + " bias",
                          "wrong length " + expected_got(shape_string({out}), shape_string({b->shape(0)})));
    tensor3<T> y = tensor3<T>::from_shape({B, S, out});
    const int M = static_cast<int>(B * S);
    if (M && out) {
        if (in == 0)
            std::fill(y.begin(), y.end(), T(0));
        else
            detail::gemm(false, out_in, M, static_cast<int>(out), static_cast<int>(in), T(1), x.data(),
                         static_cast<int>(in), w.data(), static_cast<int>(out_in ? in : out), T(0), y.data(),
                         static_cast<int>(out));
    }
    if (b) {
        T* row = y.data();
        for (int r = 0; r < M; ++r, row += out)
            for (std::size_t j = 0; j < out; ++j) row[j] += (*b)(j);
    }
    return y;
}

template <class T>
void linear_rows(const T* x, std::size_t M, std::size_t in, const T* w, std::size_t out, weight_layout layout, T* y) {
    if (M == 0 || out == 0) return;
    if (in == 0) {
        std::fill(y, y + M * out, T(0));
        return;
    }
    const bool out_in = layout == weight_layout::out_in;
    detail::gemm(false, out_in, static_cast<int>(M), static_cast<int>(out), static_cast<int>(in), T(1), x, static_cast<int>(in), w,
                 static_cast<int>(out_in ? in : out), T(0), y, static_cast<int>(out));
}

template void linear_rows(const float*, std::size_t, std::size_t, const float*, std::size_t, weight_layout, float*);
template void linear_rows(const double*, std::size_t, std::size_t, const double*, std::size_t, weight_layout, double*);

template tensor3<float> linear(const tensor3<float>&, const tensor2<float>&,
                               const std::optional<tensor1<float>>&, weight_layout, const char*);
template tensor3<double> linear(const tensor3<double>&, const tensor2<double>&,
                                const std::optional<tensor1<double>>&, weight_layout, const char*);

}  // namespace attn::core
