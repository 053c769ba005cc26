#!/usr/bin/env python3
"""Writes the fuzz seed corpora test/fuzz/corpus/<target>/ from the tiny models' real files.

Run from the repository root: python3 test/fuzz/make_corpus.py. Standard library only.
  safetensors     the real headers of llama2-tiny-random (F32) and llama3-tiny-random (BF16):
                  their tensor names, dtypes and metadata, re-packed with the shapes of the micro
                  config in fuzz_util.h so a seed is a few KB and loads; an F16 copy; and each real
                  header whole with its data cut off (a file shorter than its header says)
  config          the real config.json files, and the micro config
  tokenizer_json  the real tokenizer.json files (the tiny models, tokenizers/, kjv-12l)
  encode_decode   texts: first byte picks the tokenizer and options, then the text
"""
import json, os, struct

ROOT = "tiny_models"
OUT = "test/fuzz/corpus"
MICRO = dict(dim=8, hid=12, layers=2, q=8, kv=4, vocab=16)


def write(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def real_header(model):
    with open(os.path.join(ROOT, model, "model.safetensors"), "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    return raw, n, json.loads(raw[8:8 + n])


def micro_shape(name):
    d = MICRO
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return [d["vocab"], d["dim"]]
    if name == "model.norm.weight" or name.endswith("layernorm.weight"):
        return [d["dim"]]
    part = name.split(".")[3] + "." + name.split(".")[4]
    return {"self_attn.q_proj": [d["q"], d["dim"]], "self_attn.k_proj": [d["kv"], d["dim"]],
            "self_attn.v_proj": [d["kv"], d["dim"]], "self_attn.o_proj": [d["dim"], d["q"]],
            "mlp.gate_proj": [d["hid"], d["dim"]], "mlp.up_proj": [d["hid"], d["dim"]],
            "mlp.down_proj": [d["dim"], d["hid"]]}[part]


def repack(header, dtype=None):
    """The real header's tensors (layers >= MICRO layers dropped) with micro shapes and data."""
    out, data = {}, b""
    if "__metadata__" in header:
        out["__metadata__"] = header["__metadata__"]
    for name, t in header.items():
        if name == "__metadata__" or (name.startswith("model.layers.") and int(name.split(".")[2]) >= MICRO["layers"]):
            continue
        dt = dtype or t["dtype"]
        shape = micro_shape(name)
        count = shape[0] * (shape[1] if len(shape) > 1 else 1)
        size = {"F32": 4, "F16": 2, "BF16": 2}[dt]
        if dt == "F32":
            blob = b"".join(struct.pack("<f", 0.01 * ((i % 7) - 3)) for i in range(count))
        elif dt == "F16":
            blob = b"".join(struct.pack("<e", 0.01 * ((i % 7) - 3)) for i in range(count))
        else:
            blob = b"".join(struct.pack("<f", 0.01 * ((i % 7) - 3))[2:] for i in range(count))
        out[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + count * size]}
        data += blob
    h = json.dumps(out, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


for model in ("llama2-tiny-random", "llama3-tiny-random"):
    raw, n, header = real_header(model)
    write("safetensors", model + "-micro.safetensors", repack(header))
    write("safetensors", model + "-micro-f16.safetensors", repack(header, "F16"))
    write("safetensors", model + "-header-only.safetensors", raw[:8 + n])
    with open(os.path.join(ROOT, model, "config.json")) as f:
        write("config", model + ".json", f.read())
    with open(os.path.join(ROOT, model, "tokenizer.json")) as f:
        write("tokenizer_json", model + ".json", f.read())
for extra in ("smollm2-135m/config.json", "kjv-12l/config.json"):
    if os.path.exists(os.path.join(ROOT, extra)):
        with open(os.path.join(ROOT, extra)) as f:
            write("config", extra.split("/")[0] + ".json", f.read())
with open("test/fuzz/fuzz_util.h") as f:
    src = f.read()
micro = src[src.index("MICRO_CONFIG[] =") + len("MICRO_CONFIG[] ="):src.index(";", src.index("MICRO_CONFIG[] ="))]
write("config", "micro.json", "".join(json.loads(part) for part in micro.split("\n") if part.strip()))
for tok in ("tokenizers/gpt2-digits", "tokenizers/metaspace", "tokenizers/llama2-added", "kjv-12l"):
    path = os.path.join(ROOT, tok, "tokenizer.json")
    if os.path.exists(path):
        with open(path) as f:
            write("tokenizer_json", tok.replace("/", "-") + ".json", f.read())
texts = [b"In the beginning God created the heaven and the earth.",
         b"Hello, world! It's 2024:  1234567 \r\n\tx", "\u00e9t\u00e9 \u2581 \U0001F600 \u4e2d\u6587".encode(),
         b"<s> a</s><unk><|begin_of_text|>x<|end_of_text|>", b"\xff\xc0\xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 ok",
         b"   leading and trailing   ", b"I'm you'll WE'VE don't"]
for k, text in enumerate(texts):
    for opts in (0, 1, 2, 3, 5):
        write("encode_decode", "text%d-%d" % (k, opts), bytes([opts]) + text)
