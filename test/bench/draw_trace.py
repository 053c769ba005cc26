#!/usr/bin/env python3
"""Draws a selfspec trace (selfspec --trace FILE, JSON Lines) as one SVG, a panel per prompt.

    python3 test/bench/draw_trace.py TRACE.jsonl -o OUT.svg

Each panel, top to bottom: the run's numbers (with --compare, the measured speedup and the
passes' costs in plain decoding steps); the final skip set as Self-SD's Fig. 6 draws a layer
map (an attention row and an MLP row, one cell per layer, skipped cells filled); the skip set
over time (SWIFT and CLaSp: each set from the round it came into use; Self-SD and the oracle:
each search candidate with its objective, in the first prompt's panel, since the search runs
before it); per round the drafted and accepted tokens; the exit threshold gamma beside each
round's last draft confidence (the one the exit rule compared with gamma), and, when gamma
moves, gamma alone on its own range. Every panel is as tall as what it holds; of more than
MAX_ROWS sets, MAX_ROWS are drawn (rows_drawn: the first, a search's every new best, the last).

Python 3 standard library only. The SVG is written whole to a temporary file beside OUT,
then renamed over it. A missing or malformed trace is one error line (with the line number)
and exit status 1.
"""
import argparse
import json
import math
import os
import sys
import tempfile

X0 = 64          # px: the left edge of the maps and plots (row labels left of it)
ROW_H = (16, 10)  # px: a set row when there are few (a label each), else (a label every other)
MAX_ROWS = 80    # set rows drawn at most (rows_drawn picks which)
PLOT_W = 640     # px: the rounds' plots
FILL = {"attn": "#3b6fb6", "mlp": "#e07b24"}  # skipped attention, skipped MLP
CHANGING = ("swift", "clasp")  # methods whose set changes while decoding


class TraceError(Exception):
    pass


# ----------------------------------------------------------------------------
# reading the trace

NUM = (int, float)
# per record type, the fields the drawing reads and what each must be
FIELDS = {
    "header": {"method": "str", "n_layers": "int"},
    "search": {"i": "int", "skip": "dict", "objective": "num?"},
    "search_done": {"skip": "dict"},
    "prefill": {"prompt": "int"},
    "round": {"prompt": "int", "skip": "dict", "drafted": "int", "accepted": "int", "conf": "list",
              "gamma_before": "num?"},
    "summary": {"prompt": "int"},
}
WANT = {"str": "a string", "int": "an integer", "dict": "an object", "list": "an array",
        "num?": "a number or null"}


def is_kind(v, kind):
    if isinstance(v, bool):
        return False
    return {"str": isinstance(v, str), "int": isinstance(v, int), "dict": isinstance(v, dict),
            "list": isinstance(v, list), "num?": v is None or isinstance(v, NUM)}[kind]


def check_record(rec, where):
    kind = rec.get("type")
    if not isinstance(kind, str):
        raise TraceError('%s: no "type" (every line is an object with a "type")' % where)
    for key, want in FIELDS.get(kind, {}).items():
        if key not in rec:
            raise TraceError('%s: a %s record without "%s"' % (where, kind, key))
        if not is_kind(rec[key], want):
            raise TraceError('%s: %s "%s" is %s, want %s' % (where, kind, key, json.dumps(rec[key])[:40], WANT[want]))
    for key in ("skip", "asd_skip"):
        if isinstance(rec.get(key), dict):
            for part in ("attn", "mlp"):
                if not isinstance(rec[key].get(part), str):
                    raise TraceError('%s: %s "%s" has no "%s" string' % (where, kind, key, part))
    if kind == "round" and not 0 <= rec["accepted"] <= rec["drafted"]:
        raise TraceError("%s: round: %d accepted of %d drafted" % (where, rec["accepted"], rec["drafted"]))
    return kind


def read_trace(path):
    """The trace's records in order, checked; raises TraceError naming the file and line."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise TraceError("%s: cannot read: %s" % (path, e.strerror or e))
    records = []
    for no, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = "%s:%d" % (path, no)
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise TraceError("%s: not UTF-8 (byte %d)" % (where, e.start + 1))
        except ValueError as e:
            raise TraceError("%s: not JSON: %s" % (where, e))
        if not isinstance(rec, dict):
            raise TraceError("%s: not a JSON object" % where)
        kind = check_record(rec, where)
        if not records and kind != "header":
            raise TraceError('%s: the first record is "%s", want the header' % (where, kind))
        if kind == "header" and records:
            raise TraceError("%s: a second header (one trace per file)" % where)
        if kind == "header" and not 1 <= rec["n_layers"] <= 4096:
            raise TraceError("%s: header: n_layers %d" % (where, rec["n_layers"]))
        records.append((no, rec))
    if not records:
        raise TraceError("%s: empty: no header line" % path)
    L = records[0][1]["n_layers"]
    for no, rec in records:  # every skip set names layers of this model
        for key in ("skip", "asd_skip"):
            if isinstance(rec.get(key), dict):
                for part in ("attn", "mlp"):
                    try:
                        parse_set(rec[key][part], L)
                    except ValueError as e:
                        raise TraceError('%s:%d: %s "%s": %s' % (path, no, key, part, e))
    return [rec for _, rec in records]


def parse_set(s, L):
    """The layers a skip string names: --skip's syntax ("1,3,5-7") or --json's map ("..X.X")."""
    if s and set(s) <= {"X", "."}:
        if len(s) != L:
            raise ValueError("a map of %d layers, the model has %d" % (len(s), L))
        return {l for l, c in enumerate(s) if c == "X"}
    layers = set()
    for part in filter(None, s.replace(" ", "").split(",")):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError("not a layer list")
        lo, hi = int(lo), int(hi or lo)
        if lo > hi or hi >= L:
            raise ValueError("layer %d out of range for %d layers" % (hi, L))
        layers.update(range(lo, hi + 1))
    return layers


def skip_of(d, L):
    return (frozenset(parse_set(d["attn"], L)), frozenset(parse_set(d["mlp"], L)))


def prompts_of(records):
    """Per prompt index, in order: its prefill, rounds and summary."""
    prompts = {}
    for rec in records:
        if rec["type"] in ("prefill", "round", "summary"):
            p = prompts.setdefault(rec["prompt"], {"prefill": None, "rounds": [], "summary": None})
            if rec["type"] == "round":
                p["rounds"].append(rec)
            else:
                p[rec["type"]] = rec
    return [prompts[k] for k in sorted(prompts)]


# ----------------------------------------------------------------------------
# drawing

def clip(s, limit):
    """Control characters as spaces, what XML cannot hold as '?', at most limit characters."""
    s = "".join(" " if ord(c) < 0x20 else "?" if (0xD800 <= ord(c) <= 0xDFFF or c in "\ufffe\uffff")
                else c for c in str(s))
    return s[:limit - 1] + "\u2026" if len(s) > limit else s


def esc(s, limit=60):
    """Text content: clipped, then XML-escaped."""
    return clip(s, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def num(v, fmt="%.2f"):
    return fmt % v if isinstance(v, NUM) and not isinstance(v, bool) else "?"


class Svg:
    def __init__(self, L):
        self.L = L
        self.cw = 16.0 if L <= 40 else 640.0 / L
        self.width = max(780.0, X0 + L * self.cw + 200)
        self.out = []

    def add(self, s):
        self.out.append(s)

    def text(self, x, y, s, size=None, bold=False, anchor=None, cls=None, limit=110):
        attrs = ' class="%s"' % cls if cls else ""
        attrs += ' font-size="%g"' % size if size else ""
        attrs += ' font-weight="bold"' if bold else ""
        attrs += ' text-anchor="%s"' % anchor if anchor else ""
        self.add('<text x="%.1f" y="%.1f"%s>%s</text>' % (x, y, attrs, esc(s, limit)))

    def frame(self, x, y, w, h, lo, hi):
        """A plot's frame with its axis's ends left of it: lo at the bottom, hi at the top."""
        self.add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888" '
                 'stroke-width="0.5"/>' % (x, y, w, h))
        self.text(x - 4, y + h, lo, size=10, anchor="end")
        self.text(x - 4, y + 9, hi, size=10, anchor="end")

    def polyline(self, cls, points):
        self.add('<polyline class="%s" fill="none" stroke="#c0392b" stroke-width="1.5" points="%s"/>'
                 % (cls, " ".join("%.2f,%.2f" % p for p in points)))


def header(svg, y, no, method, model, p, rounds):
    """The panel's numbers and the final skip set's layer map; returns the height used."""
    L, s, pre = svg.L, p["summary"] or {}, p["prefill"] or {}
    title = "prompt %d" % no
    if isinstance(pre.get("text"), str):
        title += ": \u201c%s\u201d" % esc(pre["text"], 60)
    elif isinstance(pre.get("tokens"), int):
        title += " (%d tokens)" % pre["tokens"]
    svg.add('<text x="12" y="%.1f" font-size="14" font-weight="bold">%s</text>' % (y + 20, title))
    svg.text(12, y + 38, "%s | method %s%s" % (clip(model, 60), clip(method, 20),
                                                " | " + s["device"] if isinstance(s.get("device"), str) else ""))
    final = skip_of(s["skip"], L) if isinstance(s.get("skip"), dict) else \
        skip_of(rounds[-1]["skip"], L) if rounds else (frozenset(), frozenset())
    drafted = sum(r["drafted"] for r in rounds)
    accepted = sum(r["accepted"] for r in rounds)
    alpha = s.get("accept_rate", accepted / drafted if drafted else 0)
    m = s.get("mean_accepted", (accepted + len(rounds)) / len(rounds) if rounds else 1)
    n = len(final[0]) + len(final[1])
    svg.text(12, y + 54, "skipping %d of %d sublayers (%.0f%%) | acceptance \u03b1 %s | mean accepted length M %s"
             % (n, 2 * L, 100.0 * n / (2 * L), num(alpha, "%.3f"), num(m)))
    line = y + 70
    if "speedup" in s:
        svg.text(12, line, "speedup measured %sx (%s vs %s tokens/s plain, --compare); SWIFT Eq. 6 expects %sx"
                 % (num(s["speedup"]), num(s.get("tokens_per_s"), "%.0f"), num(s.get("plain_tokens_per_s"), "%.0f"),
                    num(s.get("expected_speedup"))))
    elif "expected_speedup" in s:
        svg.text(12, line, "SWIFT Eq. 6 expects %sx (a measured speedup needs --compare)"
                 % num(s["expected_speedup"]))
    else:
        line -= 16
    if "draft_pass_steps" in s and rounds:
        # Eq. 6's draft cost 1 - r, r over the draft tokens of the set each was drafted with
        sk = sum(r["drafted"] * sum(len(x) for x in skip_of(r["skip"], L)) for r in rounds)
        cost = 1 - sk / drafted / (2 * L) if drafted else 1 - n / (2 * L)
        line += 16
        svg.text(12, line, "in plain steps: a draft pass %s, a verify pass %s (Eq. 6 takes %.2f and 1); these "
                 "predict %sx" % (num(s["draft_pass_steps"]), num(s.get("verify_pass_steps")), cost,
                                  num(s.get("predicted_speedup"))), cls="costs")
    ym = line + 28
    svg.add('<g class="panel">')
    for l in range(L):
        x = X0 + l * svg.cw
        if svg.cw >= 12 or l % 5 == 0:
            svg.text(x + svg.cw / 2, ym - 4, str(l), size=9, anchor="middle")
        for r, part in enumerate(("attn", "mlp")):
            on = l in final[r]
            svg.add('<rect class="%s%s" x="%.1f" y="%.1f" width="%.1f" height="16" fill="%s" stroke="#888" '
                    'stroke-width="0.5"/>' % (part, " skipped" if on else "", x, ym + r * 18, svg.cw,
                                              FILL[part] if on else "white"))
    svg.text(X0 - 6, ym + 12, "attn", anchor="end")
    svg.text(X0 - 6, ym + 30, "mlp", anchor="end")
    svg.text(X0, ym + 50, "the final skip set (the last round's), layer 0 to %d left to right; filled: skipped "
             "by the draft" % (L - 1), size=11)
    svg.add("</g>")
    return ym + 50 + 20 - y


def rows_drawn(rows, new_best):
    """The indices of the rows drawn: all when at most MAX_ROWS, else the first MAX_ROWS / 4 (a
    search's: the first, then every new best, the search converging), filled up from the end."""
    if len(rows) <= MAX_ROWS:
        return list(range(len(rows)))
    keep = set(range(MAX_ROWS // 4 if any(new_best) else MAX_ROWS // 2))
    keep |= set([i for i, b in enumerate(new_best) if b][-(MAX_ROWS // 2):])
    i = len(rows) - 1
    while len(keep) < MAX_ROWS:
        keep.add(i)
        i -= 1
    return sorted(keep)


def set_rows(svg, y, title, rows, search, unit):
    """One row per set (label, skip pair, objective or None), a search's objective as a bar at
    its right; more than MAX_ROWS rows: those rows_drawn picks, with a row saying how many are
    left out wherever rows are. Returns the height used."""
    L, cw = svg.L, svg.cw
    svg.text(12, y + 14, title, bold=True)
    objectives = [r[2] for r in rows if isinstance(r[2], NUM)]
    lo, hi = (min(objectives), max(objectives)) if objectives else (0, 1)
    new_best, best, best_row = [], math.inf, None
    for r in rows:
        new_best.append(search and isinstance(r[2], NUM) and r[2] < best)
        if new_best[-1]:
            best, best_row = r[2], r
    shown, last = [], -1  # row indices, None for a gap
    for i in rows_drawn(rows, new_best):
        if i > last + 1:
            shown.append(None)
        shown.append(i)
        last = i
    rh = ROW_H[0] if len(shown) <= 16 else ROW_H[1]
    y0, cx = y + 24, X0 + L * cw
    for l in range(1, L):  # column guides under the map's layers
        svg.add('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd" stroke-width="0.5"/>'
                % (X0 + l * cw, y0, X0 + l * cw, y0 + len(shown) * rh))
    for k, i in enumerate(shown):
        yr = y0 + k * rh
        if i is None:
            gap = shown[k + 1] - shown[k - 1] - 1
            svg.text(X0 + L * cw / 2, yr + rh - 1, "\u2026 %d not drawn \u2026" % gap, size=9, anchor="middle",
                     cls="gap")
            continue
        label, (attn, mlp), objective = rows[i]
        cells = "".join('<rect class="%s skipped" x="%.1f" y="%.2f" width="%.1f" height="%.2f" fill="%s"/>'
                        % (part, X0 + l * cw, yr + r * 0.45 * rh, cw, 0.45 * rh, FILL[part])
                        for r, (part, layers) in enumerate((("attn", attn), ("mlp", mlp))) for l in sorted(layers))
        svg.add('<g class="set">%s</g>' % cells)
        if k % 2 == 0 or rh >= 12 or new_best[i] or shown[k - 1] is None:  # every other, and these
            svg.text(X0 - 6, yr + rh / 2 + 3.5, label, size=9, anchor="end", cls="row-label")
        if search and isinstance(objective, NUM):  # the objective as a bar, dark at a new best
            svg.add('<rect class="cost" x="%.1f" y="%.2f" width="%.2f" height="%.2f" fill="%s"/>'
                    % (cx + 8, yr + 0.05 * rh, 10 + 110 * (objective - lo) / (hi - lo if hi > lo else 1),
                       0.9 * rh, "#555" if new_best[i] else "#ccc"))
    yb = y0 + len(shown) * rh
    svg.add('<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888" stroke-width="0.5"/>'
            % (X0, y0, L * cw, yb - y0))
    if search and objectives:
        svg.text(X0, yb + 14, "%s %.4g to %.4g%s, lower is better; dark bar: a new best; best: %s (%.4g)"
                 % ("objective" if not unit else "cost", lo, hi, " " + unit if unit else "", best_row[0], best),
                 size=10)
        yb += 14
    return yb - y + 20


def rounds_plot(svg, y, rounds, ticks, exit_mode, method):
    """Per round the drafted and accepted bars, the exit threshold with the draft confidences,
    and gamma zoomed when it moves; returns the height used."""
    x0, w, ch = X0, PLOT_W, 110
    y0 = y + 26
    yb = y0 + ch
    longest = max([1] + [r["drafted"] for r in rounds])
    if not rounds:
        svg.text(12, y + 14, "plain decoding: no draft, no rounds" if method in ("plain", "none")
                 else "no rounds: the trace holds none for this prompt", bold=True)
        return 30
    svg.text(12, y + 14, "per round: accepted (dark) of drafted (dark + light) tokens", bold=True)
    svg.frame(x0, y0, w, ch, "0", "%d token%s" % (longest, "s" if longest > 1 else ""))
    if not any(r["drafted"] for r in rounds):
        svg.text(x0 + w / 2, y0 + ch / 2, "nothing drafted: an empty skip set makes each round a plain decoding "
                 "step", anchor="middle")
    bw = w / len(rounds)
    for i, r in enumerate(rounds):
        x, hd, ha = x0 + (i + 0.1) * bw, ch * r["drafted"] / longest, ch * r["accepted"] / longest
        svg.add('<rect class="drafted" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#b9cde8"/>'
                '<rect class="accepted" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2c5b9e"/>'
                % (x, yb - hd, 0.8 * bw, hd, x, yb - ha, 0.8 * bw, ha))
    svg.text(x0, yb + 26, "round 1", size=10)
    svg.text(x0 + w, yb + 26, "round %d" % len(rounds), size=10, anchor="end")
    labelled = -1e9  # tick labels at least 28 px apart
    for i in ticks:
        x = x0 + i * bw
        svg.add('<line class="set-tick" x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="#333"/>' % (x, yb, x, yb + 5))
        if x - labelled >= 28:
            svg.text(x, yb + 14, "r %d" % (i + 1), size=9, anchor="middle")
            labelled = x
    # gamma and the confidences on 0..1
    ys, sh = yb + 54, 60
    gammas = [r["gamma_before"] for r in rounds]
    known = [g for g in gammas if g is not None]
    if exit_mode == "none" or not known:
        what = "each round's last draft confidence (dots), 0 to 1; no exit threshold (--exit none)"
    elif exit_mode == "fixed" or min(known) == max(known):
        what = "exit threshold \u03b3 (red line, fixed at %.3g) and each round's last draft confidence (dots)" % known[0]
    else:
        what = "exit threshold \u03b3 (red line) and each round's last draft confidence (dots), 0 to 1"
    svg.text(12, ys - 8, what, bold=True)
    svg.frame(x0, ys, w, sh, "0", "1")
    for i, r in enumerate(rounds):
        c = r["conf"][-1] if r["conf"] else None
        if isinstance(c, NUM) and not isinstance(c, bool):
            svg.add('<circle class="confidence" cx="%.2f" cy="%.2f" r="2" fill="#555"/>'
                    % (x0 + (i + 0.5) * bw, ys + sh - sh * min(max(c, 0.0), 1.0)))
    runs = [[]]  # gamma as lines through the rounds that have one
    for i, g in enumerate(gammas):
        if g is None:
            runs.append([])
        else:
            runs[-1].append((i, g))
    if known and min(known) == max(known):  # a fixed threshold: one line across
        runs = [[(-0.5, known[0]), (len(rounds) - 0.5, known[0])]]
    for run in filter(None, runs):
        svg.polyline("gamma", [(x0 + (i + 0.5) * bw, ys + sh - sh * min(max(g, 0.0), 1.0)) for i, g in run])
    if exit_mode in ("none", "fixed") or not known or min(known) == max(known):
        return ys + sh + 16 - y
    # gamma alone on its own range, at least 0.01 wide: it moves by thousandths
    lo, hi = min(known), max(known)
    if hi - lo < 0.01:
        lo = (lo + hi) / 2 - 0.005
        hi = lo + 0.01
    yz, zh = ys + sh + 36, 40
    svg.text(12, yz - 8, "\u03b3 alone, zoomed to %.3f to %.3f" % (lo, hi), bold=True)
    svg.frame(x0, yz, w, zh, "%.3f" % lo, "%.3f" % hi)
    for run in filter(None, runs):
        svg.polyline("gamma-zoom", [(x0 + (i + 0.5) * bw, yz + zh - zh * (g - lo) / (hi - lo)) for i, g in run])
    return yz + zh + 16 - y


def draw(records):
    head = records[0]
    L, method = head["n_layers"], head["method"]
    model = head.get("model", "?")
    exit_mode = (head.get("exit") or {}).get("mode") if isinstance(head.get("exit"), dict) else None
    params = head.get("params") if isinstance(head.get("params"), dict) else {}
    unit = {"cost": "sublayers/token", "time": "ms/token"}.get(params.get("objective"), "")
    search = [r for r in records if r["type"] == "search"]
    svg = Svg(L)
    y = 0.0
    for no, p in enumerate(prompts_of(records), 1):
        rounds = p["rounds"]
        svg.add('<g class="prompt">')
        y += header(svg, y, no, method, model, p, rounds)
        svg.add('<g class="series">')
        ticks = []
        if search and no == 1:
            rows = [("it %d" % s["i"], skip_of(s["skip"], L), s["objective"]) for s in search]
            name = "Self-SD's search (Sec. 3.3)" if method == "selfsd" else "the oracle's search"
            y += set_rows(svg, y, "%s: one row per candidate set, top to bottom; its objective at the right"
                          % name, rows, True, unit)
        elif method in CHANGING and rounds:
            rows, last = [], None
            for i, r in enumerate(rounds):
                s = skip_of(r["skip"], L)
                if s != last:
                    rows.append(("r %d" % (i + 1), s, None))
                    ticks.append(i)
                    last = s
            y += set_rows(svg, y, "the skip set over time: one row per set, from round r on (ticks below the "
                          "rounds)", rows, False, "")
        y += rounds_plot(svg, y, rounds, ticks, exit_mode, method)
        svg.add("</g></g>")
    if y == 0:  # a header alone: no prompt ran
        svg.text(12, 24, "%s | method %s: the trace holds no prompt" % (model, method))
        y = 40
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" '
            'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">\n'
            '<rect class="background" width="100%%" height="100%%" fill="white"/>\n%s\n</svg>\n'
            % (svg.width, y, svg.width, y, "\n".join(svg.out)))


def write_whole(path, text):
    """Written to a temporary file beside path, then renamed over it: an old file stays whole."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise TraceError("-o %s: is a folder" % path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=folder)
    except OSError as e:
        raise TraceError("-o %s: cannot create a file in its folder: %s" % (path, e.strerror or e))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        raise TraceError("-o %s: cannot write: %s" % (path, e.strerror or e))


def main(argv):
    ap = argparse.ArgumentParser(description="Draw a selfspec --trace file as SVG (a panel per prompt).")
    ap.add_argument("trace", help="the JSON Lines file selfspec --trace wrote")
    ap.add_argument("-o", "--output", required=True, help="the SVG to write")
    a = ap.parse_args(argv)
    try:
        if os.path.abspath(a.output) == os.path.abspath(a.trace):
            raise TraceError("-o %s: names the trace itself" % a.output)
        write_whole(a.output, draw(read_trace(a.trace)))
    except TraceError as e:
        print("draw_trace.py: error: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s" % a.output, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
