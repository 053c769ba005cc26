#!/usr/bin/env python3
"""bench_gpu.py: the GPU build in one table (make bench-gpu).

On one GPU, in one run, each measurement a part (--parts) that can also run alone:
  cost     test/bench/verify_cost_cuda on kjv-12l and on a 1B model of TinyLlama's shape with
           random weights (22 layers, dim 2048, FFN 5632, GQA 32/4, vocab 2048: 3.9 GB fp32,
           written once with numpy + safetensors if --model-1b names none), CUDA graphs on and
           off (SELFSPEC_GRAPHS=0): the device's copy bandwidth (1 GB, reads + writes), a pass
           over k = 1, 2, 4, 8, 16 tokens in one-token passes (median of interleaved rounds, with
           the middle half), the draft's pass skipping half the sublayers, launches per pass, and
           each stage of a layer alone (CUDA events: the profile where no profiler runs);
  plain    plain decoding tokens/s and effective GB/s (fp32 weight bytes x tokens/s: every
           weight is read once per token) of ./selfspec-cuda on both models, graphs on and off;
  hf       HF transformers `generate`, fp32, eager attention, greedy, on the same GPU and models
           (skipped, with a line saying why, without torch or CUDA);
  methods  every method's speedup over plain decoding with --compare on kjv-12l and kjv-12l-skip
           (and SmolLM2-135M when tiny_models/smollm2-135m exists), measured / expected (Eq. 6);
then the targets of issue 49, each marked met or not. Greedy outputs must be identical to plain
decoding, or it stops. --save FILE merges a part's figures into FILE (JSON); --report FILE
prints the tables from FILE alone, so test/bench/device_check.sh can run each part under its own
time limit and still print one report, naming the parts that did not finish.

    python3 test/bench/bench_gpu.py [--model-1b DIR] [-n 128] [--repeats 3] [--parts cost,plain]
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


def run(cmd, env=None):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"bench_gpu: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


def plain_decoding(binary, model, prompts, n, repeats, env):
    """Decode-only tokens/s of plain greedy decoding (median over repeats of the mean over prompts)."""
    runs = []
    for _ in range(repeats):
        ms = []
        for p in prompts:
            out = run([binary, "-m", model, "-p", p, "-n", str(n), "--json"], env)
            r = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
            ms.append(r["decode_ms"] / r["n_tokens"])
            device = r["device"]
        runs.append(1000.0 / statistics.mean(ms))
    return statistics.median(runs), device


def verify_cost(binary, model, rounds, env):
    """verify_cost's figures: copy GB/s, {k: (ms, ratio, p25, p75)}, the draft's (ratio, p25, p75)
    and the fraction of sublayers it runs, the launch lines, and its whole output."""
    out = run([binary, model, str(rounds)], env)
    ks = {int(m.group(1)): tuple(float(m.group(i)) for i in (2, 3, 4, 5))
          for m in re.finditer(r"^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)x\s+([0-9.]+)-([0-9.]+)$", out, re.M)}
    d = re.search(r"skipping (\d+) of (\d+) sublayers: [0-9.]+ ms = ([0-9.]+) of a full pass "
                  r"\(p25-p75 ([0-9.]+)-([0-9.]+)", out)
    launches = re.findall(r"^launches per pass, (\w+) mapping: (.*)$", out, re.M)
    return {"device": out.split(" | ")[1], "copy": float(re.search(r"copy bandwidth.*?: ([0-9.]+) GB/s", out).group(1)), "ks": ks,
            "draft": [float(d.group(3)), float(d.group(4)), float(d.group(5))],
            "draft_runs": 1 - int(d.group(1)) / int(d.group(2)), "launches": launches, "raw": out.strip()}


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


def graphs_env(on):
    return dict(os.environ, SELFSPEC_GRAPHS="1" if on else "0")


def measure(a, parts, binary, vc, big, kjv, res):
    n, repeats = (16, 1) if a.cpu else (a.n, a.repeats)
    prompts = bench.prompts_of("stories")[:3]
    models = {"kjv-12l": kjv, "1B": big}
    if "cost" in parts:
        for label, model in models.items():
            for on in (1, 0):
                env = graphs_env(on)
                if on:
                    env["VERIFY_COST_STAGES"] = "5" if a.cpu else "50"
                c = verify_cost(vc, model, 5 if a.cpu else 15, env)
                res.setdefault("cost", {})[f"{label} graphs {'on' if on else 'off'}"] = c
                res.setdefault("device", c["device"])
    if "plain" in parts:
        for label, model in models.items():
            for on in (1, 0):
                tps, device = plain_decoding(binary, model, prompts, n, repeats, graphs_env(on))
                res.setdefault("plain", {})[f"{label} graphs {'on' if on else 'off'}"] = tps
                res["device"] = device
            res.setdefault("bytes", {})[label] = bench.model_bytes(model)
    if "hf" in parts:
        for label, model in models.items():
            hf = "skipped: --no-hf" if a.no_hf else hf_generate(model, prompts, n)
            res.setdefault("hf", {})[label] = hf
    if "methods" in parts:
        dev_file = os.path.join(BENCH, "prompts", "dev.txt")
        spec = [("kjv", kjv), ("kjv-skip", bench.MODELS["kjv-skip"])]
        if os.path.exists(os.path.join(ROOT, bench.MODELS["smollm2"], "config.json")):
            spec.append(("smollm2", bench.MODELS["smollm2"]))
        for name, model in spec:
            table = bench.spec_methods(name, model, "kjv", n, repeats, graphs_env(1), dev_file, 4 if a.cpu else 16)
            res.setdefault("methods", {})[name] = [list(r) for r in table]
    res["n"], res["repeats"], res["cpu"] = n, repeats, a.cpu
    res.setdefault("date", time.strftime("%Y-%m-%d"))
    git = subprocess.run(["git", "log", "-1", "--format=%h"], cwd=ROOT, capture_output=True, text=True)
    res.setdefault("commit", git.stdout.strip() if git.returncode == 0 else "(commit not known)")


def report(res, parts_wanted):
    """The markdown tables of test/bench/README.md's device section, from the figures in res."""
    cpu, n = res.get("cpu"), res.get("n", 0)
    print(f"### {res.get('device', 'device not read')}, {res.get('date')}, selfspec {res.get('commit', '')}: "
          f"test/bench/bench_gpu.py, {n} tokens, median of {res.get('repeats')}"
          + (" (CPU DRY RUN: not GPU figures)" if cpu else "") + "\n")
    missing = [p for p in parts_wanted if p not in res]
    if missing:
        print(f"Not measured (the part failed or ran out of time): {', '.join(missing)}.\n")
    rows, checks = [], []
    cost, plain = res.get("cost", {}), res.get("plain", {})
    for c in cost.values():  # (JSON keys are strings)
        c["ks"] = {int(k): v for k, v in c["ks"].items()}
    copy = next((c["copy"] for c in cost.values()), None)
    if copy:
        rows.append(("device copy bandwidth (read + write, 1 GB on the device)", f"{copy:.0f} GB/s", ""))
    for label in ("kjv-12l", "1B"):
        for g in ("on", "off"):
            key = f"{label} graphs {g}"
            if key in plain:
                gbs = res["bytes"][label] * plain[key] / 1e9
                rows.append((f"{label}: plain decoding, CUDA graphs {g}", f"{plain[key]:.1f} tokens/s = {gbs:.1f} GB/s",
                             f"{plain[key] / plain[label + ' graphs off']:.2f}x graphs off" if g == "on" and
                             label + " graphs off" in plain else ""))
        hf = res.get("hf", {}).get(label)
        if isinstance(hf, float) and f"{label} graphs on" in plain:
            rows.append((f"{label}: HF transformers generate (fp32, eager, same GPU)", f"{hf:.1f} tokens/s",
                         f"selfspec {plain[label + ' graphs on'] / hf:.2f}x"))
        elif hf is not None:
            rows.append((f"{label}: HF transformers generate", str(hf), ""))
        for g in ("on", "off"):
            c = cost.get(f"{label} graphs {g}")
            if c:
                ks = c["ks"]
                rows.append((f"{label}: a pass over k tokens / one token ({ks[1][0]:.3f} ms), graphs {g}",
                             ", ".join(f"k={k} {v[1]:.2f}x ({v[2]:.2f}-{v[3]:.2f})" for k, v in sorted(ks.items())),
                             f"draft skipping half: {c['draft'][0]:.2f} ({c['draft'][1]:.2f}-{c['draft'][2]:.2f})"))
        c = cost.get(f"{label} graphs on")
        if c:
            rows.append((f"{label}: kernel launches per pass", "; ".join(f"{m}: {v}" for m, v in c["launches"]), ""))
    for name, table in res.get("methods", {}).items():
        for r in table:
            rows.append((f"{name}: {r[0]} --compare (kjv prompts, {n} tokens)",
                         f"{r[5]:.2f}x (measured/expected {r[6]:.2f}, alpha {r[2]:.2f}, M {r[3]:.2f})",
                         f"skip ratio {r[1]:.2f}"))
    print("| what | measured | note |\n|---|---|---|")
    for r in rows:
        print("| %s | %s | %s |" % r)
    # issue 49's targets, on an H100 or H200
    if "kjv-12l graphs on" in plain:
        checks.append(("kjv-12l: plain decoding >= 3,000 tokens/s", plain["kjv-12l graphs on"] >= 3000,
                       f"{plain['kjv-12l graphs on']:.0f}"))
    for label in ("kjv-12l", "1B"):
        c = cost.get(f"{label} graphs on")
        if c:
            limit = 0.15 + c["draft_runs"]
            checks.append((f"{label}: a draft pass <= 0.15 + the fraction of sublayers it runs ({limit:.2f})",
                           c["draft"][0] <= limit, f"{c['draft'][0]:.2f}"))
    for name, table in res.get("methods", {}).items():
        worst = min(table, key=lambda r: r[6])
        checks.append((f"{name}: every method's speedup >= 0.95 of its Eq. 6 expectation", worst[6] >= 0.95,
                       f"lowest {worst[0]} {worst[6]:.2f}"))
        best = max(table, key=lambda r: r[5])
        checks.append((f"{name}: best method >= 1.15x plain decoding", best[5] >= 1.15, f"{best[0]} {best[5]:.2f}x"))
    if "1B graphs on" in plain and copy:
        share = res["bytes"]["1B"] * plain["1B graphs on"] / 1e9 / copy
        checks.append(("1B: plain decoding >= 40% of the copy bandwidth", share >= 0.40, f"{100 * share:.0f}%"))
    c = cost.get("1B graphs on")
    if c and 8 in c["ks"]:
        checks.append(("1B: a k=8 pass <= 1.3x a one-token pass", c["ks"][8][1] <= 1.3, f"{c['ks'][8][1]:.2f}x"))
    print("\n| target (issue 49) | measured | met |\n|---|---|---|")
    for what, ok, val in checks:
        print(f"| {what} | {val} | {'yes' if ok else 'no'} |")
    if cost:
        print("\n```\n" + "\n\n".join(f"# {k}\n{c['raw']}" for k, c in cost.items()) + "\n```")


PARTS = ["cost", "plain", "hf", "methods"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-1b", help="a LlamaForCausalLM folder (default: the random TinyLlama-shaped one, made once)")
    ap.add_argument("-n", type=int, default=128, help="tokens per decoding run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU build (./selfspec) with a tiny random model")
    ap.add_argument("--no-hf", action="store_true", help="skip HF transformers")
    ap.add_argument("--parts", default=",".join(PARTS), help="which measurements: " + ",".join(PARTS))
    ap.add_argument("--save", help="merge this run's figures into this JSON file (and print no report)")
    ap.add_argument("--report", help="print the report from this JSON file and measure nothing")
    a = ap.parse_args()
    parts = [p for p in a.parts.split(",") if p]
    if any(p not in PARTS for p in parts):
        sys.exit(f"bench_gpu: --parts: each of {','.join(PARTS)}")
    if a.report:
        report(json.load(open(a.report)), parts)
        return
    binary, vc = ("./selfspec", "test/bench/verify_cost") if a.cpu else ("./selfspec-cuda", "test/bench/verify_cost_cuda")
    if a.cpu:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # a dry run: no OpenMP barriers on a busy machine
    for b in (binary, vc):
        if not os.path.exists(os.path.join(ROOT, b)):
            sys.exit(f"bench_gpu: {b} is missing: run `make bench-gpu` (GPU) or `make selfspec test/bench/verify_cost` (--cpu)")
    bench.BINARY = binary
    big = a.model_1b
    if big is None:
        big = "tiny_models/random-dry-run" if a.cpu else "tiny_models/tinyllama-1b-random"
        if not os.path.exists(os.path.join(ROOT, big, "model.safetensors")):
            print(f"writing a random model of TinyLlama's shape to {big} (numpy + safetensors) ...", file=sys.stderr)
            make_random_llama(os.path.join(ROOT, big), SHAPE_DRY if a.cpu else SHAPE_1B)
    res = json.load(open(a.save)) if a.save and os.path.exists(a.save) else {}
    measure(a, parts, binary, vc, big, bench.MODELS["kjv"], res)
    if a.save:
        json.dump(res, open(a.save, "w"), indent=1)
    else:
        report(res, parts)


if __name__ == "__main__":
    main()
