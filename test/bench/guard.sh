#!/bin/sh
# guard.sh [BASE]: the working tree's decoding speed beside commit BASE (default HEAD), so that a
# regression shows before it lands. Builds BASE's selfspec.cu from `git archive` in a temporary
# folder, then runs compare_builds.sh (alternating runs, medians, new / old) on kjv-12l and, when
# it is there, stories260K. A ratio under 0.95 on an idle machine is worth finding the cause of.
set -e
base=${1:-HEAD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT # (dash runs no EXIT trap on a signal: exit from these, and it runs)
trap 'exit 143' TERM
git archive "$base" selfspec.cu selfspec.h Makefile | tar -x -C "$tmp"
[ -f jsmn.h ] && cp jsmn.h "$tmp/"
make -s -C "$tmp" selfspec >/dev/null
models=tiny_models/kjv-12l
[ -d ../shared/models/stories260K ] && models="$models ../shared/models/stories260K"
echo "decoding speed: the working tree (new) beside $(git log -1 --format='%h %s' "$base" | cut -c1-70) (old)"
REPEATS=${REPEATS:-5} sh test/bench/compare_builds.sh "$tmp/selfspec" ./selfspec $models
