#!/usr/bin/env python3
"""Side by side: what each method does on kjv-12l and on kjv-12l-skip (the model trained with
sublayer dropout), on prompts from the books held out of both models' training.

    python3 test/bench/teaching_table.py [--models tiny_models/kjv-12l tiny_models/kjv-12l-skip]
                                         [--prompts test/bench/prompts/kjv-heldout.txt] [-n 64]

Standard library only; runs ./selfspec --json --compare once per (model, method) over every
prompt (the oracle's row: test/bench/oracle's best set on test/bench/prompts/dev.txt, then
./selfspec --skip-file with it), and prints a markdown table: the sublayers skipped, acceptance alpha (accepted /
drafted over all prompts), M (tokens per verification), SWIFT Eq. 6's expected speedup (mean
over prompts) and the measured speedup (plain decoding time / self-speculative decoding time,
summed over prompts, both measured in the same process). Timings depend on the machine and its
load; every other column is deterministic.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (label, selfspec arguments); the static sets are fixed in advance, not chosen per model
RUNS = [
    ("static, the demo's 9 of 24", ["--skip", "attn:2,4,6,8,10 mlp:3,5,7,9"]),
    ("static, 12 of 24", ["--skip", "attn:2,3,4,5,6,7,8,9 mlp:3,5,7,9"]),
    ("asd", ["--method", "asd"]),
    ("selfsd (time)", ["--method", "selfsd", "--dev-prompts", "test/bench/prompts/dev.txt"]),
    ("selfsd (cost)", ["--method", "selfsd", "--objective", "cost",
                       "--dev-prompts", "test/bench/prompts/dev.txt"]),
    ("oracle (cost)", ["--skip-file", "ORACLE"]),  # test/bench/oracle's best set on dev.txt
    ("swift", ["--method", "swift"]),
    ("clasp", ["--method", "clasp"]),
]


def oracle_set(model, threads, path):
    """test/bench/oracle's best set on the dev prompts (cost objective), saved to path."""
    cmd = [os.path.join(ROOT, "test", "bench", "oracle"), "-m", model, "-f", "test/bench/prompts/dev.txt",
           "--save-skip", path]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return path


def run(model, args, prompts, n, threads):
    if "ORACLE" in args:
        with tempfile.TemporaryDirectory() as tmp:
            path = oracle_set(model, threads, os.path.join(tmp, "best.json"))
            return run(model, [path if a == "ORACLE" else a for a in args], prompts, n, threads)
    cmd = [os.path.join(ROOT, "selfspec"), "-m", model, "-f", prompts, "-n", str(n),
           "--threads", str(threads), "--json", "--compare"] + args
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def row(label, recs):
    drafted = sum(r["drafted"] for r in recs)
    accepted = sum(r["accepted"] for r in recs)
    rounds = sum(r["rounds"] for r in recs)
    spec_ms = sum(r["decode_ms"] for r in recs)
    plain_ms = sum(r["n_tokens"] / r["plain_tokens_per_s"] * 1e3 for r in recs)
    skipped = sorted({len(r["skip"]["attn"]) + len(r["skip"]["mlp"]) for r in recs})
    expected = sum(r["expected_speedup"] for r in recs) / len(recs)
    assert all(r["identical"] for r in recs), label
    alpha = accepted / drafted if drafted else 0.0
    m = (accepted + rounds) / rounds if rounds else 1.0
    skip = "-".join(str(s) for s in (skipped[0], skipped[-1])) if len(skipped) > 1 \
        else str(skipped[0])
    return (f"| {label} | {skip} | {drafted} | {alpha:.3f} | {m:.2f} | {expected:.2f}x "
            f"| {plain_ms / spec_ms:.2f}x |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+",
                    default=["tiny_models/kjv-12l", "tiny_models/kjv-12l-skip"])
    ap.add_argument("--prompts", default="test/bench/prompts/kjv-heldout.txt")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="labels to run (default: all)")
    a = ap.parse_args()
    print(f"{a.prompts}, greedy, {a.n} tokens per prompt, {a.threads} thread(s); "
          "skipped: sublayers of 24 (a range when the set changes between prompts)\n")
    for model in a.models:
        print(f"#### {os.path.basename(model)}\n")
        print("| method | skipped | drafted | acceptance | M | Eq. 6 expected | measured |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, args in RUNS:
            if a.only and label not in a.only:
                continue
            print(row(label, run(model, args, a.prompts, a.n, a.threads)), flush=True)
        print()


if __name__ == "__main__":
    main()
