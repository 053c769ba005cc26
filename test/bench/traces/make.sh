#!/bin/sh
# Rewrites test/bench/traces/swift-sample.jsonl, the trace test/test_draw_trace.py draws and
# varies: SWIFT on kjv-12l, two prompts, a step every round, --compare; from the repo root:
#   make selfspec && sh test/bench/traces/make.sh
set -e
cd "$(dirname "$0")/../../.."
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
printf 'In the beginning God created\nAnd the LORD said unto Moses\n' >"$prompts"
OMP_NUM_THREADS=1 ./selfspec -m tiny_models/kjv-12l -f "$prompts" -n 48 --method swift \
    --swift-budget 1 --compare --trace test/bench/traces/swift-sample.jsonl >/dev/null
