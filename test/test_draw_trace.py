#!/usr/bin/env python3
"""test_draw_trace.py: test/bench/draw_trace.py draws what a trace holds, as well-formed SVG.

  - the sample test/bench/traces/swift-sample.jsonl (a real SWIFT run on kjv-12l, two prompts,
    --compare; remade by test/bench/traces/make.sh): well-formed XML (xml.etree); per prompt 24 map cells with the summary's final set
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
  - the decisions' panels: SWIFT's candidate circles at each step's matchness, the kept line,
    a mark per replacement, a restart splitting the line; ASD's C_l dots (filled where C_l >=
    alpha) on one scale with the threshold, the chosen cells marked with the rule that chose
    each (C_l >= alpha, every m-th layer), the last n shaded; CLaSp's margin bars on a log scale,
    a filled square per DP that changed the set, the overlap line at each DP's Jaccard; the
    draft-length histogram and acceptance by position, against counts made here from the rounds,
    and the summary's own draft_lengths/accept_by_position accepted when they agree, one error
    line when they do not; rounds counted from 0; the "with the selection time" prediction; skip
    sets spelled as arrays drawing the very same SVG as the string spelling;
  - bad numbers and limits (issue 40 class 5): NaN, Infinity, 1e999, a 401-digit integer, a
    finite range whose width overflows, values out of their ranges, deep nesting, a reversed
    range, 4096 layers, 1001 prompts, a drawing past its element limit: one error line each, no
    file; a trace at the limits draws with every coordinate finite;
  - inputs (class 4): /dev/zero, a file over 64 MiB, a folder: one error line, read no further;
  - outputs, by selfspec's rule (README "Scope and limits", item 4): -o naming the trace through
    a symlink, a hard link or a .. through a symlinked folder refused with the trace intact; a
    symlink written through (the link stays, no temporary file left); a dangling symlink refused;
    a FIFO, a device node (a /dev/null made here, as root) and a link to /dev/stdout written in
    place; -o - on stdout, and a full stdout one error line; a 255-byte name written (a short
    temporary name); an empty name refused;
  - each reference trace under test/refs/traces/ (when there) draws as well-formed SVG with a
    bar pair per round, ASD's C_l dots, CLaSp's margin bars and the draft-length bars.
Prints "test_draw_trace: N passed, M failed" and exits non-zero on a failure (run_tests.sh).
"""
import copy
import glob
import json
import math
import os
import re
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# DRAW_TRACE_SCRIPT: another copy of the script to test (an older one, to see a test fail on it)
SCRIPT = os.environ.get("DRAW_TRACE_SCRIPT") or os.path.join(ROOT, "test", "bench", "draw_trace.py")
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
    """A skip set's layers: an array (the trace's spelling), or a "1,3-5" string (--skip's)."""
    if isinstance(s, list):
        return set(s)
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
        want = {(part, l) for part in ("attn", "mlp") for l in layers(summary["skip"][part])}
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
    s0 = [r for r in records if r["type"] == "summary"][0]
    check("speedup measured %.2fx" % s0["measured_speedup"] in t and "not measured" not in t,
          "sample: the measured speedup is not drawn")
    check("a draft pass %.2f, a verify pass %.2f" % (s0["measured_draft_pass_steps"], s0["measured_verify_pass_steps"])
          in t, "sample: the passes' costs are not drawn")
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
        want = [sum(1 for r in rounds if r["prompt"] == p) for p in (0, 1)]
        check(n == want and len(zoom) == 2, "adaptive: gamma lines of %s points and %d zoomed, want %s and 2"
              % (n, len(zoom), want))
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
        gamma = [l for l in find(root, "polyline") if cls(l).startswith("gamma")]
        check(not gamma, "exit none: %d gamma lines drawn" % len(gamma))
        check(any("--exit none" in t for t in texts(root)), "exit none: not said")
        no_blank_bands(root, "exit none")

    # no --compare: the Eq. 6 expectation alone, never "speedup measured not measured"
    v = copy.deepcopy(base)
    for r in v:
        if r["type"] == "summary":
            for k in ("plain_tokens_per_s", "measured_speedup", "identical", "measured_draft_pass_steps", "measured_verify_pass_steps",
                      "measured_predicted_speedup"):
                del r[k]
    rc, err, out = draw(v, tmp, "nocompare.svg")
    root = parse(out, "no --compare") if check(rc == 0, "no --compare: exit %d: %s" % (rc, err)) else None
    if root is not None:
        t = "\n".join(texts(root))
        e = [r for r in base if r["type"] == "summary"][0]["expected_speedup"]
        check("measured" not in t.replace("a measured speedup needs --compare", "") and "expects %.2fx" % e in t,
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
                      "phase": "empty" if i == 0 else "random" if i <= n // 5 else "gp",
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
        # the bars start at zero (issue 47): each as long as its objective against the longest
        want = {round(120 * o / max(objectives), 1) for o in objectives}
        got = {round(float(b.get("width")), 1) for b in bars}
        check(got <= want and len(got) > 3, "search of %d: bar widths %s are not 120 x objective / the largest"
              % (n, sorted(got)[:5]))
        # how each set was proposed: a filled circle for the GP's, hollow for random warm-up
        gp, rnd = find(first, "circle", "phase-gp"), find(first, "circle", "phase-random")
        check(len(gp) + len(rnd) + len(find(first, "circle", "phase-empty")) == drawn and
              all(c.get("fill") == "#333" for c in gp) and all(c.get("fill") == "white" for c in rnd) and
              len(gp) > len(rnd) > 0, "search of %d: %d GP and %d random circles for %d rows" % (n, len(gp), len(rnd), drawn))
        check(any("filled, the GP's proposal" in t for t in texts(first)), "search of %d: no key to the circles" % n)
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


def by_origin(root, where):
    """The text panel's tokens: the prompt's panels' tspans by class, in order, as (class, text)."""
    return [(cls(t)[4:], "".join(t.itertext())) for t in root.iter(NS + "tspan") if cls(t).startswith("tok-")]


def text_and_leaves(tmp):
    """Issue 47: the text by origin and SWIFT's leaves, from the sample (SWIFT's tree, --compare).
    Per prompt, the kept and own tokens after the prompt spell the summary's text; there is a
    green token per kept draft token with text, a struck red one per rejected draft token (none
    under a kept leaf); every round whose tree kept a leaf has its orange mark, and the count
    is said; the matchness panel cites Sec. 4.1.2."""
    records = [json.loads(l) for l in open(SAMPLE)]
    rc, err, out = draw(SAMPLE, tmp, "origin.svg")
    root = parse(out, "origin") if check(rc == 0, "origin: exit %d: %s" % (rc, err)) else None
    if root is None:
        return
    for p, g in enumerate(prompts(root)):
        rounds = [r for r in records if r["type"] == "round" and r["prompt"] == p]
        summary = [r for r in records if r["type"] == "summary" and r["prompt"] == p][0]
        toks = by_origin(g, "origin")
        text = "".join(t for c, t in toks if c in ("kept", "own") and toks.index((c, t)) >= 0)
        after = "".join(t for c, t in toks if c in ("kept", "own"))
        check(after == summary["text"], "origin prompt %d: the kept and own tokens spell %r, the summary %r"
              % (p, after[:80], summary["text"][:80]))
        check(all(c != "rejected" or t for c, t in toks), "origin prompt %d: an empty rejected token" % p)
        rejected = [r for r in rounds if r["rejected"] is not None and not r["leaf"]]
        check(sum(1 for c, _ in toks if c == "rejected") == len(rejected),
              "origin prompt %d: %d struck tokens for %d rejections" % (p, sum(1 for c, _ in toks if c == "rejected"),
                                                                       len(rejected)))
        struck = [t for t in g.iter(NS + "tspan") if cls(t) == "tok-rejected"]
        check(all(t.get("text-decoration") == "line-through" for t in struck), "origin prompt %d: not struck" % p)
        leaves = [r for r in rounds if r["leaf"] and r["accepted"] > 0]
        check(len(leaves) > 0 and len(find(g, "rect", "leaf")) == len(leaves) and
              any("in %d of %d rounds" % (len(leaves), len(rounds)) == t for t in texts(g)),
              "origin prompt %d: %d leaf marks for %d leaf rounds" % (p, len(find(g, "rect", "leaf")), len(leaves)))
        check(any("SWIFT's optimization steps (Sec. 4.1.2" in t for t in texts(g)), "origin prompt %d: matchness "
              "is not cited as Sec. 4.1.2" % p)
    # a trace without ids (an older format) draws, without the text
    old = [{k: v for k, v in r.items() if k not in ("ids", "rejected", "token")} for r in records]
    rc, err, out = draw(old, tmp, "noids.svg")
    root = parse(out, "no ids") if check(rc == 0, "no ids: exit %d: %s" % (rc, err)) else None
    check(root is not None and not by_origin(root, "no ids"), "no ids: a text panel without ids")


FIGURES = os.path.join(ROOT, "test", "bench", "figures")


def figures_agree(tmp):
    """Issue 47: every number a README figure prints is its run's summary's. Each committed run of
    test/bench/figures/ (its trace, and the text the run printed beside it) is drawn again, and
    the figure's numbers must be the text summary's: acceptance and M, the speedups, the passes'
    costs with Eq. 6's c and the weight share, the break-even, CLaSp's overlap means; the papers'
    Fig. 4's best set, the Self-SD search's best."""
    ran = 0
    for trace in sorted(glob.glob(os.path.join(FIGURES, "*.jsonl"))):
        name = os.path.basename(trace)[:-6]
        if not os.path.exists(os.path.join(FIGURES, name + ".svg")) or not os.path.exists(os.path.join(FIGURES, name + ".txt")):
            continue
        text = open(os.path.join(FIGURES, name + ".txt")).read()
        rc, err, out = draw(trace, tmp, "fig-" + name + ".svg")
        root = parse(out, name) if check(rc == 0, "figure %s: exit %d: %s" % (name, rc, err)) else None
        if root is None or not prompts(root):  # test/bench/oracle's figure: a search alone
            continue
        ran += 1
        t = "\n".join(texts(prompts(root)[0]))
        wants = []
        m = re.search(r"acceptance (\S+), mean accepted length M (\S+)", text)
        wants.append("acceptance \u03b1 %s | mean accepted length M %s" % m.groups())
        m = re.search(r"speedup (\S+)x \(expected (\S+)x\)", text)
        if m:
            wants.append("speedup measured %sx" % m.group(1))
            wants.append("SWIFT Eq. 6 expects %sx" % m.group(2))
        m = re.search(r"a draft pass (\S+), a verify pass (\S+) \(Eq. 6 takes (\S+) and 1; the draft reads (\S+) of the "
                      r"weights\): these alone predict (\S+)x", text)
        if m:
            wants.append("a draft pass %s, a verify pass %s (Eq. 6 takes %s and 1; the draft reads %s of the weights)"
                         % m.groups()[:4])
            wants.append("predict %sx" % m.group(5))
        m = re.search(r"break-even at these costs: M (\S+) \(.*\), this run's M (\S+); its drafts kept whole would give (\S+)",
                      text)
        if m:
            wants.append("break-even at these costs: M %s, this run's M %s; its drafts kept whole would give %s" % m.groups())
        m = re.search(r"consecutive DP sets overlap (\S+) \(mean Jaccard of (\d+) pairs; two random sets of \d+ layers: "
                      r"(\S+)\)", text)
        if m:
            wants.append("means %s and %s over %s pairs" % (m.group(1), m.group(3), m.group(2)))
        for w in wants:
            check(w in t, "figure %s: %r is in the run's summary, not in its figure" % (name, w))
        check(len(wants) >= 6, "figure %s: %d numbers compared" % (name, len(wants)))
    check(ran >= 5, "%d README figures compared with their runs' summaries, want 5 (test/bench/oracle's is a search alone)" % ran)
    # the papers' Fig. 4: its best set is the search's
    log = os.path.join(FIGURES, "selfsd-fig4.log")
    if check(os.path.exists(log), "no %s" % log):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "test", "bench", "paper_figures.py"), "selfsd-fig4",
                            os.path.join(FIGURES, "selfsd-fig4.jsonl"), "-o", os.path.join(tmp, "fig4.svg")],
                           capture_output=True, text=True)
        last = [l for l in open(log) if l.startswith("selfsd iter")][-1]
        m = re.search(r"best (\S+) skipping (\d+) of", last)
        root = parse(os.path.join(tmp, "fig4.svg"), "fig4") if check(p.returncode == 0, "fig4: %s" % p.stderr) else None
        want = "skipping %s sublayers (the search's objective %s against plain" % (m.group(2), m.group(1))
        check(root is not None and any(want in x for x in texts(root)), "fig4: %r is the search's, not the figure's" % want)


def paper_figures(tmp):
    """test/bench/paper_figures.py, on the committed traces: Self-SD Fig. 4 a dot per candidate
    (filled the GP's) at the empty set's objective over its own, against its sublayer count, and
    the dashed best-per-count line; CLaSp Fig. 3a a point per distance at the pairs' mean Jaccard;
    SWIFT Fig. 6 a dot per optimization step at its matchness, a line per prompt boundary; a
    trace of another method is one error line, exit 1."""
    script = os.path.join(ROOT, "test", "bench", "paper_figures.py")

    def run(fig, trace, out):
        p = subprocess.run([sys.executable, script, fig, trace, "-o", out], capture_output=True, text=True)
        return p.returncode, p.stderr

    def ys(root, prefix):
        return [float(c.get("cy")) for c in root.iter(NS + "circle") if cls(c).startswith(prefix)]

    # Fig. 4: y = 56 + 240 - 240 * speedup / top; the dots' order is the records'
    recs = [json.loads(l) for l in open(os.path.join(FIGURES, "selfsd-fig4.jsonl"))]
    search = [r for r in recs if r["type"] == "search"]
    rc, err = run("selfsd-fig4", os.path.join(FIGURES, "selfsd-fig4.jsonl"), os.path.join(tmp, "f4.svg"))
    root = parse(os.path.join(tmp, "f4.svg"), "fig4") if check(rc == 0, "fig4: %s" % err) else None
    if root is not None:
        dots = [c for c in root.iter(NS + "circle") if cls(c).startswith("candidate-")]
        sp = [search[0]["objective"] / r["objective"] for r in search]
        top = max(float(t.text) for t in root.iter(NS + "text") if t.get("text-anchor") == "end" and t.text
                  and re.fullmatch(r"[0-9.]+", t.text))
        ok = len(dots) == len(search) and all(abs(float(d.get("cy")) - (296 - 240 * v / top)) < 0.01 for d, v in zip(dots, sp))
        ok = ok and all((cls(d) == "candidate-gp") == (r["phase"] == "gp") and (d.get("fill") != "white") == (r["phase"] == "gp")
                        for d, r in zip(dots, search))
        counts = [len(r["skip"]["attn"]) + len(r["skip"]["mlp"]) for r in search]
        ok = ok and all(abs(float(d.get("cx")) - (70 + 640 * n / 24)) < 0.01 for d, n in zip(dots, counts))
        check(ok and len(find(root, "polyline", "best-per-count")) == 1, "fig4: %d dots for %d candidates, or "
              "not at their speedup and count" % (len(dots), len(search)))
    # Fig. 3a: one point per distance
    recs = [json.loads(l) for l in open(os.path.join(FIGURES, "clasp-fig3a.jsonl"))]
    rc, err = run("clasp-fig3a", os.path.join(FIGURES, "clasp-fig3a.jsonl"), os.path.join(tmp, "f3.svg"))
    root = parse(os.path.join(tmp, "f3.svg"), "fig3a") if check(rc == 0, "fig3a: %s" % err) else None
    if root is not None:
        dist = set()
        for p in sorted({r["prompt"] for r in recs if r["type"] == "round"}):
            at = [r["pos"] + r["accepted"] for r in recs if r["type"] == "round" and r["prompt"] == p
                  and (r["event"] or {}).get("clasp")]
            dist |= {b - a for i, a in enumerate(at) for b in at[i + 1:] if 0 < b - a <= 32}
        check(len(ys(root, "overlap-mean")) == len(dist) > 10, "fig3a: %d points for %d distances"
              % (len(ys(root, "overlap-mean")), len(dist)))
    # Fig. 6: a dot per step at 56 + 240 - 240 * matchness
    recs = [json.loads(l) for l in open(os.path.join(FIGURES, "swift-fig6.jsonl"))]
    steps = [r["event"]["swift"] for r in recs if r["type"] == "round" and (r["event"] or {}).get("swift")]
    rc, err = run("swift-fig6", os.path.join(FIGURES, "swift-fig6.jsonl"), os.path.join(tmp, "f6.svg"))
    root = parse(os.path.join(tmp, "f6.svg"), "fig6") if check(rc == 0, "fig6: %s" % err) else None
    if root is not None:
        got = ys(root, "candidate-")
        check(len(got) == len(steps) and all(abs(y - (296 - 240 * s["matchness"])) < 0.01 for y, s in zip(got, steps))
              and len(find(root, "line", "prompt-start")) == len({r["prompt"] for r in recs if r["type"] == "round"}),
              "fig6: %d dots for %d steps" % (len(got), len(steps)))
    rc, err = run("swift-fig6", os.path.join(FIGURES, "clasp-fig3a.jsonl"), os.path.join(tmp, "bad.svg"))
    check(rc == 1 and err.count("\n") == 1 and "needs a swift trace" in err and not os.path.exists(os.path.join(tmp, "bad.svg")),
          "fig6 of a clasp trace: exit %d: %s" % (rc, err))


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
         r"bad\.jsonl:2: round \"skip\" \"attn\": layer 12 out of range for 12 layers")
    case("a map of the wrong length", head + json.dumps(dict(rnd, skip={"attn": "X..", "mlp": ""})) + "\n",
         r"bad\.jsonl:2: round \"skip\" \"attn\": a map of 3 layers")
    case("not UTF-8", head + "{\"type\": \"x\", \"a\": \"\udcff\"}\n", r"bad\.jsonl:2: not UTF-8")
    case("a missing output folder", head, r"-o .*no-such-dir/x\.svg: cannot write: No such file",
         out=os.path.join(tmp, "no-such-dir", "x.svg"))
    case("the output is a folder", head, r"cannot write: Is a directory", out=out_dir)
    case("an empty output name", head, r"-o : cannot write", out="")
    case("an output name ending in /", head, r"-o .*/new/: cannot write", out=os.path.join(out_dir, "new") + "/")
    # and a good trace replaces the old file whole, with open()'s usual permissions
    with open(old, "w") as f:
        f.write("old\n")
    rc, err, _ = draw(SAMPLE, out_dir, "old.svg")
    check(rc == 0 and err == "wrote %s\n" % old and os.listdir(out_dir) == ["old.svg"],
          "a good trace over an old file: exit %d, stderr %r, files %s" % (rc, err, os.listdir(out_dir)))
    mask = os.umask(0)
    os.umask(mask)
    check(os.stat(old).st_mode & 0o777 == 0o666 & ~mask, "the SVG's mode is %o" % (os.stat(old).st_mode & 0o777))


def to_arrays(records):
    """The same trace with every skip set spelled as arrays of layer indices (the trace's coming
    spelling): {"attn": [1, 3], "mlp": [4]}."""
    def conv(d, L):
        return {part: sorted(layers(d[part]) if set(d[part]) - {"X", "."} or not d[part]
                             else {l for l, c in enumerate(d[part]) if c == "X"}) for part in ("attn", "mlp")}
    out = copy.deepcopy(records)
    L = out[0]["n_layers"]
    for r in out:
        for holder, key in [(r, "skip"), (r, "asd_skip")] + [(ev, k) for ev in (r.get("event") or {}).values()
                                                          if isinstance(ev, dict) for k in ("candidate", "skip")]:
            if isinstance(holder.get(key), dict):
                holder[key] = conv(holder[key], L)
    return out


def panel_y(root, klass, attr="cy"):
    return [float(e.get(attr)) for e in root.iter() if cls(e).split()[:1] == [klass]]


def asd_variant():
    """The sample as an ASD run: C_l per layer in its prefills, the set its rules choose."""
    v = copy.deepcopy([json.loads(l) for l in open(SAMPLE)])
    v[0].update(method="asd", params={"cos_threshold": 0.985, "every_m": 3, "keep_last_n": 2})
    cos = [0.75, 0.948, 0.94, 0.963, 0.975, 0.989, 0.992, 0.9916, 0.9938, 0.9937, 0.9946, 0.9964]
    attn = [l for l in range(10) if cos[l] >= 0.985 or (l + 1) % 3 == 0]
    mlp = [l for l in range(10) if (l + 1) % 3 == 0]
    skip = {"attn": ",".join(map(str, attn)), "mlp": ",".join(map(str, mlp))}
    for r in v:
        if r["type"] == "prefill":
            r.update(asd_cos=cos, asd_skip=skip)
        if r["type"] in ("round", "summary"):
            r["skip"] = skip
            r["event"] = None
    return v, cos, attn, mlp


def test_panels(tmp):
    """The decisions' panels: ASD's C_l, SWIFT's steps, CLaSp's DPs, the drafts; rounds from 0."""
    base = [json.loads(l) for l in open(SAMPLE)]
    rc, err, out = draw(SAMPLE, tmp, "panels.svg")
    root = parse(out, "panels") if check(rc == 0, "panels: exit %d: %s" % (rc, err)) else None
    if root is None:
        return
    for p, g in enumerate(prompts(root)):
        rounds = [r for r in base if r["type"] == "round" and r["prompt"] == p]
        # SWIFT: a circle per step at its matchness, the kept line through the kept matchness, a
        # triangle per replacement
        steps = [r["event"]["swift"] for r in rounds if (r["event"] or {}).get("swift")]
        check(len(steps) > 0, "panels prompt %d: the sample has no SWIFT step" % p)
        cy = panel_y(g, "swift-candidate")
        check(len(cy) == len(steps), "panels prompt %d: %d candidate circles for %d steps" % (p, len(cy), len(steps)))
        if len(cy) >= 2:  # 80 px for matchness 0..1
            check(abs((cy[0] - cy[1]) - 80 * (steps[1]["matchness"] - steps[0]["matchness"])) < 0.05,
                  "panels prompt %d: the circles are not the steps' matchness" % p)
        kept = [pt for l in find(g, "polyline", "swift-kept") for pt in l.get("points").split()]
        want_kept = sum(1 for s in steps if s["kept_matchness"] is not None)
        check(len(kept) == max(want_kept, 2 if want_kept == 1 else 0),
              "panels prompt %d: kept line of %d points for %d kept matchness" % (p, len(kept), want_kept))
        tri = find(g, "polygon", "swift-replaced")
        check(len(tri) == sum(1 for s in steps if s["replaced"]), "panels prompt %d: %d replacement marks" % (p, len(tri)))
        # the drafts: the histogram's bars count the rounds by draft length, acceptance by position
        hist = [float(e.get("height")) for e in find(g, "rect", "draft-length")]
        counts = [sum(1 for r in rounds if r["drafted"] == i) for i in range(max(r["drafted"] for r in rounds) + 1)]
        check(len(hist) == len(counts) and all(abs(h - 51 * c / max(counts)) < 0.01 for h, c in zip(hist, counts)),
              "panels prompt %d: histogram bars %s for counts %s" % (p, hist, counts))
        acc = [float(e.get("height")) for e in find(g, "rect", "accept-position")]
        reach = [sum(1 for r in rounds if r["drafted"] > i) for i in range(len(counts) - 1)]
        kept_at = [sum(1 for r in rounds if r["accepted"] > i) for i in range(len(counts) - 1)]
        check(len(acc) == len(reach) and all(abs(h - 51 * k / n) < 0.01 for h, k, n in zip(acc, kept_at, reach)),
              "panels prompt %d: acceptance bars %s for %s of %s" % (p, acc, kept_at, reach))
        t = texts(g)
        check(all("%d/%d" % (k, n) in t for k, n in zip(kept_at, reach)), "panels prompt %d: no k/n labels" % p)
        check("round 0" in t and "round %d" % (len(rounds) - 1) in t and any("counted from 0" in x for x in t)
              and "prompt %d" % p in " ".join(t), "panels prompt %d: rounds are not counted from 0" % p)
        # the selection time's prediction, as the engine's summary prints it
        s = [r for r in base if r["type"] == "summary" and r["prompt"] == p][0]
        passes = s["draft_ms"] + s["verify_ms"]
        own = s["select_ms"] - s["search_ms"]
        want = "%.2fx with the selection time" % (s["measured_predicted_speedup"] * passes / (passes + own))
        check(any(want in x for x in t), "panels prompt %d: no %r" % (p, want))
        no_blank_bands(root, "panels")

    # a restart splits the kept line and is drawn dashed
    v = copy.deepcopy(base)  # App. C.2 after the round before the third step (the second keeps)
    second = [j for j, r in enumerate(v) if r["type"] == "round" and (r["event"] or {}).get("swift")][2]
    v[second - 1]["event"] = dict(v[second - 1]["event"] or {}, restart={"ratio": 0.4, "skip": {"attn": [1], "mlp": []}})
    rc, err, out = draw(v, tmp, "restart.svg")
    root = parse(out, "restart") if check(rc == 0, "restart: exit %d: %s" % (rc, err)) else None
    if root is not None:
        g = prompts(root)[0]
        check(len(find(g, "line", "swift-restart")) == 1 and len(find(g, "polyline", "swift-kept")) == 2,
              "restart: %d restart lines, %d kept lines" % (len(find(g, "line", "swift-restart")),
                                                             len(find(g, "polyline", "swift-kept"))))

    # every skip set spelled as an array draws exactly the same picture
    rc, err, out = draw(to_arrays(base), tmp, "arrays.svg")
    if check(rc == 0, "arrays: exit %d: %s" % (rc, err)):
        with open(out, "rb") as a, open(os.path.join(tmp, "panels.svg"), "rb") as b:
            check(a.read() == b.read(), "arrays: the picture differs from the string spelling's")

    # ASD: a dot per layer, filled where C_l >= alpha, the threshold between; the chosen cells,
    # each marked with the rule that chose it
    v, cos, attn, mlp = asd_variant()
    for name, trace in (("asd", v), ("asd arrays", to_arrays(v))):
        rc, err, out = draw(trace, tmp, name.replace(" ", "_") + ".svg")
        root = parse(out, name) if check(rc == 0, "%s: exit %d: %s" % (name, rc, err)) else None
        if root is None:
            continue
        g = prompts(root)[0]
        dots = [e for e in g.iter(NS + "circle") if cls(e).startswith("asd-cos")]
        above = [l for l, e in enumerate(dots) if "above" in cls(e)]
        check(len(dots) == 12 and above == [l for l in range(12) if cos[l] >= 0.985],
              "%s: %d dots, filled %s" % (name, len(dots), above))
        ys = [float(e.get("cy")) for e in dots]
        line = find(g, "line", "asd-threshold")
        if check(len(dots) == 12 and len(line) == 1, "%s: no threshold line" % name):
            ty = float(line[0].get("y1"))
            check(all((ys[l] <= ty) == (cos[l] >= 0.985) for l in range(12)) and
                  all((ys[a] < ys[b]) == (cos[a] > cos[b]) for a in range(12) for b in range(12) if cos[a] != cos[b]),
                  "%s: the dots or the threshold are not on C_l's scale" % name)
        cells = [e for e in g.iter(NS + "rect") if cls(e).startswith("asd-chosen")]
        got = {(cls(e).split()[1], i % 12) for i, e in enumerate(cells) if "skipped" in cls(e)}
        check(len(cells) == 24 and got == {("attn", l) for l in attn} | {("mlp", l) for l in mlp},
              "%s: chosen cells %s" % (name, sorted(got)))
        by_cos = {i % 12 for i, e in enumerate(cells) if "by-cos" in cls(e)}
        by_m = {(i // 12, i % 12) for i, e in enumerate(cells) if "by-m" in cls(e)}
        check(by_cos == {l for l in range(10) if cos[l] >= 0.985} and by_m == {(r, l) for r in (0, 1) for l in (2, 5, 8)},
              "%s: the rules marked %s and %s" % (name, sorted(by_cos), sorted(by_m)))
        last = find(g, "rect", "asd-last-n")
        check(len(last) == 1 and abs(float(last[0].get("width")) - 2 * 640 / 12) < 0.01,
              "%s: the last n not shaded" % name)
        no_blank_bands(root, name)

    # CLaSp: a bar per DP whose height is its margin's log, a square per DP filled when the set
    # changed, the overlap line at each DP's Jaccard with the set before it
    v = copy.deepcopy(base)
    v[0]["method"] = "clasp"
    margins, sets, dps = [1e-4, 1e-3, 3e-3, 2e-5], [("1,3", "2"), ("1,3", "2"), ("1,4", "2,5"), ("", "")], []
    k = 0
    for r in v:
        if r["type"] == "round" and r["prompt"] == 0:
            r["event"] = None
            if k < len(margins):
                r["event"] = {"clasp": {"ran": True, "skip": {"attn": sets[k][0], "mlp": sets[k][1]}, "margin": margins[k],
                                        "closest": 3, "path": [[0, 0]]}}
                dps.append(r)
                k += 1
    rc, err, out = draw(v, tmp, "clasp.svg")
    root = parse(out, "clasp") if check(rc == 0 and len(dps) == 4, "clasp: exit %d: %s" % (rc, err)) else None
    if root is not None:
        g = prompts(root)[0]
        hs = [float(e.get("height")) for e in find(g, "rect", "clasp-margin")]
        # margins 2e-5 .. 3e-3: decades 1e-5 .. 1e-2, 70 px for 3 decades
        want = [70 * (math.log10(m) + 5) / 3 for m in margins]
        check(len(hs) == 4 and all(abs(h - w) < 0.01 for h, w in zip(hs, want)),
              "clasp: margin bars %s, want %s" % (hs, want))
        squares = [cls(e) for e in g.iter(NS + "rect") if cls(e) in ("clasp-changed", "clasp-kept")]
        changed = []
        for r, (a, m) in zip(dps, sets):
            old = (layers(r["skip"]["attn"]), layers(r["skip"]["mlp"]))
            changed.append((layers(a), layers(m)) != old)
        check(squares == ["clasp-changed" if c else "clasp-kept" for c in changed],
              "clasp: squares %s for changes %s" % (squares, changed))
        line = find(g, "polyline", "clasp-overlap")
        if check(len(line) == 1, "clasp: no overlap line"):
            # each DP's set against the DP's before it, as the summary's dp_overlap counts them
            ys = [float(p.split(",")[1]) for p in line[0].get("points").split()]
            js = []
            for (a0, m0), (a, m) in zip(sets, sets[1:]):
                A = {("a", l) for l in layers(a)} | {("m", l) for l in layers(m)}
                B = {("a", l) for l in layers(a0)} | {("m", l) for l in layers(m0)}
                js.append(len(A & B) / len(A | B) if A | B else 1.0)
            check(len(ys) == 3 and all(abs((ys[0] - y) - 50 * (j - js[0])) < 0.05 for y, j in zip(ys, js)),
                  "clasp: overlap line %s for Jaccard %s" % (ys, js))
            check(any("means %.2f and" % (sum(js) / 3) in t and "over 3 pairs" in t for t in texts(g)),
                  "clasp: the mean overlap is not the DP pairs' %.2f" % (sum(js) / 3))
        check(any("%d of 4 DPs changed the set" % sum(changed) in t for t in texts(g)), "clasp: the changes not counted")
        no_blank_bands(root, "clasp")

    # the summary's own draft_lengths and accept_by_position, when there, agree with the rounds
    v = copy.deepcopy(base)
    rounds0 = [r for r in v if r["type"] == "round" and r["prompt"] == 0]
    longest = max(r["drafted"] for r in rounds0)
    lengths = [sum(1 for r in rounds0 if r["drafted"] == i) for i in range(longest + 1)] + [0, 0]
    shares = [sum(1 for r in rounds0 if r["accepted"] > i) / sum(1 for r in rounds0 if r["drafted"] > i)
              for i in range(longest)]
    for r in v:
        if r["type"] == "summary" and r["prompt"] == 0:
            r.update(draft_lengths=lengths, accept_by_position=[round(x, 4) for x in shares] + [None, None])
    rc, err, _ = draw(v, tmp, "agree.svg")
    check(rc == 0, "summary's draft_lengths agreeing: exit %d: %s" % (rc, err))
    for key, value in (("draft_lengths", [1, 1, 1, 1, 0]), ("accept_by_position", [1.0, 1.0, 0.5, 0.0])):
        w = copy.deepcopy(v)
        [r for r in w if r["type"] == "summary"][0][key] = value
        rc, err, _ = draw(w, tmp, "disagree.svg")
        check(rc == 1 and re.search(r"prompt 0: the summary's %s \[" % key, err) is not None,
              "summary's %s disagreeing: exit %d: %s" % (key, rc, err))


def bad_numbers(tmp):
    """Numbers a trace cannot hold, ranges reversed, limits passed: one error line each, exit 1,
    never a traceback and never a non-finite coordinate."""
    out_dir = os.path.join(tmp, "numbers")
    os.mkdir(out_dir)
    head = {"type": "header", "method": "swift", "n_layers": 12, "params": {}}
    rnd = {"type": "round", "prompt": 0, "skip": {"attn": "1", "mlp": ""}, "drafted": 1, "accepted": 1,
           "conf": [0.9], "gamma_before": 0.8}
    search = {"type": "search", "i": 0, "skip": {"attn": "1", "mlp": ""}, "objective": 3.0}
    line = lambda r: json.dumps(r) + "\n"
    deep = "[" * 100000 + "]" * 100000
    cases = [  # name, trace text, what the one error line must say
        ("NaN confidence", line(head) + line(rnd).replace("[0.9]", "[NaN]"), r":2: NaN is not a number"),
        ("Infinity gamma", line(head) + line(rnd).replace('"gamma_before": 0.8', '"gamma_before": Infinity'),
         r":2: Infinity is not a number"),
        ("-Infinity objective", line(head) + line(search).replace("3.0", "-Infinity"), r":2: -Infinity is not a number"),
        ("NaN-only objectives", line(head) + line(search).replace("3.0", "NaN") * 3, r":2: NaN is not a number"),
        ("1e999", line(head) + line(search).replace("3.0", "1e999"), r":2: the number 1e999 is out of range"),
        ("a 401-digit integer", line(head) + line(rnd).replace('"drafted": 1', '"drafted": 1' + "0" * 400),
         r":2: an integer of 401 digits"),
        ("a huge finite objective range", line(head) + line(search).replace("3.0", "-1.7e308") +
         line(search).replace("3.0", "1.7e308"), r":2: search \"objective\" is -1\.7e\+308, out of its range"),
        ("a confidence above 1", line(head) + line(rnd).replace("[0.9]", "[1.5]"),
         r":2: round \"conf\" element 0 is 1\.5, out of its range 0\.0 to 1\.0"),
        ("a gamma far out of range", line(head) + line(rnd).replace('"gamma_before": 0.8', '"gamma_before": 1e300'),
         r":2: round \"gamma_before\" is 1e\+300, out of its range"),
        ("deep nesting", line(head) + '{"type": "x", "a": %s}\n' % deep, r":2: nested too deeply"),
        ("deep nesting in a field drawn", line(head) + line(rnd).replace("[0.9]", deep), r":2: nested too deeply"),
        ("a reversed range", line(head) + line(dict(rnd, skip={"attn": "5-2", "mlp": ""})),
         r":2: round \"skip\" \"attn\": a reversed range 5-2"),
        ("a layer index out of range in an array", line(head) + line(dict(rnd, skip={"attn": [1, 12], "mlp": []})),
         r":2: round \"skip\" \"attn\": layer 12 out of range for 12 layers"),
        ("a layer index that is not an integer", line(head) + line(dict(rnd, skip={"attn": [1.5], "mlp": []})),
         r":2: round \"skip\" \"attn\": 1\.5 is not a layer index"),
        ("4096 layers", line(dict(head, n_layers=4096)), r":1: header \"n_layers\" is 4096, out of its range 1 to 512"),
        ("too many tokens drafted", line(head) + line(dict(rnd, drafted=5000)), r":2: round \"drafted\" is 5000"),
        ("asd_cos of the wrong length", line(head) + line({"type": "prefill", "prompt": 0, "asd_cos": [0.9] * 11}),
         r":2: prefill \"asd_cos\" holds 11 values, the model has 12 layers"),
        ("asd_cos above 1", line(head) + line({"type": "prefill", "prompt": 0, "asd_cos": [0.9] * 11 + [1.2]}),
         r":2: prefill \"asd_cos\" element 11 is 1\.2, out of its range"),
        ("a negative CLaSp margin", line(head) + line(dict(rnd, event={"clasp": {"skip": rnd["skip"], "margin": -1}})),
         r":2: round event clasp \"margin\" is -1"),
        ("a SWIFT matchness of 7", line(head) + line(dict(rnd, event={"swift": {"matchness": 7}})),
         r":2: round event swift \"matchness\" is 7"),
        ("an ASD threshold of 3", line(dict(head, params={"cos_threshold": 3})),
         r":1: header params \"cos_threshold\" is 3"),
        ("more than 1000 prompts", line(head) + "".join(line({"type": "prefill", "prompt": p}) for p in range(1001)),
         r":1002: more than 1000 prompts"),
        ("more than 1000000 elements", line(dict(head, n_layers=512)) + "".join(
            line({"type": "prefill", "prompt": p}) for p in range(1000)), r"more than 1000000 elements"),
    ]
    for name, text, want in cases:
        path = os.path.join(tmp, "n.jsonl")
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(out_dir, "n.svg")
        p = subprocess.run([sys.executable, SCRIPT, path, "-o", out], capture_output=True, text=True)
        lines = p.stderr.splitlines()
        check(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("draw_trace.py: error: ") and
              re.search(want, lines[0]) is not None and os.listdir(out_dir) == [],
              "%s: exit %d, want 1, one error line matching %r and no file:\n%s" % (name, p.returncode, want,
                                                                                 p.stderr[-600:]))
    # at the limits themselves, a trace draws: 512 layers, numbers at the ends of their ranges
    text = (line(dict(head, n_layers=512, params={"cos_threshold": -1.0})) +
            line({"type": "prefill", "prompt": 0, "asd_cos": [-1.0, 1.0] * 256, "asd_skip": {"attn": [511], "mlp": []}}) +
            line(dict(rnd, skip={"attn": "0-511", "mlp": ""}, conf=[0.0], gamma_before=1.0)) +
            line(dict(rnd, drafted=1024, accepted=0, conf=[1.0] * 1024, gamma_before=0.0, skip={"attn": [], "mlp": []})))
    path = os.path.join(tmp, "edge.jsonl")
    with open(path, "w") as f:
        f.write(text)
    rc, err, out = draw(path, tmp, "edge.svg")
    root = parse(out, "limits") if check(rc == 0, "at the limits: exit %d: %s" % (rc, err)) else None
    if root is not None:
        nums = [v for e in root.iter() for k, v in e.attrib.items()
                if k in ("x", "y", "cx", "cy", "width", "height") and not v.endswith("%")]
        check(all(math.isfinite(float(v)) for v in nums), "at the limits: a coordinate is not finite")


def inputs(tmp):
    """Inputs that are not a trace-sized file: one error line, read no further than the limit."""
    out = os.path.join(tmp, "in.svg")
    big = os.path.join(tmp, "big.jsonl")
    with open(big, "w") as f:
        f.truncate((64 << 20) + 1)  # sparse: 64 MiB + 1 byte, nothing written
    for name, path, want in (("/dev/zero", "/dev/zero", r"/dev/zero: more than 64 MiB without an end"),
                             ("a file over 64 MiB", big, r"big\.jsonl: 67108865 bytes, more than a trace may hold"),
                             ("a folder", tmp, r": cannot read: Is a directory")):
        if not os.path.exists(path):
            continue
        try:
            p = subprocess.run([sys.executable, SCRIPT, path, "-o", out], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            check(False, "%s as the trace: still reading after 60 s" % name)
            continue
        check(p.returncode == 1 and len(p.stderr.splitlines()) == 1 and re.search(want, p.stderr) is not None
              and not os.path.exists(out), "%s as the trace: exit %d: %s" % (name, p.returncode, p.stderr[-300:]))
    os.unlink(big)


def outputs(tmp):
    """-o by selfspec's rule for outputs: through symlinks, in place for what is not a regular file,
    -o - on stdout, the trace itself refused however it is reached."""
    d = os.path.join(tmp, "o")
    os.makedirs(os.path.join(d, "real", "sub"))
    trace = os.path.join(d, "real", "t.jsonl")
    with open(SAMPLE, "rb") as f:
        sample = f.read()
    with open(trace, "wb") as f:
        f.write(sample)
    os.symlink(os.path.join(d, "real", "sub"), os.path.join(d, "lnk"))
    os.symlink(trace, os.path.join(d, "t-link.jsonl"))
    os.link(trace, os.path.join(d, "t-hard.jsonl"))

    def run(out, **kw):  # the trace restored first: a case failing must not make the next ones fail
        with open(trace, "wb") as f:
            f.write(sample)
        return subprocess.run([sys.executable, SCRIPT, trace, "-o", out], capture_output=True, text=True, timeout=60, **kw)

    def left(folder):  # temporary files left behind
        return [n for n in os.listdir(folder) if n.startswith(".")]

    for name, out in (("a symlink to the trace", os.path.join(d, "t-link.jsonl")),
                      ("a hard link to the trace", os.path.join(d, "t-hard.jsonl")),
                      ("a .. through a symlinked folder", os.path.join(d, "lnk", "..", "t.jsonl"))):
        p = run(out)
        with open(trace, "rb") as f:
            kept = f.read() == sample
        check(p.returncode == 1 and "is the input trace" in p.stderr and len(p.stderr.splitlines()) == 1 and kept
              and os.path.islink(os.path.join(d, "t-link.jsonl")),
              "-o %s: exit %d, trace kept %s: %s" % (name, p.returncode, kept, p.stderr))

    # a symlink to a file is written through: the link stays, its target holds the SVG
    target = os.path.join(d, "real", "target.svg")
    with open(target, "w") as f:
        f.write("old\n")
    link = os.path.join(d, "out-link.svg")
    os.symlink(target, link)
    p = run(link)
    with open(target) as f:
        body = f.read()
    check(p.returncode == 0 and os.path.islink(link) and body.startswith("<?xml") and not left(os.path.join(d, "real")),
          "-o a symlink: exit %d, link kept %s, target %r: %s" % (p.returncode, os.path.islink(link), body[:20], p.stderr))
    # a symlink to nothing is refused
    os.symlink(os.path.join(d, "nowhere", "x.svg"), os.path.join(d, "dangling.svg"))
    p = run(os.path.join(d, "dangling.svg"))
    check(p.returncode == 1 and "a symbolic link to nothing" in p.stderr, "-o a dangling symlink: %s" % p.stderr)

    # a FIFO is written in place, never renamed onto
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    p = run(fifo)
    got = b""
    while True:
        try:
            chunk = os.read(rd, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        got += chunk
    os.close(rd)
    check(p.returncode == 0 and stat.S_ISFIFO(os.stat(fifo).st_mode) and got.startswith(b"<?xml")
          and got.endswith(b"</svg>\n") and not left(d),
          "-o a FIFO: exit %d, still a FIFO %s, %d bytes read: %s" % (p.returncode, stat.S_ISFIFO(os.stat(fifo).st_mode),
                                                                     len(got), p.stderr))
    # a device node (a copy of /dev/null made here, where root may make one) is written in place
    node = os.path.join(d, "null")
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (OSError, AttributeError):
        node = None
    if node is not None:
        p = run(node)
        check(p.returncode == 0 and stat.S_ISCHR(os.stat(node).st_mode) and not left(d),
              "-o a device node: exit %d, still a device %s: %s" % (p.returncode, stat.S_ISCHR(os.stat(node).st_mode),
                                                                    p.stderr))
    # a symlink to /dev/stdout (as -o /dev/stdout): the SVG comes out on stdout, the link stays
    if os.path.exists("/dev/stdout"):
        os.symlink("/dev/stdout", os.path.join(d, "stdout"))
        p = run(os.path.join(d, "stdout"))
        check(p.returncode == 0 and p.stdout.startswith("<?xml") and os.path.islink(os.path.join(d, "stdout")),
              "-o a link to /dev/stdout: exit %d, stdout %r: %s" % (p.returncode, p.stdout[:20], p.stderr))
    # a valid 255-byte name works: the temporary name is short
    long_name = os.path.join(d, "x" * 251 + ".svg")
    p = run(long_name)
    check(p.returncode == 0 and os.path.exists(long_name) and not left(d), "-o a 255-byte name: %s" % p.stderr)
    # -o -: the SVG on stdout, and no file named "-" (issue 48); a full stdout is one error line
    p = run("-", cwd=d)
    check(p.returncode == 0 and p.stdout.startswith("<?xml") and p.stdout.endswith("</svg>\n") and
          not os.path.exists(os.path.join(d, "-")) and p.stderr == "", "-o -: exit %d, stdout %r, stderr %r"
          % (p.returncode, p.stdout[:20], p.stderr))
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            p = subprocess.run([sys.executable, SCRIPT, trace, "-o", "-"], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=60, cwd=d)
        check(p.returncode == 1 and re.fullmatch(r"draw_trace\.py: error: -o -: cannot write: No space left on "
                                                 r"device\n", p.stderr) is not None, "-o - into /dev/full: exit %d: %s"
              % (p.returncode, p.stderr))


def references(tmp):
    """The engine's reference traces, when this checkout has them: each draws, a bar pair per round."""
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "refs", "traces", "*.jsonl"))):
        name = os.path.basename(path)
        rc, err, out = draw(path, tmp, name + ".svg")
        root = parse(out, name) if check(rc == 0, "%s: exit %d: %s" % (name, rc, err)) else None
        if root is None:
            continue
        records = [json.loads(l) for l in open(path) if l.strip()]
        n_rounds = sum(1 for r in records if r.get("type") == "round")
        check(len(find(root, "rect", "drafted")) == n_rounds == len(find(root, "rect", "accepted")),
              "%s: %d bars for %d rounds" % (name, len(find(root, "rect", "drafted")), n_rounds))
        # the decisions' panels: ASD's C_l dot per layer per prompt, CLaSp's bar per DP with a
        # margin, a draft-length bar per length up to each prompt's longest draft
        L = records[0]["n_layers"]
        cos = sum(len(r["asd_cos"]) for r in records if r.get("type") == "prefill" and "asd_cos" in r)
        dots = [e for e in root.iter(NS + "circle") if cls(e).startswith("asd-cos")]
        check(len(dots) == cos and (cos > 0) == name.startswith("asd") and cos % L == 0,
              "%s: %d C_l dots for %d values" % (name, len(dots), cos))
        dps = sum(1 for r in records if r.get("type") == "round" and isinstance(r.get("event"), dict)
                  and (r["event"].get("clasp") or {}).get("margin"))
        check(len(find(root, "rect", "clasp-margin")) == dps and (dps > 0) == name.startswith("clasp"),
              "%s: %d margin bars for %d DPs" % (name, len(find(root, "rect", "clasp-margin")), dps))
        want = sum(1 + max(r["drafted"] for r in records if r.get("type") == "round" and r["prompt"] == p)
                   for p in {r["prompt"] for r in records if r.get("type") == "round"})
        check(len(find(root, "rect", "draft-length")) == want, "%s: %d draft-length bars, want %d"
              % (name, len(find(root, "rect", "draft-length")), want))
        no_blank_bands(root, name)
        # the text by origin (issue 47): per prompt, the kept and own tokens spell the summary's
        # text, with a struck token per rejected draft token
        for p, g in enumerate(prompts(root)):
            rounds = [r for r in records if r.get("type") == "round" and r["prompt"] == p]
            summary = [r for r in records if r.get("type") == "summary" and r["prompt"] == p][0]
            toks = by_origin(g, name)
            struck = sum(1 for r in rounds if r.get("rejected") is not None and not r.get("leaf"))
            check("".join(t for c, t in toks if c in ("kept", "own")) == summary["text"] and
                  sum(1 for c, _ in toks if c == "rejected") == struck and
                  (not rounds or sum(1 for c, _ in toks if c == "kept") > 0),
                  "%s prompt %d: the text by origin is not the summary's, or %d struck tokens for %d rejections"
                  % (name, p, sum(1 for c, _ in toks if c == "rejected"), struck))


def main():
    with tempfile.TemporaryDirectory(prefix="selfspec-draw-") as tmp:
        test_sample(tmp)
        variants(tmp)
        text_and_leaves(tmp)
        figures_agree(tmp)
        paper_figures(tmp)
        errors(tmp)
        test_panels(tmp)
        bad_numbers(tmp)
        inputs(tmp)
        outputs(tmp)
        references(tmp)
    print("test_draw_trace: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
