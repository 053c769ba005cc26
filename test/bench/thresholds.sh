#!/bin/sh
# thresholds.sh [MODEL...]: the CPU launch shim's parallel thresholds, measured. A launch runs on
# OpenMP threads only with MIN_PARALLEL_BLOCKS blocks or more and MIN_PARALLEL_WORK units of work
# (selfspec.cu, the launch shim); this builds selfspec once per pair of VARIANTS ("blocks:work",
# the first being the committed pair, so the reference) from the working tree's selfspec.cu with
# only those two numbers changed, then decodes with every build in turn, ROUNDS rounds (the order
# rotating each round, so drift favours none), on THREADS threads, and prints each build's median
# decode tokens/s with its range and the ratio of medians to the committed pair's, side by side.
# The greedy tokens must be the same in every build (the thresholds only choose which launches
# run in parallel): a run that differs stops the script. Timings: run it on a quiet machine.
#   sh test/bench/thresholds.sh                       # kjv-12l and stories260K, where it is
#   THREADS=2 ROUNDS=9 sh test/bench/thresholds.sh tiny_models/kjv-12l tiny_models/smollm2-135m
#   VARIANTS="64:65536 16:4096 8:1024" sh test/bench/thresholds.sh
set -e
blocks=$(sed -n 's/.*MIN_PARALLEL_BLOCKS = \([0-9]*\).*/\1/p' selfspec.cu)
work=$(sed -n 's/.*MIN_PARALLEL_WORK = \([^,}]*\).*/\1/p' selfspec.cu) # e.g. "1 << 16"
# shellcheck disable=SC2004 # (the expression, not a variable's number, is evaluated)
work=$(($work))
variants=${VARIANTS:-"$blocks:$work 32:$work 16:$work $blocks:16384 32:16384 16:16384 $blocks:4096 16:4096 8:1024"}
threads=${THREADS:-2}
rounds=${ROUNDS:-7}
models=${*:-tiny_models/kjv-12l}
[ $# -eq 0 ] && [ -d ../shared/models/stories260K ] && models="$models ../shared/models/stories260K"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for v in $variants; do
    mkdir "$tmp/$v"
    sed -e "s/MIN_PARALLEL_BLOCKS = [0-9]*/MIN_PARALLEL_BLOCKS = ${v%:*}/" \
        -e "s/MIN_PARALLEL_WORK = [^,}]*/MIN_PARALLEL_WORK = ${v#*:}/" selfspec.cu >"$tmp/$v/selfspec.cu"
    cp selfspec.h Makefile "$tmp/$v/"
    [ -f jsmn.h ] && cp jsmn.h "$tmp/$v/"
    make -s -C "$tmp/$v" selfspec >/dev/null
done
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)], v[1], v[NR]}'; }
echo "launch thresholds, $threads threads, $rounds rounds, 128 tokens; blocks:work, the first the committed pair"
printf '| model | run | blocks:work | tokens/s median | min-max | vs %s |\n|---|---|---|---|---|---|\n' \
    "${variants%% *}"
for m in $models; do
    # the draft: kjv-12l's demo set on any depth, attention of every other layer from 2 to L - 2,
    # MLP from 3 to L - 3 (a model of 5 layers: attn:2 alone)
    L=$(sed -n 's/.*"num_hidden_layers": *\([0-9]*\).*/\1/p' "$m/config.json")
    mlp=$(seq 3 2 $((L - 3)) | paste -sd, -)
    for run in "--method none" "--skip attn:$(seq 2 2 $((L - 2)) | paste -sd, -)${mlp:+;mlp:$mlp}"; do
        ref=${variants%% *}
        # shellcheck disable=SC2086 # $run is a word list
        "$tmp/$ref/selfspec" -m "$m" -n 128 $run --json | grep -o '"tokens": \[[^]]*\]' >"$tmp/want"
        # shellcheck disable=SC2086 # the variants, one word each
        set -- $variants
        for _ in $(seq "$rounds"); do
            for v in "$@"; do
                # shellcheck disable=SC2086
                j=$("$tmp/$v/selfspec" -m "$m" -n 128 --threads "$threads" $run --json)
                echo "$j" | grep -o '"tokens_per_s": [0-9.]*' | head -1 | cut -d' ' -f2 >>"$tmp/$v.tps"
                if [ "$(echo "$j" | grep -o '"tokens": \[[^]]*\]')" != "$(cat "$tmp/want")" ]; then
                    echo "thresholds.sh: $v decodes other tokens than $ref on $m ($run)" >&2
                    exit 1
                fi
            done
            first=$1 && shift && set -- "$@" "$first" # rotate the order
        done
        mid=$(median <"$tmp/$ref.tps" | cut -d' ' -f1)
        for v in $variants; do
            # shellcheck disable=SC2046 # the median and the range, three words
            set -- $(median <"$tmp/$v.tps")
            # shellcheck disable=SC2016 # the backquotes are markdown's
            printf '| %s | `%s` | %s | %s | %s-%s | %.3f |\n' "$(basename "$m")" "$run" "$v" "$1" "$2" "$3" \
                "$(echo "$1 / $mid" | bc -l)"
            rm -f "$tmp/$v.tps"
        done
    done
done
