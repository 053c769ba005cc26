#!/usr/bin/env python3
"""bench_gpu.py: the GPU build in one table (make bench-gpu).

On one GPU, in one run:
  1. the device's copy bandwidth (test/bench/verify_cost_cuda copies 1 GB on the device);
  2. plain decoding tokens/s and effective GB/s (fp32 weight bytes x tokens/s: every weight is
     read once per token) of ./selfspec-cuda on kjv-12l and on a 1B model of TinyLlama's shape
     with random weights (22 layers, dim 2048, FFN 5632, GQA 32/4, vocab 2048: 3.9 GB fp32),
     which it writes with numpy + safetensors if --model-1b names none;
  3. HF transformers `generate`, fp32, eager attention, greedy, on the same GPU and the same
     models (skipped, with a line saying why, without torch or CUDA);
  4. the cost of one pass over k = 1, 2, 4, 8, 16 tokens relative to one token, and of a draft
     pass skipping half the sublayers (test/bench/verify_cost_cuda);
  5. every method's speedup over plain decoding with --compare on kjv-12l (and SmolLM2-135M when
     tiny_models/smollm2-135m exists), with measured / expected (SWIFT Eq. 6);
and checks the targets it was written for (a table after the measurements, each marked met or
not). Greedy outputs must be identical to plain decoding, or it stops.

    python3 test/bench/bench_gpu.py [--model-1b DIR] [-n 128] [--repeats 3]
    python3 test/bench/bench_gpu.py --cpu      # dry run of the whole script on the CPU build, tiny sizes
"""
import argparse, json, os, re, shutil, statistics, subprocess, sys, time

BENCH = os.path.dirname(os.path.abspath(__file__))  # test/bench
ROOT = os.path.dirname(os.path.dirname(BENCH))
sys.path.insert(0, BENCH)
import bench  # noqa: E402  (the CPU bench: its --compare runner and Eq. 6 are reused)

# TinyLlama-1.1B's shape with kjv-12l's 2048-token vocabulary (its tokenizer is copied next to
# the weights), as in PERFORMANCE_NOTES.md; --cpu shrinks it to something a CPU runs in seconds
SHAPE_1B = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                num_key_value_heads=4, vocab_size=2048)
SHAPE_DRY = dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4, num_attention_heads=8,
                 num_key_value_heads=2, vocab_size=2048)


def make_random_llama(out_dir, shape, seed=0):
    """A LlamaForCausalLM folder with random fp32 weights (normal, std 0.02; norms 1), written with
    numpy + safetensors only (no torch), and kjv-12l's tokenizer. Random weights: gibberish text,
    the right shapes and bytes."""
    import numpy as np
    from safetensors.numpy import save_file
    os.makedirs(out_dir, exist_ok=True)
    d, h, L, v = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"], shape["vocab_size"]
    hd = d // shape["num_attention_heads"]
    q, kv = shape["num_attention_heads"] * hd, shape["num_key_value_heads"] * hd
    rng = np.random.default_rng(seed)
    def rand(*s):
        return (rng.standard_normal(s, dtype=np.float32) * 0.02).astype(np.float32)
    t = {"model.embed_tokens.weight": rand(v, d), "model.norm.weight": np.ones(d, np.float32), "lm_head.weight": rand(v, d)}
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = np.ones(d, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(d, np.float32)
        t[p + "self_attn.q_proj.weight"] = rand(q, d)
        t[p + "self_attn.k_proj.weight"] = rand(kv, d)
        t[p + "self_attn.v_proj.weight"] = rand(kv, d)
        t[p + "self_attn.o_proj.weight"] = rand(d, q)
        t[p + "mlp.gate_proj.weight"] = rand(h, d)
        t[p + "mlp.up_proj.weight"] = rand(h, d)
        t[p + "mlp.down_proj.weight"] = rand(d, h)
    save_file(t, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", attention_bias=False,
               mlp_bias=False, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
               tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, torch_dtype="float32", **shape)
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"), indent=2)
    kjv = os.path.join(ROOT, "tiny_models", "kjv-12l")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(kjv, f), out_dir)
    open(os.path.join(out_dir, "README.md"), "w").write(
        "Random weights (test/bench/bench_gpu.py): TinyLlama's layer shapes, kjv-12l's tokenizer. Gibberish text.\n")


def run(cmd):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_gpu: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


def plain_decoding(binary, model, prompts, n, repeats):
    """Decode-only tokens/s of plain greedy decoding (median over repeats of the mean over prompts)."""
    runs = []
    for _ in range(repeats):
        ms = []
        for p in prompts:
            out = run([binary, "-m", model, "-p", p, "-n", str(n), "--json"])
            r = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
            ms.append(r["decode_ms"] / r["n_tokens"])
            device = r["device"]
        runs.append(1000.0 / statistics.mean(ms))
    return statistics.median(runs), device


def verify_cost(binary, model, repeats):
    """(copy GB/s, {k: ratio to k = 1}, ms at k = 1, draft ratio) from test/bench/verify_cost."""
    out = run([binary, model, str(repeats)])
    copy = float(re.search(r"copy bandwidth.*?: ([0-9.]+) GB/s", out).group(1))
    ks = {int(m.group(1)): (float(m.group(2)), float(m.group(3)))
          for m in re.finditer(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)x(?:\s.*)?$", out, re.M)}
    draft = float(re.search(r"= ([0-9.]+) of a full pass", out).group(1))
    return copy, ks, draft, out.strip()


def hf_generate(model_dir, prompts, n):
    """HF transformers generate, fp32, eager attention, greedy, on the GPU: decode-only tokens/s,
    or a string saying why it was skipped."""
    try:
        import torch, transformers
    except ImportError as e:
        return f"skipped: {e.name} is not installed"
    if not torch.cuda.is_available():
        return "skipped: torch sees no CUDA device"
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(ROOT, model_dir))
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(ROOT, model_dir), dtype=torch.float32,
                                                              attn_implementation="eager").to("cuda")
    per_token = []
    for p in prompts:
        ids = tok(p, return_tensors="pt").input_ids.to("cuda")
        def gen(k):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, do_sample=False, max_new_tokens=k, min_new_tokens=k, pad_token_id=0)
            torch.cuda.synchronize()
            return time.perf_counter() - t0
        gen(4)
        per_token.append((gen(n) - gen(1)) / (n - 1))  # decode only: prefill cancels out
    del model
    torch.cuda.empty_cache()
    return 1.0 / statistics.mean(per_token)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-1b", help="a LlamaForCausalLM folder (default: the random TinyLlama-shaped one, made once)")
    ap.add_argument("-n", type=int, default=128, help="tokens per decoding run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU build (./selfspec) with a tiny random model")
    ap.add_argument("--no-hf", action="store_true", help="skip HF transformers")
    a = ap.parse_args()
    binary, vc = ("./selfspec", "test/bench/verify_cost") if a.cpu else ("./selfspec-cuda", "test/bench/verify_cost_cuda")
    if a.cpu:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # a dry run: no OpenMP barriers on a busy machine
    for b in (binary, vc):
        if not os.path.exists(os.path.join(ROOT, b)):
            sys.exit(f"bench_gpu: {b} is missing: run `make bench-gpu` (GPU) or `make selfspec test/bench/verify_cost` (--cpu)")
    bench.BINARY = binary
    n = 16 if a.cpu else a.n
    repeats = 1 if a.cpu else a.repeats
    big = a.model_1b
    if big is None:
        big = "tiny_models/random-dry-run" if a.cpu else "tiny_models/tinyllama-1b-random"
        if not os.path.exists(os.path.join(ROOT, big, "model.safetensors")):
            print(f"writing a random model of TinyLlama's shape to {big} (numpy + safetensors) ...", file=sys.stderr)
            make_random_llama(os.path.join(ROOT, big), SHAPE_DRY if a.cpu else SHAPE_1B)
    prompts = bench.prompts_of("stories")[:3]
    kjv = bench.MODELS["kjv"]

    rows, checks = [], []
    copy, ks_big, draft_big, raw_big = verify_cost(vc, big, 5 if a.cpu else 15)
    _, ks_kjv, draft_kjv, raw_kjv = verify_cost(vc, kjv, 5 if a.cpu else 15)
    rows.append(("device copy bandwidth (read + write, 1 GB on the device)", f"{copy:.0f} GB/s", ""))
    results = {}
    big_label = "tiny random (dry run)" if a.cpu and a.model_1b is None else "1B random (TinyLlama shape)"
    for label, model in (("kjv-12l", kjv), (big_label, big)):
        tps, device = plain_decoding(binary, model, prompts, n, repeats)
        gbs = bench.model_bytes(model) * tps / 1e9
        results[model] = tps
        rows.append((f"{label}: plain decoding, selfspec ({bench.model_bytes(model) / 1e6:.0f} MB fp32)",
                     f"{tps:.1f} tokens/s = {gbs:.1f} GB/s", ""))
        hf = None if a.no_hf else hf_generate(model, prompts, n)
        if isinstance(hf, float):
            rows.append((f"{label}: HF transformers generate (fp32, eager, same GPU)", f"{hf:.1f} tokens/s",
                         f"selfspec {tps / hf:.2f}x"))
        else:
            rows.append((f"{label}: HF transformers generate (fp32, eager, same GPU)", hf or "skipped: --no-hf", ""))
        if model == big:
            checks.append(("1B: plain decoding >= 1.0 TB/s effective", gbs >= 1000, f"{gbs:.0f} GB/s"))
            if isinstance(hf, float):
                checks.append(("1B: >= 5x HF generate", tps >= 5 * hf, f"{tps / hf:.2f}x"))
        else:
            checks.append(("kjv-12l: plain decoding >= 1500 tokens/s", tps >= 1500, f"{tps:.0f}"))
    for label, ks, draft in (("1B", ks_big, draft_big), ("kjv-12l", ks_kjv, draft_kjv)):
        cost = ", ".join(f"k={k} {ks[k][1]:.2f}x" for k in sorted(ks))
        rows.append((f"{label}: one pass over k tokens / one token ({ks[1][0]:.2f} ms)", cost,
                     f"draft skipping half: {draft:.2f}"))
    checks.append(("1B: a k=8 pass <= 1.5x a one-token pass", ks_big[8][1] <= 1.5, f"{ks_big[8][1]:.2f}x"))

    dev_file = os.path.join(BENCH, "prompts", "dev.txt")
    spec_models = [("kjv", kjv)]
    if os.path.exists(os.path.join(ROOT, bench.MODELS["smollm2"], "config.json")):
        spec_models.append(("smollm2", bench.MODELS["smollm2"]))
    for name, model in spec_models:
        table = bench.spec_methods(name, model, "kjv", n, repeats, {**os.environ}, dev_file, 4 if a.cpu else 16)
        best = max(table, key=lambda r: r[5])
        for r in table:
            rows.append((f"{name}: {r[0]} --compare (kjv prompts, {n} tokens)",
                         f"{r[5]:.2f}x (measured/expected {r[6]:.2f}, alpha {r[2]:.2f}, M {r[3]:.2f})",
                         f"skip ratio {r[1]:.2f}"))
        if name == "kjv":
            checks.append(("kjv-12l: best method >= 1.15x plain decoding", best[5] >= 1.15, f"{best[0]} {best[5]:.2f}x"))
            checks.append(("kjv-12l: best method measured/expected >= 0.9", best[6] >= 0.9, f"{best[6]:.2f}"))

    print(f"# selfspec GPU bench: {device}, {time.strftime('%Y-%m-%d')}, {n} tokens, median of {repeats}"
          + (" (CPU DRY RUN: not GPU figures)" if a.cpu else "") + "\n")
    print("| what | measured | note |\n|---|---|---|")
    for r in rows:
        print("| %s | %s | %s |" % r)
    print("\n| target | measured | met |\n|---|---|---|")
    for what, ok, val in checks:
        print(f"| {what} | {val} | {'yes' if ok else 'no'} |")
    print("\n```\n" + raw_big + "\n\n" + raw_kjv + "\n```")


if __name__ == "__main__":
    main()
