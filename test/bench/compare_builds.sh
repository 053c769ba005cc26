#!/bin/sh
# compare_builds.sh OLD NEW [MODEL...]: decoding speed of two selfspec binaries side by side.
# Each configuration runs OLD and NEW alternately REPEATS times (default 5) on THREADS threads
# (default 1), so both see the same machine; prints each build's median decode tokens/s and the
# ratio new / old. A restructuring that keeps the kernels keeps the ratio near 1.
#   sh test/bench/compare_builds.sh /tmp/old/selfspec ./selfspec tiny_models/kjv-12l
set -e
old=$1 new=$2
shift 2
models=${*:-tiny_models/kjv-12l}
repeats=${REPEATS:-5}
threads=${THREADS:-1}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
speed() { "$@" --threads "$threads" --json | grep -o '"tokens_per_s": [0-9.]*' | head -1 | cut -d' ' -f2; }
printf '| model | run | old tokens/s | new tokens/s | new / old |\n|---|---|---|---|---|\n'
for m in $models; do
    for run in "--method none" "--skip attn:1,3;mlp:2" "--method swift" "--method asd" \
               "--method clasp"; do
        : >/tmp/compare_old.txt
        : >/tmp/compare_new.txt
        for i in $(seq "$repeats"); do
            speed "$old" -m "$m" -n 128 $run >>/tmp/compare_old.txt
            speed "$new" -m "$m" -n 128 $run >>/tmp/compare_new.txt
        done
        o=$(median </tmp/compare_old.txt)
        n=$(median </tmp/compare_new.txt)
        printf '| %s | `%s` | %s | %s | %.3f |\n' "$(basename "$m")" "$run" "$o" "$n" "$(echo "$n / $o" | bc -l)"
    done
done
rm -f /tmp/compare_old.txt /tmp/compare_new.txt
