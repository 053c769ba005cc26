#!/bin/sh
# Rewrites the fixture pairs of test/test_trace_diff.py, from the repo root:
#   sh test/refs/traces/arith/make.sh
# NAME.jsonl is ./selfspec's trace for the line NAME of test/refs/traces/commands.txt (asd, clasp);
# NAME-fma.jsonl the same run on a build that lets the compiler fuse a*b+c into one FMA
# (-ffp-contract=fast, which the Makefile turns off): another arithmetic, whose floats differ in
# their last bits, so plain diff fails on nearly every line while test/trace_diff.py passes.
set -e
cd "$(dirname "$0")/../../../.."
make -s selfspec
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the Makefile's CFLAGS with -ffp-contract=fast last, so it wins over -ffp-contract=off
${CC:-cc} -O3 -march=native -mprefer-vector-width=256 -std=gnu11 -fopenmp -I. \
    -ffp-contract=fast -x c selfspec.cu -o "$tmp/selfspec-fma" -lm
for name in asd clasp; do
    args=$(sed -n "s/^$name //p" test/refs/traces/commands.txt)
    # shellcheck disable=SC2086 # the arguments split on spaces
    OMP_NUM_THREADS=1 ./selfspec -m tiny_models/kjv-12l $args \
        --trace "test/refs/traces/arith/$name.jsonl" >/dev/null
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 "$tmp/selfspec-fma" -m tiny_models/kjv-12l $args \
        --trace "test/refs/traces/arith/$name-fma.jsonl" >/dev/null
done
