#!/usr/bin/env python3
"""Draws a selfspec trace (selfspec --trace FILE, JSON Lines) as one SVG, a panel per prompt.

    python3 test/bench/draw_trace.py TRACE.jsonl -o OUT.svg

Each panel, top to bottom: the run's numbers (with --compare, the measured speedup and the
passes' costs in plain decoding steps beside Eq. 6's c and the weight share the draft reads,
with the speedup they predict alone and with the selection time, and the break-even); the final
skip set as Self-SD's Fig. 6 draws a layer map (an attention row and an MLP row, one cell per
layer, skipped cells filled); the text, each token marked by origin (Leviathan et al.'s Fig. 1:
kept draft tokens green, a rejected draft token red and struck through, the full model's own
blue), put into words with the model folder's tokenizer.json when the trace has the rounds'
ids; ASD: each layer's C_l against the threshold alpha, and the layers each of its two rules
chose; the skip set over time (SWIFT and CLaSp: each set from the round it came into use;
Self-SD and the oracle: each search candidate with its objective as a bar from zero, and
whether the GP or random warm-up proposed it, in the first prompt's panel, since the search
runs before it); per round the drafted and accepted tokens (SWIFT's kept leaves marked); the exit threshold gamma beside each round's last draft
confidence, and, when gamma moves, gamma alone on its own range; SWIFT: each optimization
step's candidate and kept matchness, replacements marked; CLaSp: each DP's margin, whether it
changed the set, and how much consecutive sets overlap against random sets of those sizes; the
draft-length histogram and acceptance by draft position. Prompts, rounds, steps, DPs and
layers are counted from 0, as the trace counts them. Every panel is as tall as what it holds;
of more than MAX_ROWS sets, MAX_ROWS are drawn (rows_drawn: the first, a search's every new
best, the last).

Python 3 standard library only. A missing, malformed or out-of-limits trace (LIMITS below) is
one error line (with the line number) and exit status 1; -o follows selfspec's rule for its
outputs (OUTPUT_RULES below, README "Scope and limits"), and -o - writes to stdout.
"""
import argparse
import json
import math
import os
import re
import signal
import stat
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
# reading the trace, within stated limits (--help and README list them)

MAX_BYTES = 64 << 20     # a trace is read whole, at most this many bytes (/dev/zero is refused)
MAX_LAYERS = 512         # n_layers (the largest LLaMA has 126)
MAX_PROMPTS = 1000       # prompt panels
MAX_ROUNDS = 200000      # rounds, all prompts together
MAX_DRAFT = 1024         # tokens one round drafts
MAX_SEARCH = 100000      # search records
MAX_ELEMENTS = 1000000   # SVG elements the drawing may hold
MAX_DIGITS = 15          # digits of an integer (every count a trace holds is far below 10^15)
MAX_ABS = 1e12           # |objective| (sublayers or ms per token)
NUM = (int, float)


class BadNumber(ValueError):
    pass


def bad_constant(name):
    raise BadNumber("%s is not a number (JSON has no NaN or Infinity)" % name)


def float_of(s):
    v = float(s)
    if not math.isfinite(v):
        raise BadNumber("the number %s is out of range" % clip(s, 24))
    return v


def int_of(s):
    if len(s.lstrip("-")) > MAX_DIGITS:
        raise BadNumber("an integer of %d digits (at most %d)" % (len(s.lstrip("-")), MAX_DIGITS))
    return int(s)


def is_num(v):
    return isinstance(v, NUM) and not isinstance(v, bool)


# what a field must be: (kind, lo, hi, null allowed); numbers are checked against [lo, hi]
INT = lambda lo, hi: ("int", lo, hi, False)
NUM_IN = lambda lo, hi: ("num", lo, hi, True)
PROB = NUM_IN(0.0, 1.0)
FIELDS = {  # the fields each record type must have
    "header": {"method": ("str",), "n_layers": INT(1, MAX_LAYERS)},
    "search": {"i": INT(0, 10 ** MAX_DIGITS), "skip": ("skip",), "objective": NUM_IN(-MAX_ABS, MAX_ABS)},
    "search_done": {"skip": ("skip",)},
    "prefill": {"prompt": INT(0, 10 ** MAX_DIGITS)},
    "round": {"prompt": INT(0, 10 ** MAX_DIGITS), "skip": ("skip",), "drafted": INT(0, MAX_DRAFT),
              "accepted": INT(0, MAX_DRAFT), "conf": ("list", PROB), "gamma_before": PROB},
    "summary": {"prompt": INT(0, 10 ** MAX_DIGITS)},
}
OPTIONAL = {  # fields drawn when present, checked when present; other keys are ignored
    "prefill": {"asd_cos": ("list", NUM_IN(-1.0, 1.0)), "asd_skip": ("skip",)},
    "summary": {"skip": ("skip",), "draft_lengths": ("list", INT(0, MAX_ROUNDS)),
                "accept_by_position": ("list", PROB)},
    "swift": {"candidate": ("skip",), "matchness": PROB, "kept_matchness": PROB, "replaced": ("bool",)},
    "clasp": {"skip": ("skip",), "margin": NUM_IN(0.0, 2.0)},  # |cos - cos|
    "params": {"cos_threshold": NUM_IN(-1.0, 1.0), "every_m": INT(1, MAX_LAYERS),
               "keep_last_n": INT(0, MAX_LAYERS)},
}


def check_value(v, spec, what, L):
    """None, or why v is not what spec says (a skip set is parsed for L layers)."""
    kind = spec[0]
    if kind == "skip":
        if not isinstance(v, dict):
            return "is %s, want an object" % clip(json.dumps(v), 40)
        for part in ("attn", "mlp"):
            if part not in v:
                return 'has no "%s"' % part
            try:
                parse_set(v[part], L)
            except ValueError as e:
                return '"%s": %s' % (part, e)
        return None
    if kind == "list":
        if not isinstance(v, list):
            return "is %s, want an array" % clip(json.dumps(v), 40)
        for i, x in enumerate(v):
            why = check_value(x, spec[1], what, L)
            if why:
                return "element %d %s" % (i, why)
        return None
    if v is None and kind in ("int", "num") and spec[3]:
        return None
    ok = {"str": isinstance(v, str), "bool": isinstance(v, bool), "int": isinstance(v, int) and not isinstance(v, bool),
          "num": is_num(v)}[kind]
    if not ok:
        return "is %s, want %s" % (clip(json.dumps(v), 40), {"str": "a string", "bool": "true or false",
                                                             "int": "an integer", "num": "a number"}[kind]
                                   + (" or null" if len(spec) > 3 and spec[3] else ""))
    if kind in ("int", "num") and not spec[1] <= v <= spec[2]:
        return "is %s, out of its range %s to %s" % (clip(repr(v), 24), spec[1], spec[2])
    return None


def check_fields(rec, fields, name, where, L, required):
    for key, spec in fields.items():
        if key not in rec:
            if required:
                raise TraceError('%s: a %s record without "%s"' % (where, name, key))
            continue
        why = check_value(rec[key], spec, key, L)
        if why:
            raise TraceError('%s: %s "%s" %s' % (where, name, key, why))


def check_record(rec, where, L):
    """The record's type, its fields checked (L: the header's n_layers; None for the header)."""
    kind = rec.get("type")
    if not isinstance(kind, str):
        raise TraceError('%s: no "type" (every line is an object with a "type")' % where)
    check_fields(rec, FIELDS.get(kind, {}), kind, where, L or MAX_LAYERS, True)
    check_fields(rec, OPTIONAL.get(kind, {}), kind, where, L or MAX_LAYERS, False)
    if kind == "header" and isinstance(rec.get("params"), dict):
        check_fields(rec["params"], OPTIONAL["params"], "header params", where, MAX_LAYERS, False)
    if kind == "round":
        if rec["accepted"] > rec["drafted"]:
            raise TraceError("%s: round: %d accepted of %d drafted" % (where, rec["accepted"], rec["drafted"]))
        event = rec.get("event")
        for method in ("swift", "clasp"):
            if isinstance(event, dict) and isinstance(event.get(method), dict):
                check_fields(event[method], OPTIONAL[method], "round event " + method, where, L, False)
    if kind == "prefill" and isinstance(rec.get("asd_cos"), list) and len(rec["asd_cos"]) != L:
        raise TraceError('%s: prefill "asd_cos" holds %d values, the model has %d layers'
                         % (where, len(rec["asd_cos"]), L))
    return kind


def read_bytes(path):
    """The file whole: at most MAX_BYTES, so that one that never ends (/dev/zero) is refused."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISREG(st.st_mode) and st.st_size > MAX_BYTES:
                raise TraceError("%s: %d bytes, more than a trace may hold (%d MiB)" % (path, st.st_size, MAX_BYTES >> 20))
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise TraceError("%s: cannot read: %s" % (path, e.strerror or e))
    if len(data) > MAX_BYTES:
        raise TraceError("%s: more than %d MiB without an end (a trace is a file of at most %d MiB)"
                         % (path, MAX_BYTES >> 20, MAX_BYTES >> 20))
    return data


def parse_line(raw, where):
    try:
        rec = json.loads(raw.decode("utf-8"), parse_constant=bad_constant, parse_float=float_of,
                         parse_int=int_of)
    except UnicodeDecodeError as e:
        raise TraceError("%s: not UTF-8 (byte %d)" % (where, e.start + 1))
    except BadNumber as e:
        raise TraceError("%s: %s" % (where, e))
    except RecursionError:
        raise TraceError("%s: nested too deeply to be a trace record" % where)
    except ValueError as e:
        raise TraceError("%s: not JSON: %s" % (where, e))
    if not isinstance(rec, dict):
        raise TraceError("%s: not a JSON object" % where)
    return rec


def read_trace(path):
    """The trace's records in order, checked; raises TraceError naming the file and line."""
    records, L, prompts, counts = [], None, set(), {"round": 0, "search": 0}
    limits = {"round": MAX_ROUNDS, "search": MAX_SEARCH}
    for no, raw in enumerate(read_bytes(path).split(b"\n"), 1):
        if not raw.strip():
            continue
        where = "%s:%d" % (path, no)
        rec = parse_line(raw, where)
        kind = check_record(rec, where, L)
        if not records and kind != "header":
            raise TraceError('%s: the first record is "%s", want the header' % (where, kind))
        if kind == "header" and records:
            raise TraceError("%s: a second header (one trace per file)" % where)
        if kind == "header":
            L = rec["n_layers"]
            if isinstance(rec.get("skip"), dict) and check_value(rec["skip"], ("skip",), "skip", L):
                raise TraceError('%s: header "skip" %s' % (where, check_value(rec["skip"], ("skip",), "skip", L)))
        if kind in counts:
            counts[kind] += 1
            if counts[kind] > limits[kind]:
                raise TraceError("%s: more than %d %s records (the limit)" % (where, limits[kind], kind))
        if isinstance(rec.get("prompt"), int) and kind in ("prefill", "round", "summary"):
            prompts.add(rec["prompt"])
            if len(prompts) > MAX_PROMPTS:
                raise TraceError("%s: more than %d prompts (the limit)" % (where, MAX_PROMPTS))
        records.append(rec)
    if not records:
        raise TraceError("%s: empty: no header line" % path)
    return records


def parse_set(s, L):
    """The layers a skip set names, in any spelling the trace uses: an array of layer indices
    ([1, 3, 5]), --skip's list ("1,3,5-7") or --json's map ("..X.X", one character per layer)."""
    if isinstance(s, list):
        for l in s:
            if not isinstance(l, int) or isinstance(l, bool):
                raise ValueError("%s is not a layer index" % clip(json.dumps(l), 20))
            if not 0 <= l < L:
                raise ValueError("layer %d out of range for %d layers" % (l, L))
        return set(s)
    if not isinstance(s, str):
        raise ValueError("is %s, want a layer list" % clip(json.dumps(s), 20))
    if s and set(s) <= {"X", "."}:
        if len(s) != L:
            raise ValueError("a map of %d layers, the model has %d" % (len(s), L))
        return {l for l, c in enumerate(s) if c == "X"}
    layers = set()
    for part in filter(None, s.replace(" ", "").split(",")):
        lo, _, hi = part.partition("-")
        if not (lo.isdigit() and lo.isascii()) or (hi and not (hi.isdigit() and hi.isascii())) or len(part) > 12:
            raise ValueError("%s is not a layer list" % clip(part, 20))
        lo, hi = int(lo), int(hi or lo)
        if lo > hi:
            raise ValueError("a reversed range %d-%d" % (lo, hi))
        if hi >= L:
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
    return fmt % v if is_num(v) and math.isfinite(v) else "?"


class Svg:
    def __init__(self, L):
        self.L = L
        self.cw = 16.0 if L <= 40 else 640.0 / L
        self.width = max(860.0, X0 + L * self.cw + 200)
        self.out = []
        self.elements = 0

    def add(self, s):
        self.elements += s.count("<") - s.count("</")
        if self.elements > MAX_ELEMENTS:
            raise TraceError("the drawing would hold more than %d elements (the limit): draw fewer "
                             "prompts or rounds" % MAX_ELEMENTS)
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
    title = "prompt %d" % (no - 1)  # the trace's index, from 0
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
    if "measured_speedup" in s:
        svg.text(12, line, "speedup measured %sx (%s vs %s tokens/s plain, --compare); SWIFT Eq. 6 expects %sx"
                 % (num(s["measured_speedup"]), num(s.get("tokens_per_s"), "%.0f"), num(s.get("plain_tokens_per_s"), "%.0f"),
                    num(s.get("expected_speedup"))))
    elif "expected_speedup" in s:
        svg.text(12, line, "SWIFT Eq. 6 expects %sx (a measured speedup needs --compare)"
                 % num(s["expected_speedup"]))
    else:
        line -= 16
    if "measured_draft_pass_steps" in s and rounds:
        # Eq. 6's draft cost 1 - r, r over the draft tokens of the set each was drafted with
        sk = sum(r["drafted"] * sum(len(x) for x in skip_of(r["skip"], L)) for r in rounds)
        cost = 1 - sk / drafted / (2 * L) if drafted else 1 - n / (2 * L)
        line += 16
        share = "; the draft reads %s of the weights" % num(s["draft_weight_share"]) if is_num(s.get("draft_weight_share")) else ""
        svg.text(12, line, "in plain steps: a draft pass %s, a verify pass %s (Eq. 6 takes %.2f and 1%s): these "
                 "alone" % (num(s["measured_draft_pass_steps"]), num(s.get("measured_verify_pass_steps")), cost, share),
                 cls="costs", limit=150)
        line += 16
        svg.text(12, line, "predict %sx%s" % (num(s.get("measured_predicted_speedup")), with_selection(s)), cls="costs")
        if is_num(s.get("measured_break_even")):
            line += 16
            svg.text(12, line, "break-even at these costs: M %s, this run's M %s; its drafts kept whole would give %.2f"
                     % (num(s["measured_break_even"]), num(m), 1 + drafted / len(rounds)), cls="break-even", limit=150)
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


def with_selection(s):
    """", 0.13x with the selection time" as the engine's summary says it: the passes' prediction
    scaled by the passes' share of the passes plus the selection done while decoding (SWIFT's
    steps, CLaSp's DPs; a search before decoding is not in it)."""
    keys = ("measured_predicted_speedup", "draft_ms", "verify_ms", "select_ms", "search_ms")
    if not (isinstance(s.get("selections"), int) and s["selections"] > 0 and all(is_num(s.get(k)) for k in keys)):
        return ""
    passes, own = s["draft_ms"] + s["verify_ms"], s["select_ms"] - s["search_ms"]
    if not (passes > 0 and own >= 0 and math.isfinite(passes + own)):
        return ""
    return ", %sx with the selection time" % num(s["measured_predicted_speedup"] / ((passes + own) / passes))


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
    top = max([hi, 0]) or 1  # the bars start at zero: a bar twice as long is twice the cost
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
        label, (attn, mlp), objective = rows[i][:3]
        cells = "".join('<rect class="%s skipped" x="%.1f" y="%.2f" width="%.1f" height="%.2f" fill="%s"/>'
                        % (part, X0 + l * cw, yr + r * 0.45 * rh, cw, 0.45 * rh, FILL[part])
                        for r, (part, layers) in enumerate((("attn", attn), ("mlp", mlp))) for l in sorted(layers))
        svg.add('<g class="set">%s</g>' % cells)
        if k % 2 == 0 or rh >= 12 or new_best[i] or shown[k - 1] is None:  # every other, and these
            svg.text(X0 - 6, yr + rh / 2 + 3.5, label, size=9, anchor="end", cls="row-label")
        if search and isinstance(objective, NUM):  # the objective as a bar from zero, dark at a new best
            svg.add('<rect class="cost" x="%.1f" y="%.2f" width="%.2f" height="%.2f" fill="%s"/>'
                    % (cx + 8, yr + 0.05 * rh, 120 * max(objective, 0) / top, 0.9 * rh, "#555" if new_best[i] else "#ccc"))
        phase = rows[i][3] if len(rows[i]) > 3 else None
        if phase in ("gp", "random", "empty", "every"):  # how the set was proposed: GP filled, others hollow
            svg.add('<circle class="phase-%s" cx="%.1f" cy="%.2f" r="%.1f" fill="%s" stroke="#333" stroke-width="0.7"/>'
                    % (phase, cx + 4, yr + rh / 2, min(3.0, rh / 3), "#333" if phase == "gp" else "white"))
    yb = y0 + len(shown) * rh
    svg.add('<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888" stroke-width="0.5"/>'
            % (X0, y0, L * cw, yb - y0))
    if search and objectives:
        svg.text(X0, yb + 14, "%s %.4g to %.4g%s (bars from 0), lower is better; dark bar: a new best; best: %s (%.4g)"
                 % ("objective" if not unit else "cost", lo, hi, " " + unit if unit else "", best_row[0], best),
                 size=10, limit=150)
        yb += 14
        phases = [r[3] for r in rows if len(r) > 3]
        if "gp" in phases:
            svg.text(X0, yb + 14, "circle left of the bar: filled, the GP's proposal (UCB); hollow, random warm-up "
                     "(%d of %d) or the empty set" % (sum(1 for q in phases if q == "random"), len(phases)), size=10,
                     limit=150)
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
    svg.text(12, y + 14, "per round (counted from 0, as the trace's \u201cround\u201d): accepted (dark) of drafted "
             "(dark + light) tokens", bold=True)
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
        if r.get("leaf") is True and r["accepted"] > 0:  # SWIFT's tree kept a next-best token: the top one
            svg.add('<rect class="leaf" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#e07b24"/>'
                    % (x, yb - ha, 0.8 * bw, ch / longest))
    leaves = sum(1 for r in rounds if r.get("leaf") is True and r["accepted"] > 0)
    if leaves:
        svg.text(x0 + w + 8, y0 + 10, "orange: a kept leaf,", size=10)
        svg.text(x0 + w + 8, y0 + 24, "a next-best token", size=10)
        svg.text(x0 + w + 8, y0 + 38, "of SWIFT's tree (Sec. 4.2)", size=10)
        svg.text(x0 + w + 8, y0 + 52, "in %d of %d rounds" % (leaves, len(rounds)), size=10, cls="leaf-count")
    svg.text(x0, yb + 26, "round 0", size=10)
    svg.text(x0 + w, yb + 26, "round %d" % (len(rounds) - 1), size=10, anchor="end")
    labelled = -1e9  # tick labels at least 28 px apart
    for i in ticks:
        x = x0 + i * bw
        svg.add('<line class="set-tick" x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="#333"/>' % (x, yb, x, yb + 5))
        if x - labelled >= 28:
            svg.text(x, yb + 14, "r %d" % i, size=9, anchor="middle")
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
        if is_num(c):
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


def events(rounds, method):
    """(round index, event) for the rounds whose event holds this method's decision."""
    return [(i, r["event"][method]) for i, r in enumerate(rounds)
            if isinstance(r.get("event"), dict) and isinstance(r["event"].get(method), dict)]


def asd_panel(svg, y, pre, params, L):
    """ASD's C_l per layer against the threshold, and the set its two rules chose; the height."""
    cos, cw = pre["asd_cos"], PLOT_W / L  # its own columns, wider than the map's
    thr = params.get("cos_threshold") if is_num(params.get("cos_threshold")) else None
    m = params.get("every_m") if isinstance(params.get("every_m"), int) else None
    n = params.get("keep_last_n") if isinstance(params.get("keep_last_n"), int) else None
    vals = [c for c in cos if c is not None] + ([thr] if thr is not None else [])
    lo, hi = (max(-1.0, math.floor(min(vals) * 20) / 20) if vals else 0.0), 1.0
    lo = min(lo, hi - 0.05)
    svg.text(12, y + 14, "ASD's rule (Sec. 3.2, Alg. 1): each layer's C_l against the threshold \u03b1", bold=True)
    svg.text(12, y + 28, "C_l: the cosine of attention's input and output, averaged over the prompt (dots; filled: "
             "C_l \u2265 \u03b1)", size=10, limit=150)
    y0, ph, right = y + 40, 80, X0 + L * cw
    yv = lambda v: y0 + ph - ph * (v - lo) / (hi - lo)
    if n:  # the last n layers, which neither rule may skip
        svg.add('<rect class="asd-last-n" x="%.2f" y="%.1f" width="%.2f" height="%d" fill="#eee"/>'
                % (X0 + (L - min(n, L)) * cw, y0, min(n, L) * cw, ph))
    svg.frame(X0, y0, L * cw, ph, "%.2f" % lo, "1")
    if thr is not None:
        svg.add('<line class="asd-threshold" x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#c0392b" '
                'stroke-width="1.5"/>' % (X0, yv(thr), right, yv(thr)))
        svg.text(right + 6, yv(thr) + 4, "ASD's \u03b1 = %.4g" % thr, size=10)
    for l, c in enumerate(cos):
        if c is not None:
            on = thr is not None and c >= thr
            svg.add('<circle class="asd-cos%s" cx="%.2f" cy="%.2f" r="2.5" fill="%s" stroke="#333"/>'
                    % (" above" if on else "", X0 + (l + 0.5) * cw, yv(c), "#333" if on else "white"))
            if cw >= 36:  # room for the value
                svg.text(X0 + (l + 0.5) * cw, max(yv(c) - 5, y0 + 8) if yv(c) > y0 + 20 else yv(c) + 13,
                         "%.4f" % c, size=8, anchor="middle", cls="asd-value")
    for l in range(L):
        if cw >= 12 or l % 5 == 0:
            svg.text(X0 + (l + 0.5) * cw, y0 + ph + 10, str(l), size=9, anchor="middle")
    ym = y0 + ph + 16
    chosen = skip_of(pre["asd_skip"], L) if isinstance(pre.get("asd_skip"), dict) else None
    if chosen is None:
        return ym - y + 4
    last = L - (n or 0)
    for r, part in enumerate(("attn", "mlp")):
        for l in range(L):
            on = l in chosen[r]
            why = [w for w, ok in (("\u03b1", r == 0 and thr is not None and cos[l] is not None and cos[l] >= thr),
                                   ("m", m is not None and (l + 1) % m == 0)) if ok and l < last] if on else []
            svg.add('<rect class="asd-chosen %s%s%s" x="%.2f" y="%.1f" width="%.2f" height="14" fill="%s" '
                    'stroke="#888" stroke-width="0.5"/>' % (part, " skipped" if on else "",
                                                         "".join(" by-cos" if w != "m" else " by-m" for w in why),
                                                         X0 + l * cw, ym + r * 16, cw, FILL[part] if on else "white"))
            if why and cw >= 12:
                svg.text(X0 + (l + 0.5) * cw, ym + r * 16 + 11, "".join(why), size=9, anchor="middle", cls="asd-why")
    svg.text(X0 - 6, ym + 11, "attn", anchor="end")
    svg.text(X0 - 6, ym + 27, "mlp", anchor="end")
    rule = []
    if thr is not None:
        rule.append("\u03b1: attention where C_l \u2265 %.4g" % thr)
    if m is not None:
        rule.append("m: attention and MLP of every m-th layer, m = %d (indices %d, %d, \u2026)" % (m, m - 1, 2 * m - 1))
    if n is not None:
        rule.append("grey: the last %d, never" % n)
    svg.text(X0, ym + 46, "the set ASD chose for this prompt (prefill's asd_skip), layers from 0:", size=10)
    svg.text(X0, ym + 60, "; ".join(rule), size=10, limit=150)
    return ym + 60 + 12 - y


def swift_panel(svg, y, rounds):
    """SWIFT's steps: each candidate's matchness against the kept set's, replacements marked, and
    App. C.2's restarts (a round's event.restart) as a dashed line before the next step."""
    steps = events(rounds, "swift")
    if not steps:
        return 0
    restart_rounds = [i for i, _ in events(rounds, "restart")]
    svg.text(12, y + 14, "SWIFT's optimization steps (Sec. 4.1.2, Eq. 3-4): each candidate's matchness against the kept set's",
             bold=True)
    svg.text(12, y + 28, "circles: the candidate's; line: the kept set's; \u25b2: the candidate replaced it",
             size=10)
    x0, w, y0, ph = X0, PLOT_W, y + 40, 80
    svg.frame(x0, y0, w, ph, "0", "1")
    sw = w / len(steps)
    yv = lambda v: y0 + ph - ph * v
    runs = [[]]
    for k, (i, ev) in enumerate(steps):
        x = x0 + (k + 0.5) * sw
        kept, cand = ev.get("kept_matchness"), ev.get("matchness")
        if any(steps[k - 1][0] <= j < i if k else j < i for j in restart_rounds):
            runs.append([])
            svg.add('<line class="swift-restart" x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="#888" '
                    'stroke-dasharray="3,2"/>' % (x - sw / 2, y0, x - sw / 2, y0 + ph))
        if is_num(kept):
            runs[-1].append((x, yv(kept)))
        else:
            runs.append([])
        if is_num(cand):
            svg.add('<circle class="swift-candidate" cx="%.2f" cy="%.2f" r="2.5" fill="white" stroke="#e07b24"/>'
                    % (x, yv(cand)))
            if ev.get("replaced") is True:
                svg.add('<polygon class="swift-replaced" points="%.2f,%.2f %.2f,%.2f %.2f,%.2f" fill="#2a8a3e"/>'
                        % (x - 4, yv(cand) - 5, x + 4, yv(cand) - 5, x, yv(cand) - 12))
    for run in filter(None, runs):
        svg.add('<polyline class="swift-kept" fill="none" stroke="#333" stroke-width="1.5" points="%s"/>'
                % " ".join("%.2f,%.2f" % p for p in (run if len(run) > 1 else [(run[0][0] - 2, run[0][1]),
                                                                                  (run[0][0] + 2, run[0][1])])))
    replaced = sum(1 for _, ev in steps if ev.get("replaced") is True)
    restarts = len(restart_rounds)
    svg.text(x0, y0 + ph + 14, "step 0 (before round %d)" % steps[0][0], size=10)
    svg.text(x0 + w, y0 + ph + 14, "step %d (before round %d)" % (len(steps) - 1, steps[-1][0]), size=10, anchor="end")
    svg.text(x0, y0 + ph + 30, "%d steps, %d replaced the set%s; matchness: the share of the window's tokens the "
             "draft with that set predicts, 0 to 1" % (len(steps), replaced,
                                                       ", %d restarts (dashed)" % restarts if restarts else ""),
             size=10, limit=160)
    return y0 + ph + 30 + 12 - y


def jaccard(a, b):
    """|a & b| / |a | b| over sublayers (1 for two empty sets), and the sizes of a and b."""
    A = {(0, l) for l in a[0]} | {(1, l) for l in a[1]}
    B = {(0, l) for l in b[0]} | {(1, l) for l in b[1]}
    return len(A & B) / len(A | B) if A | B else 1.0, len(A), len(B)


def random_jaccard(a, b, L):
    """The mean Jaccard overlap of two sets drawn at random with the sizes of a and b: over whole
    layers when each skips whole layers (CLaSp's; the engine's random_overlap), else over the 2L
    sublayers. The intersection i is hypergeometric: P(i) = C(m, i) C(n - m, k - i) / C(n, k)."""
    whole = a[0] == a[1] and b[0] == b[1]
    n, m, k = (L, len(a[0]), len(b[0])) if whole else (2 * L, len(a[0]) + len(a[1]), len(b[0]) + len(b[1]))
    if m + k == 0:
        return 1.0
    return sum(math.comb(m, i) * math.comb(n - m, k - i) / math.comb(n, k) * i / (m + k - i)
               for i in range(max(0, m + k - n), min(m, k) + 1))


def clasp_panel(svg, y, rounds, L):
    """CLaSp's DPs: each one's margin (its closest decision) and whether it changed the set."""
    dps = events(rounds, "clasp")
    if not dps:
        return 0
    svg.text(12, y + 14, "CLaSp's DPs (Alg. 1): each DP's margin, and whether it changed the set", bold=True)
    svg.text(12, y + 28, "margin: its closest skip-or-run decision, |cos(skip) \u2212 cos(run)|, on a log scale; "
             "filled square: the set changed", size=10, limit=150)
    x0, w, y0, ph = X0, PLOT_W, y + 40, 70
    margins = [ev.get("margin") for _, ev in dps]
    pos = [v for v in margins if is_num(v) and v > 0]
    e_lo = math.floor(math.log10(min(pos))) if pos else -4
    e_hi = max(e_lo + 1, math.ceil(math.log10(max(pos)))) if pos else 0
    svg.frame(x0, y0, w, ph, "1e%d" % e_lo, "1e%d" % e_hi)
    bw = w / len(dps)
    yj, jh = y0 + ph + 70, 50
    overlap, random_overlap, changed, last = [], [], 0, None
    for k, (i, ev) in enumerate(dps):
        x = x0 + k * bw
        v = ev.get("margin")
        if is_num(v) and v > 0:
            h = ph * (math.log10(v) - e_lo) / (e_hi - e_lo)
            svg.add('<rect class="clasp-margin" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#7d5ba6"/>'
                    % (x + 0.1 * bw, y0 + ph - h, 0.8 * bw, h))
        if not isinstance(ev.get("skip"), dict):
            continue
        new, old = skip_of(ev["skip"], L), skip_of(rounds[i]["skip"], L)
        changed += new != old
        svg.add('<rect class="%s" x="%.2f" y="%.1f" width="%.2f" height="%.2f" fill="%s" stroke="#333" '
                'stroke-width="0.5"/>' % ("clasp-changed" if new != old else "clasp-kept", x + 0.5 * bw - min(4, bw * 0.4),
                                          y0 + ph + 4, 2 * min(4, bw * 0.4), 2 * min(4, bw * 0.4),
                                          "#333" if new != old else "white"))
        last, prev = new, last  # each DP's set against the last DP's (the summary's dp_overlap)
        if prev is None:
            continue
        overlap.append((x + 0.5 * bw, jaccard(new, prev)[0]))
        random_overlap.append((x + 0.5 * bw, random_jaccard(new, prev, L)))
    svg.text(x0, y0 + ph + 26, "DP 0 (after round %d)" % dps[0][0], size=10)
    svg.text(x0 + w, y0 + ph + 26, "DP %d (after round %d)" % (len(dps) - 1, dps[-1][0]), size=10, anchor="end")
    if not overlap:
        return y0 + ph + 26 + 12 - y
    mean = sum(j for _, j in overlap) / len(overlap)
    rmean = sum(j for _, j in random_overlap) / len(random_overlap)
    svg.text(12, yj - 22, "each DP's set against the one before it: how much they overlap", bold=True)
    svg.text(12, yj - 8, "Jaccard (line) against two random sets of those sizes (dashed); means %.2f and %.2f over %d "
             "pairs; %d of %d DPs changed the set" % (mean, rmean, len(overlap), changed, len(dps)), size=10, limit=150)
    svg.frame(x0, yj, w, jh, "0", "1")
    for cls, pts, dash in (("clasp-overlap", overlap, ""), ("clasp-random", random_overlap, ' stroke-dasharray="4,3"')):
        pts = pts if len(pts) > 1 else [(pts[0][0] - 2, pts[0][1]), (pts[0][0] + 2, pts[0][1])]
        svg.add('<polyline class="%s" fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>'
                % (cls, "#7d5ba6" if cls == "clasp-overlap" else "#999", dash,
                   " ".join("%.2f,%.2f" % (px, yj + jh - jh * v) for px, v in pts)))
    return yj + jh + 12 - y


# ----------------------------------------------------------------------------
# the text by origin: the model folder's tokenizer.json puts the trace's ids into words

MAX_TOKENIZER = 64 << 20  # bytes of a tokenizer.json read


def read_decoder(model):
    """id -> the bytes that token adds to the text, and whether the text's first space is
    stripped, from model/tokenizer.json; None when it cannot be read or its decoder is neither
    byte-level BPE nor SentencePiece-style (the two families the engine decodes)."""
    try:
        with open(os.path.join(model, "tokenizer.json"), "rb") as f:
            t = json.loads(f.read(MAX_TOKENIZER).decode("utf-8"))
        vocab = dict(t["model"]["vocab"])
        specials = {a["id"] for a in t.get("added_tokens", []) if a.get("special")}
        vocab.update({a["content"]: a["id"] for a in t.get("added_tokens", [])})
        dec = t.get("decoder") or {}
        kinds = [d.get("type") for d in dec.get("decoders", [dec])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if "ByteLevel" in kinds:  # GPT-2's bytes_to_unicode, inverted
        bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
        cs = bs + [256 + n for n in range(256 - len(bs))]
        bs = bs + [b for b in range(256) if b not in bs]
        byte_of = {chr(c): b for b, c in zip(bs, cs)}
        piece = lambda p: bytes(byte_of[c] for c in p) if all(c in byte_of for c in p) else p.encode()
    elif "Replace" in kinds or "Metaspace" in kinds:  # \u2581 for a space, <0xNN> for a byte
        piece = lambda p: bytes([int(p[3:5], 16)]) if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", p) else \
            p.replace("\u2581", " ").encode()
    else:
        return None
    table = {i: b"" if i in specials else piece(p) for p, i in vocab.items() if isinstance(i, int)}
    names = {i: p for p, i in vocab.items() if i in specials}  # a special token shows its name
    return table, "Strip" in kinds or "Metaspace" in kinds, names


def token_texts(decoder, ids):
    """Each token's text in the stream of ids, decoded incrementally as the engine streams it
    (a character split over tokens comes with the one that completes it)."""
    import codecs
    table, strip, _ = decoder
    inc, out, start = codecs.getincrementaldecoder("utf-8")("replace"), [], True
    for i in ids:
        text = inc.decode(table.get(i, b""))
        if start and text:
            text, start = text[1:] if strip and text[0] == " " else text, False
        out.append(text)
    out[-1:] = [out[-1] + inc.decode(b"", final=True)] if out else []
    return out


def tokens_by_origin(p):
    """[(text, origin)] of a prompt's panel: the prompt, the prefill's token and each round's full
    model token ("own"), each round's kept draft tokens ("kept"), its rejected one ("rejected",
    drawn struck through, not part of the text); None when the trace lacks the ids."""
    pre, s, rounds = p["prefill"] or {}, p["summary"] or {}, p["rounds"]
    if not (isinstance(pre.get("ids"), list) and isinstance(s.get("tokens"), list) and s["tokens"]
            and all(isinstance(r.get("ids"), list) and "token" in r for r in rounds)):
        return None
    seq = [(i, "prompt") for i in pre["ids"]] + [(t, "own") for t in s["tokens"][:1 if rounds else None]]
    for r in rounds:  # (plain decoding has none: every token is the full model's)
        seq += [(i, "kept") for i in r["ids"][:r["accepted"]]]
        if r.get("rejected") is not None and not r.get("leaf"):
            seq.append((r["rejected"], "rejected"))
        seq.append((r["token"], "own"))
    return seq


def text_panel(svg, y, p, decoder):
    """The prompt's text with each token marked by origin, as Leviathan et al.'s Fig. 1 draws
    speculative decoding: kept draft tokens green, a rejected draft token red and struck through,
    the full model's own tokens (corrections and bonuses) blue; the height used."""
    seq = tokens_by_origin(p)
    if seq is None or decoder is None:
        return 0
    stream = [(i, o) for i, o in seq if o != "rejected"]
    texts = dict(zip(range(len(stream)), token_texts(decoder, [i for i, _ in stream])))
    s, n_prompt = p["summary"] or {}, sum(1 for _, o in seq if o == "prompt")
    if isinstance(s.get("text"), str) and "".join(texts[k] for k in range(n_prompt, len(stream))) != s["text"]:
        svg.text(12, y + 14, "the text by origin is not drawn: the trace's ids, decoded with %s/tokenizer.json, are "
                 "not its summary's text" % clip(svg.model, 60), cls="no-text", limit=170)
        return 20
    rejected = {}  # the rejected draft token before the k-th token of the stream
    k, pieces = 0, []
    for i, o in seq:
        if o == "rejected":  # alone, as a token inside the text (a special token: its name)
            pieces.append((token_texts(decoder, [i, i])[1] or decoder[2].get(i, "?"), o))
        else:
            pieces.append((texts[k], o))
            k += 1
    svg.text(12, y + 14, "the text: green, draft tokens the full model kept; red, struck, one it rejected; blue, "
             "its own tokens (Leviathan et al.'s Fig. 1)", bold=True, limit=150)
    width, cw, lh = int((svg.width - 24) / 6.6), 6.6, 15
    colours = {"prompt": "#888", "kept": "#2a8a3e", "rejected": "#c0392b", "own": "#2c5b9e"}
    lines, line, col = [], [], 0
    for text, o in pieces:  # greedy wrapping at a token's end, a line break at a newline
        for part in text.split("\n")[:-1]:
            line.append((part, o))
            lines.append(line)
            line, col = [], 0
        text = text.split("\n")[-1]
        if col + len(text) > width and line:
            lines.append(line)
            line, col = [], 0
        line.append((text, o))
        col += len(text)
    lines.append(line)
    for n, ln in enumerate(lines):
        spans = "".join('<tspan class="tok-%s" fill="%s"%s>%s</tspan>'
                        % (o, colours[o], ' text-decoration="line-through"' if o == "rejected" else "",
                           esc(t, 10 ** 6)) for t, o in ln if t)
        svg.add('<text x="12" y="%.1f" font-family="DejaVu Sans Mono, monospace" font-size="11" xml:space="preserve">'
                '%s</text>' % (y + 32 + n * lh, spans))
    return 32 + len(lines) * lh + 10 - 14


def draft_stats(rounds, summary, where):
    """The draft-length histogram (element i: rounds that drafted i tokens) and acceptance by
    position (element i: of the rounds whose draft reached position i + 1, the share that kept
    it; None where none reached it), from the rounds; checked against the summary's own when it
    has them."""
    longest = max([0] + [r["drafted"] for r in rounds])
    lengths = [0] * (longest + 1)
    for r in rounds:
        lengths[r["drafted"]] += 1
    reached = [sum(1 for r in rounds if r["drafted"] > i) for i in range(longest)]
    kept = [sum(1 for r in rounds if r["accepted"] > i) for i in range(longest)]
    shares = [k / n if n else None for k, n in zip(kept, reached)]
    s = summary or {}
    if isinstance(s.get("draft_lengths"), list):
        theirs = list(s["draft_lengths"])
        while theirs and theirs[-1] == 0 and len(theirs) > len(lengths):
            theirs.pop()
        if theirs != lengths:
            raise TraceError("%s: the summary's draft_lengths %s, its rounds give %s"
                             % (where, clip(json.dumps(s["draft_lengths"]), 40), clip(json.dumps(lengths), 40)))
    if isinstance(s.get("accept_by_position"), list):
        theirs = s["accept_by_position"]
        bad = len(theirs) < len(shares) or any(
            (v is None and t not in (None, 0)) or (v is not None and (t is None or abs(t - v) > 5e-4))
            for t, v in zip(theirs, shares)) or any(t not in (None, 0) for t in theirs[len(shares):])
        if bad:
            raise TraceError("%s: the summary's accept_by_position %s, its rounds give %s"
                             % (where, clip(json.dumps(theirs), 40),
                                clip(json.dumps([None if v is None else round(v, 4) for v in shares]), 40)))
    return lengths, shares, kept, reached


def drafts_panel(svg, y, rounds, summary, where):
    """The draft-length histogram beside acceptance by draft position; the height."""
    if not rounds:
        return 0
    lengths, shares, kept, reached = draft_stats(rounds, summary, where)
    svg.text(12, y + 14, "the drafts: how long each round's draft was, and how far the verification kept it",
             bold=True)
    svg.text(12, y + 28, "counted from this prompt's rounds: what the summary's draft_lengths and "
             "accept_by_position hold", size=10)
    y0, ph, w = y + 54, 60, PLOT_W / 2 - 30
    top = max(lengths)
    svg.text(X0, y0 - 6, "rounds that drafted 0, 1, 2, \u2026 tokens", size=10)
    svg.frame(X0, y0, w, ph, "0", "")
    svg.text(X0 - 4, y0 + 0.15 * ph + 9, str(top), size=10, anchor="end")
    bw = w / len(lengths)
    for i, c in enumerate(lengths):
        h = 0.85 * ph * c / top if top else 0  # room above for the count
        svg.add('<rect class="draft-length" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2c5b9e"/>'
                % (X0 + (i + 0.1) * bw, y0 + ph - h, 0.8 * bw, h))
        if len(lengths) <= 26 or i in (0, len(lengths) - 1):
            svg.text(X0 + (i + 0.5) * bw, y0 + ph + 12, str(i), size=9, anchor="middle")
            if c:
                svg.text(X0 + (i + 0.5) * bw, y0 + ph - h - 2, str(c), size=9, anchor="middle", cls="count")
    x1 = X0 + w + 60
    svg.text(x1, y0 - 6, "of the rounds whose draft reached position i, the share kept", size=10)
    svg.frame(x1, y0, w, ph, "0", "")
    svg.text(x1 - 4, y0 + 0.15 * ph + 9, "1", size=10, anchor="end")
    if shares:
        bw = w / len(shares)
        for i, v in enumerate(shares):
            h = 0.85 * ph * (v or 0)  # room above for the count
            svg.add('<rect class="accept-position" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="#2a8a3e"/>'
                    % (x1 + (i + 0.1) * bw, y0 + ph - h, 0.8 * bw, h))
            if len(shares) <= 12 or i in (0, len(shares) - 1):
                svg.text(x1 + (i + 0.5) * bw, y0 + ph + 12, str(i + 1), size=9, anchor="middle")
                svg.text(x1 + (i + 0.5) * bw, y0 + ph - h - 2, "%d/%d" % (kept[i], reached[i]), size=9,
                         anchor="middle", cls="count")
    else:
        svg.text(x1 + w / 2, y0 + ph / 2, "no round drafted", anchor="middle")
    return y0 + ph + 12 + 10 - y


def search_panel(svg, y, search, method, L, unit):
    """A search's candidates, one row each with its objective (Self-SD's, or test/bench/oracle's)."""
    rows = [("it %d" % s["i"], skip_of(s["skip"], L), s["objective"], s.get("phase")) for s in search]
    name = "Self-SD's search (Sec. 3.3)" if method == "selfsd" else "the oracle's search"
    return set_rows(svg, y, "%s: one row per candidate set, top to bottom; its objective at the right"
                    % name, rows, True, unit)


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
    decoder = read_decoder(model) if isinstance(model, str) else None
    svg.model = model
    prompts = prompts_of(records)
    for no, p in enumerate(prompts, 1):
        rounds = p["rounds"]
        svg.add('<g class="prompt">')
        y += header(svg, y, no, method, model, p, rounds)
        y += text_panel(svg, y, p, decoder)
        svg.add('<g class="series">')
        ticks = []
        if isinstance((p["prefill"] or {}).get("asd_cos"), list):
            y += asd_panel(svg, y, p["prefill"], params, L)
        if search and no == 1:
            y += search_panel(svg, y, search, method, L, unit)
        elif method in CHANGING and rounds:
            rows, last = [], None
            for i, r in enumerate(rounds):
                s = skip_of(r["skip"], L)
                if s != last:
                    rows.append(("r %d" % i, s, None))
                    ticks.append(i)
                    last = s
            y += set_rows(svg, y, "the skip set over time: one row per set, from round r on (ticks below the "
                          "rounds)", rows, False, "")
        y += rounds_plot(svg, y, rounds, ticks, exit_mode, method)
        y += swift_panel(svg, y, rounds)
        y += clasp_panel(svg, y, rounds, L)
        y += drafts_panel(svg, y, rounds, p["summary"], "prompt %d" % (no - 1))
        svg.add("</g></g>")
    if search and not prompts:  # a search alone (test/bench/oracle --trace)
        y += search_panel(svg, y, search, method, L, unit)
    if y == 0:  # a header alone: no prompt ran
        svg.text(12, 24, "%s | method %s: the trace holds no prompt" % (model, method))
        y = 40
    out = "\n".join(svg.out)
    bad = re.search(r'\s(?:x|y|x1|x2|y1|y2|cx|cy|r|width|height|points)="[^"]*(?:nan|inf)', out)
    if bad:  # every number reaching a coordinate was checked on reading: this is a bug here
        raise TraceError("a coordinate that is not a number (%s): a bug in draw_trace.py" % bad.group(0)[:40])
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" '
            'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">\n'
            '<rect class="background" width="100%%" height="100%%" fill="white"/>\n%s\n</svg>\n'
            % (svg.width, y, svg.width, y, out))


# ----------------------------------------------------------------------------
# the output, by selfspec's rule for its outputs (README "Scope and limits", item 4)

def check_output(path, trace):
    """-o before anything is read: the input trace itself is refused, however it is reached."""
    try:
        if path != "-" and os.path.samefile(path, trace):
            raise TraceError("-o %s: is the input trace; writing it would replace it" % path)
    except OSError:
        pass  # -o does not exist yet (or the trace does not: read_trace says so)


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def write_output(path, text):
    """-o -: stdout. A device or FIFO (/dev/null, a link to /dev/stdout): in place. Else a temporary
    file beside the file the path names (through a symlink: beside its target), renamed over it, so
    it is the old file or the whole new one; Ctrl-C or SIGTERM (main) leaves no temporary file."""
    data = text.encode("utf-8")
    try:
        if path == "-" or (os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode)):
            fd = 1 if path == "-" else os.open(path, os.O_WRONLY | os.O_TRUNC)
            write_all(fd, data)
            if fd != 1:
                os.close(fd)
            return
        if os.path.islink(path) and not os.path.exists(path):
            raise TraceError("-o %s: a symbolic link to nothing (give its target)" % path)
        target = os.path.realpath(path) if os.path.exists(path) else path
        fd, tmp = tempfile.mkstemp(prefix=".selfspec-", dir=os.path.dirname(target) or ".")
    except OSError as e:
        raise TraceError("-o %s: cannot write: %s" % (path, e.strerror or e))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # the mode a new file gets from a shell's >
        write_all(fd, data)
        os.close(fd)
        fd = None
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise TraceError("-o %s: cannot write: %s" % (path, e.strerror or e))
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            os.unlink(tmp)


LIMITS = ("Limits: a trace is a file of at most %d MiB (one that never ends, such as /dev/zero, is "
          "refused), of at most %d layers, %d prompts, %d rounds in all, %d search records and %d tokens "
          "drafted per round, with integers of at most %d digits and no NaN or Infinity; the drawing holds "
          "at most %d elements. Each is one error line and exit status 1."
          % (MAX_BYTES >> 20, MAX_LAYERS, MAX_PROMPTS, MAX_ROUNDS, MAX_SEARCH, MAX_DRAFT, MAX_DIGITS, MAX_ELEMENTS))
OUTPUT_RULES = ("-o - writes to stdout; a device or FIFO (/dev/null, a link to /dev/stdout) is written in place; "
                "any other file is written whole to a temporary file beside it (through a symlink: beside its target) "
                "and renamed over it, so it is the old file or the new one, also on Ctrl-C or SIGTERM; -o naming the "
                "trace itself is refused (README \"Scope and limits\").")


def main(argv):
    ap = argparse.ArgumentParser(description="Draw a selfspec --trace file as SVG (a panel per prompt).",
                                 epilog=LIMITS + " " + OUTPUT_RULES)
    ap.add_argument("trace", help="the JSON Lines file selfspec --trace wrote")
    ap.add_argument("-o", "--output", required=True, help="the SVG to write (-: stdout)")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))  # (write_output's finally)
    try:
        check_output(a.output, a.trace)  # before anything is read
        write_output(a.output, draw(read_trace(a.trace)))
    except TraceError as e:
        print("draw_trace.py: error: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: -o as it was, no temporary file left
        print("draw_trace.py: interrupted; %s left as it was" % a.output, file=sys.stderr)
        return 130
    if a.output != "-":
        print("wrote %s" % a.output, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
