#!/usr/bin/env python3
"""trace_diff.py: compares two `selfspec --trace` files field by field, each within its tolerance.

  python3 test/trace_diff.py A.jsonl B.jsonl [--tol FIELD=REL[,ABS]]... [--ignore FIELD]...

Records are matched in order (the Nth line of A with the Nth of B; lines end at "\\n" only);
within a record every key is compared, JSON values walked recursively, each number by the class
of the key that holds it (the classes below; a key in no class compares exactly). A record or
key in one file only is a difference; the order of keys within a record is not. A value that is
not finite (Infinity, -Infinity, NaN, a number beyond float range such as 1e400) equals only
itself: it differs from every finite value whatever the tolerance. FIELD in --tol and --ignore
is a key name (conf), a dotted path's end (summary.skip_ratio, params.skip_ratio) or a class
name (model32); --tol sets that field's relative tolerance, and its absolute one after a comma;
--ignore also takes a record type (search), whose records are dropped from both traces before
they are matched. Prints the first difference (record, its type, its prompt and round, the
field's path, both values and the tolerance exceeded; both arrays when their lengths differ) and
exits 1; exits 0 when the traces agree, 2 when a file or flag cannot be read (one line: a file
over 256 MiB, not UTF-8, a line that is not JSON or not a record, a header's params that is not
an object, an integer beyond 64 bits, a value nested deeper than 64, a string that is not
Unicode text such as a lone surrogate). Two values of different types are a difference.
Standard library only, so a porter needs nothing else.
"""
import json
import math
import re
import sys
import textwrap

# ----------------------------------------------------------------------------
# The tolerances: every field's class, and each class's (relative, absolute) tolerance. Two
# numbers agree when |a - b| <= max(abs, rel * max(|a|, |b|)); None: the field is not compared.
CLASSES = {
    # Measured, not computed: timings (any key ending in _ms or _per_s), `device` (the thread
    # count), --compare's ratios of two measured speeds, and any key whose name starts with
    # "measured" (issue 37 names --compare's so). They change from run to run on one machine
    # (README "The trace"), so no tolerance could hold them.
    "measured": None,
    # The exit threshold (gamma) and SWIFT's skip ratio: stepped by constants on decisions taken
    # from token counts (Eq. 3's eps, App. C.2's 0.05), but Self-SD Eq. 4 smooths gamma with a
    # multiply-add, which FMA contraction rounds once instead of twice: gamma drifts by a few
    # float32 ulps (at most 5.4e-7 over test/refs/traces/commands.txt's runs, as arith/ shows;
    # the smoothing keeps it bounded). 1e-5 is ~100 ulps, and 100 times below the 1e-3 that an
    # Eq. 3 decision going the other way moves gamma by ((1 - beta2) eps at the defaults), so
    # every differing decision is still caught.
    "stepped": (0.0, 1e-5),
    # float32 values the model computes: a draft token's top-1 probability, ASD's cosines. They
    # follow the order of the float32 sums (FMA contraction moved conf by 1.8e-6 relative in
    # arith/); 1e-4 is what the forward pass is held to against Hugging Face's float32 logits
    # (test_forward), the error a port on another framework brings.
    "model32": (1e-4, 0.0),
    # CLaSp's margin: a difference of two cosines near 1, so its relative error is the cosines'
    # absolute error over a small number (6.9e-4 relative, 3e-8 absolute in arith/): held
    # absolutely, 1e-5 being ~100 float32 ulps of a cosine. So is each decision along the DP's
    # path (the same difference of cosines, kept as float32).
    "margin": (0.0, 1e-5),
    # Ratios of counts printed with %.9g (SWIFT's matchness: tokens matched over the window; a
    # search's objective under --objective cost: sublayers run per token): exact on the counts;
    # 1e-6 lets a port compute them in float32 and stays far below one count's change.
    "counts": (1e-6, 0.0),
    # The summary's ratios and gammas, printed with 4 decimals (%.4f): one unit in the last
    # place, which two computations of the same counts (or of gammas within "stepped") can
    # straddle; the rounds before a summary have compared those counts and gammas already.
    "decimals4": (0.0, 1.0001e-4),
}

FIELDS = {  # key name, or a dotted path's end (the record's type first), -> class
    "device": "measured", "speedup": "measured", "draft_pass_steps": "measured",
    "verify_pass_steps": "measured", "predicted_speedup": "measured",
    "gamma": "stepped", "gamma_before": "stepped", "gamma_after": "stepped",
    "ratio": "stepped",
    "conf": "model32", "asd_cos": "model32",
    "margin": "margin", "path": "margin",
    "matchness": "counts", "kept_matchness": "counts", "objective": "counts",
    "summary.skip_ratio": "decimals4", "summary.accept_rate": "decimals4",
    "summary.mean_accepted": "decimals4", "summary.expected_speedup": "decimals4",
    "summary.gamma_first": "decimals4", "summary.gamma_last": "decimals4",
    "summary.gamma_mean": "decimals4", "summary.accept_by_position": "decimals4",
    "summary.conf_mean": "decimals4", "summary.dp_overlap": "decimals4",
    "summary.draft_weight_share": "decimals4",
    # (exact, in no class: the round's token ids `ids`, `rejected`, `token`, a search's `phase`;
    # `measured_break_even` is measured by its name)
}
MEASURED_SUFFIXES = ("_ms", "_per_s")
# What a trace can hold (selfspec writes less by far): beyond these it is not read (exit 2).
MAX_BYTES = 256 << 20  # a file; read this far and no further (an endless file or /dev/zero)
MAX_DEPTH = 64         # objects and arrays within one another (a record nests four deep)
MAX_INT_DIGITS = 19    # an integer's digits: 64 bits (the counts and ids are far below)


class Unreadable(Exception):
    """A file or flag that cannot be read: one line, exit status 2."""


class Differ(Exception):
    """The first difference: its field path and what differs."""

    def __init__(self, path, what):
        super().__init__(what)
        self.path, self.what = path, what


# ----------------------------------------------------------------------------
# Which tolerance a field gets

class Tolerances:
    def __init__(self, tols, ignores, time_objective):
        self.tols, self.ignores, self.time_objective = tols, ignores, time_objective

    def lookup(self, keys):
        """(tolerance or None, class name) for a field, keys its path from the record's type."""
        name = keys[-1]
        for i in range(len(keys)):  # the longest matching path end first
            end = ".".join(keys[i:])
            if end in self.ignores:
                return None, "ignored"
            if end in self.tols:
                return self.tols[end], "--tol " + end
        for i in range(len(keys)):
            cls = FIELDS.get(".".join(keys[i:]))
            if cls is not None:
                break
        if cls is None and (name.endswith(MEASURED_SUFFIXES) or name.startswith("measured")):
            cls = "measured"
        if cls == "counts" and name == "objective" and self.time_objective:
            cls = "measured"  # --objective time: a search scores sets by measured ms
        if cls is None:
            return (0.0, 0.0), "exact"
        if cls in self.ignores:
            return None, "ignored"
        if cls in self.tols:
            return self.tols[cls], "--tol " + cls
        return CLASSES[cls], cls


# ----------------------------------------------------------------------------
# Comparing two records

def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def show(v):
    return json.dumps(v) if not isinstance(v, float) else "%.9g" % v


def show_list(v, most=24):
    """An array as JSON, its first `most` items when it is longer."""
    if len(v) <= most:
        return show(v)
    return "[%s, ... %d more]" % (", ".join(show(x) for x in v[:most]), len(v) - most)


def compare_numbers(a, b, tol, cls):
    rel_tol, abs_tol = tol
    if a == b or (isinstance(a, float) and isinstance(b, float)
                  and math.isnan(a) and math.isnan(b)):
        return None
    if not (math.isfinite(a) and math.isfinite(b)):  # no tolerance reaches an infinity
        return "%s vs %s (not finite: equal only to itself)" % (show(a), show(b))
    d = abs(a - b)
    scale = max(abs(a), abs(b))
    if d <= abs_tol or d <= rel_tol * scale:
        return None
    sa, sb = (show(a), show(b)) if show(a) != show(b) else (repr(a), repr(b))
    if rel_tol == 0 and abs_tol == 0:
        return "%s vs %s (%s)" % (sa, sb, "exact" if cls == "exact" else cls + ": exact")
    parts = []
    if rel_tol > 0 or abs_tol == 0:
        parts.append("rel %.1e > %.0e" % (d / scale, rel_tol))
    if abs_tol > 0:
        parts.append("abs %.1e > %.0e" % (d, abs_tol))
    return "%s vs %s (%s; %s)" % (sa, sb, ", ".join(parts), cls)


def compare(a, b, keys, shown, tols, names):
    """Raises Differ at the first difference between JSON values a and b; keys: the path of
    keys from the record's type (for the tolerance), shown: the path as printed."""
    tol, cls = tols.lookup(keys) if len(keys) > 1 else ((0.0, 0.0), "exact")
    if tol is None:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            sub = shown + "." + k if shown else k
            if tols.lookup(keys + [k])[0] is None:
                continue  # not compared, so not required either: a port need not time itself
            if k not in b or k not in a:
                raise Differ(sub, "key only in %s" % (names[0] if k in a else names[1]))
            compare(a[k], b[k], keys + [k], sub, tols, names)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise Differ(shown, "%s vs %s (%d items vs %d)" % (show_list(a), show_list(b), len(a),
                                                               len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, keys, "%s[%d]" % (shown, i), tols, names)
        return
    if is_number(a) and is_number(b):
        what = compare_numbers(a, b, tol, cls)
        if what is not None:
            raise Differ(shown, what)
        return
    if type(a) is not type(b) or a != b:
        raise Differ(shown, "%s vs %s" % (show(a), show(b)))


def describe(n, r):
    """'record 57, round 3 of prompt 1': a record's number (1-based, its line), type, place."""
    t = r.get("type")
    place = str(t)
    if t == "round" and "round" in r:
        place = "round %s" % r["round"]
    elif t == "search" and "i" in r:
        place = "search %s" % r["i"]
    if "prompt" in r:
        place += " of prompt %s" % r["prompt"]
    return "record %d, %s" % (n, place)


# ----------------------------------------------------------------------------
# Reading, the command line

def parse_int(text):
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("an integer of %d digits, beyond 64 bits" % len(text.lstrip("-")))
    return int(text)


def check_value(v):
    """Raises ValueError when v nests deeper than MAX_DEPTH or holds a string (a key included)
    that is not Unicode text (a lone surrogate: it cannot be printed or compared as text)."""
    stack = [(v, 1)]
    while stack:
        x, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError("nested deeper than %d" % MAX_DEPTH)
        items = list(x.items()) if isinstance(x, dict) else [(None, y) for y in x] \
            if isinstance(x, list) else [(None, x)]
        for key, y in items:
            for t in (key, y):
                if isinstance(t, str):
                    try:
                        t.encode("utf-8")
                    except UnicodeEncodeError:
                        raise ValueError("a string that is not Unicode text (%s)"
                                         % t.encode("utf-8", "backslashreplace").decode()[:40])
            if isinstance(y, (dict, list)):
                stack.append((y, depth + 1))


def read_trace(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise Unreadable("%s: larger than %d MiB, not read (a trace is far smaller)"
                             % (path, MAX_BYTES >> 20))
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise Unreadable("%s: %s" % (path, getattr(e, "strerror", None) or e))
    lines = text.split("\n")  # "\n" only: U+0085, U+2028 and U+2029 may sit in a JSON string
    if lines and lines[-1] == "":
        lines.pop()
    records = []
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line, parse_int=parse_int)
            check_value(r)
        except (ValueError, RecursionError) as e:
            raise Unreadable("%s: line %d is not JSON a trace holds (%s)"
                             % (path, n, str(e).splitlines()[0][:120]))
        if not isinstance(r, dict) or not isinstance(r.get("type"), str):
            raise Unreadable("%s: line %d is not a trace record (an object with a \"type\")"
                             % (path, n))
        if r["type"] == "header" and not isinstance(r.get("params", {}), dict):
            # the one value this script reads to decide (params.objective): it must be an object
            raise Unreadable("%s: line %d: the header's params is %s, not an object"
                             % (path, n, type(r["params"]).__name__))
        records.append(r)
    if not records:
        raise Unreadable("%s: empty, not a trace" % path)
    return records


def parse_args(argv):
    files, tols, ignores = [], {}, set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(__doc__.strip() + "\n\n" + class_table())
            sys.exit(0)
        if arg in ("--tol", "--ignore"):
            if i + 1 >= len(argv):
                raise Unreadable("%s needs a value" % arg)
            i += 1
            if arg == "--ignore":
                ignores.add(argv[i])
            else:
                m = re.fullmatch(r"([A-Za-z0-9_.]+)=([^,]+)(?:,(.+))?", argv[i])
                try:
                    tol = (float(m.group(2)), float(m.group(3) or 0)) if m else None
                except ValueError:
                    tol = None
                if tol is None or not all(math.isfinite(t) and t >= 0 for t in tol):
                    raise Unreadable("--tol %s: expected FIELD=REL or FIELD=REL,ABS with "
                                     "non-negative numbers (e.g. --tol conf=1e-3)" % argv[i])
                tols[m.group(1)] = tol
        elif arg.startswith("-"):
            raise Unreadable("unknown flag %s (expected --tol FIELD=REL[,ABS] or --ignore FIELD)"
                             % arg)
        else:
            files.append(arg)
        i += 1
    if len(files) != 2:
        raise Unreadable("expected two trace files, got %d (usage: trace_diff.py A.jsonl B.jsonl "
                         "[--tol FIELD=REL[,ABS]]... [--ignore FIELD]...)" % len(files))
    return files, tols, ignores


def class_table():
    """--help's table: each class of CLASSES, its tolerance and the fields FIELDS puts in it."""
    rows = ["Field classes (two numbers agree when |a - b| <= max(ABS, REL * max(|a|, |b|));",
            "a field in no class, exactly; the reasons are in the script, above CLASSES):"]
    for cls, tol in CLASSES.items():
        fields = [k for k, v in FIELDS.items() if v == cls]
        if cls == "measured":
            fields += ["*_ms", "*_per_s", "measured*", "search.objective under --objective time"]
        head = "  %-10s %s: " % (cls, "not compared" if tol is None else "REL %g, ABS %g" % tol)
        rows += textwrap.wrap(", ".join(fields), 99, initial_indent=head,
                              subsequent_indent=" " * 13)
    return "\n".join(rows)


def time_objective(records):
    h = records[0]
    params = h.get("params") if h.get("type") == "header" else None
    return isinstance(params, dict) and params.get("objective") == "time"


def diff(a_recs, b_recs, names, tols):
    """None when the traces agree, else the line naming the first difference."""
    for n in range(1, max(len(a_recs), len(b_recs)) + 1):
        if n > len(a_recs) or n > len(b_recs):
            which, r = (names[0], a_recs[n - 1]) if n <= len(a_recs) else (names[1], b_recs[n - 1])
            return "%s: only in %s" % (describe(n, r), which)
        a, b = a_recs[n - 1], b_recs[n - 1]
        try:
            compare(a, b, [a["type"]], "", tols, names)
        except Differ as d:
            return "%s: %s: %s" % (describe(n, a), d.path, d.what)
    return None


def main(argv):
    try:
        (fa, fb), tols, ignores = parse_args(argv)
        a, b = read_trace(fa), read_trace(fb)
    except Unreadable as e:
        print("trace_diff: %s" % e, file=sys.stderr)
        return 2
    # a record type given to --ignore: its records leave both traces before they are matched
    a = [r for r in a if r["type"] not in ignores]
    b = [r for r in b if r["type"] not in ignores]
    t = Tolerances(tols, ignores, time_objective(a) or time_objective(b))
    first = diff(a, b, (fa, fb), t)
    if first is not None:
        print(first)
        return 1
    print("trace_diff: %d records agree within the tolerances" % len(a))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
