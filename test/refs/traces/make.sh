#!/bin/sh
# Rewrites the reference traces test/refs/traces/NAME.jsonl, one per line of commands.txt
# (NAME, then the arguments; no quoting: an argument holds no space), from the repo root:
#   make selfspec && sh test/refs/traces/make.sh
# Each is `./selfspec -m tiny_models/kjv-12l ARGS --trace NAME.jsonl` on one thread, greedy.
# test/test_trace.c runs the same commands and diffs their traces with these, timings masked.
set -e
cd "$(dirname "$0")/../../.."
while read -r name args; do
    # shellcheck disable=SC2086 # the arguments split on spaces
    OMP_NUM_THREADS=1 ./selfspec -m tiny_models/kjv-12l $args --trace "test/refs/traces/$name.jsonl" >/dev/null
done < test/refs/traces/commands.txt
