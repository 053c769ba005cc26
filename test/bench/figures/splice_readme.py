#!/usr/bin/env python3
"""Puts each sample output of test/bench/figures/*.txt into README.md, in place of the block
that shows the same command's output (test/test_readme checks the two agree).

    python3 test/bench/figures/splice_readme.py        # after test/bench/figures/make.sh

A README example is an output block (a fence with no language) whose first line is the command,
or one right after a ```sh block holding only the command (a trailing "# comment" aside). A
.txt file's first line is its command, the rest what the command printed. Standard library only.
"""
import glob
import os

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "..", "README.md")


def command(line):
    return line.split("  #")[0].strip()


def elided(lines):
    """A run of more than 4 progress lines (same first two words) as its first two, "...", its last."""
    out, i = [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j].split()[:2] == lines[i].split()[:2] and lines[i].strip():
            j += 1
        run = lines[i:max(j, i + 1)]
        out += run if len(run) <= 4 or not lines[i].split()[1:2] == ["iter"] else run[:2] + ["..."] + run[-1:]
        i = max(j, i + 1)
    return out


def main():
    outputs = {}
    for path in sorted(glob.glob(os.path.join(HERE, "*.txt"))):
        lines = open(path).read().rstrip("\n").split("\n")
        outputs[command(lines[0])] = elided([l for l in lines[1:] if not l.startswith("wrote test/bench/figures/")])
    lines = open(README).read().split("\n")
    out, i, prev_sh, used = [], 0, None, set()
    while i < len(lines):
        if not lines[i].startswith("```"):
            out.append(lines[i])
            i += 1
            continue
        j = lines.index("```", i + 1) if lines[i] != "```" else i + 1
        while lines[j] != "```":
            j += 1
        body = lines[i + 1:j]
        if lines[i] == "```sh":
            prev_sh = (j, body)
        else:
            cmd = command(body[0]) if body else None
            if cmd in outputs:  # the command opens the block
                body = [body[0]] + outputs[cmd]
                used.add(cmd)
            elif prev_sh and len(prev_sh[1]) == 1 and i - prev_sh[0] <= 2 \
                    and command(prev_sh[1][0]) in outputs:
                body = outputs[command(prev_sh[1][0])]
                used.add(command(prev_sh[1][0]))
        out += [lines[i]] + body + ["```"]
        i = j + 1
    with open(README + ".tmp", "w") as f:
        f.write("\n".join(out))
    os.replace(README + ".tmp", README)
    for cmd in sorted(set(outputs) - used):
        print(f"splice_readme: no README block shows `{cmd}`")


if __name__ == "__main__":
    main()
