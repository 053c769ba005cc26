#!/usr/bin/env python3
"""Three of the papers' figures at small scale, each drawn from a selfspec --trace (SVG):

    python3 test/bench/paper_figures.py selfsd-fig4 TRACE.jsonl -o OUT.svg   # a selfsd search's trace
    python3 test/bench/paper_figures.py clasp-fig3a TRACE.jsonl -o OUT.svg   # a clasp run's, --loi 1
    python3 test/bench/paper_figures.py swift-fig6 TRACE.jsonl -o OUT.svg    # a swift -f run's

- selfsd-fig4, Self-SD's Fig. 4 (Sec. 4.3): each Bayesian-optimization candidate's speedup
  against the number of sublayers it skips, the dashed line the best speedup at each count. Here
  the speedup is the search's own: the empty set's objective over the candidate's (the cost
  objective: sublayers run per generated token), GP proposals filled, random warm-up hollow.
- clasp-fig3a, CLaSp's Fig. 3a (Sec. 3.7, sparse persistence): the Jaccard similarity of the
  skip sets the DP chose for two tokens against the distance between them, here every pair of
  DPs of a prompt, the distance between the slots of their last accepted tokens, beside two
  random sets of the same sizes (the dashed line).
- swift-fig6, SWIFT's Fig. 6 left (Sec. 5.4): the matchness (Eq. 4) of the layer set over the
  optimization steps as the prompts of a -f run go by, here the kept set's (line) and each
  candidate's (dots, GP's filled), prompt boundaries as vertical lines, each prompt's Eq. 6
  expected speedup below, since a per-instance measured speedup needs the wall clock.

Python 3 standard library only; the trace is read and checked by draw_trace.py's reader, and -o
follows its output rules (README "The pictures"). A trace that lacks what the figure needs is
one error line, exit status 1.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import draw_trace as dt  # noqa: E402 (the reader, the checks, the output rules)

W, H, X0, Y0 = 640, 240, 70, 56  # px: the plot's size and its top-left corner


class Plot:
    """One plot: a frame with axes x in [x0, x1] and y in [0, y1], ticks and labels."""

    def __init__(self, title, sub, xlabel, ylabel, x0, x1, y1):
        self.out, self.x0, self.x1, self.y1 = [], x0, x1, y1
        self.text(12, 20, title, size=14, bold=True)
        self.text(12, 38, sub, size=11)
        self.add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (X0, Y0, W, H))
        self.text(X0 + W / 2, Y0 + H + 34, xlabel, anchor="middle")
        self.add('<text x="16" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>'
                 % (Y0 + H / 2, Y0 + H / 2, dt.esc(ylabel, 80)))
        for xv in ticks(x0, x1):
            self.text(self.x(xv), Y0 + H + 14, "%g" % xv, size=10, anchor="middle")
        for yv in ticks(0, y1):
            self.text(X0 - 6, self.y(yv) + 4, "%g" % yv, size=10, anchor="end")

    def add(self, s):
        self.out.append(s)

    def text(self, x, y, s, size=12, bold=False, anchor=None, cls=None):
        self.add('<text x="%.1f" y="%.1f" font-size="%d"%s%s%s>%s</text>'
                 % (x, y, size, ' font-weight="bold"' if bold else "", ' text-anchor="%s"' % anchor if anchor else "",
                    ' class="%s"' % cls if cls else "", dt.esc(s, 160)))

    def x(self, v):
        return X0 + W * (v - self.x0) / ((self.x1 - self.x0) or 1)

    def y(self, v):
        return Y0 + H - H * v / (self.y1 or 1)

    def dot(self, cls, x, y, filled, colour="#333"):
        self.add('<circle class="%s" cx="%.2f" cy="%.2f" r="3" fill="%s" stroke="%s"/>'
                 % (cls, self.x(x), self.y(y), colour if filled else "white", colour))

    def line(self, cls, pts, colour="#c0392b", dash=False):
        if pts:
            self.add('<polyline class="%s" fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>'
                     % (cls, colour, ' stroke-dasharray="4,3"' if dash else "",
                        " ".join("%.2f,%.2f" % (self.x(a), self.y(b)) for a, b in pts)))

    def svg(self, notes):
        y = Y0 + H + 56
        for n in notes:
            self.text(12, y, n, size=11, cls="note")
            y += 15
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
                'viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, sans-serif">\n<rect width="100%%" height="100%%" '
                'fill="white"/>\n%s\n</svg>\n' % (X0 + W + 150, y, X0 + W + 150, y, "\n".join(self.out)))


def ticks(lo, hi):
    """About five ticks on [lo, hi] at a step of 1, 2 or 5 times a power of ten."""
    step = ceil_nice((hi - lo) / 5.0)
    return [round(lo + k * step, 6) for k in range(int((hi - lo) / step + 1e-9) + 1)]


def ceil_nice(v):
    """The axis's top: v rounded up to 1, 2 or 5 times a power of ten."""
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 5, 10) if m * e >= v)


def selfsd_fig4(records):
    head, search = records[0], [r for r in records if r["type"] == "search"]
    L = head["n_layers"]
    plain = [r["objective"] for r in search if r["i"] == 0]
    if head["method"] != "selfsd" or not plain or plain[0] <= 0 or len(search) < 2:
        raise dt.TraceError("selfsd-fig4 needs a selfsd trace with its search records (the empty set first)")
    pts = [(sum(len(x) for x in dt.skip_of(r["skip"], L)), plain[0] / r["objective"], r.get("phase"), r["i"])
           for r in search if dt.is_num(r["objective"]) and r["objective"] > 0]
    unit = (head.get("params") or {}).get("objective", "?")
    top = ceil_nice(max(p[1] for p in pts))
    p = Plot("Self-SD Fig. 4 at small scale: each candidate's speedup against the sublayers it skips",
             "%s, %d candidates of a Bayesian-optimization search; speedup = the empty set's objective / the "
             "candidate's (%s)" % (dt.clip(head.get("model", "?"), 40), len(pts), unit),
             "skipped sublayers ||z|| (of %d)" % (2 * L), "speedup over plain decoding", 0, 2 * L, top)
    p.line("plain", [(0, 1), (2 * L, 1)], colour="#999")
    best = {}
    for n, sp, phase, i in pts:
        best[n] = max(best.get(n, 0), sp)
        p.dot("candidate-%s" % (phase or "?"), n, sp, phase == "gp")
    p.line("best-per-count", sorted(best.items()), dash=True)
    n_best, sp_best = max(best.items(), key=lambda kv: kv[1])
    gp = sum(1 for q in pts if q[2] == "gp")
    return p.svg(["filled: the GP's proposals (%d); hollow: random warm-up and the empty set (%d); dashed: the best "
                  "at each count; grey: 1x" % (gp, len(pts) - gp),
                  "best: %.3fx skipping %d sublayers (the search's objective %.4f against plain %.4f)"
                  % (sp_best, n_best, plain[0] / sp_best, plain[0])])


def clasp_fig3a(records, max_gap=32):
    head = records[0]
    L = head["n_layers"]
    pairs = {}  # distance in tokens -> [Jaccard], and the random sets' mean Jaccard
    dps_seen = 0
    for p in dt.prompts_of(records):
        dps = [(r["pos"] + r["accepted"], dt.skip_of(r["event"]["clasp"]["skip"], L)) for r in p["rounds"]
               if isinstance(r.get("event"), dict) and isinstance(r["event"].get("clasp"), dict)
               and isinstance(r["event"]["clasp"].get("skip"), dict)]
        dps_seen += len(dps)
        for a in range(len(dps)):
            for b in range(a + 1, len(dps)):
                d = dps[b][0] - dps[a][0]
                if 0 < d <= max_gap:
                    pairs.setdefault(d, []).append((dt.jaccard(dps[a][1], dps[b][1])[0],
                                                    dt.random_jaccard(dps[a][1], dps[b][1], L)))
    if head["method"] != "clasp" or not pairs:
        raise dt.TraceError("clasp-fig3a needs a clasp trace with at least two DPs in a prompt (--loi 1)")
    ds = sorted(pairs)
    mean = [(d, sum(j for j, _ in pairs[d]) / len(pairs[d])) for d in ds]
    rnd = [(d, sum(r for _, r in pairs[d]) / len(pairs[d])) for d in ds]
    p = Plot("CLaSp Fig. 3a at small scale: how alike two DPs' skip sets are, against the tokens between them",
             "%s, %d DPs (LOI %s); each pair of DPs of a prompt at most %d tokens apart"
             % (dt.clip(head.get("model", "?"), 40), dps_seen, (head.get("params") or {}).get("interval", "?"), max_gap),
             "distance between the DPs' last accepted tokens (tokens)", "Jaccard similarity of the two skip sets",
             0, max(ds), 1.0)
    p.line("overlap", mean, colour="#7d5ba6")
    p.line("random", rnd, colour="#999", dash=True)
    for d, m in mean:
        p.dot("overlap-mean", d, m, True, colour="#7d5ba6")
    near = [j for d in ds if d <= 2 for j, _ in pairs[d]]
    far = [j for d in ds if d >= max(ds) - 7 for j, _ in pairs[d]]
    return p.svg(["line: the mean over the pairs at each distance (%d pairs); dashed: two random sets of those sizes"
                  % sum(len(v) for v in pairs.values()),
                  "within 2 tokens %.2f, beyond %d tokens %.2f; random %.2f" % (
                      sum(near) / len(near) if near else float("nan"), max(ds) - 8, sum(far) / len(far) if far
                      else float("nan"), sum(r for _, r in rnd) / len(rnd))])


def swift_fig6(records):
    head = records[0]
    prompts = dt.prompts_of(records)
    steps = []  # (prompt, step event)
    for n, p in enumerate(prompts):
        steps += [(n, r["event"]["swift"]) for r in p["rounds"]
                  if isinstance(r.get("event"), dict) and isinstance(r["event"].get("swift"), dict)]
    if head["method"] != "swift" or not steps:
        raise dt.TraceError("swift-fig6 needs a swift trace with optimization steps (--swift-budget 1)")
    p = Plot("SWIFT Fig. 6 (left) at small scale: the layer set's matchness over the optimization steps",
             "%s, %d prompts, %d steps; matchness (Eq. 4): the share of the last %s generated tokens the draft "
             "predicts" % (dt.clip(head.get("model", "?"), 40), len(prompts), len(steps),
                           (head.get("params") or {}).get("window", "?")),
             "optimization step (all prompts, in order)", "matchness", 0, len(steps), 1.0)
    kept, last = [], None
    for k, (n, ev) in enumerate(steps):
        if n != last:
            p.add('<line class="prompt-start" x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#bbb"/>'
                  % (p.x(k), Y0, p.x(k), Y0 + H))
            p.text(p.x(k) + 3, Y0 + 12, "prompt %d" % n, size=9)
            last = n
        if dt.is_num(ev.get("matchness")):
            p.dot("candidate-%s" % ev.get("phase"), k + 0.5, ev["matchness"], ev.get("phase") == "gp", colour="#e07b24")
        best = max(ev["matchness"], ev["kept_matchness"]) if dt.is_num(ev.get("kept_matchness")) else ev.get("matchness")
        if dt.is_num(best):
            kept.append((k + 0.5, best))
    p.line("kept", kept, colour="#333")
    summaries = [q["summary"] for q in prompts if q["summary"]]
    eq6 = ", ".join("%.2fx" % s["expected_speedup"] for s in summaries if dt.is_num(s.get("expected_speedup")))
    return p.svg(["dots: each step's candidate (filled: the GP's, Eq. 2); line: the best of it and the kept set, "
                  "what the next step keeps",
                  "each prompt's Eq. 6 expected speedup: %s" % eq6])


FIGURES = {"selfsd-fig4": selfsd_fig4, "clasp-fig3a": clasp_fig3a, "swift-fig6": swift_fig6}


def main(argv):
    ap = argparse.ArgumentParser(description="Draw one of the papers' figures from a selfspec trace (SVG).")
    ap.add_argument("figure", choices=sorted(FIGURES))
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    try:
        dt.check_output(a.output, a.trace)  # before anything is read
        dt.write_output(a.output, FIGURES[a.figure](dt.read_trace(a.trace)))
    except dt.TraceError as e:
        print("paper_figures.py: error: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s" % a.output, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
