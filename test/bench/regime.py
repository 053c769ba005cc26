#!/usr/bin/env python3
"""The regime: what the papers' models have that the bundled ones do not, measured.

    python3 test/bench/regime.py [--models DIR ...] [--prompts FILE] [--n-prompts P] [-n N]
                                 [--oracle-sets S] [--repeats R]

For each model (default: tiny_models/kjv-12l, tiny_models/kjv-12l-skip, and
tiny_models/smollm2-135m where tiny_models/get_smollm2.sh has made it; a missing one is left out
with a note), on the first P prompts of FILE, N tokens each, greedy:

  1. the draft's top-1 confidence (median, and the share above 0.6, Self-SD's gamma_0), over
     every draft token of a run that drafts one token per round (-K 1 --exit none, so no exit
     rule chooses which tokens are seen) with the best of S random sets of 45% of the sublayers
     (test/bench/oracle at SWIFT's r = 0.45, searching on the first prompt with the same K and exit);
  2. that run's greedy acceptance: the share of positions where the draft's top-1 token is the
     full model's;
  3. ASD's C_l (the mean cosine between attention's input and output over a prompt), per layer
     averaged over the prompts, then its median over the layers (ASD Table 1's statistic);
  4. the share of the full model's top-1 tokens that skipping one sublayer changes, for every
     sublayer alone: the most and the least sensitive;
  5. the cost of a verify pass over 2 and 4 tokens in one-token passes: test/bench/verify_cost
     on one thread, R rounds that each time a one-token and a k-token pass back to back; the
     median of the rounds' ratios and their middle half (the statistic verify_cost prints, which
     load slowing both passes of a round cannot move the way it moves separate timings), and
     the H200 figures of test/bench/README.md.

Prints a markdown table beside the papers' own figures. Standard library only; needs
./selfspec, test/bench/oracle and test/bench/verify_cost (make selfspec test/bench/oracle
test/bench/verify_cost). Items 1-4 are
counts, exact for a given build; item 5 is a timing, and depends on the machine and its load.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["tiny_models/kjv-12l", "tiny_models/kjv-12l-skip", "tiny_models/smollm2-135m"]

# The papers' own figures, each with where it is printed
PAPERS = {
    "conf": "not tabulated; SWIFT's rounds emit M = 5.01 tokens (Table 2) with drafts that stop "
            "below a threshold the paper does not give (its code's `stop_threshold` is 0.8), so "
            "most draft tokens are above it",
    "share": "(as above)",
    "acceptance": "Self-SD 0.919, about half of LLaMA-2-13B skipped (Table 3, Fig. 4); SWIFT "
                  "0.90-1.00 at r = 0.45-0.5, with its tree (Table 2)",
    "cos": "0.977, Llama-2-13B's attention layers (ASD Table 1)",
    "sensitivity": "not tabulated per sublayer",
    "verify": "about 1, as SWIFT Eq. 6 assumes (a memory-bound GPU)",
}


def selfspec(args, what, binary=None):
    """Runs ./selfspec (or binary) with args on one thread; returns stdout, or exits naming what
    failed."""
    binary = binary or os.environ.get("SELFSPEC_BIN", os.path.join(ROOT, "selfspec"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        r = subprocess.run([binary] + args, cwd=ROOT, env=env, capture_output=True, text=True,
                           check=False)
    except OSError as e:
        sys.exit(f"regime: {binary}: {e}")
    if r.returncode != 0:
        sys.exit(f"regime: {what}: selfspec exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def read_trace(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def measure(model, prompts, first, n, oracle_sets, repeats, tmp):
    base = ["-m", model, "-f", prompts, "-n", str(n)]
    row = {}
    # 1-2: the best 45% set's drafts, one token a round
    trace, best = os.path.join(tmp, "oracle.jsonl"), os.path.join(tmp, "best.json")
    one = ["-K", "1", "--exit", "none"]
    selfspec(["-m", model, "-p", first, "--sets", str(oracle_sets), "--save-skip", best] + one,
             f"{model} oracle", os.path.join(ROOT, "test", "bench", "oracle"))
    out = selfspec(base + ["--skip-file", best] + one + ["--json", "--trace", trace], f"{model} best set")
    runs = json_lines(out)
    conf = [c for r in read_trace(trace) if r.get("type") == "round" for c in r["conf"]]
    drafted = sum(r["drafted"] for r in runs)
    row["conf"] = f"{statistics.median(conf):.2f}"
    row["share"] = f"{sum(c > 0.6 for c in conf) / len(conf):.2f} of {len(conf)} tokens"
    row["acceptance"] = (f"{sum(r['accepted'] for r in runs) / drafted:.3f} "
                         f"({runs[0]['skip_ratio']:.0%} skipped)")
    # 3: ASD's C_l
    trace = os.path.join(tmp, "asd.jsonl")
    selfspec(base[:4] + ["-n", "1", "--method", "asd", "--trace", trace], f"{model} asd")
    cos = [r["asd_cos"] for r in read_trace(trace) if r.get("type") == "prefill"]
    per_layer = [sum(c[l] for c in cos) / len(cos) for l in range(len(cos[0]))]
    row["cos"] = f"{statistics.median(per_layer):.3f} (layers {min(per_layer):.3f}-{max(per_layer):.3f})"
    # 4: one sublayer skipped at a time
    changed = []
    for l in range(len(per_layer)):
        for kind in ("attn", "mlp"):
            out = selfspec(base + ["--skip", f"{kind}:{l}", "-K", "1", "--exit", "none", "--json"],
                           f"{model} --skip {kind}:{l}")
            runs = json_lines(out)
            acc = sum(r["accepted"] for r in runs) / sum(r["drafted"] for r in runs)
            changed.append((1 - acc, f"{kind} {l}"))
    changed.sort()
    row["sensitivity"] = (f"most {changed[-1][0]:.0%} ({changed[-1][1]}), median "
                          f"{statistics.median(c for c, _ in changed):.0%}, "
                          f"least {changed[0][0]:.0%} ({changed[0][1]})")
    # 5: a verify pass over k tokens, in one-token passes: verify_cost's per-round ratios
    bench = os.path.join(ROOT, "test", "bench", "verify_cost")
    try:
        r = subprocess.run([bench, model, str(repeats)], cwd=ROOT, capture_output=True,
                           text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), check=False)
    except OSError as e:
        sys.exit(f"regime: {bench}: {e} (make test/bench/verify_cost)")
    if r.returncode != 0:
        sys.exit(f"regime: {bench} {model}: exit {r.returncode}: {r.stderr.strip()}")
    found = {k: (x, lo, hi) for k, x, lo, hi in re.findall(
        r"^\s+(\d+)\s+[\d.]+\s+([\d.]+)x\s+([\d.]+)-([\d.]+)$", r.stdout, re.M)}
    if "2" not in found or "4" not in found:
        sys.exit(f"regime: {bench} {model}: no k = 2 and 4 rows in its output:\n{r.stdout}")
    row["verify"] = ", ".join(f"k={k} {found[k][0]}x ({found[k][1]}-{found[k][2]})"
                              for k in ("2", "4")) + f" (CPU, median of {repeats} rounds)"
    return row


def gpu_verify():
    """The H200 figures of test/bench/README.md: kjv-12l's k = 2 and 4 passes."""
    try:
        with open(os.path.join(ROOT, "test", "bench", "README.md"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"\| kjv-12l: one pass over k tokens / one token[^|]*\| [^|]*k=2 ([\d.]+x), "
                  r"k=4 ([\d.]+x)", text)
    return f"k=2 {m.group(1)}, k=4 {m.group(2)} (H200)" if m else None


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--models", nargs="+", default=MODELS)
    a.add_argument("--prompts", default="test/bench/prompts/kjv-heldout.txt")
    a.add_argument("--n-prompts", type=int, default=5)
    a.add_argument("-n", type=int, default=48)
    a.add_argument("--oracle-sets", type=int, default=40)
    a.add_argument("--repeats", type=int, default=63, help="verify_cost's rounds (at most 201)")
    o = a.parse_args()
    notes, rows = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "prompts.txt")
        try:
            with open(os.path.join(ROOT, o.prompts), encoding="utf-8") as f:
                lines = [line for line in f if line.strip()][:o.n_prompts]
        except OSError as e:
            sys.exit(f"regime: {o.prompts}: {e}")
        with open(prompts, "w", encoding="utf-8") as f:
            f.writelines(lines)
        for model in o.models:
            if not os.path.exists(os.path.join(ROOT, model, "config.json")):
                notes.append(f"{model}: not here, left out"
                             + (" (make it with tiny_models/get_smollm2.sh)"
                                if "smollm2" in model else ""))
                continue
            print(f"regime: measuring {model}", file=sys.stderr)
            rows[model] = measure(model, prompts, lines[0].rstrip("\r\n"), o.n, o.oracle_sets, o.repeats, tmp)
    names = list(rows)
    labels = [("conf", "draft's top-1 confidence, median"),
              ("share", "draft tokens with confidence above 0.6"),
              ("acceptance", "greedy acceptance, best 45% set"),
              ("cos", "ASD's C_l, median over layers"),
              ("sensitivity", "top-1 tokens changed by skipping one sublayer"),
              ("verify", "a verify pass over 2 / 4 tokens, in one-token passes")]
    print(f"{len(lines)} prompts of {o.prompts}, {o.n} tokens each, greedy; the best of "
          f"{o.oracle_sets} random sets\n")
    print("| | " + " | ".join(os.path.basename(n) for n in names) + " | the papers |")
    print("|---|" + "---|" * (len(names) + 1))
    gpu = gpu_verify()
    for key, label in labels:
        cells = [rows[n][key] for n in names]
        paper = PAPERS[key] + (f"; this build's GPU on kjv-12l: {gpu}" if key == "verify" and gpu
                               else "")
        print(f"| {label} | " + " | ".join(cells) + f" | {paper} |")
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
