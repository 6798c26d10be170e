#!/usr/bin/env python3
"""Writes the tokenizer's test fixtures (tests/fixtures/tokenizer/):

- conformance/corpus.jsonl: about a thousand strings (one JSON string per line): prose, code,
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
        "Hello world!", "Hello, world! How are you doing today?", "The quick brown fox jumps over the lazy dog.", "The capital of France is",
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
    return texts + more_corpus()


def more_corpus():
    """Strings 301 on, by category (the first 300 stay as they were): prose in several
    languages, code, digits, URLs, emoji and ZWJ sequences, CJK, right-to-left and Indic
    scripts, NFC/NFD pairs, whitespace runs, every model's special tokens written in the
    text, very long words, control characters, and random mixtures of all of them."""
    rng = random.Random(20261127)
    texts = [
        # Prose.
        "It was the best of times, it was the worst of times, it was the age of wisdom.",
        "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse...",
        "The mitochondria is the powerhouse of the cell; ATP synthase makes ATP from ADP and Pi.",
        "She said, \"Don't go there!\" — but he'd already left (at 5 o'clock).",
        "Q: What's 2+2?\nA: It's 4.", "Mr. Smith & Mrs. Jones vs. Dr. Who, Ph.D., et al.",
        "Le cœur a ses raisons que la raison ne connaît point.", "Übermäßige Größe führt zu Ärger über Öl.",
        "¿Dónde está la biblioteca? ¡Allí está!", "Ça va? Très bien, merci. À bientôt!",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
        "Съешь же ещё этих мягких французских булок, да выпей чаю.", "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
        "Árvíztűrő tükörfúrógép", "Høj bølge på fjorden, æble og øl.", "Tiếng Việt có dấu: Người ơi, đừng đi.",
        "Türkçe: çağdaş, ığdır, şişe, öğrenci, üzüm.", "Ελευθερία ή θάνατος· ο λόγος του ανθρώπου.",
        "Kiswahili ni lugha ya Afrika Mashariki.", "Ein Satz mit\u00a0geschütztem Leerzeichen und ‚Anführungszeichen‘.",
        # Code.
        "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\nprint(x.shape)",
        "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }",
        "fn main() {\n    let v: Vec<u8> = vec![0xFF; 16];\n    println!(\"{:?}\", v);\n}",
        "const f = async (x) => { await fetch(`/api/${x}`); return x?.y ?? null; };",
        "{\"name\": \"attn\", \"version\": [1, 2, 3], \"ok\": true, \"none\": null}",
        "<div id=\"main\"><p>Hello &amp; welcome</p><br/></div>", "SELECT a.id, COUNT(*) FROM a JOIN b ON a.id=b.aid GROUP BY 1;",
        "for i in $(seq 1 10); do echo \"$i\"; done 2>&1 | tee log.txt", "x = [i**2 for i in range(10) if i % 2 == 0]",
        "\\begin{equation} E = mc^2 \\end{equation}", "$$\\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2}$$",
        "# Title\n\n- item one\n- item two\n\n```python\nprint('hi')\n```\n", "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.com$",
        "if (a && b || !c) { x <<= 2; y >>= 1; z ^= ~w; }", "def __init__(self, *args, **kwargs):\n\tsuper().__init__()",
        "    indented\n        more\n            most", "a==b!=c<=d>=e->f=>g::h", "0xDEADBEEF 0o755 0b1101 1_000_000",
        "key: value\nlist:\n  - a\n  - b\n", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
        # URLs and addresses.
        "https://en.wikipedia.org/wiki/Attention_(machine_learning)", "http://localhost:8080/api/v1/users?id=42&sort=desc",
        "ftp://files.example.net/pub/file-1.2.3.tar.gz", "git@github.com:owner/repo.git", "user.name+tag@sub.domain.co.jp",
        "https://例え.jp/パス?q=検索", "https://xn--r8jz45g.jp/", "file:///home/user/My%20Documents/a.txt",
        "192.168.0.1:443 and [2001:db8::1]:80", "www.example.com/index.html#section-2.3",
        # Emoji and ZWJ sequences.
        "👩\u200d💻 coding", "🏳\ufe0f\u200d🌈 pride", "🧑🏾\u200d🚀 astronaut", "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3 keycaps",
        "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f Scotland", "👨\u200d❤\ufe0f\u200d💋\u200d👨", "🇺🇳🇪🇺🇬🇧🇩🇪",
        "☺︎ vs ☺️", "🫠🫡🫢🫣🫤🥹", "👋🏻👋🏼👋🏽👋🏾👋🏿", "text😀text😀text", "emoji at end 🎉", "🎉 emoji at start",
        "🧔\u200d♀\ufe0f 👁\ufe0f\u200d🗨\ufe0f", "♥♦♣♠ ★☆ ✓✗ ☐☑",
        # CJK.
        "我爱自然语言处理。", "今日はいい天気ですね。散歩に行きましょう！", "東京都渋谷区神南1-2-3", "한국어와 日本語와 中文",
        "𠀀𠀁𠀂 (CJK Extension B)", "龍龘齉", "「引用」『二重』【括弧】〈山〉《书名》", "ｱｲｳｴｵ ｶﾞｷﾞｸﾞ",
        "ひらがな カタカナ 漢字 ー〜", "中文，全角标点；还有：问号？感叹号！", "繁體中文與简体中文", "第1章 第２章 第三章",
        # Right-to-left and Indic scripts.
        "السلام عليكم ورحمة الله وبركاته", "كِتَابٌ مُشَكَّلٌ بِالْحَرَكَاتِ", "عدد ١٢٣ و ۴۵۶", "שָׁלוֹם עֲלֵיכֶם", "mixed עברית and English",
        "क्षत्रिय ज्ञान श्री", "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు", "ਪੰਜਾਬੀ", "ગુજરાતી", "ಕನ್ನಡ", "മലയാളം",
        "ภาษาไทย ๑๒๓", "ພາສາລາວ", "ខ្មែរ", "မြန်မာ", "ᠮᠣᠩᠭᠣᠯ", "ትግርኛ አማርኛ", "Հայերեն", "ქართული",
    ]
    # NFC/NFD pairs (and NFKC-sensitive forms).
    for w in ["café", "naïve", "résumé", "Ångström", "jalapeño", "façade", "crème brûlée", "Zürich", "São Paulo",
              "Dvořák", "Łódź", "Ελλάδα", "Ἀθῆναι", "Việt Nam", "Đà Nẵng", "한국어", "가나다", "がぎぐげご", "パピプペポ",
              "ñandú", "Ærøskøbing", "İzmir", "Kraków", "Žluťoučký kůň", "ŞİŞLİ", "ǅemal", "Ǖǖ", "ḱṃ",
              "e\u0301\u0301", "a\u0300\u0301\u0302"]:
        texts.append(unicodedata.normalize("NFC", w))
        texts.append(unicodedata.normalize("NFD", w))
        texts.append(unicodedata.normalize("NFC", w) + " " + unicodedata.normalize("NFD", w))
    for w in ["ﬁ ﬂ ﬃ", "Ⅻ ⅻ", "㎏ ㎞ ㏄", "①⑩⑳", "¹²³⁴", "Ｈｅｌｌｏ", "ℌℑℜ", "µ vs μ", "Ω vs Ω", "㍻ ㋿"]:
        texts.append(w)
        texts.append(unicodedata.normalize("NFKC", w))
    # Digits.
    for n in range(1, 25):
        texts.append("".join(rng.choice("0123456789") for _ in range(n)))
    texts += ["3.14", "-0.5e+10", "$1,234.56", "€99,99", "¥1000", "100%", "1/2 3/4", "12:34:56.789", "2024-02-29T23:59:59Z",
              "+1 (555) 123-4567", "v1.2.3-beta.4+build.5", "ISBN 978-3-16-148410-0", "1st 2nd 3rd 4th 21st",
              "１２３４５", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "໑໒໓", "Ⅰ Ⅱ Ⅲ Ⅳ", "x1 y22 z333 w4444", "1234567890" * 5]
    # Whitespace runs.
    spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\u3000", "\u00a0", "\u2028", "\u0085", "\u200b", "\ufeff",
              "\u2003", "\u202f", "\n\n", "\r\n\r\n", " \n ", "\t\t", "\u3000\u3000"]
    for _ in range(70):
        run = "".join(rng.choice(spaces) for _ in range(rng.randint(1, 6)))
        a, b = rng.choice(["word", "日本", "café", "x", "42", "😀", "ไทย", ""]), rng.choice(["next", "中文", "é", "y", "7", "!", ""])
        texts.append(rng.choice(["", run]) + a + run + b + rng.choice(["", run]))
    texts += [" " * n for n in (3, 4, 5, 8, 16, 17, 33)] + ["\n" * n for n in (2, 3, 7)] + ["\r\n" * 4, "\u3000" * 5, "\t" * 9]
    # Special tokens of every model written in the text, alone, adjacent, spaced, broken.
    specials = ["<|endoftext|>", "[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<|begin_of_text|>", "<|end_of_text|>",
                "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>", "<|im_start|>",
                "<|im_end|>", "<|vision_start|>", "<think>", "</think>", "<tool_call>", "<s>", "</s>", "<unk>", "<bos>", "<eos>",
                "<pad>", "<mask>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<unused0>", "<|startoftext|>",
                "<|return|>", "<|channel|>", "<|message|>", "<|call|>", "<|constrain|>"]
    for s in specials:
        texts.append(s)
        texts.append("before " + s + " after")
        texts.append("x" + s + "y")
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(2, 6)):
            parts.append(rng.choice(specials) if rng.random() < 0.5 else rng.choice(["hi", " ", "  ", "\n", "text ", " word", "日本", "é"]))
        texts.append("".join(parts))
    texts += ["<|endoftext", "endoftext|>", "<|im_start", "[CLS", "CLS]", "<s", "s>", "< s >", "<|eot_id|", "<<s>>", "[[SEP]]",
              "<|<|im_end|>|>", "<|end_of_text|><|end_of_text|><|end_of_text|>", "[SEP][SEP]", "<S>", "[cls]", "<BOS>"]
    # Very long words.
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in (101, 150, 200, 500, 1000):
        texts.append("".join(rng.choice(letters) for _ in range(n)))
    texts += ["Pneumonoultramicroscopicsilicovolcanoconiosis", "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
              "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch", "ab" * 200, "é" * 300, "日本" * 100, "😀" * 100,
              "ไทย" * 100, "e\u0301" * 150, "9" * 400, "_" * 200, "." * 300, "Ab1" * 150, "a-b" * 100]
    # Control characters (BertNormalizer's clean_text removes them) and odd code points.
    texts += ["nul\x00byte", "bell\x07 and\x1b[31mred\x1b[0m", "del\x7f", "form\x0cfeed\x0bvtab", "\ufffd replacement",
              "soft\u00adhyphen", "rtl\u202emark\u202c", "word\u2060joiner", "\U0001d400\U0001d401 math bold",
              "private \ue000\uf8ff", "noncharacter \ufdd0", "variation \ufe0e\ufe0f", "\U0010fffd end of planes",
              "combining alone \u0301\u0308", "\u200d zwj alone \u200c"]
    # Random mixtures of all of the above.
    pool = ([w for w in texts if len(w) < 40] + ["the", "of", "and", "is", "attention", "token", "Hello", "world", " ", ", ",
                                                 ". ", "\n"])
    blocks = [(0x20, 0x7e), (0xa0, 0x17f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f),
              (0xe00, 0xe7f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0x1f300, 0x1f64f), (0x2000, 0x206f),
              (0x300, 0x36f)]
    while len(texts) < 760:
        parts = []
        for _ in range(rng.randint(1, 10)):
            if rng.random() < 0.7:
                parts.append(rng.choice(pool))
            else:
                lo, hi = rng.choice(blocks)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8))))
            parts.append(rng.choice(["", " ", " ", "  ", "\n", ", "]))
        texts.append("".join(parts))
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
