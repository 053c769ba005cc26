#!/bin/sh
# device_check.sh [OUT]: what a lent GPU should run, in one go, under 8 minutes on an H200
# (make device-check OUT=...). Each part runs under its own time limit, cut to what is left of
# the whole (BUDGET seconds, default 470); a part that fails or runs out of time is reported and
# the rest still run. In order: the machine (nvidia-smi, nvcc), the build (make cuda cuda-tests
# test/bench/verify_cost_cuda, CUDA_ARCH=sm_90 unless set), make test-cuda (the reduced
# workload, SELFSPEC_TEST_QUICK=1, unless FULL=1), then test/bench/bench_gpu.py part by part:
# cost (verify_cost_cuda on kjv-12l and a random 1B model, CUDA graphs on and off: pass costs,
# launches per pass, each stage of a layer timed with CUDA events), a per-kernel profile (nsys
# when it is on the PATH, else ncu when it is, else the stage timings alone), plain (decoding
# tokens/s, graphs on and off), hf (transformers on the same GPU), methods (every method's
# --compare on kjv-12l and kjv-12l-skip); last the report: the device section of
# test/bench/README.md, the device named, with issue 49's targets beside the figures.
#
# Needs nvcc and an NVIDIA GPU, python3 with numpy and safetensors (torch and transformers for
# the hf part), and jsmn.h beside selfspec.cu or on the include path (copy /usr/include/jsmn.h
# beside selfspec.cu before the tree travels: it is not committed). Writes to OUT (default
# /tmp/selfspec-device-check; at most 8 files, as a lent machine sends back): log.txt (every
# command's output), status.txt (each part: ok, failed or timed out, and its seconds),
# results.json (bench_gpu.py's figures), profile.txt, section.md (the report) and README.md
# (test/bench/README.md with section.md between its device_check.sh markers; the tree's own copy
# is updated too, except in a dry run). Exit status: 0 when every part passed, 1 otherwise.
# shellcheck disable=SC2086 # $build, $tests and $flags below are word lists, split on purpose
set -u
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
case ${1:-} in --profile | --report) mode=$1; shift ;; *) mode= ;; esac
out=${1:-${TMPDIR:-/tmp}/selfspec-device-check}
budget=${BUDGET:-450}
arch=${CUDA_ARCH:-sm_90}
py=${PYTHON:-python3}
# DRY=1: the script's own check on a machine without a GPU (the CPU build, tiny sizes, no HF)
if [ "${DRY:-0}" = 1 ]; then
    build="make -j2 selfspec test/bench/verify_cost test/test_forward" vc=test/bench/verify_cost
    tests="./test/test_forward" flags="--cpu --no-hf" big=tiny_models/random-dry-run
else
    build="make -j8 cuda cuda-tests test/bench/verify_cost_cuda CUDA_ARCH=$arch"
    vc=test/bench/verify_cost_cuda tests="make test-cuda CUDA_ARCH=$arch" flags=
    big=tiny_models/tinyllama-1b-random
fi
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
log=$out/log.txt
status=$out/status.txt
export PYTHONUNBUFFERED=1

# part NAME LIMIT COMMAND...: runs COMMAND under min(LIMIT, what is left of the budget) seconds,
# appending its output to the log, and records how it ended
part() {
    name=$1 limit=$2
    shift 2
    left=$((budget - ($(date +%s) - start)))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -le 5 ]; then
        echo "$name: skipped (the ${budget} s budget is spent)" | tee -a "$status"
        failed=1
        return 1
    fi
    printf '\n==== %s (limit %s s): %s\n' "$name" "$limit" "$*" >>"$log"
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - t0))
    case $rc in
    0) how=ok ;;
    124 | 137) how="timed out at $limit s" ;;
    *) how="failed (exit $rc)" ;;
    esac
    echo "$name: $how, $took s" | tee -a "$status"
    [ $rc -eq 0 ] || failed=1
    return $rc
}

# the profile (run as `device_check.sh --profile OUT`, so that timeout can run it): nsys, else
# ncu (30 kernels of each model, launched one by one), else the cost part's stage timings alone
profile() {
    if command -v nsys >/dev/null 2>&1; then
        nsys profile --stats=true --force-overwrite true -o "$out/nsys" "$vc" "$big" 3 \
            >"$out/profile.txt" 2>&1
        rc=$?
        rm -f "$out"/nsys.* # the report file: too large to send back, and its table is in profile.txt
        return $rc
    elif command -v ncu >/dev/null 2>&1; then
        for m in tiny_models/kjv-12l "$big"; do
            echo "# ncu, $m: the 30 kernels after the first 400 (one pass or more)"
            SELFSPEC_GRAPHS=0 ncu --clock-control none --launch-skip 400 --launch-count 30 \
                --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
                "$vc" "$m" 3 || return 1
        done >"$out/profile.txt" 2>&1
    else
        echo "neither nsys nor ncu is on the PATH: the cost part's stage timings are the profile" \
            >"$out/profile.txt"
    fi
}

# the report, and test/bench/README.md with it between the markers (`device_check.sh --report`)
report() {
    "$py" test/bench/bench_gpu.py --report "$out/results.json" >"$out/section.md" || return 1
    "$py" - "$out/section.md" test/bench/README.md "$out/README.md" <<'EOF' || return 1
import sys
section, path, copy = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
text = open(path).read()
begin, end = "<!-- device_check.sh: begin -->", "<!-- device_check.sh: end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} ... {end} markers")
head, rest = text.split(begin, 1)
text = head + begin + "\n" + section.rstrip() + "\n" + end + rest.split(end, 1)[1]
open(copy, "w").write(text)
EOF
    [ "${DRY:-0}" = 1 ] || cp "$out/README.md" test/bench/README.md # (a dry run's figures are no device's)
}

case $mode in
--profile) profile; exit ;;
--report) report; exit ;;
esac
: >"$log"
: >"$status"
start=$(date +%s)
failed=0
part machine 20 sh -c 'nvidia-smi; nvcc --version; uname -a'
part build 150 $build ||
    { echo "the build failed: nothing else can run (see $log)"; exit 1; }
if [ "${FULL:-0}" = 1 ]; then
    part test-cuda 240 $tests
else
    part test-cuda 120 env SELFSPEC_TEST_QUICK=1 $tests
fi
rm -f "$out/results.json"
part cost 75 "$py" test/bench/bench_gpu.py $flags --parts cost --save "$out/results.json"
part profile 45 sh "$self" --profile "$out"
part plain 45 "$py" test/bench/bench_gpu.py $flags --parts plain --save "$out/results.json"
part hf 60 "$py" test/bench/bench_gpu.py $flags --parts hf --save "$out/results.json"
part methods 90 "$py" test/bench/bench_gpu.py $flags --parts methods --save "$out/results.json"
budget=$((budget + 15)) # the report's 15 s are kept aside
part report 15 sh "$self" --report "$out"
echo "device_check: $(($(date +%s) - start)) s; $(grep -c ': ok' "$status") of $(wc -l <"$status") parts ok; the report: $out/section.md"
[ -f "$out/section.md" ] && sed -n '/^| target/,/^$/p' "$out/section.md"
exit $failed
