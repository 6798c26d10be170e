#!/usr/bin/env python3
"""Writes the tokenizer's test fixtures (tests/fixtures/tokenizer/):

- conformance/corpus.jsonl: a few hundred strings (one JSON string per line): prose, code,
  digits, URLs, emoji and ZWJ sequences, CJK, Arabic, Hindi, Thai, NFC/NFD pairs,
  whitespace runs (\\r\\n, U+3000), special tokens written in the text, a very long word.
- small tokenizer.json files (byte-level BPE, BPE with byte fallback, WordPiece, added-token
  flags), written here by hand from tiny vocabularies.

The expected encodings are NOT computed here: scripts/make_tokenizer_references.sh runs HF
tokenizers itself (scripts/tokenizer_reference.js) over them.

    /usr/bin/python3 scripts/make_tokenizer_fixtures.py
"""
import json
import os
import random
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")


def corpus():
    texts = [
        "Hello world!", "Hello, world! How are you doing today?", "The quick brown fox jumps over the lazy dog.",
        "I'm sure they'll say it's fine; we've done what we'd planned.", "DON'T SHOUT. I'M LISTENING, YOU'RE LOUD.",
        "", " ", "  ", "a", " a", "a ", "  leading and trailing  ", "\n", "\t\ttabs\tand\ttext", "line one\nline two\n\nline four",
        "windows\r\nline\r\nendings\r\n", "mixed \r\n \n\r spaces", "ideographic\u3000space\u3000\u3000here",
        "non\u00a0breaking\u00a0space", "zero\u200bwidth\u200bspace", "em\u2003space and\u2009thin",
        "12345", "3.14159265358979", "1,000,000 and 2024-11-25", "0x1F600 0b1010 1e-9", "Call 555-0199 at 10:30pm",
        "https://example.com/path/to/page?query=1&other=two#frag", "mailto:someone@example.org", "www.test.co.uk/a_b-c",
        "def f(x):\n    return x ** 2 + 1  # square\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "const x = {a: 1, 'b': [2, 3]};", "SELECT * FROM users WHERE id = 42;", "<html><body class=\"x\">Hi</body></html>",
        "$ echo \"$HOME\" | grep -v '^#'", "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
        "😀", "I ❤️ NY", "family: 👨\u200d👩\u200d👧\u200d👦 done", "flags 🇫🇷🇯🇵", "skin 👍🏽 tone", "🤖🚀✨🔥💯",
        "日本語のテキストです。", "中文文本，包括标点符号。", "한국어 텍스트입니다", "漢字かなカナ混じり文",
        "مرحبا بالعالم", "اللغة العربية جميلة جداً", "नमस्ते दुनिया", "हिन्दी भाषा में लिखा गया वाक्य",
        "สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "Привет, мир!", "Ελληνικά γράμματα", "עברית מימין לשמאל",
        "Ünïcödé àccénts ñ ç ø å", "straße STRASSE Maße", "İstanbul ıi", "ﬁne ﬂow ﬀ (ligatures)", "①②③ ⅫⅣ ½ ²",
        "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ｶﾀｶﾅ halfwidth", "math: ∑ ∫ √ ≤ ≥ ≠ ∞", "quotes “double” ‘single’ «guillemets»",
        "dash – em — ellipsis …", "café", "cafe\u0301", "résumé", "re\u0301sume\u0301", "Å vs A\u030a vs \u212b",
        "ñ vs n\u0303", "\u1e9b\u0323", "한글 vs \u1112\u1161\u11ab\u1100\u1173\u11af",
        "x" * 300, "supercalifragilisticexpialidocious" * 8, "a" * 1000, "-" * 50, "!!!???...", "....", "''''",
        "'s 't 're 've 'm 'll 'd", "it's", "IT'S", "tab\there", "multiple     spaces     between", " \n \n ",
    ]
    specials = [
        "<|begin_of_text|>Hello", "Hello<|end_of_text|>", "a <|end_of_text|> b", "<|endoftext|>text<|endoftext|>",
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<s>Hello</s>", "x <s> y </s> z", "<bos>hi<eos>",
        "<start_of_turn>user\nhello<end_of_turn>", "<|start|>system<|message|>hi<|end|>", "<unk> and <pad>",
        "<|reserved_special_token_0|>", "<<|end_of_text|>>", "<|end_of_text", "[CLS] [SEP] [MASK]",
    ]
    texts += specials
    rng = random.Random(1234)
    words = ("the of and to in is was that for on are with as I his they be at one have this from or had by hot "
             "word but what some we can out other were all there when up use your how said an each she which do "
             "their time if will way about many then them write would like so these her long make thing see him "
             "two has look more day could go come did number sound no most people my over know water than call "
             "first who may down side been now find").split()
    extra = ["🙂", "日本", "café", "naïve", "42", "3.5", "x_y", "don't", "Ünï", "—", "\u3000", "\t", "\n", "\r\n",
             "https://a.b/c", "#tag", "@user", "😀👍", "हिन्दी", "ไทย", "عربى", "中文", "  ", "e\u0301"]
    for _ in range(200):
        n = rng.randint(1, 14)
        parts = []
        for _ in range(n):
            w = rng.choice(words) if rng.random() < 0.75 else rng.choice(extra)
            if rng.random() < 0.15:
                w = w.capitalize()
            if rng.random() < 0.1:
                w = w.upper()
            parts.append(w)
            parts.append(rng.choice([" ", " ", " ", ", ", ". ", "", "  ", "\n"]))
        texts.append("".join(parts).rstrip(" ") if rng.random() < 0.7 else "".join(parts))
    return texts


def byte_level_bpe():
    """A tiny GPT-2-style tokenizer: the 256 byte tokens, a few merges, added tokens."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_char = {b: chr(c) for b, c in zip(bs, cs)}
    vocab = {byte_char[b]: i for i, b in enumerate(range(256))}
    merges = []

    def add_merge(a, b):
        merges.append([a, b])
        if a + b not in vocab:
            vocab[a + b] = len(vocab)

    for a, b in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("o", "n"), ("l", "l"),
                 ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("l", "d"), ("Ġwor", "ld"), ("H", "e"), ("He", "ll"), ("Hell", "o"),
                 ("Ġ", "Ġ"), ("ĠĠ", "ĠĠ"), ("Ċ", "Ċ"), ("1", "2"), ("12", "3"), ("a", "a"), ("aa", "aa"), ("Ã", "©")]:
        add_merge(a, b)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def byte_fallback_bpe():
    """A tiny Llama-2-style tokenizer: ▁ normalizer, byte fallback, BOS template."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    merges = []
    for ch in "▁abcdehlnortw":
        vocab.setdefault(ch, len(vocab))
    for a, b in [("▁", "t"), ("h", "e"), ("▁t", "he"), ("▁", "a"), ("l", "l"), ("e", "ll"), ("h", "ell"), ("hell", "o"),
                 ("▁", "hello"), ("▁", "w"), ("o", "r"), ("▁w", "or"), ("l", "d"), ("▁wor", "ld"), ("▁", "▁")]:
        merges.append(a + " " + b)
        vocab.setdefault(a + b, len(vocab))
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
            {"id": 1, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
            {"id": 2, "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
        ],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def word_piece():
    """A tiny BERT-style tokenizer: BertNormalizer (lowercase, accents, CJK), BertPreTokenizer, WordPiece."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "jump", "##s", "##ed",
              "over", "lazy", "dog", "hello", "world", "!", ",", ".", "?", "'", "un", "##aff", "##able", "cafe",
              "resume", "日", "本", "语", "a", "##b", "##c", "1", "##2", "##3", "-", "(", ")", "[", "]", "to", "##day"]
    vocab = {t: i for i, t in enumerate(tokens)}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
            for i, t in enumerate(tokens[:5])
        ],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def added_flags():
    """The byte-level tokenizer with added tokens of every flag: lstrip, rstrip, single_word, normalized."""
    t = byte_level_bpe()
    t["normalizer"] = {"type": "Lowercase"}
    n = len(t["model"]["vocab"]) + 1
    t["added_tokens"] += [
        {"id": n, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": True},
        {"id": n + 1, "content": "<sep>", "single_word": False, "lstrip": False, "rstrip": True, "normalized": False, "special": True},
        {"id": n + 2, "content": "cat", "single_word": True, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"id": n + 3, "content": "DOG", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": False},
        {"id": n + 4, "content": "Bird", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False},
    ]
    t["pre_tokenizer"]["add_prefix_space"] = True
    t["post_processor"] = {"type": "RobertaProcessing", "sep": ["<sep>", n + 1], "cls": ["<|endoftext|>", n - 1],
                           "trim_offsets": True, "add_prefix_space": True}
    return t


def word_level(pre_tokenizer, normalizer=None):
    """A WordLevel model (a piece is one token, or [UNK]): the encodings show exactly how
    the normalizer and pre-tokenizer cut the text (offsets, word ids)."""
    words = ["[UNK]", "hello", "world", "the", "-", ",", "--", " ", "1", "2", "3", "123", "cafe", "▁hello", "▁world"]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)}, "unk_token": "[UNK]"},
    }


def split_fixtures():
    out = {}
    for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        for invert in [False, True]:
            name = "split_%s%s" % (behavior.lower(), "_invert" if invert else "")
            out[name] = word_level({"type": "Split", "pattern": {"Regex": "[\\s,-]"}, "behavior": behavior,
                                    "invert": invert})
    out["split_string_isolated"] = word_level({"type": "Split", "pattern": {"String": "--"}, "behavior": "Isolated",
                                               "invert": False})
    return out


def metaspace_fixtures():
    out = {}
    for name, scheme, split in [("metaspace_first_split", "first", True), ("metaspace_always_nosplit", "always", False),
                                ("metaspace_never_split", "never", True)]:
        t = byte_fallback_bpe()
        t["normalizer"] = None
        t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
        t["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}]}
        t["added_tokens"].append({"id": 3, "content": "<sep>", "single_word": False, "lstrip": False, "rstrip": False,
                                  "normalized": False, "special": True})
        t["model"]["vocab"]["<sep>"] = 3
        t["model"]["vocab"] = {k: (v if v < 3 or k == "<sep>" else v + 1) for k, v in t["model"]["vocab"].items()}
        out[name] = t
    return out


def normalizer_fixtures():
    return {
        "normalizers_sequence": word_level(
            {"type": "Whitespace"},
            {"type": "Sequence", "normalizers": [
                {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "NFC"}]}),
        "normalizers_nfkc_prepend": word_level(
            {"type": "WhitespaceSplit"},
            {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Prepend", "prepend": "▁"},
                                                 {"type": "Replace", "pattern": {"String": " "}, "content": " ▁"}]}),
        "normalizers_nfd": word_level({"type": "WhitespaceSplit"}, {"type": "NFD"}),
        "pre_tokenizers_digits_punctuation": word_level(
            {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"},
                                                   {"type": "Digits", "individual_digits": True}]}),
        "pre_tokenizers_digits_contiguous": word_level({"type": "Digits", "individual_digits": False}),
        "pre_tokenizers_bert": word_level({"type": "BertPreTokenizer"}),
    }


def unigram_fixtures():
    """Tiny Unigram (SentencePiece-style) tokenizers: Metaspace, unk fusing, byte fallback."""
    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("▁", -2.0), ("▁the", -3.0), ("▁hello", -4.0),
              ("▁world", -4.5), ("he", -5.0), ("llo", -5.5), ("wor", -6.0), ("ld", -6.0), ("▁he", -5.2), ("ll", -5.8),
              ("o", -7.0), ("cat", -6.5), ("▁c", -6.8), ("at", -6.1), ("s", -7.5), ("▁a", -6.3), ("1", -8.0), ("2", -8.0),
              ("12", -7.9), ("日本", -7.0), ("日", -8.5), ("本", -8.5)]
    for ch in "abcdefghijklmnopqrstuvwxyz":
        if (ch, -9.0) not in pieces and ch not in [p for p, _ in pieces]:
            pieces.append((ch, -9.0 - 0.01 * (ord(ch) - 97)))
    out = {}
    for name, fallback in [("unigram", False), ("unigram_byte_fallback", True)]:
        vocab = [list(p) for p in pieces]
        if fallback:
            vocab += [["<0x%02X>" % b, -20.0] for b in range(256)]
        out[name] = {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, t in enumerate(["<unk>", "<s>", "</s>"])],
            "normalizer": {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "</s>", "type_id": 1}}],
                               "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
            "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": fallback},
        }
    return out


def small_corpus():
    return [
        "Hello world", "the world", "  the  world  ", "hello\n\nworld", "123 1234", "aaaaaaaaa", "café é", "日本語",
        "😀 ok", "<|endoftext|>Hello", "Hello <|endoftext|> world", "a<mask>b", "a   <mask> b", "x <sep>   y",
        "cat concat cat. cats", "the cat", "DOG dog Dog", "Bird bird BIRD", "Hello there, the quick brown fox!",
        "The quick brown fox jumped over the lazy dog's back (today).", "unaffable [MASK] 日本语 123 abc",
        "Café résumé", "\ttabs\tand\r\nnewlines", "", " ", "<s>Hello</s> world", "hello world", "x\u00e9\u4e2d\U0001F600",
        "the   the", "tt hh", "a b c", "hello-world, the--world", "hello,,, world -- the", " -hello- ", "a--b--c",
        "--", ",", "12345 and 1 2 3", "x1y22z333", "ﬁne Ｈｅｌｌｏ ①", "Café  Résumé   ", "  cafe\u0301 ", "hello <sep> world",
        "<sep>hello", "hello<sep>", "wait... what?!", "e.g. (this) [that] {other}", "hello\u3000world\u00a0the",
    ]


def main():
    os.makedirs(os.path.join(OUT, "conformance"), exist_ok=True)
    with open(os.path.join(OUT, "conformance", "corpus.jsonl"), "w", encoding="utf-8") as f:
        for t in corpus():
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    with open(os.path.join(OUT, "small_corpus.jsonl"), "w", encoding="utf-8") as f:
        for t in small_corpus():
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    tokenizers = {"byte_level_bpe": byte_level_bpe(), "byte_fallback_bpe": byte_fallback_bpe(),
                  "word_piece": word_piece(), "added_flags": added_flags()}
    tokenizers.update(split_fixtures())
    tokenizers.update(metaspace_fixtures())
    tokenizers.update(normalizer_fixtures())
    tokenizers.update(unigram_fixtures())
    for name, tok in tokenizers.items():
        with open(os.path.join(OUT, name + ".tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
    with open(os.path.join(OUT, "small_tokenizers.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokenizers) + "\n")


if __name__ == "__main__":
    main()
