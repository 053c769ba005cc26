#!/usr/bin/env python3
"""run.py: puts each published speculative-decoding bug of test/bug_zoo/ into a copy of the tree
and shows which test catches it (make bug-zoo).

  python3 test/bug_zoo/run.py [BUG.bug ...]     (default: every test/bug_zoo/*.bug)

A .bug file is a few `key: value` lines, then the patch as an exact find/replace pair:

  bug: the bonus token ignores the temperature          (one line: what goes wrong)
  source: owner/repo#123: what the engine did            (where it was published)
  test: test/test_decode bonus_token                     (the test program and the tests to run)
  find:
  <the lines of selfspec.cu to replace, exactly as they are>
  replace:
  <the lines that put the bug in>

The text to find must occur exactly once in selfspec.cu, so line numbers moving elsewhere do not
matter, and a patch whose text is gone (the code changed) fails loudly instead of testing
nothing. The tree (the files git tracks, and new ones it does not ignore, as they are in the
working tree) is copied once to a temporary folder; each test program is first built and run
there unpatched and must pass, then each bug is applied to a fresh selfspec.cu, the program is
rebuilt and run, and the bug counts as caught when the program fails (a failed check, or a
crash). Prints one table row per bug: the bug, its source, the test that caught it (with its
first failure line) and the test's CPU seconds. Exits 1 if a bug was not caught or a patch did
not apply, 2 on a bad .bug file. Runs each test with OMP_NUM_THREADS=1. Standard library only.
"""
import glob
import os
import resource
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS = ("bug", "source", "test")


class BadBug(Exception):
    pass


def read_bug(path):
    """The bug file's keys, and its find and replace texts (without their last newline)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    bug, block, find, replace = {}, None, [], []
    for line in lines:
        if line in ("find:", "replace:"):
            block = find if line == "find:" else replace
        elif block is not None:
            block.append(line)
        elif line.strip() and not line.startswith("#"):
            key, sep, value = line.partition(": ")
            if not sep or key not in KEYS or key in bug:
                raise BadBug("%s: %r is not one of %s (each once)" % (path, line, ", ".join(KEYS)))
            bug[key] = value.strip()
    while replace and replace[-1] == "":
        replace.pop()  # the file's final newline
    if set(bug) != set(KEYS) or not find or block is not replace:
        raise BadBug("%s: needs %s, then find: and replace: blocks" % (path, ", ".join(KEYS)))
    bug["find"], bug["replace"], bug["name"] = "\n".join(find), "\n".join(replace), path
    return bug


def copy_tree(dest):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_test(tree, test):
    """Builds and runs `test` (the program, then its test names) in tree: (exit status, first
    FAIL line or the last line of output, CPU seconds of the run)."""
    args = test.split()
    build = subprocess.run(["make", "-s", "selfspec", args[0]], cwd=tree, capture_output=True,
                           text=True)
    if build.returncode != 0:
        return -1, "build failed: " + (build.stderr.strip().splitlines() or ["?"])[-1], 0.0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = cpu_seconds()
    p = subprocess.run(["./" + args[0]] + args[1:], cwd=tree, capture_output=True, text=True,
                       env=env)
    cpu = cpu_seconds() - t0
    out = (p.stderr + p.stdout).splitlines()
    fails = [line for line in out if line.startswith("FAIL: ")]
    line = fails[0][6:] if fails else (out[-1] if out else "")
    return p.returncode, line if len(line) <= 120 else line[:117] + "...", cpu


def main(argv):
    paths = argv or sorted(glob.glob(os.path.join(ROOT, "test", "bug_zoo", "*.bug")))
    try:
        bugs = [read_bug(p) for p in paths]
    except (OSError, BadBug) as e:
        print("bug_zoo: %s" % e, file=sys.stderr)
        return 2
    with open(os.path.join(ROOT, "selfspec.cu"), encoding="utf-8") as f:
        source = f.read()
    status = 0
    with tempfile.TemporaryDirectory(prefix="bug_zoo.") as tree:
        copy_tree(tree)
        for test in sorted({b["test"] for b in bugs}):  # the unpatched tree passes each test
            rc, line, cpu = run_test(tree, test)
            print("unpatched: %s: exit %d in %.1f CPU s" % (test, rc, cpu), flush=True)
            if rc != 0:
                print("bug_zoo: %s fails without a bug: %s" % (test, line), file=sys.stderr)
                return 1
        rows = []
        for b in bugs:
            name = os.path.basename(b["name"])
            found = source.count(b["find"])
            if found != 1:
                print("bug_zoo: %s: its find text occurs %d times in selfspec.cu, not once: update "
                      "the patch" % (name, found), file=sys.stderr)
                rows.append((b, "PATCH DOES NOT APPLY", 0.0))
                status = 1
                continue
            with open(os.path.join(tree, "selfspec.cu"), "w", encoding="utf-8") as f:
                f.write(source.replace(b["find"], b["replace"]))
            rc, line, cpu = run_test(tree, b["test"])
            caught = rc != 0 and not line.startswith("build failed")
            status |= 0 if caught else 1
            how = b["test"].replace("test/", "", 1)
            rows.append((b, ("%s: %s" % (how, line)) if caught else "NOT CAUGHT (%s)" % line, cpu))
            print("%s: %s in %.1f CPU s" % (name, "caught" if caught else "NOT CAUGHT", cpu),
                  flush=True)
        with open(os.path.join(tree, "selfspec.cu"), "w", encoding="utf-8") as f:
            f.write(source)
    print("\n| bug | source | caught by | CPU s |\n|---|---|---|---|")
    for b, how, cpu in rows:
        cell = lambda s: s.replace("|", "\\|")
        print("| %s | %s | %s | %.1f |" % (cell(b["bug"]), cell(b["source"]), cell(how), cpu))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
