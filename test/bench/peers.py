#!/usr/bin/env python3
"""selfspec's plain decoding beside two peers and the memory-bandwidth bound, in one run.

    make bench-peers LLAMA2C=path/to/llama2.c PYTHON=.venv/bin/python
    .venv/bin/python test/bench/peers.py [--llama2c DIR] [--repeats 7] [--threads 1,2]

Rows, each a ratio of speeds measured in this run, runs alternating (selfspec, peer, selfspec,
...) and medians taken, so both see the same machine; beside each ratio of medians, in
brackets, the range of the rounds' own ratios:
- stories260K (../shared/models/stories260K) against llama2.c's run.c built as its README says
  (`make runfast`: -Ofast, one thread), when --llama2c (or LLAMA2C) names a checkout. The model
  is written by llama2.c's own export.py (`legacy_export`, the format run.c reads); its HF
  loader (`load_hf_model`) cannot be used as it is, since it sets n_kv_heads = n_heads and
  un-permutes K with the query head count, which fails on stories260K's grouped-query
  attention, so this script builds llama2.c's `Transformer` with the right head counts itself.
  run.c needs a tokenizer .bin, written here from tokenizer.json in run.c's format (scores =
  minus the merge rank). Both decode the same prompt greedily for the same positions; run.c's
  "achieved tok/s" counts every position after the first, prompt included, so selfspec's is
  timed the same way (--json's tokens_per_s is decode only: here the prompt is 5 tokens of 256).
- SmolLM2-135M (tiny_models/smollm2-135m, tiny_models/get_smollm2.sh) against llama.cpp through
  llama-cpp-python, when it is importable, on the same weights converted to an F32 GGUF by
  llama.cpp's own convert_hf_to_gguf.py (found in the llama-cpp-python source distribution,
  downloaded by pip into a temporary folder, or given with --convert). Decode tokens/s of both,
  prefill excluded; the greedy continuations are compared.
- the bound: a numpy copy loop's bandwidth (reads + writes counted, bench.py's bandwidth_gbs)
  over the fp32 weight bytes a token reads, in tokens/s, and selfspec's share of it. Decoding
  only reads, and reads alone can go faster than a copy, so a share above 1 is possible.
Neither peer is a dependency of selfspec or of `make test`.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(BENCH))
sys.path.insert(0, BENCH)
from bench import bandwidth_gbs, model_bytes  # noqa: E402

STORIES = os.path.join(ROOT, "..", "shared", "models", "stories260K")
SMOL = os.path.join(ROOT, "tiny_models", "smollm2-135m")


def selfspec(model, prompt, n, threads):
    out = subprocess.run([os.path.join(ROOT, "selfspec"), "-m", model, "-p", prompt, "-n", str(n),
                          "-t", "0", "--threads", str(threads), "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def median(xs):
    return statistics.median(xs)


def spread(ours, peer):
    """The range of the rounds' own ratios (each round ran both programs back to back)."""
    r = [o / p for o, p in zip(ours, peer) if p]
    return f"{min(r):.2f}-{max(r):.2f}" if r else "-"


# ---------------------------------------------------------------- llama2.c ----
def llama2c_files(checkout, model_dir, work):
    """run.c built with `make runfast` in a copy of the checkout; the model and tokenizer .bin."""
    build = os.path.join(work, "llama2c")
    subprocess.run(["cp", "-r", checkout, build], check=True)
    subprocess.run(["make", "-C", build, "runfast"], check=True, capture_output=True)
    sys.path.insert(0, build)
    import torch
    from export import legacy_export
    from model import ModelArgs, Transformer
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    w = {k: v.float() for k, v in load_file(os.path.join(model_dir, "model.safetensors")).items()}
    args = ModelArgs(dim=cfg["hidden_size"], n_layers=cfg["num_hidden_layers"],
                     n_heads=cfg["num_attention_heads"], n_kv_heads=cfg["num_key_value_heads"],
                     vocab_size=cfg["vocab_size"], hidden_dim=cfg["intermediate_size"],
                     norm_eps=cfg["rms_norm_eps"], max_seq_len=cfg["max_position_embeddings"])
    model = Transformer(args)
    head_dim = args.dim // args.n_heads

    def unpermute(t, heads):  # HF's rotate-half layout back to Meta's interleaved pairs
        return t.view(heads, 2, head_dim // 2, t.shape[1]).transpose(1, 2).reshape(t.shape)
    sd = {"tok_embeddings.weight": w["model.embed_tokens.weight"], "norm.weight": w["model.norm.weight"],
          "output.weight": w.get("lm_head.weight", w["model.embed_tokens.weight"])}
    names = {"attention_norm": "input_layernorm", "attention.wv": "self_attn.v_proj",
             "attention.wo": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "feed_forward.w1": "mlp.gate_proj", "feed_forward.w2": "mlp.down_proj",
             "feed_forward.w3": "mlp.up_proj"}
    for i in range(args.n_layers):
        p = f"model.layers.{i}."
        for ours, hf in names.items():
            sd[f"layers.{i}.{ours}.weight"] = w[p + hf + ".weight"]
        sd[f"layers.{i}.attention.wq.weight"] = unpermute(w[p + "self_attn.q_proj.weight"], args.n_heads)
        sd[f"layers.{i}.attention.wk.weight"] = unpermute(w[p + "self_attn.k_proj.weight"], args.n_kv_heads)
    model.load_state_dict(sd, strict=False)
    if "lm_head.weight" not in w:
        model.output.weight = model.tok_embeddings.weight  # tied: legacy_export writes it once
    model_bin = os.path.join(work, "model.bin")
    legacy_export(model, model_bin)
    # tokenizer .bin (run.c's build_tokenizer): max_token_length, then per token its score,
    # length and bytes; "▁" is the space, and the score orders merges (higher merges first)
    tj = json.load(open(os.path.join(model_dir, "tokenizer.json")))
    rank = {}
    for r, m in enumerate(tj["model"]["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        rank.setdefault(a + b, -r)
    toks = sorted(tj["model"]["vocab"].items(), key=lambda kv: kv[1])
    pieces = [p.replace("\u2581", " ").encode() for p, _ in toks]
    tok_bin = os.path.join(work, "tokenizer.bin")
    with open(tok_bin, "wb") as f:
        f.write(struct.pack("i", max(len(p) for p in pieces)))
        for (p, _), b in zip(toks, pieces):
            f.write(struct.pack("fI", float(rank.get(p, -1e6)), len(b)))
            f.write(b)
    return os.path.join(build, "run"), model_bin, tok_bin


def llama2c_rows(checkout, repeats, threads_list, positions=256, prompt="Once upon a time"):
    """selfspec at each thread count beside run.c's one thread (runfast has no threads)."""
    with tempfile.TemporaryDirectory() as work:
        run, model_bin, tok_bin = llama2c_files(checkout, STORIES, work)
        n = positions - r_prompt_len(prompt)
        peer, ours, texts = [], {t: [] for t in threads_list}, []
        for _ in range(repeats):
            out = subprocess.run([run, model_bin, "-z", tok_bin, "-t", "0", "-n", str(positions),
                                  "-i", prompt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, check=True).stdout
            peer.append(float(out.rsplit("achieved tok/s:", 1)[1]))
            texts.append(out.split("achieved tok/s:")[0].strip())
            for t in threads_list:
                r = selfspec(STORIES, prompt, n, t)
                ours[t].append((r["n_prompt"] + r["n_tokens"] - 1) /
                               ((r["prefill_ms"] + r["decode_ms"]) / 1e3))
        same = texts[0].startswith((prompt + r["text"])[:200].strip()[:150])
        p = median(peer)
        return [f"| stories260K | {t} | {median(ours[t]):.0f} | llama2.c runfast (1 thread) {p:.0f} | "
                f"{median(ours[t]) / p:.2f}x ({spread(ours[t], peer)}) | {'same' if same else 'DIFFERENT'} greedy text |"
                for t in threads_list]


def r_prompt_len(prompt):
    return selfspec(STORIES, prompt, 1, 1)["n_prompt"]


# ---------------------------------------------------------------- llama.cpp ----
def gguf_f32(model_dir, convert, work):
    out = os.path.join(work, "model-f32.gguf")
    if convert is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-q", "-d", work, "llama-cpp-python"], check=True)
        tar = [f for f in os.listdir(work) if f.endswith(".tar.gz")][0]
        subprocess.run(["tar", "xzf", tar], cwd=work, check=True)
        convert = next(os.path.join(d, "convert_hf_to_gguf.py") for d, _, fs in os.walk(work)
                       if "convert_hf_to_gguf.py" in fs)
    subprocess.run([sys.executable, convert, model_dir, "--outtype", "f32", "--outfile", out],
                   check=True, capture_output=True)
    return out


def llamacpp_decode(llm, prompt, n):
    toks = llm.tokenize(prompt.encode(), add_bos=False)
    llm.reset()
    out, times = [], []
    for t in llm.generate(toks, temp=0.0, top_k=1, reset=True):
        times.append(time.perf_counter())
        out.append(t)
        if len(out) == n:
            break
    return (n - 1) / (times[-1] - times[0]), llm.detokenize(out).decode(errors="replace")


def llamacpp_rows(threads_list, repeats, convert, n=48, prompt="Once upon a time, in a small village,"):
    from llama_cpp import Llama
    rows = []
    with tempfile.TemporaryDirectory() as work:
        gguf = gguf_f32(SMOL, convert, work)
        for threads in threads_list:
            llm = Llama(model_path=gguf, n_ctx=512, n_threads=threads, n_threads_batch=threads,
                        verbose=False)
            peer, ours = [], []
            for _ in range(repeats):
                tps, text = llamacpp_decode(llm, prompt, n)
                peer.append(tps)
                r = selfspec(SMOL, prompt, n, threads)
                # decode only, as llama.cpp's is timed: from the first generated token on
                ours.append((r["n_tokens"] - 1) / (r["decode_ms"] / 1e3) if r["decode_ms"] else 0)
            # llama.cpp's generate does not stop at the end-of-sequence token: compare what both wrote
            same = text.startswith(r["text"]) or r["text"].startswith(text)
            s, p = median(ours), median(peer)
            rows.append((threads, s, f"| SmolLM2-135M F32 | {threads} | {s:.2f} | llama.cpp {p:.2f} | "
                                     f"{s / p:.2f}x ({spread(ours, peer)}) | {'same' if same else 'DIFFERENT'} greedy text |"))
            del llm
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama2c", default=os.environ.get("LLAMA2C"))
    ap.add_argument("--convert", help="llama.cpp's convert_hf_to_gguf.py (default: from the sdist)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    print("| model | threads | selfspec tokens/s | peer tokens/s | selfspec / peer | note |")
    print("|---|---:|---:|---:|---:|---|")
    if a.llama2c and os.path.isdir(STORIES):
        for row in llama2c_rows(a.llama2c, a.repeats, threads):
            print(row, flush=True)
    else:
        print("| stories260K | | | | | skipped: give LLAMA2C=path/to/llama2.c (and ../shared/models) |")
    smol_tps = {}
    try:
        import llama_cpp  # noqa: F401
        have_llamacpp = os.path.isdir(SMOL)
    except ImportError:
        have_llamacpp = False
    if have_llamacpp:
        for t, s, row in llamacpp_rows(threads, a.repeats, a.convert):
            smol_tps[t] = s
            print(row, flush=True)
    else:
        print("| SmolLM2-135M F32 | | | | | skipped: pip install llama-cpp-python in this venv, "
              "and tiny_models/get_smollm2.sh |")
    if os.path.isdir(SMOL):
        print("\n| threads | copy GB/s (reads + writes) | fp32 MB per token | bound tokens/s | "
              "selfspec tokens/s | selfspec / bound |")
        print("|---:|---:|---:|---:|---:|---:|")
        mb = model_bytes(SMOL)
        for t in threads:
            gbs = bandwidth_gbs(a.repeats, t)
            s = smol_tps.get(t) or median([selfspec(SMOL, "The capital of France is", 48, t)["tokens_per_s"]
                                           for _ in range(a.repeats)])
            bound = gbs * 1e9 / mb
            print(f"| {t} | {gbs:.1f} | {mb / 1e6:.0f} | {bound:.1f} | {s:.2f} | {s / bound:.2f} |")


if __name__ == "__main__":
    main()
