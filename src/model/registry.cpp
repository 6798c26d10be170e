// The family registry (include/attn/model/registry.hpp, docs/design.md §3.1): the list of
// families, the lookups by --arch name and model_type, and the helpers family files share
// (tensor shapes for config_from_tensors, the fused-QKV split).
#include "attn/model/registry.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "attn/error.hpp"
#include "attn/text.hpp"

namespace attn::model {

// Every `const family_spec& <name>_family()` defined in a file of this folder, as the build
// lists them (families.inc, attn_registry in cmake/floors.cmake): naming each one here makes
// the static archive keep its object (the linker takes only what something names), so a new
// family is its file (and its test) alone.
#define ATTN_REGISTERED(function) const family_spec& function();
#include "families.inc"
#undef ATTN_REGISTERED

namespace {

std::vector<const family_spec*>& registered() {
    static std::vector<const family_spec*> list = [] {
        std::vector<const family_spec*> v{
#define ATTN_REGISTERED(function) &function(),
#include "families.inc"
#undef ATTN_REGISTERED
        };
        // The order users read: each family's place, then its name.
        std::sort(v.begin(), v.end(), [](const family_spec* a, const family_spec* b) {
            return std::tie(a->order, a->name) < std::tie(b->order, b->name);
        });
        return v;
    }();
    return list;
}

}  // namespace

std::vector<const family_spec*> families() { return registered(); }

const family_spec* find_family(const std::string& name) {
    for (const family_spec* f : registered())
        if (f->name == name) return f;
    return nullptr;
}

const family_spec* family_for_model_type(const std::string& model_type) {
    for (const family_spec* f : registered())
        if (std::find(f->model_types.begin(), f->model_types.end(), model_type) != f->model_types.end()) return f;
    return nullptr;
}

scoped_registration::scoped_registration(const family_spec& spec) : spec_(&spec) {
    if (find_family(spec.name)) throw usage_error("family registry", "family " + spec.name + " is already registered");
    for (const auto& t : spec.model_types)
        if (family_for_model_type(t))
            throw usage_error("family registry", "model_type " + t + " is already registered");
    registered().push_back(spec_);
}

scoped_registration::~scoped_registration() {
    auto& list = registered();
    list.erase(std::remove(list.begin(), list.end(), spec_), list.end());
}

const shape_t& tensor_shapes::need(const std::string& local, const char* key) const {
    const std::string name = prefix + local;
    const shape_t* s = weights.shape(name);
    if (!s) throw value_error(source, std::string(key) + ": no config.json, and no tensor " + name + " to read it from " +
                                          expected_got("--config FILE, or a checkpoint with " + name, "neither"));
    if (s->size() != 2) throw value_error(source, name + ": wrong rank " + expected_got("2-D", shape_string(*s)));
    return *s;
}

std::size_t tensor_shapes::count_layers(const char* stem, const std::string& rest) const {
    std::size_t n = 0;
    while (n <= max_config_count && weights.shape(prefix + layer_key(stem, n, rest))) ++n;
    return n;
}

std::size_t tensor_shapes::head_dim_of(const std::string& local, std::size_t axis) const {
    const std::size_t n = need(local, "head_dim")[axis];
    if (n % heads != 0)
        throw value_error(source, "head_dim: --heads " + std::to_string(heads) + " does not divide " + prefix + local + "'s " +
                                      std::to_string(n) + (axis == 0 ? " rows " : " columns ") +
                                      expected_got("a divisor of " + std::to_string(n), std::to_string(heads)));
    return n / heads;
}

void split_fused_qkv(const array& weight, const std::string& weight_name, const std::optional<array>& bias,
                     const std::string& bias_name, core::weight_layout layout, std::size_t q_width, std::size_t kv_width,
                     const std::string& fits, std::vector<named_array>& out, std::size_t groups) {
    if (groups == 0 || q_width % groups != 0 || kv_width % groups != 0)
        throw usage_error("split_fused_qkv", std::to_string(groups) + " groups do not divide the widths " +
                                                 expected_got("a divisor of " + std::to_string(q_width) + " and " +
                                                                  std::to_string(kv_width),
                                                              std::to_string(groups)));
    const std::size_t total = q_width + 2 * kv_width;
    const bool in_out = layout == core::weight_layout::in_out;
    const std::size_t inner = weight.rank() == 2 ? weight.shape[in_out ? 0 : 1] : 0;
    const shape_t want = in_out ? shape_t{inner, total} : shape_t{total, inner};
    if (weight.rank() != 2 || weight.shape != want)
        throw value_error("config", weight_name + " does not fit " + fits + " " +
                                        expected_got(weight.rank() == 2 ? shape_string(want) : "2-D", shape_string(weight.shape)));
    if (bias && bias->size() != total)
        throw value_error("config", bias_name + " does not fit " + fits + " " +
                                        expected_got(shape_string({total}), shape_string(bias->shape)));
    // Within each group of total / groups outputs: q, then k, then v.
    const std::size_t group = total / groups;
    const std::size_t widths[3] = {q_width / groups, kv_width / groups, kv_width / groups};
    const std::size_t starts[3] = {0, widths[0], widths[0] + widths[1]};
    // Output o (in 0 … width·groups) of a part is output (o / width)·group + start + o % width of the fused one.
    const auto source = [&](std::size_t part, std::size_t o) {
        return (o / widths[part]) * group + starts[part] + o % widths[part];
    };
    const char* wn[3] = {"w_q", "w_k", "w_v"};
    const std::size_t sz = dtype_size(weight.type);
    for (std::size_t part = 0; part < 3; ++part) {
        const std::size_t width = widths[part] * groups;
        array p;
        p.type = weight.type;
        p.shape = in_out ? shape_t{inner, width} : shape_t{width, inner};
        p.data.resize(inner * width * sz);
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t o = g * widths[part];  // this group's first output of the part
            if (in_out) {
                // Columns source(o) … + widths[part] of every row.
                for (std::size_t r = 0; r < inner; ++r)
                    std::memcpy(p.data.data() + (r * width + o) * sz, weight.data.data() + (r * total + source(part, o)) * sz,
                                widths[part] * sz);
            } else {
                std::memcpy(p.data.data() + o * inner * sz, weight.data.data() + source(part, o) * inner * sz,
                            widths[part] * inner * sz);
            }
        }
        out.push_back({wn[part], std::move(p)});
    }
    if (bias) {
        const char* bn[3] = {"b_q", "b_k", "b_v"};
        const std::size_t bs = dtype_size(bias->type);
        for (std::size_t part = 0; part < 3; ++part) {
            const std::size_t width = widths[part] * groups;
            array p;
            p.type = bias->type;
            p.shape = {width};
            p.data.resize(width * bs);
            for (std::size_t g = 0; g < groups; ++g) {
                const std::size_t o = g * widths[part];
                std::memcpy(p.data.data() + o * bs, bias->data.data() + source(part, o) * bs, widths[part] * bs);
            }
            out.push_back({bn[part], std::move(p)});
        }
    }
}

void check_rope(const config& c, const core::rope_scaling& s, const std::string& key, const std::string& theta_key) {
    const auto p = core::rope_scaling_problem_of(s);
    if (!p) return;
    // The field as config.json names it: the base and the rotated fraction where they were
    // read, max_position_embeddings at the top level, the rest in the rope object.
    std::string name = key + "." + p->field;
    if (p->field == "rope_theta") name = theta_key;
    else if (p->field == "rotary_dim") name = c.origin.partial;
    else if (p->field == "max_position_embeddings") name = p->field;
    std::string what = p->what;
    if (what.rfind("is ", 0) == 0) what.erase(0, 3);
    const std::string source = c.origin.file.empty() ? std::string("config") : c.origin.file;
    const std::string message = name + ": " + what + " " + expected_got(p->expected, p->got);
    if (p->shape) throw shape_error(source, message);
    throw value_error(source, message);
}

std::size_t checked_rotary_dim(const config& c, const char* factor_key) {
    const std::size_t rotary = rotary_dim_of(c);
    const std::string key = c.origin.partial.empty() ? std::string(factor_key) : c.origin.partial;
    if (rotary == 0 || rotary % 2 != 0)
        throw value_error(c.origin.file.empty() ? std::string("config") : c.origin.file,
                          key + ": gives an odd or zero rotary_dim " + expected_got("an even number ≥ 2", std::to_string(rotary)));
    if (c.rope_scaling.kind != core::rope_scaling_kind::none) {
        core::rope_scaling s = c.rope_scaling;
        s.theta = c.rope_theta;
        s.rotary_dim = rotary;
        check_rope(c, s, c.origin.rope, c.origin.theta);
    }
    return rotary;
}

}  // namespace attn::model
