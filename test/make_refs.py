#!/usr/bin/env python3
"""Write the Hugging Face reference fixtures under test/refs/<name>/ for the C tests.

Development tool only: the fixtures are committed and CI never runs Python.

    HF_HUB_OFFLINE=1 python test/make_refs.py            # every target whose model/tokenizer exists
    HF_HUB_OFFLINE=1 python test/make_refs.py llama2-tiny tok-metaspace

Everything runs on the CPU in fp32 (weights upcast from their stored dtype, eager attention).
Format: see test/refs/README.md.  To add a target, add an entry to TARGETS below.
"""

import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFS = os.path.join(ROOT, "test", "refs")
MIN_GAP = 1e-3
SEED = 0

# ----------------------------------------------------------------------------------------------
# Targets.
#   model:        folder relative to the repo root (a Hugging Face model folder, or for token-only
#                 targets the folder holding tokenizer.json)
#   tokens_only:  True = write tokens.txt only
#   prompts:      3 prompt strings (encoded with the tokenizer, BOS included if the tokenizer adds
#                 it); all 3 give greedy.txt lines, the first LOGIT_PROMPTS give full-model logits
#   skips:        skip patterns applied to prompt 0 for logits ("attn:1,3;mlp:0,4", 0-based layers)
#   max_new:      greedy continuation length (default 64)
#   prompt_len:   allowed prompt length range in tokens, BOS included (default (12, 24))
#   logit_prompts: how many prompts get a full-model logits case (default 2)
#   tokens:       False = no tokens.txt (the tokenizer is another target's)
#   make:         a function that writes the target's folder first (its tokenizer.json)
#   extra:        strings encoded after CORPUS for this target only

KJV_PROMPTS = [
    "In the beginning God created the heaven and the earth.",
    "And the LORD said unto Moses, Go in unto Pharaoh,",
    "Blessed are the meek: for they shall inherit",
]

# The two random tiny models have the same 6 layers: the same skip sets for both.
TINY_SKIPS = ["attn:1,3", "mlp:2,4", "attn:0,2,4;mlp:1,2,5"]

TARGETS = {
    "llama2-tiny": dict(model="tiny_models/llama2-tiny-random", prompts=KJV_PROMPTS, skips=TINY_SKIPS),
    "llama3-tiny": dict(model="tiny_models/llama3-tiny-random", prompts=KJV_PROMPTS, skips=TINY_SKIPS),
    # tie_word_embeddings true and an lm_head.weight that differs: transformers uses the file's head.
    # Its tokenizer is llama3-tiny's (no tokens.txt of its own).
    "llama3-tied-head": dict(model="tiny_models/llama3-tied-head", prompts=KJV_PROMPTS, skips=TINY_SKIPS,
                             tokens=False),
    "tok-metaspace": dict(model="tiny_models/tokenizers/metaspace", tokens_only=True),
    "tok-gpt2-digits": dict(model="tiny_models/tokenizers/gpt2-digits", tokens_only=True),
    "tok-stories260k": dict(model="tiny_models/tokenizers/stories260k", tokens_only=True),
    # llama2-tiny-random's tokenizer after transformers' add_tokens and add_special_tokens, as a
    # fine-tune saves it (issue 48): normalized added tokens under the Prepend/Replace normalizer.
    "tok-llama2-added": dict(model="tiny_models/tokenizers/llama2-added", tokens_only=True,
                             make=lambda t: make_added_tokens(t), extra=lambda: ADDED_CORPUS),
    # The trained KJV model (tiny_models/train_kjv.py); the prompts open with "In the beginning
    # God", "And the LORD said unto Moses", "Blessed are the" (12-14 tokens with BOS).
    "kjv": dict(
        model="tiny_models/kjv-12l",
        prompts=KJV_PROMPTS,
        skips=["attn:2,5,8", "mlp:3,7,10", "attn:1,4,6,9;mlp:2,5,8,10"],
    ),
    # The same architecture and tokenizer trained with sublayer dropout
    # (tiny_models/train_kjv_skip.py): the skips are the demo's set and a 12-of-24 one.
    "kjv-skip": dict(
        model="tiny_models/kjv-12l-skip",
        prompts=KJV_PROMPTS,
        skips=["attn:2,4,6,8,10;mlp:3,5,7,9", "attn:2,3,4,5,6,7,8,9;mlp:3,5,7,9"],
    ),
    # SmolLM2-135M-Instruct (tiny_models/get_smollm2.sh; not committed, the fixtures are).
    # Vocab 49152: 5-token prompts keep each .f32 case under 1 MB. No BOS (the tokenizer adds none).
    "smollm2": dict(
        model="tiny_models/smollm2-135m",
        prompts=["Once upon a time,", "The meaning of life is"],
        skips=["attn:4,9,14,19,24;mlp:6,12,18,24"],
        prompt_len=(4, 8),
    ),
    # config.json variants (CONFIG_VARIANTS below) and what transformers builds from each
    "configs": dict(model="tiny_models/llama2-tiny-random", configs=True, tokens=False),
}

# ----------------------------------------------------------------------------------------------
# Config variants (target "configs"): llama2-tiny-random's config.json edited, and what
# transformers builds from each: test_forward reads every one with read_config and compares.

L3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 64}


def _set(**kv):
    return lambda c: c.update(kv)


def _drop(key):
    return lambda c: c.pop(key)


def _l3(**kv):
    return dict(L3, **kv)


def _text(edit):  # an edit of the JSON text, for what a dict cannot hold (a key twice, NaN)
    return ("text", edit)


# (name, an edit of the config dict or of its JSON text)
CONFIG_VARIANTS = [
    ("as-is", None),
    ("rope_parameters-theta", _set(rope_parameters={"rope_theta": 5e5})),
    ("rope_parameters-default", _set(rope_parameters={"rope_type": "default", "rope_theta": 5e5})),
    ("rope_parameters-llama3", _set(rope_parameters=_l3(rope_theta=5e5))),
    ("rope_scaling-llama3", _set(rope_scaling=dict(L3))),
    ("rope_scaling-type-key", _set(rope_scaling={("type" if k == "rope_type" else k): v for k, v in L3.items()})),
    ("rope_scaling-theta-inside", _set(rope_scaling=_l3(rope_theta=5e5))),
    ("rope_scaling-over-rope_parameters-default", _set(rope_scaling=dict(L3), rope_parameters={"rope_type": "default"})),
    ("rope_scaling-over-rope_parameters-factor", _set(rope_scaling=dict(L3), rope_parameters=_l3(factor=4.0))),
    ("rope_scaling-over-rope_parameters-theta", _set(rope_scaling=dict(L3), rope_parameters={"rope_theta": 5e5})),
    ("rope_scaling-empty", _set(rope_scaling={}, rope_parameters=_l3(rope_theta=5e5))),
    ("rope_scaling-false", _set(rope_scaling=False)),
    ("rope_scaling-number", _set(rope_scaling=5)),
    ("rope_parameters-number", _set(rope_parameters=5)),
    ("llama3-no-original-max", _set(rope_scaling={k: v for k, v in L3.items() if k != "original_max_position_embeddings"})),
    ("llama3-no-factor", _set(rope_scaling={k: v for k, v in L3.items() if k != "factor"})),
    ("llama3-original-max-float", _set(rope_scaling=_l3(original_max_position_embeddings=64.0))),
    ("rope_type-null", _set(rope_scaling=_l3(rope_type=None))),
    ("rope_type-yarn", _set(rope_scaling={"rope_type": "yarn", "factor": 2.0})),
    ("rope_theta-null", _set(rope_theta=None)),
    ("rope_theta-twice", _text(lambda s: s[:-1] + ', "rope_theta": 500000.0}')),
    ("rope_theta-NaN", _text(lambda s: s.replace('"rope_theta": 10000.0', '"rope_theta": NaN'))),
    ("eos_token_id-twice", _text(lambda s: s[:-1] + ', "eos_token_id": [2, 5]}')),
    ("eos_token_id-list", _set(eos_token_id=[2, 7])),
    ("model_type-mistral-sliding_window", _set(model_type="mistral", sliding_window=4)),
    ("model_type-absent", _drop("model_type")),
    ("model_type-LLaMA", _set(model_type="LLaMA")),
    ("architectures-mistral", _set(architectures=["MistralForCausalLM"])),
    ("architectures-absent", _drop("architectures")),
    ("hidden_act-swish", _set(hidden_act="swish")),
    ("hidden_act-null", _set(hidden_act=None)),
    ("rms_norm_eps-null", _set(rms_norm_eps=None)),
    ("tie_word_embeddings-null", _set(tie_word_embeddings=None)),
    ("tie_word_embeddings-true", _set(tie_word_embeddings=True)),
    ("attention_bias-null", _set(attention_bias=None)),
    ("head_dim-null", _set(head_dim=None)),
    ("num_key_value_heads-null", _set(num_key_value_heads=None)),
    ("num_key_value_heads-2", _set(num_key_value_heads=2)),
    ("hidden_size-not-a-multiple-of-heads", _set(num_attention_heads=3, num_key_value_heads=3)),
]


def write_config_refs(out):
    """cases.txt: per variant `name<TAB>config.json text<TAB>verdict`, the verdict `refused` (from_pretrained
    fails, builds another class than LlamaForCausalLM, or its RoPE frequencies are not finite) or `ok
    head_dim n_kv_heads tied rms_norm_eps eos_ids(comma-separated, - for none) inv_freq...`."""
    import json
    import tempfile
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    transformers.logging.set_verbosity_error()
    with open(os.path.join(ROOT, "tiny_models/llama2-tiny-random/config.json")) as f:
        base = json.load(f)
    lines = []
    for name, edit in CONFIG_VARIANTS:
        c = dict(base)
        if isinstance(edit, tuple):
            text = edit[1](json.dumps(c))
        else:
            if edit is not None:
                edit(c)
            text = json.dumps(c)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write(text)
            try:
                cfg = AutoConfig.from_pretrained(d)
                model = AutoModelForCausalLM.from_config(cfg)
                inv = model.model.rotary_emb.inv_freq.float()
                assert type(model).__name__ == "LlamaForCausalLM" and bool(torch.isfinite(inv).all())
                eos = cfg.eos_token_id
                eos = "-" if eos is None else ",".join(map(str, eos if isinstance(eos, list) else [eos]))
                verdict = (f"ok {cfg.head_dim} {cfg.num_key_value_heads} {int(cfg.tie_word_embeddings)} "
                           f"{cfg.rms_norm_eps!r} {eos} " + " ".join(f"{float(x):.9g}" for x in inv))
            except Exception:  # noqa: BLE001 (any failure: transformers does not build it)
                verdict = "refused"
        lines.append(f"{name}\t{text}\t{verdict}\n")
        print(f"  configs/{name}: {verdict.split(' ')[0]}")
    with open(os.path.join(out, "cases.txt"), "w", newline="\n") as f:
        f.writelines(lines)


# ----------------------------------------------------------------------------------------------
# Tokenizer corpus: the same list for every tokenizer.

LONG_1 = (
    "And it came to pass, when men began to multiply on the face of the earth, and daughters were "
    "born unto them, That the sons of God saw the daughters of men that they were fair; and they took "
    "them wives of all which they chose. And the LORD said, My spirit shall not always strive with "
    "man, for that he also is flesh: yet his days shall be an hundred and twenty years."
)
LONG_2 = (
    "Self-speculative decoding drafts tokens with a subset of the model's own layers (skipping some "
    "attention and MLP sublayers), then verifies the draft with the full model in one batched pass. "
    "Accepted tokens cost ~1/3 of a full step; on 2024-11-21 we measured 1.73x at T=0, batch 1, "
    "with K=4 drafts. Naïve implementations forget the KV cache: café, jalapeño, 東京, Ελλάδα, 🚀!\n"
    "Second line\twith a tab, and    four spaces."
)
LONG_CODE = (
    "static float dot(const float *a, const float *b, int n) {\n"
    "    float s = 0.0f;\n"
    "    for (int i = 0; i < n; ++i) {\n"
    "        s += a[i] * b[i];   // accumulate\n"
    "    }\n"
    "    return s;\n"
    "}\n"
    "\n"
    "def rmsnorm(x, w, eps=1e-5):\n"
    "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w\n"
)

CORPUS = [
    # empty / whitespace
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "a  b",
    "a   b    c",
    "   leading",
    "trailing   ",
    "\n\n\nx",
    "\t\tindent",
    "x\n\ny",
    "line one\r\nline two\r\n",
    " \n \t ",
    "word\u00a0nbsp",
    "\u00a0",
    "thin\u2009space and ideographic\u3000space",
    # ASCII prose
    "Hello world",
    "Hello, world!",
    "hello",
    "Hello",
    "HELLO WORLD",
    "The quick brown fox jumps over the lazy dog.",
    "A man, a plan, a canal: Panama.",
    "What? No! Yes... maybe; (perhaps) [or not] {who knows}.",
    "e-mail: someone@example.com, url: https://example.org/a/b?c=d&e=f#g",
    "She said \"hi\" and he said 'bye'.",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "a",
    "I",
    "x",
    ".",
    "!!!",
    "...",
    "--",
    # KJV-style verses
    "In the beginning God created the heaven and the earth.",
    "And the earth was without form, and void; and darkness was upon the face of the deep.",
    "And God said, Let there be light: and there was light.",
    "The LORD is my shepherd; I shall not want.",
    "For God so loved the world, that he gave his only begotten Son,",
    "Thou shalt not kill. Thou shalt not commit adultery. Thou shalt not steal.",
    "And Jacob said unto Laban, Give me my wife, for my days are fulfilled,",
    "Genesis 1:1 And God saw the light, that it was good.",
    "Ge1:1 In the beginning",
    "And Moses stretched forth his hand over the sea; and the LORD caused the sea to go back",
    # contractions
    "don't",
    "Don't",
    "I'LL",
    "it's",
    "It'S",
    "we're they've I'm you'd she'll",
    "rock 'n' roll",
    "''quoted''",
    "o'clock",
    "dont't",
    # digits and numbers
    "0",
    "7",
    "42",
    "123",
    "1234",
    "1234567",
    "12345678901234567890",
    "3.14159",
    "-2.5e-10",
    "2024-11-21",
    "10:30 AM",
    "$1,000,000.00",
    "100%",
    "v1.2.3",
    "x1y22z333",
    "0x7fffffff",
    "1st 2nd 3rd 4th",
    "٣٤٥ ١٢",
    # code
    "int main(void) { return 0; }",
    "if (a != b && c <= d || e >= f) { x += 1; y -= 2; z *= 3; }",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tprintf(\"%d\\n\", argc);\n\treturn 0;\n}\n",
    "for (size_t i = 0; i < n; ++i) a[i] = b[i] << 2 | c[i] >> 1;",
    "def f(x):\n    if x > 0:\n        return x ** 2\n    return -x\n",
    "class Foo(Bar):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n",
    "print(f\"{name!r}: {value:>10.3f}\")",
    "x = [i * i for i in range(10) if i % 2 == 0]",
    "lambda a, b: (a + b) // 2",
    "/* comment */ // another\n",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "SELECT * FROM users WHERE id = 42;",
    "    ",
    "\t\t\tdeep();",
    "a->b->c; p = &q; *p++ = ~x ^ y;",
    # accented Latin and other scripts
    "café naïve Ærø",
    "Crème brûlée à la mode, s'il vous plaît.",
    "Straße Größe Übermaß",
    "señor niño año jalapeño",
    "Dvořák Łódź Kraków Čeština",
    "Ελληνικά: Καλημέρα κόσμε",
    "Русский текст: Привет, мир!",
    "你好，世界",
    "日本語のテキスト",
    "한국어 텍스트",
    "中文English混合text",
    "עברית שלום",
    "العربية مرحبا",
    "हिन्दी नमस्ते",
    "ไทย สวัสดี",
    "e\u0301 (combining acute) vs \u00e9",
    "ﬁ ligature ＡＢＣ fullwidth",
    # emoji
    "😀",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇺🇸🇯🇵🇫🇷",
    "I ❤️ Rust 🦀 and C 🚀!",
    "emoji😀inside😀words",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math 𝑥² + 𝑦² = 𝑧²",
    # metaspace character and special-token text
    "▁",
    "▁▁hello▁world",
    "a▁b",
    "a<s>b",
    "<s>",
    "</s>",
    "a</s>b",
    "<unk>",
    "x<|endoftext|>y",
    "<|endoftext|>",
    "<|im_start|>user\nhi<|im_end|>",
    "<|begin_of_text|>Hello",
    "Hello<|end_of_text|>",
    " <s> ",
    "<0x41>",
    "<s",
    # control characters
    "\x00",
    "a\x00b",
    "\x01\x02\x03\x1b[0m",
    "bell\x07 backspace\x08 vt\x0b ff\x0c",
    "\x7f",
    "\u200b zero width \u200d joiner \ufeff bom",
    "\u2028line sep\u2029para sep",
    # long paragraphs
    LONG_1,
    LONG_2,
    LONG_CODE,
]

# What tok-llama2-added adds: tokens a fine-tune adds with add_tokens (normalized=True, special=False:
# matched in normalized text, so after a space or at a piece's start) and one with
# add_special_tokens (normalized=False); and the strings that reach them.
ADDED_TOKENS = ["<|im_start|>", "<|im_end|>", "hello world", "ab", "abc", "\u2581x", "<tok>",
                "\u65e5\u672c"]
ADDED_SPECIAL = "<extra>"
ADDED_CORPUS = [
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|> user <|im_end|>",
    "say hello world!",
    "hello world",
    "hello  world hello world",
    "ab abc abcd cab ab",
    "\u2581x x \u2581x",
    "a <tok> b",
    "a<tok>b",
    "<tok>",
    " <tok>",
    "\u65e5\u672c \u8a9e \u65e5\u672c",
    "<extra>x <extra> y",
    "hello world<extra>hello world",
]

# ----------------------------------------------------------------------------------------------


def make_added_tokens(t):
    """tok-llama2-added's tokenizer.json: transformers' own add_tokens and save_pretrained, then the
    ids of transformers' encode checked against those of tokenizers (which tokens.txt holds)."""
    from transformers import AutoTokenizer
    src, out = os.path.join(ROOT, "tiny_models", "llama2-tiny-random"), target_dir(t)
    tok = AutoTokenizer.from_pretrained(src)
    assert tok.add_tokens(ADDED_TOKENS) == len(ADDED_TOKENS)
    assert tok.add_special_tokens({"additional_special_tokens": [ADDED_SPECIAL]}) == 1
    tmp = out + ".tmp"
    tok.save_pretrained(tmp)
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(tmp, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    shutil.rmtree(tmp)
    back, plain = AutoTokenizer.from_pretrained(src), load_tokenizer(t)
    back.add_tokens(ADDED_TOKENS)
    back.add_special_tokens({"additional_special_tokens": [ADDED_SPECIAL]})
    for s in CORPUS + ADDED_CORPUS:
        assert back.encode(s) == plain.encode(s, add_special_tokens=True).ids, s


def target_dir(t):
    return os.path.normpath(os.path.join(ROOT, t["model"]))


def load_tokenizer(t):
    return Tokenizer.from_file(os.path.join(target_dir(t), "tokenizer.json"))


def write_tokens(name, t, out):
    tok = load_tokenizer(t)
    corpus = CORPUS + (t["extra"]() if "extra" in t else [])
    with open(os.path.join(out, "tokens.txt"), "w", encoding="ascii", newline="\n") as f:
        for s in corpus:
            ids = tok.encode(s, add_special_tokens=True).ids
            dec = tok.decode(ids, skip_special_tokens=True)
            f.write(f"{s.encode('utf-8').hex()}\t{' '.join(map(str, ids))}\t{dec.encode('utf-8').hex()}\n")
    print(f"  {name}: tokens.txt ({len(corpus)} strings)")


def parse_skip(spec):
    """'attn:1,3;mlp:0,4' -> ({1, 3}, {0, 4}); '-' -> (set(), set())."""
    attn, mlp = set(), set()
    if spec == "-":
        return attn, mlp
    for part in spec.split(";"):
        kind, _, layers = part.partition(":")
        dst = {"attn": attn, "mlp": mlp}[kind]
        dst.update(int(x) for x in layers.split(","))
    return attn, mlp


class Skipper:
    """Patch HF LlamaDecoderLayer sublayers so that skipped ones contribute exactly zero
    (h = h + 0, bitwise h): self_attn returns zeros of the right shape, mlp returns zeros."""

    def __init__(self, model):
        self.layers = model.model.layers
        self.orig = [(l.self_attn.forward, l.mlp.forward) for l in self.layers]

    def set(self, spec):
        attn, mlp = parse_skip(spec)
        n = len(self.layers)
        assert all(0 <= i < n for i in attn | mlp), (spec, n)
        for i, l in enumerate(self.layers):
            fa, fm = self.orig[i]
            l.self_attn.forward = self._zero_attn(fa) if i in attn else fa
            l.mlp.forward = self._zero_mlp() if i in mlp else fm

    @staticmethod
    def _zero_attn(fa):
        def f(hidden_states, *args, **kwargs):
            out = fa(hidden_states, *args, **kwargs)  # keeps the KV cache / return shape as usual
            return (torch.zeros_like(out[0]),) + tuple(out[1:])
        return f

    @staticmethod
    def _zero_mlp():
        def f(x):
            return torch.zeros_like(x)
        return f


def load_model(t):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(target_dir(t), dtype=torch.float32, attn_implementation="eager")
    return m.eval()


def prompt_ids(t, tok):
    lo, hi = t.get("prompt_len", (12, 24))
    res = []
    for p in t["prompts"]:
        ids = list(p) if isinstance(p, (list, tuple)) else tok.encode(p, add_special_tokens=True).ids
        assert lo <= len(ids) <= hi, (p, len(ids))
        res.append(ids)
    return res


def check_skipper(model, skipper, ids):
    """A layer with both sublayers skipped must be a bitwise identity, and skipping only the MLP
    must give exactly h + attn(norm(h))."""
    n = len(model.model.layers)
    L = min(2, n - 2)
    x = torch.tensor([ids])
    with torch.no_grad():
        skipper.set(f"attn:{L};mlp:{L}")
        hs = model(x, output_hidden_states=True, use_cache=False).hidden_states
        assert torch.equal(hs[L + 1], hs[L]), "skipped layer is not an identity"
        skipper.set("-")
        hs_full = model(x, output_hidden_states=True, use_cache=False).hidden_states
        assert not torch.equal(hs_full[L + 1], hs_full[L])
        skipper.set(f"mlp:{L}")
        hs2 = model(x, output_hidden_states=True, use_cache=False).hidden_states
        assert torch.equal(hs2[L], hs_full[L])
        layer = model.model.layers[L]
        pos = torch.arange(len(ids))[None]
        pe = model.model.rotary_emb(hs_full[L], pos)
        mask = torch.full((len(ids), len(ids)), float("-inf")).triu(1)[None, None]
        a = layer.self_attn(layer.input_layernorm(hs_full[L]), position_embeddings=pe,
                            attention_mask=mask)[0]
        assert torch.allclose(hs2[L + 1], hs_full[L] + a, atol=1e-5, rtol=1e-5), "mlp skip mismatch"
        skipper.set("-")


def run_greedy(model, ids, max_new, eos):
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=max_new,
                             eos_token_id=eos, pad_token_id=eos if isinstance(eos, int) else eos[0],
                             return_dict_in_generate=True, output_logits=True, num_beams=1,
                             temperature=None, top_p=None, top_k=None)
    gen = out.sequences[0, len(ids):].tolist()
    gaps = []
    for step, lg in enumerate(out.logits):
        v = torch.topk(lg[0].float(), 2).values
        gaps.append(float(v[0] - v[1]))
        assert int(lg[0].argmax()) == gen[step]
    return gen, gaps


def greedy_min_gap(name):
    """Used by tiny_models/make_tiny_models.py to check its seeds."""
    torch.set_num_threads(1)
    t = TARGETS[name]
    model = load_model(t)
    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None \
        else model.config.eos_token_id
    gaps = []
    for ids in prompt_ids(t, load_tokenizer(t)):
        gaps += run_greedy(model, ids, t.get("max_new", 64), eos)[1]
    return min(gaps)


def write_model_refs(name, t, out):
    torch.manual_seed(SEED)
    tok = load_tokenizer(t)
    model = load_model(t)
    vocab = model.config.vocab_size
    skipper = Skipper(model)
    prompts = prompt_ids(t, tok)
    check_skipper(model, skipper, prompts[0])

    cases = [(f"p{i}_full", "-", prompts[i]) for i in range(t.get("logit_prompts", 2))]
    cases += [(f"p0_skip{j + 1}", s, prompts[0]) for j, s in enumerate(t["skips"])]
    min_case_gap = float("inf")
    with open(os.path.join(out, "logits.txt"), "w", newline="\n") as f:
        for case, spec, ids in cases:
            skipper.set(spec)
            with torch.no_grad():
                lg = model(torch.tensor([ids]), use_cache=False).logits[0].float()
            skipper.set("-")
            assert lg.shape == (len(ids), vocab)
            top = torch.topk(lg, 2, dim=-1).values
            min_case_gap = min(min_case_gap, float((top[:, 0] - top[:, 1]).min()))
            lg.numpy().astype("<f4").tofile(os.path.join(out, f"{case}.f32"))
            f.write(f"{case} {spec} {len(ids)} {' '.join(map(str, ids))}\n")
    # the full-model cases must not be affected by the patching machinery
    with torch.no_grad():
        fresh = model(torch.tensor([prompts[0]]), use_cache=False).logits[0].float().numpy()
    assert np.array_equal(fresh, np.fromfile(os.path.join(out, "p0_full.f32"), "<f4").reshape(fresh.shape))

    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None \
        else model.config.eos_token_id
    all_gaps = []
    with open(os.path.join(out, "greedy.txt"), "w", newline="\n") as f:
        for ids in prompts:
            gen, gaps = run_greedy(model, ids, t.get("max_new", 64), eos)
            all_gaps += gaps
            f.write(f"{len(ids)} {' '.join(map(str, ids))} {len(gen)} {' '.join(map(str, gen))}\n")
    g = min(all_gaps)
    assert g > MIN_GAP, f"{name}: greedy top1-top2 gap {g} <= {MIN_GAP}; pick another seed"
    print(f"  {name}: logits.txt ({len(cases)} cases, vocab {vocab}, min gap over logits {min_case_gap:.5f}), "
          f"greedy.txt (min gap {g:.5f})")


def main(argv):
    torch.set_num_threads(1)
    names = argv or [n for n, t in TARGETS.items()
                     if "make" in t or os.path.isfile(os.path.join(target_dir(t), "tokenizer.json"))]
    for n in names:
        if n not in TARGETS:
            sys.exit(f"unknown target {n!r}; known: {' '.join(TARGETS)}")
    for name in names:
        t = TARGETS[name]
        if "make" in t:
            t["make"](t)
        out = os.path.join(REFS, name)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        if t.get("configs"):
            write_config_refs(out)
            continue
        with open(os.path.join(out, "model.txt"), "w", newline="\n") as f:
            f.write(t["model"] + "\n")
        if t.get("tokens", True):
            write_tokens(name, t, out)
        if not t.get("tokens_only"):
            write_model_refs(name, t, out)


if __name__ == "__main__":
    main(sys.argv[1:])
