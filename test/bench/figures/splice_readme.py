#!/usr/bin/env python3
"""Puts each sample output of test/bench/figures/*.txt into README.md and test/exercises.md, in place of the block
that shows the same command's output, and the prose numbers that quote a block into step with
its new output (test/test_readme checks both).

    python3 test/bench/figures/splice_readme.py        # after test/bench/figures/make.sh

A README example is an output block (a fence with no language) whose first line is the command,
or one right after a ```sh block holding only the command (a trailing "# comment" aside). A
.txt file's first line is its command, the rest what the command printed. The prose of a block
is what follows it up to the next fence or heading; a decimal number there outside `code` that
the old block printed becomes the number printed at the same place (line and order on it) of
the new block (its line of the same shape); one the old block printed in places that now differ,
or on a line the new block lacks, is reported, not guessed.
Standard library only.
"""
import glob
import os
import re

NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?!\d)")  # a decimal, as test_readme's prose check reads one
DIGITS = re.compile(r"\d+(?:\.\d+)?")  # any number: a line's shape is the line without them

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
FILES = ("README.md", os.path.join("test", "exercises.md"))  # the files whose blocks are spliced


def command(line):
    return line.split("  #")[0].strip()


def elided_rounds(lines):
    """--show-rounds' lines, when more than 12: the first 3, then each that shows a SWIFT GP step
    (Eq. 2) or an App. C.2 restart and the round after a restart, "..." for the rest."""
    if len([l for l in lines if l.startswith("round ")]) <= 12:
        return lines
    out, n, after = [], 0, False
    for l in lines:
        keep = not l.startswith("round ") or n < 3 or after or "SWIFT step (gp)" in l or "restart" in l
        after = "restart" in l
        n += l.startswith("round ")
        if keep:
            out.append(l)
        elif out[-1] != "...":
            out.append("...")
    return out


def reprosed(prose, old, new, where, path):
    """The prose lines with each decimal the old block printed replaced by the new block's at the
    same place (outside `code`): the same place on the new block's line of the same shape (its
    numbers aside; the k-th such line for the old block's k-th), so that a line more or less (a
    progress line) moves nothing."""
    shapes = {}  # a line's shape -> the new block's lines of that shape, in order
    for line in new:
        shapes.setdefault(DIGITS.sub("#", line), []).append(line)
    at, seen = {}, {}  # number -> the new block's numbers where the old block printed it
    for line in old:
        shape = DIGITS.sub("#", line)
        k = seen[shape] = seen.get(shape, -1) + 1
        fresh = NUMBER.findall(shapes[shape][k]) if k < len(shapes.get(shape, [])) else []
        for j, n in enumerate(NUMBER.findall(line)):
            at.setdefault(n, set()).add(fresh[j] if j < len(fresh) else None)
    out = []
    for j, line in enumerate(prose):
        parts = line.split("`")
        for p in range(0, len(parts), 2):  # the even parts are outside code spans
            def swap(m):
                choices = at.get(m.group(0))
                if choices is None or len(choices) == 1 and None not in choices:
                    return next(iter(choices)) if choices else m.group(0)
                print("splice_readme: %s line %d quotes %s, which the new block above it prints as %s: check it"
                      % (os.path.basename(path), where + j, m.group(0), " or ".join(sorted(c or "nothing" for c in choices))))
                return m.group(0)
            parts[p] = NUMBER.sub(swap, parts[p])
        out.append("`".join(parts))
    return out


def elided(lines):
    """A run of more than 4 progress lines (same first two words) as its first two, "...", its last;
    --show-rounds' lines as elided_rounds keeps them."""
    lines = elided_rounds(lines)
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
    outputs, used = {}, set()
    for path in sorted(glob.glob(os.path.join(HERE, "*.txt"))):
        lines = open(path).read().rstrip("\n").split("\n")
        outputs[command(lines[0])] = elided([l for l in lines[1:] if not l.startswith("wrote test/bench/figures/")])
    for name in FILES:
        if os.path.exists(os.path.join(ROOT, name)):
            splice(os.path.join(ROOT, name), outputs, used)
    for cmd in sorted(set(outputs) - used):
        print(f"splice_readme: no block of {' or '.join(FILES)} shows `{cmd}`")


def splice(path, outputs, used):
    lines = open(path).read().split("\n")
    out, i, prev_sh = [], 0, None
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
        old_body = lines[i + 1:j]
        out += [lines[i]] + body + ["```"]
        i = j + 1
        if body != old_body:  # the prose after it, up to the next block or heading
            k = i
            while k < len(lines) and not lines[k].startswith("```") and not lines[k].startswith("#"):
                k += 1
            out += reprosed(lines[i:k], old_body, body, len(out) + 1, path)
            i = k
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(out))
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
