#!/usr/bin/env python3
"""test_draw_trace.py: test/bench/draw_trace.py draws what a trace holds, as well-formed SVG.

  - the hand-written sample test/bench/traces/swift-sample.jsonl (SWIFT, 12 layers, two
    prompts): well-formed XML (xml.etree); per prompt 24 map cells with the summary's final set
    filled, one drafted and one accepted bar per round of the right height, a set row per set
    the rounds drafted with holding that set's cells, a confidence dot per drafting round, one
    fixed gamma line and no zoomed one; the measured speedup, and markup in text escaped;
  - variants of it: an adaptive gamma (a line point per round and the zoom), --exit none (no
    gamma), no --compare (no "measured" at all), Self-SD's search of 65 candidates (rows >= 10 px,
    its caption clear of the next heading) and of 200 (80 rows drawn, every new best among them);
  - every panel as tall as its content: no blank band at the bottom or between sections;
  - errors: a missing trace, a line that is not JSON (its line number), no "type", no header
    first, a skip layer out of range, a missing output folder: one line, exit status 1, and
    an old output file kept whole with no temporary file left beside it;
  - each reference trace under test/refs/traces/ (when there) draws as well-formed SVG with a
    bar pair per round.
Prints "test_draw_trace: N passed, M failed" and exits non-zero on a failure (run_tests.sh).
"""
import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "test", "bench", "draw_trace.py")
SAMPLE = os.path.join(ROOT, "test", "bench", "traces", "swift-sample.jsonl")
NS = "{http://www.w3.org/2000/svg}"
passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + msg, file=sys.stderr)
    return ok


def draw(records_or_path, tmp, name="out.svg"):
    """Runs the script on a trace (a path, or records written to a file); returns (rc, stderr, svg path)."""
    path = records_or_path
    if not isinstance(path, str):
        path = os.path.join(tmp, name + ".jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records_or_path))
    out = os.path.join(tmp, name)
    p = subprocess.run([sys.executable, SCRIPT, path, "-o", out], capture_output=True, text=True)
    return p.returncode, p.stderr, out


def parse(path, what):
    """The SVG's root, or None (a failed check) when it is not well-formed."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        check(False, "%s: not well-formed XML: %s" % (what, e))
        return None
    check(root.tag == NS + "svg", "%s: the root is %s, not <svg>" % (what, root.tag))
    return root


def cls(e):
    return e.get("class", "")


def find(root, tag, klass=None):
    return [e for e in root.iter(NS + tag) if klass is None or cls(e) == klass]


def prompts(root):
    return [g for g in root.iter(NS + "g") if cls(g) == "prompt"]


def texts(root):
    return ["".join(t.itertext()) for t in root.iter(NS + "text")]


def layers(s):
    out = set()
    for part in filter(None, s.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def bottom(e):
    """The lowest y an element reaches (rects, lines, texts, circles, polylines)."""
    t = e.tag[len(NS):]
    if t == "rect" and e.get("y") is not None:
        return float(e.get("y")) + float(e.get("height"))
    if t == "line":
        return max(float(e.get("y1")), float(e.get("y2")))
    if t == "text":
        return float(e.get("y")) + 3
    if t == "circle":
        return float(e.get("cy")) + float(e.get("r"))
    if t == "polyline":
        return max(float(p.split(",")[1]) for p in e.get("points").split())
    return 0.0


def no_blank_bands(root, what):
    """Every 40 px band of the drawing's height holds something: no empty stretch of 40 px."""
    height = float(root.get("height"))
    tops = []
    for e in root.iter():
        if e.tag in (NS + "svg", NS + "g") or cls(e) == "background":
            continue
        b = bottom(e)
        top = b - (float(e.get("height")) if e.tag == NS + "rect" else 14 if e.tag == NS + "text" else 0)
        tops.append((top, b))
    tops.sort()
    reach, gap = 0.0, 0.0
    for top, b in tops:
        gap = max(gap, top - reach)
        reach = max(reach, b)
    gap = max(gap, height - reach)
    return check(gap < 40, "%s: an empty band %.0f px tall in a drawing %.0f px tall" % (what, gap, height))


def test_sample(tmp):
    records = [json.loads(l) for l in open(SAMPLE)]
    L = records[0]["n_layers"]
    rc, err, out = draw(SAMPLE, tmp, "sample.svg")
    if not check(rc == 0, "sample: exit %d: %s" % (rc, err)):
        return
    root = parse(out, "sample")
    if root is None:
        return
    panels = prompts(root)
    check(len(panels) == 2, "sample: %d prompt panels, want 2" % len(panels))
    for p, g in enumerate(panels[:2]):
        rounds = [r for r in records if r["type"] == "round" and r["prompt"] == p]
        summary = [r for r in records if r["type"] == "summary" and r["prompt"] == p][0]
        panel = find(g, "g", "panel")[0]
        cells = [e for e in find(panel, "rect") if cls(e).split()[0] in ("attn", "mlp")]
        filled = {(cls(e).split()[0], round((float(e.get("x")) - 64) / 16)) for e in cells if "skipped" in cls(e)}
        want = {(part, l) for part in ("attn", "mlp") for l, c in enumerate(summary["skip"][part]) if c == "X"}
        check(len(cells) == 2 * L and filled == want, "sample prompt %d: map cells %d, filled %s, want %d and %s"
              % (p, len(cells), sorted(filled), 2 * L, sorted(want)))
        drafted, accepted = find(g, "rect", "drafted"), find(g, "rect", "accepted")
        check(len(drafted) == len(rounds) == len(accepted), "sample prompt %d: %d drafted and %d accepted bars, want %d"
              % (p, len(drafted), len(accepted), len(rounds)))
        longest = max(r["drafted"] for r in rounds)
        for i, r in enumerate(rounds[:len(drafted)]):
            hd, ha = float(drafted[i].get("height")), float(accepted[i].get("height"))
            check(abs(hd - 110 * r["drafted"] / longest) < 0.01 and abs(ha - 110 * r["accepted"] / longest) < 0.01,
                  "sample prompt %d round %d: bars %.2f and %.2f px for %d drafted, %d accepted of at most %d"
                  % (p, i, hd, ha, r["drafted"], r["accepted"], longest))
        sets = []  # the sets the rounds drafted with, one per change
        for r in rounds:
            s = (layers(r["skip"]["attn"]), layers(r["skip"]["mlp"]))
            if not sets or sets[-1] != s:
                sets.append(s)
        rows = find(g, "g", "set")
        check(len(rows) == len(sets) == len(find(g, "line", "set-tick")),
              "sample prompt %d: %d set rows and %d ticks, want %d" % (p, len(rows), len(find(g, "line", "set-tick")),
                                                                      len(sets)))
        for row, (attn, mlp) in zip(rows, sets):
            got = {(cls(e).split()[0], round((float(e.get("x")) - 64) / 16)) for e in row}
            want = {("attn", l) for l in attn} | {("mlp", l) for l in mlp}
            check(got == want, "sample prompt %d: a set row holds %s, want %s" % (p, sorted(got), sorted(want)))
        dots = find(g, "circle", "confidence")
        check(len(dots) == sum(1 for r in rounds if r["drafted"] > 0),
              "sample prompt %d: %d confidence dots, want one per drafting round" % (p, len(dots)))
        # the dot is the last draft token's confidence, on 0..1 in a 60 px frame
        frame_bottom = max(float(d.get("cy")) + 60 * [r for r in rounds if r["drafted"]][i]["conf"][-1]
                           for i, d in enumerate(dots))
        frame_top = min(float(d.get("cy")) - 60 * (1 - [r for r in rounds if r["drafted"]][i]["conf"][-1])
                        for i, d in enumerate(dots))
        check(abs(frame_bottom - frame_top - 60) < 0.05, "sample prompt %d: the dots are not the last confidences" % p)
        check(len(find(g, "polyline", "gamma")) == 1 and not find(g, "polyline", "gamma-zoom"),
              "sample prompt %d: a fixed gamma is drawn as %d lines and %d zoomed ones" %
              (p, len(find(g, "polyline", "gamma")), len(find(g, "polyline", "gamma-zoom"))))
    t = "\n".join(texts(root))
    check("speedup measured 0.79x" in t and "not measured" not in t, "sample: the measured speedup is not drawn")
    check("a draft pass 0.41, a verify pass 1.44" in t, "sample: the passes' costs are not drawn")
    check("fixed at 0.8" in t, "sample: the fixed threshold is not named")
    no_blank_bands(root, "sample")
    with open(out, encoding="utf-8") as f:
        raw = f.read()
    check(raw.startswith("<?xml") and raw.endswith("</svg>\n"), "sample: the file is not whole")


def variants(tmp):
    base = [json.loads(l) for l in open(SAMPLE)]
    rounds = [r for r in base if r["type"] == "round"]

    # an adaptive gamma that moves by thousandths: a point per round, and the zoom in which it shows
    v = copy.deepcopy(base)
    v[0]["exit"] = {"mode": "adaptive"}
    for i, r in enumerate(x for x in v if x["type"] == "round"):
        r["gamma_before"] = 0.6 + 0.003 * i
    rc, err, out = draw(v, tmp, "adaptive.svg")
    root = parse(out, "adaptive") if check(rc == 0, "adaptive: exit %d: %s" % (rc, err)) else None
    if root is not None:
        lines = find(root, "polyline", "gamma")
        zoom = find(root, "polyline", "gamma-zoom")
        n = [len(l.get("points").split()) for l in lines]
        check(n == [5, 3] and len(zoom) == 2, "adaptive: gamma lines of %s points and %d zoomed, want [5, 3] and 2"
              % (n, len(zoom)))
        if zoom:
            ys = [float(p.split(",")[1]) for p in zoom[0].get("points").split()]
            check(max(ys) - min(ys) >= 20, "adaptive: the zoomed gamma spans %.1f px, want >= 20" % (max(ys) - min(ys)))
        no_blank_bands(root, "adaptive")

    # --exit none: no threshold at all, and the heading says so
    v = copy.deepcopy(base)
    v[0]["exit"] = {"mode": "none"}
    for r in v:
        if r["type"] == "round":
            r["gamma_before"] = r["gamma_after"] = None
    rc, err, out = draw(v, tmp, "none.svg")
    root = parse(out, "exit none") if check(rc == 0, "exit none: exit %d: %s" % (rc, err)) else None
    if root is not None:
        check(not find(root, "polyline"), "exit none: %d gamma lines drawn" % len(find(root, "polyline")))
        check(any("--exit none" in t for t in texts(root)), "exit none: not said")
        no_blank_bands(root, "exit none")

    # no --compare: the Eq. 6 expectation alone, never "speedup measured not measured"
    v = copy.deepcopy(base)
    for r in v:
        if r["type"] == "summary":
            for k in ("plain_tokens_per_s", "speedup", "identical", "draft_pass_steps", "verify_pass_steps",
                      "predicted_speedup"):
                del r[k]
    rc, err, out = draw(v, tmp, "nocompare.svg")
    root = parse(out, "no --compare") if check(rc == 0, "no --compare: exit %d: %s" % (rc, err)) else None
    if root is not None:
        t = "\n".join(texts(root))
        check("measured" not in t.replace("a measured speedup needs --compare", "") and "expects 1.30x" in t,
              "no --compare: the header reads:\n%s" % t[:400])
        no_blank_bands(root, "no --compare")

    # markup and control characters in text from the run stay text
    v = copy.deepcopy(base)
    v[1]["text"] = "<b>\"Tom & Jerry\"</b>\x01 caf\u00e9 \ud800 ]]> " + "x" * 80
    v[0]["model"] = "dir&<name>"
    rc, err, out = draw(v, tmp, "escape.svg")
    root = parse(out, "escaping") if check(rc == 0, "escaping: exit %d: %s" % (rc, err)) else None
    if root is not None:
        t = "\n".join(texts(root))
        check("<b>\"Tom & Jerry\"</b>" in t and "dir&<name>" in t and "\u2026" in t,
              "escaping: the prompt or model is not drawn as text:\n%s" % t[:300])

    # Self-SD's search: 65 candidates drawn one row each, readable, the caption clear of what follows
    for n, drawn in ((65, 65), (200, 80)):
        v = [dict(base[0], method="selfsd", params={"objective": "cost"})]
        for i in range(n):
            v.append({"type": "search", "method": "selfsd", "i": i, "objective": 30.0 - (i % 7) - i / 100,
                      "skip": {"attn": ",".join(str(l) for l in range(1, 11) if (l * 7 + i) % 3 == 0), "mlp": "4"}})
        v.append({"type": "search_done", "skip": v[-1]["skip"], "objective": 20.0})
        v += [dict(r, skip=v[-1]["skip"]) if r["type"] == "round" else r for r in base[1:]]
        rc, err, out = draw(v, tmp, "search%d.svg" % n)
        root = parse(out, "search of %d" % n) if check(rc == 0, "search %d: exit %d: %s" % (n, rc, err)) else None
        if root is None:
            continue
        first = prompts(root)[0]
        rows, bars = find(first, "g", "set"), find(first, "rect", "cost")
        check(len(rows) == drawn and len(bars) == drawn, "search of %d: %d rows and %d cost bars, want %d"
              % (n, len(rows), len(bars), drawn))
        check(not find(prompts(root)[1], "g", "set"), "search of %d: the second prompt redraws the search" % n)
        heights = {round(float(e.get("height")) / 0.45, 2) for row in rows for e in row}
        check(min(heights) >= 10, "search of %d: rows %.1f px tall, want >= 10" % (n, min(heights)))
        check((n > 80) == any("not drawn" in t for t in texts(first)), "search of %d: no gap row" % n)
        # every new best is drawn, dark, and labelled: the search converging stays in view
        objectives = [r["objective"] for r in v if r["type"] == "search"]
        bests = [i for i, o in enumerate(objectives) if o < min(objectives[:i] or [1e30])]
        dark = [b for b in bars if b.get("fill") == "#555"]
        labels = set(texts(first))
        check(len(dark) == len(bests) and all("it %d" % i in labels for i in bests),
              "search of %d: %d dark bars for %d new bests, labels %s" % (n, len(dark), len(bests),
                                                                          [i for i in bests if "it %d" % i not in labels]))
        # the caption under the bars ends at least 12 px above the next heading
        ts = list(first.iter(NS + "text"))
        cap = [t for t in ts if "".join(t.itertext()).startswith("cost ")]
        nxt = [t for t in ts if "".join(t.itertext()).startswith("per round")]
        if check(len(cap) == 1 and len(nxt) == 1, "search of %d: no caption or no rounds heading" % n):
            last_bar = max(float(b.get("y")) + float(b.get("height")) for b in bars)
            cy, hy = float(cap[0].get("y")), float(nxt[0].get("y"))
            check(cy - 10 >= last_bar and hy - 12 - cy >= 12, "search of %d: caption at y %.0f, bars end %.0f, next "
                  "heading at %.0f" % (n, cy, last_bar, hy))
            check("sublayers/token" in "".join(cap[0].itertext()), "search of %d: the cost has no unit" % n)
        no_blank_bands(root, "search of %d" % n)


def errors(tmp):
    out_dir = os.path.join(tmp, "out")
    os.mkdir(out_dir)
    old = os.path.join(out_dir, "old.svg")

    def case(name, trace_text, want, out=old, path=None):
        with open(old, "w") as f:
            f.write("old\n")
        if path is None:
            path = os.path.join(tmp, "bad.jsonl")
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(trace_text)
        p = subprocess.run([sys.executable, SCRIPT, path, "-o", out], capture_output=True, text=True)
        lines = p.stderr.splitlines()
        check(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("draw_trace.py: error: ") and
              re.search(want, lines[0]) is not None,
              "%s: exit %d, want 1 and one error line matching %r:\n%s" % (name, p.returncode, want, p.stderr))
        with open(old) as f:
            kept = f.read()
        check(kept == "old\n" and os.listdir(out_dir) == ["old.svg"],
              "%s: the old output was changed or a file was left: %r, %s" % (name, kept, os.listdir(out_dir)))

    head = json.dumps({"type": "header", "method": "swift", "n_layers": 12}) + "\n"
    rnd = {"type": "round", "prompt": 0, "skip": {"attn": "1", "mlp": ""}, "drafted": 1, "accepted": 1,
           "conf": [0.9], "gamma_before": 0.8}
    case("a missing trace", "", r"no-such\.jsonl: cannot read: No such file", path=os.path.join(tmp, "no-such.jsonl"))
    case("an empty trace", "\n", r"bad\.jsonl: empty")
    case("line 3 not JSON", head + json.dumps(rnd) + "\n{\"type\": \"round\",\n", r"bad\.jsonl:3: not JSON")
    case("no type", head + "{\"prompt\": 0}\n", r"bad\.jsonl:2: no \"type\"")
    case("not an object", head + "[1, 2]\n", r"bad\.jsonl:2: not a JSON object")
    case("no header first", json.dumps(rnd) + "\n", r"bad\.jsonl:1: the first record is \"round\", want the header")
    case("a round without drafted", head + json.dumps(dict(rnd, drafted=None)) + "\n",
         r"bad\.jsonl:2: round \"drafted\" is null, want an integer")
    case("more accepted than drafted", head + json.dumps(dict(rnd, accepted=2)) + "\n",
         r"bad\.jsonl:2: round: 2 accepted of 1 drafted")
    case("a layer out of range", head + json.dumps(dict(rnd, skip={"attn": "1,12", "mlp": ""})) + "\n",
         r"bad\.jsonl:2: skip \"attn\": layer 12 out of range for 12 layers")
    case("a map of the wrong length", head + json.dumps(dict(rnd, skip={"attn": "X..", "mlp": ""})) + "\n",
         r"bad\.jsonl:2: skip \"attn\": a map of 3 layers")
    case("not UTF-8", head + "{\"type\": \"x\", \"a\": \"\udcff\"}\n", r"bad\.jsonl:2: not UTF-8")
    case("a missing output folder", head, r"-o .*no-such-dir/x\.svg: cannot create a file in its folder",
         out=os.path.join(tmp, "no-such-dir", "x.svg"))
    case("the output is a folder", head, r"is a folder", out=out_dir)
    # and a good trace replaces the old file whole, with open()'s usual permissions
    with open(old, "w") as f:
        f.write("old\n")
    rc, err, _ = draw(SAMPLE, out_dir, "old.svg")
    check(rc == 0 and err == "wrote %s\n" % old and os.listdir(out_dir) == ["old.svg"],
          "a good trace over an old file: exit %d, stderr %r, files %s" % (rc, err, os.listdir(out_dir)))
    mask = os.umask(0)
    os.umask(mask)
    check(os.stat(old).st_mode & 0o777 == 0o666 & ~mask, "the SVG's mode is %o" % (os.stat(old).st_mode & 0o777))


def references(tmp):
    """The engine's reference traces, when this checkout has them: each draws, a bar pair per round."""
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "refs", "traces", "*.jsonl"))):
        name = os.path.basename(path)
        rc, err, out = draw(path, tmp, name + ".svg")
        root = parse(out, name) if check(rc == 0, "%s: exit %d: %s" % (name, rc, err)) else None
        if root is None:
            continue
        n_rounds = sum(1 for l in open(path) if json.loads(l).get("type") == "round")
        check(len(find(root, "rect", "drafted")) == n_rounds == len(find(root, "rect", "accepted")),
              "%s: %d bars for %d rounds" % (name, len(find(root, "rect", "drafted")), n_rounds))
        no_blank_bands(root, name)


def main():
    with tempfile.TemporaryDirectory(prefix="selfspec-draw-") as tmp:
        test_sample(tmp)
        variants(tmp)
        errors(tmp)
        references(tmp)
    print("test_draw_trace: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
