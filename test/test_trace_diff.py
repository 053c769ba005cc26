#!/usr/bin/env python3
"""test_trace_diff.py: test/trace_diff.py finds the first difference that matters, and only those.

  - each reference trace in test/refs/traces/ against itself, and against a copy whose measured
    fields (timings, device, --compare's ratios) and key order changed: exit 0;
  - one mutation per field class, each the first difference in its trace: an integer, a skip set
    (string and array spellings), a gamma beyond its tolerance (an Eq. 3 decision) and within it
    (one ulp), a float32 (conf, asd_cos) beyond and within, CLaSp's margin, a count ratio
    (matchness, a search's objective, ignored under --objective time), a 4-decimal summary
    field, a string, null against a number; the line printed names the record, its type, its
    prompt and round, the field's path and both values; exit 1;
  - a missing and an extra record, a missing and an extra key (the new format's `ids`, CLaSp's
    `closest`, SWIFT's `restart`): exit 1;
  - --tol FIELD=REL[,ABS] by key, by path end and by class, and --ignore;
  - bad input (a missing file, a line that is not JSON, a record without "type", an empty file,
    a bad --tol, one file only): one line naming it, exit 2;
  - it never lies (issue 48): a value that is not finite differs from every finite one and from
    the other infinity, whatever the tolerance; a 401-digit integer, 100,000-deep and 65-deep
    nesting, a header's params as a string, a lone surrogate key, bytes that are not UTF-8 and
    /dev/zero are one line and exit 2 (never a traceback); U+0085, U+2028 and U+2029 in
    a trace's text are not line breaks; --ignore takes a record type; --help lists every class,
    its tolerances and its fields; arrays of different lengths are printed both;
  - another arithmetic: test/refs/traces/arith/, a trace and the same run on a build with FMA
    contraction: different in most lines under plain diff, conf and gamma among them, equal
    under trace_diff (and not with the float32 fields held exactly);
  - README's example ("Comparing two traces") prints what README shows.
Prints "test_trace_diff: N passed, M failed" and exits non-zero on a failure (run_tests.sh).
"""
import copy
import glob
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "test", "trace_diff.py")
REFS = os.path.join(ROOT, "test", "refs", "traces")
passed = failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + msg, file=sys.stderr)
    return ok


def load(name):
    with open(os.path.join(REFS, name)) as f:
        return [json.loads(line) for line in f]


def write(records, path):
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    return path


def run(a, b, *flags):
    """trace_diff on two paths; returns (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, SCRIPT, a, b] + list(flags), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def first(records, rtype, has=None):
    """Index of the first record of type rtype (holding key path `has`, dot-separated)."""
    for i, r in enumerate(records):
        if r["type"] != rtype:
            continue
        v = r
        for k in has.split(".") if has else []:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            return i
    raise AssertionError("no %s record with %s" % (rtype, has))


def mutated(tmp, name, records, i, fn):
    """Writes records with record i changed by fn (asserting it changed), returns the path."""
    out = copy.deepcopy(records)
    fn(out[i])
    if json.dumps(out[i]) == json.dumps(records[i]):
        raise AssertionError("%s: the mutation changed nothing" % name)
    return write(out, os.path.join(tmp, name + ".jsonl"))


def expect_diff(tmp, what, name, i, fn, want, *flags):
    """Record i of reference trace `name` changed by fn: exit 1, one line holding each of want."""
    records = load(name + ".jsonl")
    a = write(records, os.path.join(tmp, name + ".jsonl"))
    b = mutated(tmp, name + "-" + what.replace(" ", "-"), records, i, fn)
    rc, out, err = run(a, b, *flags)
    lines = out.splitlines()
    ok = check(rc == 1 and len(lines) == 1 and err == "", "%s: exit %d, %d lines, stderr %r "
               "(want exit 1, one line)" % (what, rc, len(lines), err))
    for w in want:
        ok = check(w in out, "%s: %r not in %r" % (what, w, out.strip())) and ok
    return out


def expect_equal(tmp, what, name, i, fn, *flags):
    records = load(name + ".jsonl")
    a = write(records, os.path.join(tmp, name + ".jsonl"))
    b = mutated(tmp, name + "-" + what.replace(" ", "-"), records, i, fn)
    rc, out, err = run(a, b, *flags)
    check(rc == 0 and "records agree" in out and err == "",
          "%s: exit %d (want 0): %s%s" % (what, rc, out, err))


def place(records, i):
    r = records[i]
    if r["type"] == "round":
        return "record %d, round %d of prompt %d: " % (i + 1, r["round"], r["prompt"])
    if "prompt" in r:
        return "record %d, %s of prompt %d: " % (i + 1, r["type"], r["prompt"])
    return "record %d, %s" % (i + 1, r["type"])


# ----------------------------------------------------------------------------

def equal_traces(tmp):
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REFS, "*.jsonl")))
    check(len(names) >= 7, "reference traces: %d found, want the 7 of commands.txt" % len(names))
    for name in names:
        path = os.path.join(REFS, name)
        rc, out, _ = run(path, path)
        n = len(load(name))
        check(rc == 0 and out.strip() == "trace_diff: %d records agree within the tolerances" % n,
              "%s against itself: exit %d, %r" % (name, rc, out))
    # measured fields changed everywhere, keys reordered: still equal
    records = load("selfsd.jsonl")
    out, changed = [], 0
    for r in records:
        r2 = {}
        for k in reversed(list(r)):  # the keys in reverse order
            v = r[k]
            if k.endswith("_ms") or k.endswith("_per_s"):
                v, changed = v * 3 + 1, changed + 1
            elif k == "device":
                v, changed = "GPU: NVIDIA H100", changed + 1
            r2[k] = v
        if r["type"] == "summary":  # --compare's measured ratios, on one side only
            r2.update({"plain_tokens_per_s": 1.5, "speedup": 0.7, "draft_pass_steps": 0.4,
                       "verify_pass_steps": 1.1, "predicted_speedup": 0.9,
                       "measured": {"speedup": 0.7}, "measured_speedup": 0.7})
        out.append(r2)
    b = write(out, os.path.join(tmp, "measured.jsonl"))
    check(changed >= 3 * 6, "measured fields changed: %d" % changed)
    rc, o, e = run(os.path.join(REFS, "selfsd.jsonl"), b)
    check(rc == 0, "measured fields and key order changed: exit %d (want 0): %s%s" % (rc, o, e))


def field_classes(tmp):
    rnd = load("asd.jsonl")
    i = first(rnd, "round")
    while rnd[i]["drafted"] < 1 or rnd[i]["round"] < 2:
        i += 1
    r = rnd[i]
    at = place(rnd, i)
    # an integer
    expect_diff(tmp, "an int", "asd", i, lambda r: r.update(accepted=r["accepted"] + 1),
                [at + "accepted: %d vs %d (exact)" % (r["accepted"], r["accepted"] + 1)])
    # a skip set, as a string and as arrays (the format to come)
    expect_diff(tmp, "a set", "asd", i, lambda r: r["skip"].update(attn="1,2,3"),
                [at + "skip.attn: %s vs \"1,2,3\"" % json.dumps(r["skip"]["attn"])])

    def arrays(rec):  # the spelling to come (issue 37), unless the traces have it already
        for k in ("skip", "asd_skip"):
            if k in rec and isinstance(rec[k]["attn"], str):
                rec[k] = {s: [int(x) for x in rec[k][s].split(",") if x] for s in rec[k]}

    recs = [copy.deepcopy(x) for x in rnd]
    for x in recs:
        if x["type"] != "summary":  # the summary's set is a layer map
            arrays(x)
    a = write(recs, os.path.join(tmp, "arrays-a.jsonl"))
    arrays_b = copy.deepcopy(recs)
    arrays_b[i]["skip"]["mlp"] = arrays_b[i]["skip"]["mlp"][:-1]
    b = write(arrays_b, os.path.join(tmp, "arrays-b.jsonl"))
    rc, o, _ = run(a, a)
    check(rc == 0, "arrays against themselves: exit %d %s" % (rc, o))
    rc, o, _ = run(a, b)
    mlp = recs[i]["skip"]["mlp"]
    check(rc == 1 and at + "skip.mlp: %s vs %s (%d items vs %d)" % (json.dumps(mlp), json.dumps(mlp[:-1]),
                                                                    len(mlp), len(mlp) - 1) in o,
          "an array set one layer short: both sets, then their sizes: %d %r" % (rc, o))
    # gamma: a decision the other way (Eq. 4 moves it 1e-3 per decision), and one ulp
    g = r["gamma_after"]
    expect_diff(tmp, "a gamma", "asd", i, lambda r: r.update(gamma_after=g - 2e-3),
                [at + "gamma_after: %.9g vs %.9g (abs 2.0e-03 > 1e-05; stepped)" % (g, g - 2e-3)])
    expect_equal(tmp, "a gamma one ulp off", "asd", i, lambda r: r.update(gamma_after=g + 6e-8))
    # a float32 the model computed: conf[k] beyond and within 1e-4 relative
    k = len(r["conf"]) - 1
    c = r["conf"][k]

    def conf(scale):
        return lambda r: r["conf"].__setitem__(k, c * scale)

    expect_diff(tmp, "a conf", "asd", i, conf(1.001),
                [at + "conf[%d]: %.9g vs %.9g (rel 1.0e-03 > 1e-04; model32)" % (k, c, c * 1.001)])
    expect_equal(tmp, "a conf within", "asd", i, conf(1.00001))
    expect_diff(tmp, "a conf as a class override", "asd", i, conf(1.01),
                ["rel 9.9e-03 > 1e-03; --tol model32"], "--tol", "model32=1e-3")
    expect_equal(tmp, "a conf with --tol", "asd", i, conf(1.001), "--tol", "conf=1e-2")
    expect_equal(tmp, "a conf with --ignore", "asd", i, conf(2), "--ignore", "conf")
    expect_diff(tmp, "a conf null", "asd", i, lambda r: r["conf"].__setitem__(k, None),
                [at + "conf[%d]: %.9g vs null" % (k, c)])
    p = first(rnd, "prefill", "asd_cos")
    cos = rnd[p]["asd_cos"][4]
    expect_diff(tmp, "an asd_cos", "asd", p, lambda r: r["asd_cos"].__setitem__(4, cos + 1e-3),
                [place(rnd, p) + "asd_cos[4]: %.9g vs %.9g (rel " % (cos, cos + 1e-3), "model32"])
    # CLaSp's margin: absolute, 1e-5
    cl = load("clasp.jsonl")
    m = first(cl, "round", "event.clasp")
    mg = cl[m]["event"]["clasp"]["margin"]
    expect_diff(tmp, "a margin", "clasp", m, lambda r: r["event"]["clasp"].update(margin=mg + 2e-5),
                [place(cl, m) + "event.clasp.margin: ", "(abs 2.0e-05 > 1e-05; margin)"])
    expect_equal(tmp, "a margin within", "clasp", m,
                 lambda r: r["event"]["clasp"].update(margin=mg * 1.5 if mg < 2e-5 else mg + 5e-6))
    expect_diff(tmp, "a clasp set", "clasp", m,
                lambda r: r["event"]["clasp"]["skip"].update(mlp="0"),
                [place(cl, m) + "event.clasp.skip.mlp: "])
    # counts' ratios: SWIFT's matchness (one token of the window), a search's objective
    sw = load("swift.jsonl")
    s = first(sw, "round", "event.swift")
    mt = sw[s]["event"]["swift"]["matchness"]
    expect_diff(tmp, "a matchness", "swift", s,
                lambda r: r["event"]["swift"].update(matchness=mt + 1.0 / 32),
                [place(sw, s) + "event.swift.matchness: ", "counts"])
    rp = sw[s]["event"]["swift"]["replaced"]
    expect_diff(tmp, "a boolean as a number", "swift", s,
                lambda r: r["event"]["swift"].update(replaced=int(rp)),
                [place(sw, s) + "event.swift.replaced: %s vs %d" % (json.dumps(rp), rp)])
    expect_diff(tmp, "a swift phase", "swift", s, lambda r: r["event"]["swift"].update(phase="gp"),
                [place(sw, s) + "event.swift.phase: \"start\" vs \"gp\""])
    sd = load("selfsd.jsonl")
    o = first(sd, "search")
    ob = sd[o]["objective"]
    expect_diff(tmp, "an objective", "selfsd", o, lambda r: r.update(objective=ob * 1.001),
                ["record %d, search %d: objective: " % (o + 1, sd[o]["i"]),
                 "(rel 1.0e-03 > 1e-06; counts)"])
    expect_equal(tmp, "an objective within", "selfsd", o,
                 lambda r: r.update(objective=ob * (1 + 1e-7)))
    timed = copy.deepcopy(sd)
    timed[0]["params"]["objective"] = "time"
    a = write(timed, os.path.join(tmp, "time-a.jsonl"))
    timed[o]["objective"] = ob * 2
    b = write(timed, os.path.join(tmp, "time-b.jsonl"))
    rc, out, _ = run(a, b)
    check(rc == 0, "an objective under --objective time is measured: exit %d %s" % (rc, out))
    # the summary's 4-decimal fields
    sm = first(rnd, "summary")
    ar = rnd[sm]["accept_rate"]
    expect_diff(tmp, "an accept_rate", "asd", sm, lambda r: r.update(accept_rate=ar + 3e-4),
                [place(rnd, sm) + "accept_rate: ", "(abs 3.0e-04 > 1e-04; decimals4)"])
    expect_equal(tmp, "an accept_rate within", "asd", sm, lambda r: r.update(accept_rate=ar + 1e-4))
    expect_diff(tmp, "a header setting", "asd", 0,
                lambda r: r["params"].update(cos_threshold=0.9851),
                ["record 1, header: params.cos_threshold: 0.985 vs 0.9851 (exact)"])
    expect_diff(tmp, "a string", "asd", sm, lambda r: r.update(text=r["text"] + "!"),
                [place(rnd, sm) + "text: "])
    expect_equal(tmp, "the model folder with --ignore", "asd", 0,
                 lambda r: r.update(model="elsewhere"), "--ignore", "model")
    # plain decoding's gamma as null (the format to come): null on both sides, or on one
    st = load("static-exit-none.jsonl")
    n = first(st, "round")
    check(st[n]["gamma_before"] is None, "static-exit-none's gammas are null")
    expect_diff(tmp, "a gamma null", "static-exit-none", n, lambda r: r.update(gamma_before=0.6),
                [place(st, n) + "gamma_before: null vs 0.6"])


def structure(tmp):
    recs = load("clasp.jsonl")
    a = write(recs, os.path.join(tmp, "clasp.jsonl"))
    b = write(recs[:-1], os.path.join(tmp, "clasp-short.jsonl"))
    rc, out, _ = run(a, b)
    check(rc == 1 and out.strip() == "record %d, summary of prompt 2: only in %s" % (len(recs), a),
          "a missing record: exit %d %r" % (rc, out))
    extra = recs + [{"type": "round", "prompt": 2, "round": 99}]
    b = write(extra, os.path.join(tmp, "clasp-long.jsonl"))
    rc, out, _ = run(a, b)
    check(rc == 1
          and out.strip() == "record %d, round 99 of prompt 2: only in %s" % (len(extra), b),
          "an extra record: exit %d %r" % (rc, out))
    # a dropped round in the middle: the records after it no longer line up
    i = first(recs, "round")
    b = write(recs[:i] + recs[i + 1:], os.path.join(tmp, "clasp-gap.jsonl"))
    rc, out, _ = run(a, b)
    check(rc == 1 and out.startswith("record %d, round 0 of prompt 0: " % (i + 1)),
          "a dropped round: exit %d %r" % (rc, out))
    # keys the format to come adds: prefill ids, CLaSp's closest, SWIFT's restart
    p = first(recs, "prefill")
    expect_diff(tmp, "an extra key", "clasp", p, lambda r: r.update(extra=[1, 2, 3]),
                ["record %d, prefill of prompt 0: extra: key only in " % (p + 1)])
    expect_diff(tmp, "a missing key", "clasp", p, lambda r: r.pop("tokens"),
                ["record %d, prefill of prompt 0: tokens: key only in " % (p + 1)])
    with_ids = copy.deepcopy(recs)
    with_ids[p]["ids"] = [1, 400, 7]
    m = first(recs, "round", "event.clasp")
    with_ids[m]["event"]["clasp"]["closest"] = {"layer": 4, "skips": 2}
    with_ids[m]["event"]["clasp"]["path"] = [0, 1, 1, 0]
    a = write(with_ids, os.path.join(tmp, "clasp-new.jsonl"))
    rc, out, _ = run(a, a)
    check(rc == 0, "the new keys against themselves: exit %d %s" % (rc, out))
    for what, fn, want in [
            ("ids", lambda x: x[p]["ids"].__setitem__(1, 401),
             "prefill of prompt 0: ids[1]: 400 vs 401"),
            ("closest", lambda x: x[m]["event"]["clasp"]["closest"].update(skips=3),
             "event.clasp.closest.skips: 2 vs 3"),
            ("path", lambda x: x[m]["event"]["clasp"]["path"].__setitem__(2, 0),
             "event.clasp.path[2]: 1 vs 0"),
            ("restart", lambda x: x[m]["event"].update(restart=True),
             "event.restart: key only in")]:
        changed = copy.deepcopy(with_ids)
        fn(changed)
        b = write(changed, os.path.join(tmp, "clasp-new-%s.jsonl" % what))
        rc, out, _ = run(a, b)
        check(rc == 1 and want in out, "%s differs: exit %d %r (want %r)" % (what, rc, out, want))


def bad_input(tmp):
    good = os.path.join(REFS, "plain.jsonl")
    lines = open(good).read().splitlines()
    cases = [
        ("a missing file", [good, os.path.join(tmp, "nope.jsonl")], "nope.jsonl: No such file"),
        ("not JSON", [good, write_text(tmp, "bad.jsonl", lines[:2] + ["{\"type\": "] + lines[3:])],
         "bad.jsonl: line 3 is not JSON"),
        ("no type", [write_text(tmp, "notype.jsonl", ["{\"prompt\": 0}"]), good],
         "notype.jsonl: line 1 is not a trace record"),
        ("empty", [good, write_text(tmp, "empty.jsonl", [])], "empty.jsonl: empty"),
        ("a bad --tol", [good, good, "--tol", "conf"], "--tol conf: expected FIELD=REL"),
        ("a negative --tol", [good, good, "--tol", "conf=-1"], "--tol conf=-1: expected"),
        ("an unknown flag", [good, good, "--tolerance", "1"], "unknown flag --tolerance"),
        ("one file", [good], "expected two trace files, got 1"),
    ]
    for what, args, want in cases:
        p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
        check(p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1
              and p.stderr.startswith("trace_diff: ") and want in p.stderr,
              "%s: exit %d, stderr %r (want 2 and one line with %r)"
              % (what, p.returncode, p.stderr, want))


def never_lie(tmp):
    """Issue 48's cases: trace_diff never says "agree" when a value is not finite, never ends in a
    traceback (which would exit 1, "differ") on an input it cannot read, splits lines on "\\n" only,
    ignores record types, lists its classes in --help."""
    recs = load("asd.jsonl")
    i = first(recs, "round")
    while recs[i]["drafted"] < 1:
        i += 1
    a = write(recs, os.path.join(tmp, "finite.jsonl"))

    def with_conf(name, text):  # record i's conf[0] replaced by a JSON literal
        out = [json.dumps(r) for r in recs]
        r = copy.deepcopy(recs[i])
        r["conf"][0] = "@"
        out[i] = json.dumps(r).replace('"@"', text)
        return write_text(tmp, name, out)

    c = recs[i]["conf"][0]
    for what, x, y, flags in [("Infinity against a finite conf", a, with_conf("inf.jsonl", "Infinity"), []),
                              ("1e400 against a finite conf", a, with_conf("big.jsonl", "1e400"), []),
                              ("Infinity against -Infinity", with_conf("inf.jsonl", "Infinity"),
                               with_conf("ninf.jsonl", "-Infinity"), []),
                              ("Infinity under --tol conf=1", a, with_conf("inf.jsonl", "Infinity"),
                               ["--tol", "conf=1"])]:
        rc, out, err = run(x, y, *flags)
        check(rc == 1 and "conf[0]: " in out and "not finite" in out,
              "%s: exit %d %r (want a difference: no tolerance reaches an infinity)" % (what, rc, out + err))
    rc, out, _ = run(with_conf("nan-a.jsonl", "NaN"), with_conf("nan-b.jsonl", "NaN"))
    check(rc == 0, "NaN against NaN: exit %d %r (want equal)" % (rc, out))
    check("%.9g" % c not in ("inf", "nan"), "the finite conf")
    # unreadable inputs: one line on stderr, exit 2. Each beside a partner that the old script
    # compared it with and crashed on (a traceback, exit 1: "differ"), or read forever
    deep = '{"type": "round", "v": ' + "[" * 100000 + "]" * 100000 + "}"
    header = copy.deepcopy(recs[0])
    header["params"] = "cos_threshold=0.985"
    one = write_text(tmp, "one.jsonl", ['{"type": "round", "accepted": 1, "v": []}'])
    cases = [
        ("a 401-digit integer", write_text(tmp, "int.jsonl", ['{"type": "round", "accepted": ' + "9" * 401 +
                                                              ', "v": []}']), one, "an integer of 401 digits"),
        ("100,000-deep nesting", write_text(tmp, "deep.jsonl", [deep]), one, "line 1 is not JSON a trace holds"),
        ("65-deep nesting", write_text(tmp, "deep65.jsonl", ['{"type": "round", "v": ' + "[" * 64 + "]" * 64 + "}"]),
         one, "nested deeper than 64"),
        ("params as a string", write([header] + recs[1:], os.path.join(tmp, "params.jsonl")), a,
         "line 1: the header's params is str, not an object"),
        ("a lone surrogate key", write_text(tmp, "surrogate.jsonl", ['{"type": "round", "\\ud800": 1}']), one,
         "not Unicode text"),
        ("bytes that are not UTF-8", write_bytes(tmp, "latin1.jsonl", b'{"type": "round", "t": "\xe9"}\n'), one,
         "utf-8"),
        ("/dev/zero", "/dev/zero", one, "larger than 256 MiB"),
    ]
    for what, path, partner, want in cases:
        p = subprocess.run([sys.executable, SCRIPT, partner, path], capture_output=True, text=True, timeout=120,
                           preexec_fn=memory_cap)
        check(p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1
              and p.stderr.startswith("trace_diff: ") and want in p.stderr,
              "%s: exit %d, stderr %r (want 2 and one line with %r)" % (what, p.returncode, p.stderr[-300:], want))
    # lines end at "\n" only: U+0085, U+2028, U+2029 inside a trace's text are characters
    sm = first(recs, "summary")
    texty = copy.deepcopy(recs)
    texty[sm]["text"] = "a\u0085b\u2028c\u2029d"
    x = os.path.join(tmp, "seps.jsonl")
    with open(x, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in texty))
    rc, out, err = run(x, x)
    check(rc == 0 and "%d records agree" % len(recs) in out,
          "a trace whose text holds U+0085, U+2028, U+2029: exit %d %r" % (rc, out + err))
    texty[sm]["text"] += "!"
    y = os.path.join(tmp, "seps2.jsonl")
    with open(y, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in texty))
    rc, out, err = run(x, y)
    check(rc == 1 and ("record %d, summary of prompt 0: text: " % (sm + 1)) in out,
          "that text changed: exit %d %r" % (rc, out + err))
    # --ignore takes a record type: the records of that type leave both traces
    sd = load("selfsd.jsonl")
    a = write(sd, os.path.join(tmp, "sd.jsonl"))
    b = write([r for r in sd if r["type"] != "search"], os.path.join(tmp, "sd-nosearch.jsonl"))
    rc, out, _ = run(a, b, "--ignore", "search")
    n = sum(r["type"] != "search" for r in sd)
    check(rc == 0 and "%d records agree" % n in out, "--ignore search against a port without search records: "
          "exit %d %r" % (rc, out))
    rc, out, _ = run(a, b)
    check(rc == 1, "without --ignore search: exit %d %r (want the missing records seen)" % (rc, out))
    # --help: every class, its tolerances, and the fields in it
    import importlib.util
    spec = importlib.util.spec_from_file_location("trace_diff", SCRIPT)
    td = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(td)
    p = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True)
    missing = [c for c in td.CLASSES if c not in p.stdout]
    missing += [f for f in td.FIELDS if f not in p.stdout]
    missing += ["REL %g, ABS %g" % t for t in td.CLASSES.values() if t and "REL %g, ABS %g" % t not in p.stdout]
    check(p.returncode == 0 and not missing, "--help: %r not listed" % missing)


def memory_cap():
    """A child's address space capped at 2 GiB: an unbounded read fails instead of filling memory."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def write_bytes(tmp, name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def write_text(tmp, name, lines):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def other_arithmetic(tmp):
    """The pairs in test/refs/traces/arith/ (arith/make.sh): the FMA build's floats differ in
    their last bits, plain diff fails, trace_diff passes."""
    for name, fields in (("asd", ("conf", "gamma_after", "asd_cos")),
                         ("clasp", ("conf", "margin"))):
        # the fields the other arithmetic moved, not only the timings
        a = os.path.join(REFS, "arith", name + ".jsonl")
        b = os.path.join(REFS, "arith", name + "-fma.jsonl")
        la, lb = open(a).read().splitlines(), open(b).read().splitlines()
        ra, rb = [json.loads(x) for x in la], [json.loads(x) for x in lb]
        rounds = [(x, y) for x, y in zip(la, lb) if '"type": "round"' in x]
        same = sum(x == y for x, y in rounds)
        check(len(la) == len(lb) and rounds and same < len(rounds) / 2,
              "arith/%s: %d of %d round lines byte-identical (want under half)"
              % (name, same, len(rounds)))
        for f in fields:
            moved = [x for x, y in zip(ra, rb) if json.dumps(find(x, f)) != json.dumps(find(y, f))]
            check(len(moved) > 0, "arith/%s: no %s differs between the builds" % (name, f))
        rc, out, err = run(a, b)
        check(rc == 0 and "records agree" in out,
              "arith/%s: exit %d %s%s (want 0)" % (name, rc, out, err))
        rc, out, _ = run(a, b, "--tol", "model32=0")
        check(rc == 1 and "(--tol model32: exact)" in out,
              "arith/%s with float32 exact: exit %d %r (want 1)" % (name, rc, out))


def readme_example(tmp):
    """README's "Comparing two traces" runs its commands and prints the block shown under them."""
    text = open(os.path.join(ROOT, "README.md")).read()
    at = text.index("### Comparing two traces")
    sh = text.index("```sh\n", at) + len("```sh\n")
    commands = text[sh:text.index("```", sh)].splitlines()
    shown = text.index("```\n", text.index("```", sh) + 3) + len("```\n")
    want = text[shown:text.index("```", shown)].splitlines()
    got = []
    for line in commands:
        args = shlex.split(line)
        check(args[:2] == ["python3", "test/trace_diff.py"], "README runs %r" % line)
        p = subprocess.run([sys.executable] + args[1:], cwd=ROOT, capture_output=True, text=True)
        got += p.stdout.splitlines()
    check(len(commands) == 2 and got == want,
          "README's trace_diff example prints %r, README shows %r" % (got, want))


def find(v, key):
    """The first value of key anywhere in v (depth first), or None."""
    if isinstance(v, dict):
        if key in v:
            return v[key]
        v = list(v.values())
    if isinstance(v, list):
        for x in v:
            found = find(x, key)
            if found is not None:
                return found
    return None


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for test in (equal_traces, field_classes, structure, bad_input, never_lie, other_arithmetic,
                     readme_example):
            # a reference trace without what a case mutates, or a fixture missing: a failure
            try:
                test(tmp)
            except (AssertionError, OSError, ValueError, KeyError) as e:
                check(False, "%s: %s: %s" % (test.__name__, type(e).__name__, e))
    print("test_trace_diff: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
