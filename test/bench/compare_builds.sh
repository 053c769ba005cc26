#!/bin/sh
# compare_builds.sh OLD NEW [MODEL...]: decoding speed of two selfspec binaries side by side.
# Each configuration runs OLD and NEW alternately REPEATS times (default 5) on THREADS threads
# (default 1), so both see the same machine; prints each build's median decode tokens/s, the
# ratio new / old and each build's range (min-max: the spread the medians came from). A
# restructuring that keeps the kernels keeps the ratio near 1.
#   sh test/bench/compare_builds.sh /tmp/old/selfspec ./selfspec tiny_models/kjv-12l
# A run that fails (no speed in its --json) is an error: the script stops with exit 1 and names
# the build and the configuration, rather than print a ratio of nothing. Its numbers go to a
# folder of its own (mktemp), removed at the end, on Ctrl-C and on TERM, so two runs at once
# never read each other's.
set -e
old=$1 new=$2
shift 2
models=${*:-tiny_models/kjv-12l}
repeats=${REPEATS:-5}
threads=${THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT # (dash runs no EXIT trap on a signal: exit from these, and it runs)
trap 'exit 143' TERM
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
range() { sort -n | awk '{v[NR] = $1} END {print v[1] "-" v[NR]}'; }
speed() { "$@" --threads "$threads" --json | grep -o '"tokens_per_s": [0-9.]*' | head -1 | cut -d' ' -f2; }
printf '| model | run | old tokens/s | new tokens/s | new / old | old min-max | new min-max |\n|---|---|---|---|---|---|---|\n'
for m in $models; do
    for run in "--method none" "--skip attn:1,3;mlp:2" "--method swift" "--method asd" \
               "--method clasp"; do
        : >"$tmp/old"
        : >"$tmp/new"
        for i in $(seq "$repeats"); do
            speed "$old" -m "$m" -n 128 $run >>"$tmp/old"
            speed "$new" -m "$m" -n 128 $run >>"$tmp/new"
        done
        for b in old new; do
            got=$(grep -c . "$tmp/$b" || true)
            if [ "$got" -ne "$repeats" ]; then
                [ $b = old ] && bin=$old || bin=$new
                echo "compare_builds.sh: error: the $b build ($bin) gave a speed in $got of $repeats runs of \`$run\` on $m (run it by hand to see why)" >&2
                exit 1
            fi
        done
        o=$(median <"$tmp/old")
        n=$(median <"$tmp/new")
        printf '| %s | `%s` | %s | %s | %.3f | %s | %s |\n' "$(basename "$m")" "$run" "$o" "$n" \
            "$(echo "$n / $o" | bc -l)" "$(range <"$tmp/old")" "$(range <"$tmp/new")"
    done
done
