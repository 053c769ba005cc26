#!/bin/sh
# Runs one fuzz target: sh test/fuzz/run_fuzz.sh TARGET SECONDS [MAX_RUNS]
# The seeds in test/fuzz/corpus/TARGET are copied into test/fuzz/work/TARGET (not committed),
# where libFuzzer adds what it finds; crashes land in test/fuzz/work/TARGET-crash-*. Ends with
# one line "TARGET: N executions in S s, E exec/s, corpus C, crashes K"; exits non-zero on a crash.
set -u
t=$1; seconds=$2; runs=${3:-10000000}
case $t in
    encode_decode) max_len=4096 ;;     # a Llama 2 prompt is one BPE word: O(n^2) merges, keep n small
    tokenizer_json) max_len=131072 ;;  # the seeds are real tokenizer.json files of up to 121 KB
    *) max_len=65536 ;;
esac
work=test/fuzz/work
mkdir -p "$work/$t"
cp -n test/fuzz/corpus/"$t"/* "$work/$t"/ 2>/dev/null
log="$work/$t.log"
start=$(date +%s)
./test/fuzz/fuzz_"$t" "$work/$t" -max_total_time="$seconds" -runs="$runs" -rss_limit_mb=2048 \
    -max_len="$max_len" -timeout=30 -print_final_stats=1 -artifact_prefix="$work/$t-" >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
crashes=$(ls "$work/$t"-crash-* "$work/$t"-leak-* "$work/$t"-timeout-* "$work/$t"-oom-* 2>/dev/null | wc -l)
echo "$t: ${execs:-?} executions in ${elapsed} s, ${rate:-?} exec/s, corpus $(ls "$work/$t" | wc -l), crashes $crashes (log $log)"
[ $rc -eq 0 ] || { grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$log"; exit 1; }
