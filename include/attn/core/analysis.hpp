#pragma once
/// \file analysis.hpp
/// Summaries for looking at attention (docs/design.md §4.4): per-head statistics, attention
/// rollout across layers, and per-head divergences between two sets of weights.
/// All functions take flat C-order buffers and accumulate in double.

#include <cstddef>
#include <vector>

namespace attn::core {

/// Per-head summaries of attention weights, each of n_heads = (L·)B·H values in C order
/// of the leading axes. Averaged over the query rows that are not fully masked (a row
/// whose weights sum to 0, or hold a NaN); a head with no such row gives NaN.
struct head_statistics {
    std::vector<double> entropy;      ///< row entropy −Σⱼ w·ln w, nats (0·ln 0 = 0)
    std::vector<double> max_weight;   ///< row maximum
    std::vector<double> distance;     ///< Σⱼ w·|p − j|, p = i + (Tk − Tq) (bottom-right aligned position of query i)
    std::vector<double> sink_mass;    ///< Σ_{j<K} w, K = sink_k
    std::vector<double> small_share;  ///< share of visible cells (visible: mask says the key is seen) with w < 1e-3
                                      ///< (a row with no visible cell, as a finite --mask-fill leaves a fully masked
                                      ///< row, is left out of this mean only)
};

/// head_stats of `weights`, n_heads blocks of (tq, tk). `visible`, when not null, has the
/// same layout (1 = the mask lets the query see the key); when null, a cell counts as
/// visible iff its weight is > 0. Throws value_error for sink_k = 0 or sink_k > tk (tk > 0).
/// Source: docs/design.md §4.4 (entropy: Shannon 1948; distance: Vig & Belinkov 2019, "Analyzing
/// the Structure of Attention in a Transformer Language Model", mean attention distance).
template <class T>
head_statistics head_stats(const T* weights, const unsigned char* visible, std::size_t n_heads, std::size_t tq,
                           std::size_t tk, std::size_t sink_k = 1);

/// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
/// Transformers", eq. 1): for each batch item, Â_l = ½·mean_h(A_l) + ½·I with every row
/// renormalised to sum 1 (a row summing to 0 stays 0), and R = Â_L ⋯ Â_1 (layer 1 the
/// first). `weights` is (L, B, H, T, T) in C order; returns (B, T, T) in double.
/// Throws value_error when layers < 2, heads = 0 or tq ≠ tk ("rollout: needs Tq = Tk (expected
/// square weights, got Tq = 3, Tk = 4)"). The products run through BLAS (dgemm), O(L·B·T³).
template <class T>
std::vector<double> rollout(const T* weights, std::size_t layers, std::size_t batch, std::size_t heads,
                            std::size_t tq, std::size_t tk);

/// Attention rollout (as rollout() above, the same arithmetic and the same values) taken one
/// layer at a time, so that no layer's weights need be kept once multiplied in (docs/design.md
/// §5.4): holds R, B·T·T doubles, one T·T buffer and 128 rows, whatever the number of layers.
class rollout_product {
public:
    /// For weights of `batch` items of `heads` heads, (tq, tk) each. Throws value_error when
    /// tq ≠ tk or heads = 0, with rollout()'s messages.
    rollout_product(std::size_t batch, std::size_t heads, std::size_t tq, std::size_t tk);

    /// Multiplies in the next layer (the first call: layer 1 of eq. 1): `weights` is its
    /// (B, H, T, T) in C order. R ← Â_l · R for every batch item.
    template <class T>
    void multiply(const T* weights);

    /// The next layer one head at a time, for a caller that computes its heads one by one
    /// (core::attention_by_head): `weights` is head h's (B, 1, T, T) in C order, heads in
    /// order 0 … H − 1; the head-mean is summed as multiply() sums it, and after head H − 1
    /// the layer is multiplied in, so the bits are multiply()'s. Holds B sums of (T, T)
    /// doubles meanwhile. Throws value_error("rollout", …) for a head out of order.
    template <class T>
    void add_head(std::size_t h, const T* weights);

    /// The next layer one (batch item, head) block at a time, in C order of (B, H): `weights`
    /// is block (b, h)'s (T, T) in C order, for a caller that reads a layer in pieces
    /// (attn view of one array); after item b's last head it is multiplied in, and after
    /// the last item the layer is, with multiply()'s sums and so its bits. Holds one (T, T)
    /// sum meanwhile. Not mixed with add_head within a layer. Throws value_error("rollout",
    /// …) for a block out of order.
    template <class T>
    void add_block(std::size_t b, std::size_t h, const T* weights);

    /// The layers multiplied in so far.
    std::size_t layers() const noexcept { return layers_; }
    /// B, the batch items.
    std::size_t batch() const noexcept { return batch_; }
    /// T, R's rows and columns.
    std::size_t size() const noexcept { return n_; }

    /// R, (B, T, T) in C order, double. Throws value_error when fewer than two layers were
    /// multiplied in ("rollout: needs several layers (expected L ≥ 2, got L = 1)").
    std::vector<double> result() const;

private:
    std::size_t batch_, heads_, n_;
    std::size_t layers_ = 0;
    std::vector<std::vector<double>> product_;  // B of (T, T): R of each item so far
    std::vector<double> a_;                     // (T, T): Â_l of one item, then Â_l · R
    std::vector<double> next_;                  // a block of rows of Â_l · R
    std::vector<std::vector<double>> sums_;     // add_head: B of (T, T), Σ_h A_l so far
    std::size_t next_head_ = 0;                 // add_head, add_block: the head expected next
    std::size_t next_item_ = 0;                 // add_block: the batch item expected next

    /// Â_l from a_ = Σ_h A_l of item b, then R_b ← Â_l · R_b (a_ is consumed).
    void finish_item(std::size_t b);
};

/// One row of a per-head comparison of two weight tensors of identical shape.
struct row_divergence {
    std::size_t head = 0;         ///< flat index over the leading axes ((L·)B·H)
    std::size_t row = 0;          ///< query index
    double max_abs = 0;           ///< max_j |a − b|
    double kl = 0;                ///< KL(A‖B) = Σ a·ln(a/b), nats (0·ln 0 = 0; a > 0 = b gives +∞)
    double js = 0;                ///< Jensen–Shannon: ½KL(A‖M) + ½KL(B‖M), M = ½(A + B), nats, ≤ ln 2
};

/// Per head and row divergences of `a` against `b`, both n_heads blocks of (tq, tk),
/// sorted worst first (by max_abs, then js; NaN above every number; ties in (head, row) order).
/// Rows are taken as they are (not renormalised). A cell holding NaN on both sides agrees
/// (is skipped, as compare treats NaN facing NaN); NaN on one side makes the row's values NaN.
/// Source: Kullback & Leibler 1951; Lin 1991 (Jensen–Shannon).
template <class T>
std::vector<row_divergence> per_head_divergence(const T* a, const T* b, std::size_t n_heads, std::size_t tq,
                                                std::size_t tk);

}  // namespace attn::core
