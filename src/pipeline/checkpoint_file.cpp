// The checks a checkpoint file passes before its family reads it (checkpoint_file.hpp).
#include "checkpoint_file.hpp"

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "attn/error.hpp"
#include "attn/io/input.hpp"
#include "attn/io/json.hpp"
#include "attn/io/npy.hpp"
#include "attn/io/npz.hpp"
#include "attn/text.hpp"

namespace attn::pipeline {

/// Refuses, before the safetensors reader sees it, a file --layer cannot read as a
/// checkpoint, saying what it is (as compute without --layer does): a PyTorch archive,
/// an .npy or .npz, JSON that is not a shard index, CSV or other bytes. Files that look
/// like safetensors (or are named so) go on to the reader, which reports their faults.
void check_checkpoint_format(const std::string& path) {
    if (io::is_checkpoint_file(path)) return;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return;  // the reader says why it cannot open it
    const std::string bytes = io::read_file(path);
    const std::string what = "not a safetensors checkpoint: ";
    const std::string expected = " (expected model.safetensors or model.safetensors.index.json, got ";
    if (io::is_npy(bytes)) throw format_error(path, what + "a .npy array" + expected + ".npy)");
    if (io::is_zip(bytes)) {
        if (io::zip_has_member(bytes, [](const std::string& m) { return m.size() >= 8 && m.compare(m.size() - 8, 8, "data.pkl") == 0; }))
            throw format_error(path, io::torch_archive_message);
        throw format_error(path, what + "an .npz archive" + expected + ".npz)");
    }
    io::check_json_start(bytes, path);  // a PyTorch pickle, CSV, binary bytes
    if (bytes.find("\"weight_map\"") != std::string::npos) return;  // a shard index under another name
    throw format_error(path, what + "JSON without a weight_map" + expected + "JSON; a config.json goes to --config)");
}

/// Refuses a checkpoint whose weights are stored quantised (docs/design.md §5.1), naming
/// the first such tensor: one named as a quantiser's packed weights or their companions
/// (GPTQ/AWQ qweight, qzeros, scales, g_idx; bitsandbytes SCB, weight_format, absmax,
/// quant_map, quant_state.*; compressed-tensors weight_packed, weight_scale,
/// weight_zero_point), or an integer `*.weight` where a float weight is expected
/// (bitsandbytes int8 and 4-bit) when no tensor names its quantiser. gpt-oss's MXFP4
/// `*_blocks` / `*_scales` match none.
void refuse_quantised_tensors(const io::checkpoint& file) {
    static const std::pair<const char*, const char*> marks[] = {
        {".qweight", "GPTQ/AWQ"},           {".qzeros", "GPTQ/AWQ"},          {".scales", "GPTQ/AWQ"},
        {".g_idx", "GPTQ"},                 {".SCB", "bitsandbytes int8"},    {".weight_format", "bitsandbytes int8"},
        {".absmax", "bitsandbytes 4-bit"},  {".quant_map", "bitsandbytes 4-bit"},
        {".weight_packed", "compressed-tensors"}, {".weight_scale", "compressed-tensors"},
        {".weight_zero_point", "compressed-tensors"}};
    const io::tensor_entry* integer_weight = nullptr;
    for (const io::tensor_entry& e : file.tensors()) {
        const auto ends = [&](const std::string& s) {
            return e.name.size() > s.size() && e.name.compare(e.name.size() - s.size(), s.size(), s) == 0;
        };
        std::string what, suffix;
        for (const auto& [mark, method] : marks)
            if (ends(mark)) {
                what = method;
                suffix = mark + 1;
            }
        if (what.empty() && e.name.find(".quant_state.") != std::string::npos) {
            what = "bitsandbytes 4-bit";
            suffix = e.name.substr(e.name.find(".quant_state.") + 1);
        }
        if (!what.empty())
            throw value_error(file.path(), e.name + ": " + what + " quantised weights are not read by attn " +
                                               expected_got("float weights", e.dtype + " " + suffix));
        if (!integer_weight && ends(".weight") && !e.dtype.empty() && (e.dtype[0] == 'I' || e.dtype[0] == 'U'))
            integer_weight = &e;
    }
    if (integer_weight)
        throw value_error(file.path(), integer_weight->name + ": integer-packed quantised weights are not read by attn " +
                                           expected_got("float weights", integer_weight->dtype + " weight"));
}

}  // namespace attn::pipeline
