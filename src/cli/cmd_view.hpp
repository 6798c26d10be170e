#pragma once
// What `attn compute --format html` borrows from `attn view` (cmd_view.cpp).

#include "attn/io/document.hpp"

namespace attn::cli {

/// Adds `rollout` (core::rollout, Abnar & Zuidema 2020) of the weights of `doc`, which the
/// page shows as one more layer, when they have a layer axis of L ≥ 2 with Tq = Tk and
/// `doc` holds no rollout yet: a checkpoint run with --layer all, or a lone
/// (L, B, H, T, T) array. (T, T) for one sequence without a batch axis, else (B, T, T).
/// Leaves `doc` as it is otherwise.
void add_rollout(io::document& doc);

}  // namespace attn::cli
