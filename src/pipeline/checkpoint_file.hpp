#pragma once
// The checks a checkpoint file passes before its family reads it (src/pipeline/checkpoint.cpp;
// docs/design.md §5.1): what the file is, and whether its weights are stored quantised.
#include <string>

#include "attn/io/safetensors.hpp"

namespace attn::pipeline {

/// Refuses, before the safetensors reader sees it, a file --layer cannot read as a
/// checkpoint, saying what it is (as compute without --layer does): a PyTorch archive,
/// an .npy or .npz, JSON that is not a shard index, CSV or other bytes. Files that look
/// like safetensors (or are named so) go on to the reader, which reports their faults.
void check_checkpoint_format(const std::string& path);

/// Refuses a checkpoint whose weights are stored quantised (docs/design.md §5.1), naming
/// the first such tensor: one named as a quantiser's packed weights or their companions
/// (GPTQ/AWQ qweight, qzeros, scales, g_idx; bitsandbytes SCB, weight_format, absmax,
/// quant_map, quant_state.*; compressed-tensors weight_packed, weight_scale,
/// weight_zero_point), or an integer `*.weight` where a float weight is expected
/// (bitsandbytes int8 and 4-bit) when no tensor names its quantiser. gpt-oss's MXFP4
/// `*_blocks` / `*_scales` match none.
void refuse_quantised_tensors(const io::checkpoint& file);

}  // namespace attn::pipeline
