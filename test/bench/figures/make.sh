#!/bin/sh
# Remakes the README's figures and sample outputs from exactly the runs the README prints: each
# command below runs once with --trace test/bench/figures/NAME.jsonl, its text (stdout, then the
# summary on stderr) goes to test/bench/figures/NAME.txt, test/bench/draw_trace.py draws the trace
# as NAME.svg, and rsvg-convert (Debian/Ubuntu: librsvg2-bin) renders NAME.png. Run from the
# repository root on an idle machine: sh test/bench/figures/make.sh
# With --draw, only the drawing: each committed NAME.jsonl drawn again as NAME.svg and NAME.png,
# no run and no README change (after a change to draw_trace.py alone).
set -eu
draw_only=0
case "${1:-}" in
    --draw) draw_only=1 ;;
    "") ;;
    *) echo "make.sh: unknown argument $1 (usage: sh test/bench/figures/make.sh [--draw])" >&2; exit 1 ;;
esac
command -v rsvg-convert >/dev/null || { echo "make.sh: rsvg-convert not found (apt-get install librsvg2-bin)" >&2; exit 1; }
[ $draw_only = 1 ] || make -s selfspec test/bench/oracle
fig() { # NAME 'COMMAND': the command as the README prints it
    if [ $draw_only = 0 ]; then
        echo "$2" >test/bench/figures/$1.txt
        eval "$2 --trace test/bench/figures/$1.jsonl" >>test/bench/figures/$1.txt 2>&1
    fi
    python3 test/bench/draw_trace.py test/bench/figures/$1.jsonl -o test/bench/figures/$1.svg
    rsvg-convert test/bench/figures/$1.svg -o test/bench/figures/$1.png
    echo "test/bench/figures/$1: jsonl, svg, png, txt"
}
fig demo './selfspec -p "And the LORD said unto Moses," -n 64 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --compare'
fig selfsd './selfspec --method selfsd --objective cost --compare'
fig swift './selfspec --method swift --swift-budget 1 --compare'
fig clasp './selfspec --method clasp --loi 2 --compare'
fig asd './selfspec -m tiny_models/kjv-12l-skip --method asd --compare'
fig oracle 'test/bench/oracle --save-skip best.json'
# each .txt into README.md's block for the same command (test/test_readme checks they agree)
[ $draw_only = 1 ] || python3 test/bench/figures/splice_readme.py
