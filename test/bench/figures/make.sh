#!/bin/sh
# Remakes the README's figures and sample outputs from exactly the runs the README prints: each
# command below runs once with --trace test/bench/figures/NAME.jsonl, its text (stdout, then the
# summary on stderr) goes to test/bench/figures/NAME.txt, test/bench/draw_trace.py draws the trace
# as NAME.svg (paper: test/bench/paper_figures.py draws one of the papers' figures from it; text:
# no picture), and rsvg-convert (Debian/Ubuntu: librsvg2-bin) renders NAME.png. Then
# splice_readme.py puts each .txt into README's block for the same command and the prose numbers
# that quote a block into step with it. Run from the repository root on an idle machine:
# sh test/bench/figures/make.sh
# With --draw, only the drawing: each committed NAME.jsonl drawn again as NAME.svg and NAME.png,
# no run and no README change (after a change to draw_trace.py or paper_figures.py alone).
set -eu
draw_only=0
case "${1:-}" in
    --draw) draw_only=1 ;;
    "") ;;
    *) echo "make.sh: unknown argument $1 (usage: sh test/bench/figures/make.sh [--draw])" >&2; exit 1 ;;
esac
command -v rsvg-convert >/dev/null || { echo "make.sh: rsvg-convert not found (apt-get install librsvg2-bin)" >&2; exit 1; }
[ $draw_only = 1 ] || make -s selfspec test/bench/oracle
run() { # NAME 'COMMAND' [EXT]: the command as README prints it, its output (NAME.txt, or NAME.EXT:
    # not spliced) and trace recorded
    if [ $draw_only = 0 ]; then
        echo "$2" >test/bench/figures/$1.${3:-txt}
        eval "$2 --trace test/bench/figures/$1.jsonl" >>test/bench/figures/$1.${3:-txt} 2>&1
    fi
}
fig() { # NAME 'COMMAND': the run, drawn by draw_trace.py
    run "$1" "$2"
    python3 test/bench/draw_trace.py test/bench/figures/$1.jsonl -o test/bench/figures/$1.svg
    rsvg-convert test/bench/figures/$1.svg -o test/bench/figures/$1.png
    echo "test/bench/figures/$1: jsonl, svg, png, txt"
}
paper() { # NAME FIGURE 'COMMAND': the run, drawn as one of the papers' figures (paper_figures.py)
    run "$1" "$3" log
    python3 test/bench/paper_figures.py "$2" test/bench/figures/$1.jsonl -o test/bench/figures/$1.svg
    rsvg-convert test/bench/figures/$1.svg -o test/bench/figures/$1.png
    echo "test/bench/figures/$1: jsonl, svg, png, log"
}
text() { # NAME 'COMMAND': the run's text alone, for a README block (its trace is kept, not drawn)
    [ $draw_only = 1 ] || { run "$1" "$2"; echo "test/bench/figures/$1: jsonl, txt"; }
}
fig demo './selfspec -p "And the LORD said unto Moses," -n 64 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --compare'
fig selfsd './selfspec --method selfsd --objective cost --compare'
fig swift './selfspec --method swift --swift-budget 1 --compare'
fig clasp './selfspec --method clasp --loi 2 --compare'
fig asd './selfspec -m tiny_models/kjv-12l-skip --method asd --compare'
fig oracle 'test/bench/oracle --save-skip best.json'
text rounds './selfspec -p "And the LORD said unto Moses," -n 12 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --show-rounds'
text swift-chain './selfspec --method swift --swift-budget 1 --swift-tree off --compare'
text exit-none './selfspec -p "And the LORD said unto Moses," -n 64 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --exit none -K 4'
text exit-fixed './selfspec -p "And the LORD said unto Moses," -n 64 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --exit fixed:0.2'
text exit-256 './selfspec -p "And the LORD said unto Moses," -n 256 --skip "attn:2,4,6,8,10 mlp:3,5,7,9"'
text swift-events './selfspec --method swift --swift-budget 1 --swift-tree off -n 160 --show-rounds'
text ex-mlp0 './selfspec --skip "mlp:0" -n 32'
text ex-attn4 './selfspec --skip "attn:4" -n 32'
text ex-asd './selfspec --method asd -n 16'
text ex-asd-alpha './selfspec --method asd -n 16 --asd-alpha 0.9829'
paper selfsd-fig4 selfsd-fig4 './selfspec --method selfsd --objective cost --iters 200'
paper clasp-fig3a clasp-fig3a './selfspec --method clasp --loi 1 -f test/bench/prompts/kjv.txt -n 64'
paper swift-fig6 swift-fig6 './selfspec --method swift --swift-budget 1 -f test/bench/prompts/kjv.txt -n 64'
# each .txt into README.md's block for the same command, and the prose's numbers that quote it
# (test/test_readme checks they agree)
[ $draw_only = 1 ] || python3 test/bench/figures/splice_readme.py
