#!/usr/bin/env python3
"""Does CLaSp's re-selection find a persistent set, or noise? (CLaSp Sec. 3.7: the paper's
premise is that the skipped layers change little from one DP to the next.)

    python3 test/bench/clasp_overlap.py [TRACE]

Reads a --trace of a CLaSp run (without TRACE: runs README's CLaSp example,
./selfspec --method clasp --loi 2, with --trace into a temporary folder; $SELFSPEC_BIN names
another binary) and prints, per run: how many DPs changed the set, the mean Jaccard overlap
|A & B| / |A | B| of consecutive DP sets (within a prompt; a set is its skipped layers), the
range of the DPs' margins (how close each came to choosing otherwise), and
the same mean for two sets of M layers drawn at random out of L, computed exactly (the
hypergeometric law of |A & B|). Standard library only; everything it prints is deterministic.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README_RUN = ["--method", "clasp", "--loi", "2"]


def layers(skip):
    """A trace skip set's skipped layers (CLaSp skips whole layers: attention and MLP)."""
    return frozenset(skip["attn"])


def jaccard(a, b):
    return len(a & b) / len(a | b) if a | b else 1.0


def random_jaccard(n_layers, m):
    """E[J(A, B)] for A, B independent uniform m-subsets of n_layers: |A & B| = k has
    probability C(m, k) C(L - m, m - k) / C(L, m), and then J = k / (2m - k)."""
    if m == 0:
        return 1.0
    total = math.comb(n_layers, m)
    return sum(math.comb(m, k) * math.comb(n_layers - m, m - k) / total * k / (2 * m - k)
               for k in range(0, m + 1))


def read_trace(path):
    try:
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        sys.exit(f"clasp_overlap: {path}: {e}")
    header = records[0] if records and isinstance(records[0], dict) else {}
    if header.get("type") != "header" or header.get("method") != "clasp":
        sys.exit(f"clasp_overlap: {path}: not a trace of --method clasp")
    dps = {}  # prompt -> [(set drafted with before, set chosen)]
    for r in records:
        event = r.get("event") if r.get("type") == "round" else None
        if event and "clasp" in event:
            dps.setdefault(r["prompt"], []).append((layers(r["skip"]),
                                                   layers(event["clasp"]["skip"]),
                                                   event["clasp"]["margin"]))
    return header, dps


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        sys.exit(__doc__.split("\n\n")[1])
    with tempfile.TemporaryDirectory() as tmp:
        path = sys.argv[1] if len(sys.argv) == 2 else os.path.join(tmp, "clasp.jsonl")
        if len(sys.argv) == 1:
            binary = os.environ.get("SELFSPEC_BIN", os.path.join(ROOT, "selfspec"))
            cmd = [binary] + README_RUN + ["--trace", path]
            try:
                run = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, check=False)
            except OSError as e:
                sys.exit(f"clasp_overlap: {binary}: {e}")
            if run.returncode != 0:
                sys.exit(f"clasp_overlap: {' '.join(cmd)}: exit {run.returncode}: {run.stderr}")
        header, dps = read_trace(path)
    n_layers, m = header["n_layers"], header["params"]["M"]
    runs = [dp for prompt in dps.values() for dp in prompt]
    changed = sum(before != chosen for before, chosen, _ in runs)
    margins = [margin for _, _, margin in runs if margin is not None]
    pairs = [jaccard(a[1], b[1]) for prompt in dps.values() for a, b in zip(prompt, prompt[1:])]
    print(f"{header['model']}: {len(runs)} DPs (M = {m} of {n_layers} layers), "
          f"{changed} of which changed the set")
    if margins:
        print(f"their closest decisions (the trace's margin): {min(margins):.2g} to "
              f"{max(margins):.2g} in cosine")
    if pairs:
        print(f"consecutive DP sets: mean Jaccard {sum(pairs) / len(pairs):.3f} over "
              f"{len(pairs)} pairs (min {min(pairs):.3f}, max {max(pairs):.3f})")
    else:
        print("consecutive DP sets: fewer than two DPs in every prompt, no pair to compare")
    print(f"two random sets of {m} of {n_layers} layers: mean Jaccard "
          f"{random_jaccard(n_layers, m):.3f}")


if __name__ == "__main__":
    main()
