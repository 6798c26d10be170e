// The option table (src/cli/option_table.hpp): core's terms map to the flags they always
// did, choices come from the registries, options bind to their typed fields, and a
// manifest line parsed over a copy of the command line's options applies only its own.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../src/cli/compute_options.hpp"
#include "../src/cli/flag_terms.hpp"
#include "../src/cli/option_table.hpp"
#include "attn/core/attention_call.hpp"
#include "attn/core/rope.hpp"
#include "attn/io/formats.hpp"
#include "attn/model/config.hpp"
#include "attn/stages.hpp"

using attn::cli::option_row;
using attn::cli::option_scope;
using attn::cli::option_table;

namespace {

/// Parses `words` (a command line after the subcommand) into `c` (and the output options
/// into `out`) with every pipeline, rope, job, run and output row bound, as attn compute
/// binds them.
void parse(attn::cli::pipeline_cli& c, std::vector<std::string> words, attn::cli::output_cli* out = nullptr) {
    CLI::App app;
    attn::cli::output_cli ignored;
    for (const option_row& r : option_table()) {
        if (r.scope == option_scope::output) r.bind_output(app, out ? *out : ignored, r);
        else if (r.scope != option_scope::other) r.bind(app, c, r);
    }
    std::reverse(words.begin(), words.end());  // CLI11 takes them last to first
    app.parse(words);
}

const option_row& row(const std::string& flag) { return attn::cli::option_of(flag); }

}  // namespace

TEST_CASE("option table: core's setting names map to the flags the command line always used") {
    const std::vector<std::pair<std::string, std::string>> expected{
        {"causal", "--mask causal"},      {"mask", "--mask"},
        {"lengths", "--lengths"},         {"pad_id", "--pad-id"},
        {"window", "--window"},           {"prefix_len", "--prefix-len"},
        {"sink_tokens", "--sink-tokens"}, {"cu_seqlens", "--cu-seqlens"},
        {"alibi", "--alibi"},             {"alibi_slopes", "--alibi-slopes"},
        {"rope", "--rope"},               {"rotary_dim", "--rotary-dim"},
        {"rope_theta", "--rope-theta"},   {"posenc", "--posenc"},
        {"len", "--len"},                 {"len_kv", "--len-kv"},
        {"dtype", "--dtype"},             {"dk", "--dk"},
        {"dv", "--dv"},                   {"heads", "--heads"},
        {"embed", "--embed"},             {"projection_weights", "--weights"}};
    auto got = attn::cli::setting_flags();
    auto want = expected;
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    CHECK(got == want);
    CHECK(attn::cli::in_flag_terms("`window`: each side (expected `causal`, got `scale`)") ==
          "--window: each side (expected --mask causal, got `scale`)");
}

TEST_CASE("option table: one row per flag, and every row but another command's binds") {
    std::set<std::string> flags;
    for (const option_row& r : option_table()) {
        CHECK_MESSAGE(flags.insert(r.flag).second, r.flag);
        CHECK_MESSAGE((r.scope == option_scope::other || r.scope == option_scope::output) == !r.bind, r.flag);
        CHECK_MESSAGE((r.scope == option_scope::output) == static_cast<bool>(r.bind_output), r.flag);
    }
    CHECK(row("--q").file);
    CHECK(row("--config").file);
    CHECK_FALSE(row("--window").file);
}

TEST_CASE("option table: the choices are the registries'") {
    CHECK(row("--mask").choices == attn::core::mask_names());
    CHECK(row("--arch").choices == attn::model::family_names());
    CHECK(row("--rope").choices == std::vector<std::string>{attn::core::rope_style_name(attn::core::rope_style::half),
                                                             attn::core::rope_style_name(attn::core::rope_style::interleaved)});
    CHECK(row("--causal-align").choices ==
          std::vector<std::string>{attn::core::causal_align_name(attn::core::causal_align::top_left),
                                   attn::core::causal_align_name(attn::core::causal_align::bottom_right)});
    CHECK(row("--masked-rows").choices == std::vector<std::string>{"zero", "nan"});
    std::vector<std::string> stages, formats;
    for (const attn::stage_info& s : attn::stage_table()) stages.push_back(s.name);
    for (const attn::io::format f : attn::io::output_formats()) formats.push_back(f->name);
    CHECK(row("--dump").choices == stages);
    CHECK(row("--format").choices == formats);
}

TEST_CASE("option table: compute's output options are rows that write their typed fields") {
    for (const std::string flag : {"--dump", "--format", "-o,--output", "--store", "--precision", "--compact", "--full"}) {
        CHECK_MESSAGE(row(flag).scope == option_scope::output, flag);
        CHECK_MESSAGE(row(flag).group == "Output", flag);
    }
    attn::cli::pipeline_cli c;
    attn::cli::output_cli out;
    CHECK(out.dump == attn::default_dump());
    parse(c, {"--dump", "weights,lse", "--format", "csv", "-o", "w.csv", "--store", "bfloat16", "--precision", "5", "--compact",
              "--full", "--sink-k", "2"},
          &out);
    CHECK(out.dump == std::vector<std::string>{"weights", "lse"});
    CHECK(out.format == "csv");
    CHECK(out.output == "w.csv");
    CHECK(out.store == "bfloat16");
    CHECK(out.precision == 5);
    CHECK(out.compact);
    CHECK(out.full);
    CHECK(c.settings.sink_k == 2);
    // A job over a copy keeps what it does not set.
    attn::cli::output_cli job = out;
    parse(c, {"--format", "json"}, &job);
    CHECK(job.format == "json");
    CHECK(job.dump == out.dump);
    CHECK(job.output == "w.csv");
    attn::cli::output_cli bad;
    CHECK_THROWS_AS(parse(c, {"--format", "xml"}, &bad), CLI::ValidationError);
    CHECK_THROWS_AS(parse(c, {"--store", "float8"}, &bad), CLI::ValidationError);
}

TEST_CASE("option table: options write their typed fields of the call") {
    attn::cli::pipeline_cli c;
    parse(c, {"--causal", "--causal-align", "bottom-right", "--prefix-len", "2,3", "--sink-tokens", "1", "--alibi",
              "--cu-seqlens", "0,3,7", "--lengths", "3,5", "--pad-id", "-1", "--attn-mask-true", "masked", "--masked-rows",
              "nan", "--scale", "0.5", "--softcap", "30", "--rope", "interleaved", "--rope-theta", "500000", "--rotary-dim", "4",
              "--kernel", "reference", "--dtype", "float64", "--weight-layout", "in-out", "--tokens", "a b", "-j", "3"});
    const attn::pipeline_options& s = c.settings;
    CHECK(s.attention.mask.causal);
    CHECK(s.attention.mask.align == attn::core::causal_align::bottom_right);
    CHECK(s.attention.mask.prefix_len == std::vector<std::size_t>{2, 3});
    CHECK(s.attention.mask.sink_tokens == 1);
    CHECK(s.attention.mask.alibi);
    CHECK(s.attention.mask.cu_seqlens == std::vector<std::size_t>{0, 3, 7});
    CHECK(s.attention.mask.lengths == std::vector<std::size_t>{3, 5});
    CHECK(s.attention.mask.pad_id == -1);
    CHECK(s.attention.mask.attn_mask_true_masks);
    CHECK(s.attention.rows == attn::core::masked_rows::nan);
    CHECK(s.attention.scale == 0.5);
    CHECK(s.attention.softcap == 30);
    CHECK(s.attention.rope == attn::core::rope_style::interleaved);
    CHECK(s.attention.rope_theta == 500000);
    CHECK(s.attention.rope_theta_given);
    CHECK(s.attention.rotary_dim == 4);
    CHECK(s.kernel == attn::kernel_kind::reference);
    CHECK(s.compute_type == attn::dtype::f8);
    CHECK(s.layout == attn::core::weight_layout::in_out);
    CHECK(s.tokens == std::vector<std::string>{"a", "b"});
    CHECK(s.threads == 3);
}

TEST_CASE("option table: a job parsed over a copy of the command line's options applies only its own") {
    attn::cli::pipeline_cli base;
    parse(base, {"--causal-align", "bottom-right", "--rope", "half", "--rope-theta", "1000", "--lengths", "3,5", "--mask", "causal"});
    attn::cli::pipeline_cli job = base;
    parse(job, {"--lengths", "4", "--masked-rows", "nan"});
    CHECK(job.settings.attention.mask.align == attn::core::causal_align::bottom_right);
    CHECK(job.settings.attention.rope == attn::core::rope_style::half);
    CHECK(job.settings.attention.rope_theta == 1000);
    CHECK(job.settings.attention.rope_theta_given);
    CHECK(job.mask == std::vector<std::string>{"causal"});
    CHECK(job.settings.attention.mask.lengths == std::vector<std::size_t>{4});
    CHECK(job.settings.attention.rows == attn::core::masked_rows::nan);
    CHECK(base.settings.attention.rows == attn::core::masked_rows::zero);
}
