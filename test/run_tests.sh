#!/bin/sh
# Runs each test binary given, its output streaming as it runs, sums their "N passed, M failed"
# lines into one closing line, and exits non-zero if any test failed or crashed.
passed=0; failed=0; status=0
log=$(mktemp); rcf=$(mktemp)
trap 'rm -f "$log" "$rcf"' EXIT
for t in "$@"; do
    { "./$t" 2>&1; echo $? >"$rcf"; } | tee "$log"
    rc=$(cat "$rcf")
    line=$(grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; }; then
        echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); status=1; continue
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
    f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" -ne 0 ] && status=1
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ] && exit $status
exit 1
