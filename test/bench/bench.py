#!/usr/bin/env python3
"""bench.py: selfspec against plain decoding and against peers, side by side in one run.

Every ratio here is measured in one run on one machine, repeated, with the median reported:
  1. memory bandwidth (a numpy copy loop) and the bandwidth bound on plain decoding;
  2. plain decoding tokens/s: selfspec vs HF transformers generate (torch fp32, same threads);
  3. the cost of verifying k tokens: test/bench/verify_cost (one pass over k tokens / k = 1);
  4. self-speculative decoding, greedy, every method vs plain decoding in the same process
     (selfspec --compare), on three prompt sets: acceptance, M, tokens/s, speedup,
     measured / expected (SWIFT Eq. 6), selection overhead, the layer map;
  5. a peer doing the same job: transformers' assisted generation with a self-speculative
     early-exit draft (assistant_early_exit) vs its own plain generate.

Development tool only (needs torch/transformers for the peers); prints markdown tables.
    python test/bench/bench.py [--threads 2] [--repeats 3] [--models kjv,smollm2] [--quick]
With --plots DIR it also draws the tables as PNG plots (needs matplotlib): the cost of a k-token
pass against k, speedup against acceptance, and measured against expected speedup. With
--from FILE it runs nothing and draws the plots from a results file it printed before:
    python test/bench/bench.py --plots test/bench/plots --from test/bench/results-2026-11-21-2threads.md
"""
import argparse, io, json, os, platform, re, statistics, subprocess, sys, tempfile, time

BENCH = os.path.dirname(os.path.abspath(__file__))  # test/bench
ROOT = os.path.dirname(os.path.dirname(BENCH))
MODELS = {"kjv": "tiny_models/kjv-12l", "kjv-skip": "tiny_models/kjv-12l-skip", "smollm2": "tiny_models/smollm2-135m"}
SETS = ["kjv", "stories", "code"]
# hand-picked drafts (static runs): the best of a few sets tried by hand with --compare on the
# stories prompts (test/bench/README.md); SmolLM2-135M tolerates very little skipping
HAND_PICKED = {"kjv": "attn:2,4,6,8,10 mlp:3,5,7,9", "kjv-skip": "attn:2,4,6,8,10 mlp:3,5,7,9",
               "smollm2": "attn:10,14,18,22"}


def run(cmd, env=None):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


def prompts_of(name):
    with open(os.path.join(BENCH, "prompts", name + ".txt")) as f:
        return [line.rstrip("\n").replace("\\n", "\n") for line in f if line.strip()]


def bandwidth_gbs(repeats, threads):
    """A copy loop over 256 MB, split among `threads` threads (numpy releases the GIL while it
    copies), so the bound is taken with as many cores as the decoding it bounds."""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    a = np.ones(64 * 2**20, dtype=np.float32)  # 256 MB, far beyond any cache
    b = np.empty_like(a)
    parts = np.array_split(np.arange(a.size), threads)
    spans = [(p[0], p[-1] + 1) for p in parts]
    times = []
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            list(pool.map(lambda s: np.copyto(b[s[0]:s[1]], a[s[0]:s[1]]), spans))
            times.append(time.perf_counter() - t0)
    return 2 * a.nbytes / statistics.median(times[1:]) / 1e9  # read + write


BINARY = "./selfspec"  # bench_gpu.py sets ./selfspec-cuda


def selfspec_json(model, args, env):
    out = run([BINARY, "-m", model, "--json"] + args, env)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def plain_selfspec(model, prompts, n, env):
    rows = []
    for p in prompts:
        r = selfspec_json(model, ["-p", p, "-n", str(n)], env)[0]
        rows.append(r["decode_ms"] / r["n_tokens"])
    return 1000.0 / statistics.mean(rows)


def plain_hf(model_dir, prompts, n, threads):
    import torch, transformers
    torch.set_num_threads(threads)
    tok = transformers.AutoTokenizer.from_pretrained(os.path.join(ROOT, model_dir))
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(ROOT, model_dir), dtype=torch.float32)
    per_token = []
    for p in prompts:
        ids = tok(p, return_tensors="pt").input_ids
        def gen(k):
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, do_sample=False, max_new_tokens=k, min_new_tokens=k, pad_token_id=0)
            return time.perf_counter() - t0
        gen(2)
        per_token.append((gen(n) - gen(1)) / (n - 1))  # decode only: prefill cancels out
    return 1.0 / statistics.mean(per_token), model


def model_bytes(model_dir):
    cfg = json.load(open(os.path.join(ROOT, model_dir, "config.json")))
    d, h, L, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    hd = cfg.get("head_dim") or d // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * hd
    per_layer = d * q * 2 + d * kv * 2 + 3 * d * h + 2 * d
    # fp32, each weight read once per token: the layers, the final norm, the output head (v x d),
    # and one row of the input embedding (tied or not: a token reads its own row, not the table)
    return 4 * (L * per_layer + d + v * d + d)


def spec_methods(name, model, set_name, n, repeats, env, dev_file, iters):
    methods = [("static", ["--skip", HAND_PICKED[name]]), ("selfsd", ["--method", "selfsd", "--dev-prompts", dev_file,
               "--iters", str(iters)]), ("swift", ["--method", "swift"]), ("asd", ["--method", "asd"]), ("clasp", ["--method", "clasp"])]
    table = []
    for label, extra in methods:
        speedups, rows = [], None
        for _ in range(repeats):
            rs = selfspec_json(model, ["-f", os.path.join(BENCH, "prompts", set_name + ".txt"), "-n", str(n),
                                       "--compare"] + extra, env)
            spec_s = sum(r["decode_ms"] for r in rs)
            plain_s = sum(r["n_tokens"] / r["plain_tokens_per_s"] * 1000 for r in rs)
            speedups.append(plain_s / spec_s)
            if not all(r["identical"] for r in rs):
                sys.exit(f"bench: {label} on {name}/{set_name}: output differs from plain decoding")
            rows = rs
        drafted = sum(r["drafted"] for r in rows); accepted = sum(r["accepted"] for r in rows)
        rounds = sum(r["rounds"] for r in rows)
        alpha = accepted / drafted if drafted else 0
        M = (accepted + rounds) / rounds if rounds else 1
        ratio = statistics.mean(r["skip_ratio"] for r in rows)
        expected = M * alpha / ((M - 1) * (1 - ratio) + alpha) if alpha > 0 else 1
        decode = sum(r["decode_ms"] for r in rows)
        verify = sum(r["verify_ms"] for r in rows)
        calls = sum(r["selections"] for r in rows)
        search = sum(r["search_ms"] for r in rows)           # offline, before decoding (selfsd)
        select = sum(r["select_ms"] for r in rows) - search  # during decoding (swift, asd, clasp)
        tps = sum(r["n_tokens"] for r in rows) / decode * 1000
        sp = statistics.median(speedups)
        # one selection call (a SWIFT step, a CLaSp DP) in units of one verification pass
        per_call = "%.2f" % ((select / calls) / (verify / rounds)) if calls and rounds and label in ("swift", "clasp") else "-"
        table.append((label, ratio, alpha, M, tps, sp, sp / expected, select / (decode + 1e-9), per_call, search / 1e3,
                      ",".join(map(str, rows[-1]["skip"]["attn"])), ",".join(map(str, rows[-1]["skip"]["mlp"]))))
    return table


def peer_early_exit(model, tok, prompts, n, threads, layer):
    import torch
    torch.set_num_threads(threads)
    def timed(**kw):
        total = 0
        for p in prompts:
            ids = tok(p, return_tensors="pt").input_ids
            t0 = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, do_sample=False, max_new_tokens=n, pad_token_id=0, **kw)
            total += time.perf_counter() - t0
        return total
    timed()
    plain = timed()
    early = timed(assistant_early_exit=layer)
    return plain / early


METHODS = ["static", "selfsd", "swift", "asd", "clasp"]


def parse_results(text):
    """The markdown bench.py prints (a run's, or a committed results file) as the plots' data:
    {model: {"cost": [(k, pass / one-token pass)], "runs": [(set, method, alpha, speedup, expected)]}}."""
    data, model, set_name = {}, None, None
    for line in text.splitlines():
        m = re.match(r"## (\w+) \(", line)
        if m:
            model, set_name = m.group(1), None
            data[model] = {"cost": [], "runs": []}
            continue
        m = re.match(r"### \w+, (\w+) prompts", line)
        if m:
            set_name = m.group(1)
            continue
        m = re.match(r"\s+(\d+)\s+[\d.]+\s+([\d.]+)x(\s|$)", line)  # verify_cost: k, ms/pass, vs k=1
        if m and model:
            data[model]["cost"].append((int(m.group(1)), float(m.group(2))))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if model and set_name and len(cells) >= 7 and cells[0] in METHODS:
            alpha, speedup, ratio = float(cells[2]), float(cells[5].rstrip("x")), float(cells[6])
            data[model]["runs"].append((set_name, cells[0], alpha, speedup, speedup / ratio if ratio else 1.0))
    return data


def plot_results(data, out_dir, title):
    """Three PNGs in out_dir: verify_cost.png, speedup_vs_acceptance.png, measured_vs_expected.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    colors = dict(zip(sorted(data), ["#3b6fb6", "#e07b24", "#2a9d4b", "#8e44ad"]))
    markers = dict(zip(METHODS, "osD^v"))

    def save(fig, ax, name, legend_title=None):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=legend_title, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
        fig.suptitle(title, fontsize=7, color="#555")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, name), dpi=90)
        plt.close(fig)
        print(f"bench: wrote {os.path.join(out_dir, name)}", file=sys.stderr)

    # 1. one pass over k tokens, in units of a one-token pass: flat = memory-bound, k = compute-bound
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    k_max = max((k for d in data.values() for k, _ in d["cost"]), default=16)
    ks = [k for k in (1, 2, 4, 8, 16, 32) if k <= k_max]
    ax.plot(ks, ks, "k--", lw=0.8, label="k one-token passes")
    ax.plot(ks, [1] * len(ks), "k:", lw=0.8, label="one pass, free extra tokens")
    for name, d in data.items():
        if d["cost"]:
            ax.plot(*zip(*d["cost"]), "o-", color=colors[name], label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_yticks(ks, [str(k) for k in ks])
    ax.set_xlabel("tokens k in one forward pass")
    ax.set_ylabel("time / time of a one-token pass")
    ax.set_title("the cost of verifying k tokens", fontsize=10)
    save(fig, ax, "verify_cost.png")

    # 2. speedup against acceptance, every method and model (one point per prompt set)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.axhline(1, color="k", lw=0.8, ls=":")
    for name, d in data.items():
        for method in METHODS:
            pts = [(a, sp) for _, mth, a, sp, _ in d["runs"] if mth == method]
            if pts:
                ax.scatter(*zip(*pts), marker=markers[method], color=colors[name], s=22, label=f"{name} {method}")
    ax.set_xlabel("acceptance rate \u03b1 (draft tokens accepted / drafted)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title("speedup against acceptance", fontsize=10)
    save(fig, ax, "speedup_vs_acceptance.png", "model, method")

    # 3. measured against expected (SWIFT Eq. 6): below the diagonal, a pass or a selection costs more
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    hi = 1.05 * max([1.2] + [max(sp, e) for d in data.values() for *_, sp, e in d["runs"]])
    ax.plot([0, hi], [0, hi], "k--", lw=0.8, label="measured = expected")
    for name, d in data.items():
        for method in METHODS:
            pts = [(e, sp) for _, mth, _, sp, e in d["runs"] if mth == method]
            if pts:
                ax.scatter(*zip(*pts), marker=markers[method], color=colors[name], s=22, label=f"{name} {method}")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("expected speedup (SWIFT Eq. 6, from \u03b1, M, skip ratio)")
    ax.set_ylabel("measured speedup")
    ax.set_title("measured against expected speedup", fontsize=10)
    save(fig, ax, "measured_vs_expected.png", "model, method")


class Tee(io.StringIO):
    """Keeps what main prints, for --plots, while it still goes to stdout."""
    def write(self, s):
        sys.__stdout__.write(s)
        return super().write(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="kjv,smollm2")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="skip the peers and use one repeat")
    ap.add_argument("--selfsd-iters", type=int, default=24)
    ap.add_argument("--plots", metavar="DIR", help="also write PNG plots of the tables into DIR (needs matplotlib)")
    ap.add_argument("--from", dest="from_file", metavar="FILE", help="with --plots: plot this results file, run nothing")
    a = ap.parse_args()
    if a.plots:
        try:
            import matplotlib  # noqa: F401  (an optional dependency, of the plots only)
        except ImportError:
            sys.exit("bench: --plots needs matplotlib (pip install matplotlib)")
    if a.from_file:
        if not a.plots:
            sys.exit("bench: --from FILE needs --plots DIR")
        text = open(a.from_file).read()
        data = parse_results(text)
        if not any(d["runs"] or d["cost"] for d in data.values()):
            sys.exit(f"bench: --from {a.from_file}: no bench tables found")
        plot_results(data, a.plots, text.splitlines()[0].lstrip("# ") + f" ({os.path.basename(a.from_file)})")
        return
    if a.plots:
        sys.stdout = Tee()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    repeats = 1 if a.quick else a.repeats
    cpu = next((l.split(":")[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    print(f"# selfspec bench: {cpu}, {os.cpu_count()} cores, {a.threads} threads, {time.strftime('%Y-%m-%d')}\n")
    bw = bandwidth_gbs(5, a.threads)
    print(f"memory bandwidth (numpy copy, {a.threads} threads, read + write): {bw:.1f} GB/s\n")
    dev_file = os.path.join(BENCH, "prompts", "dev.txt")
    for name in a.models.split(","):
        model = MODELS[name]
        if not os.path.exists(os.path.join(ROOT, model, "config.json")):
            print(f"({model} not present: skipped; tiny_models/get_smollm2.sh makes SmolLM2)\n")
            continue
        prompts = prompts_of("stories")[:3]
        ours = statistics.median(plain_selfspec(model, prompts, a.n, env) for _ in range(repeats))
        bound = bw * 1e9 / model_bytes(model)
        print(f"## {name} ({model})\n")
        print("| plain decoding | tokens/s | vs selfspec |\n|---|---|---|")
        print(f"| selfspec ({a.threads} threads, fp32) | {ours:.1f} | 1.00 |")
        hf_model = None
        if not a.quick:
            hf, hf_model = plain_hf(model, prompts, a.n, a.threads)
            print(f"| HF transformers generate (torch fp32, {a.threads} threads) | {hf:.1f} | {hf / ours:.2f} |")
        print(f"| bandwidth bound ({model_bytes(model) / 1e6:.0f} MB / {bw:.1f} GB/s) | {bound:.1f} | {bound / ours:.2f} |\n")
        print("```\n" + run(["test/bench/verify_cost", model, "9"], env).strip() + "\n```\n")
        for set_name in SETS:
            print(f"### {name}, {set_name} prompts, greedy, {a.n} tokens, speedup vs plain decoding in the same process\n")
            print("| method | skip ratio | α | M | tokens/s | speedup | measured/expected | selection share | "
                  "call / verify pass | search (s) | attn | mlp |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for row in spec_methods(name, model, set_name, a.n, repeats, env, dev_file, a.selfsd_iters):
                print("| %s | %.2f | %.3f | %.2f | %.1f | %.2fx | %.2f | %.1f%% | %s | %.1f | `%s` | `%s` |" %
                      (row[0], row[1], row[2], row[3], row[4], row[5], row[6], 100 * row[7], row[8], row[9], row[10],
                       row[11]))
            print()
        if not a.quick and hf_model is not None:
            import transformers
            tok = transformers.AutoTokenizer.from_pretrained(os.path.join(ROOT, model))
            L = hf_model.config.num_hidden_layers
            for layer in (L // 4, L // 2):
                sp = peer_early_exit(hf_model, tok, prompts, a.n, a.threads, layer)
                print(f"peer: transformers assisted generation, assistant_early_exit={layer} of {L} layers: "
                      f"{sp:.2f}x over its own plain generate")
            print()
    if a.plots:
        text, sys.stdout = sys.stdout.getvalue(), sys.__stdout__
        plot_results(parse_results(text), a.plots, text.splitlines()[0].lstrip("# "))


if __name__ == "__main__":
    main()
