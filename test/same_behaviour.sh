#!/bin/sh
# same_behaviour.sh LOG: writes to LOG what ./selfspec prints (exit status, stderr, stdout) for
# every run the CLI-level tests make and for a fixed set of decoding runs, with timings masked.
# Run it on two commits and diff the logs: a restructuring that changes no behaviour leaves them
# equal.
#   sh test/same_behaviour.sh /tmp/old.log   (on the old commit)
#   sh test/same_behaviour.sh /tmp/new.log   (on the new one), then diff /tmp/old.log /tmp/new.log
set -e
log=$(realpath -m "$1")
raw="$log.raw"
: >"$raw"
export OMP_NUM_THREADS=1
make -s selfspec test/test_bad_inputs test/test_cli test/test_select test/test_forward
for t in test_bad_inputs test_cli test_select test_forward; do
    SELFSPEC_LOG="$raw" ./test/$t | tail -1
done

# decoding runs: each method, greedy and sampled, text and --json
run() {
    printf '=== %s\n' "$*" >>"$raw"
    ./selfspec "$@" >>"$raw" 2>&1 && echo "rc 0" >>"$raw" || echo "rc $?" >>"$raw"
}
for m in "none" "swift --swift-budget 1" "asd" "clasp" "selfsd --objective cost --iters 8"; do
    for s in "" "-t 0.8 -s 7" "-t 0.7 --top-p 0.9 -s 3"; do
        run -n 24 --method $m $s
        run -n 24 --method $m $s --json --compare
    done
done
run -m tiny_models/llama3-tiny-random -n 16 --method clasp -p "Hello world"
run -m tiny_models/llama2-tiny-random -n 16 --method asd --json -p "Once upon"
run -n 40 --method swift --swift-budget 2 -p "And God said" --loi 2 --json

# timings: numbers before ms, s, tokens/s, x, and the JSON fields that hold them
sed -E -e 's/[0-9]+(\.[0-9]+)? (ms|s left|tokens\/s)/T \2/g' \
       -e 's/[0-9]+(\.[0-9]+)?x/Tx/g' \
       -e 's/"(tokens_per_s|plain_tokens_per_s|[a-z_]+_ms|measured_[a-z_]+)": [0-9.e+-]+/"\1": T/g' \
       -e 's/\([0-9]+ vs/(T vs/' -e 's/a draft pass [0-9.]+, a verify pass [0-9.]+/a draft pass T, a verify pass T/' \
       -e 's/= [0-9.]+ verification passes; [0-9.]+%/= T verification passes; T%/' \
       -e 's/taking [0-9]+% of the speedup/taking T% of the speedup/' \
       -e 's/CPU: [0-9]+ OpenMP threads? \([^)]*\)/CPU: T OpenMP threads/' \
       -e '/ms\/token/s/best [0-9.]+/best T/' \
       "$raw" >"$log"
rm -f "$raw"
echo "same_behaviour: $(grep -c '^=== ' "$log") runs in $log"
