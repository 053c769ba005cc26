// test_svg.c: the --svg drawing is well-formed XML that draws what was recorded.
//   - a small XML checker (tags nest and close, one root, quoted attributes, entities, valid
//     UTF-8) parses every file written here; each element keeps its parent, so the test checks
//     that cells sit in the groups they belong to;
//   - a known run (the demo: kjv-12l, 9 of 24 sublayers skipped, 64 tokens): 24 map cells, 9
//     filled, one drafted and one accepted bar per round, one gamma point per round, gamma also
//     on its own zoomed axis, a confidence dot per drafting round (the confidence the exit rule
//     compared), and the recorded rounds add up to the totals;
//   - a 30-layer model with a long folder name and 40 sets: no text past the right edge, set
//     rows >= 10 px, labels >= 9 px, a tick per set under the rounds;
//   - CLaSp: one set row per recorded set, each row's filled cells are that set's, and the rows
//     differ from one to the next; Self-SD's search: one row per candidate, iters + 1;
//   - a prompt full of markup and invalid UTF-8 still gives well-formed XML;
//   - the CLI: -f with two prompts gives one file with two panels, sized for two.
// (An unwritable --svg path is a case of test_bad_inputs.)
#define TESTING
#include "../selfspec.cu"
#include "testing.h"

#include <unistd.h>

enum { MAX_ELEMS = 20000 };

typedef struct {
    char name[16];   // element name
    char cls[32];    // its class attribute, "" if none
    int parent;      // index of the enclosing element, -1 for the root
    int n_points;    // polyline: the pairs in its points attribute
} Elem;

static Elem elems[MAX_ELEMS];
static int n_elems;

static int xml_fail(char *err, const char *what, const char *s, const char *at) {
    snprintf(err, SS_ERR_LEN, "%s at byte %ld: \"%.40s\"", what, (long)(at - s), at);
    return -1;
}

// An entity reference at p ('&'): &amp; &lt; &gt; &quot; &apos; &#N; &#xN;. Returns its length or 0.
static int xml_entity(const char *p) {
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int k = 0; k < 5; k++) { if (strncmp(p, named[k], strlen(named[k])) == 0) { return (int)strlen(named[k]); } }
    int n = 1;
    if (p[n++] != '#') { return 0; }
    int hex = p[n] == 'x';
    n += hex;
    int start = n;
    while (hex ? isxdigit((unsigned char)p[n]) : isdigit((unsigned char)p[n])) { n++; }
    return n > start && p[n] == ';' ? n + 1 : 0;
}

static int is_name_char(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_' || c == ':' || c == '.'; }

// Checks s is a well-formed XML document (the subset an SVG writer uses: a prolog, elements,
// attributes, text, no comments or CDATA) and records its elements. Returns 0, or -1 with err.
static int xml_check(const char *s, char *err) {
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) { // the whole file is valid UTF-8
        int cp;
        size_t n = utf8_decode(s, len, i, &cp);
        if (cp < 0 || (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r')) { return xml_fail(err, "invalid character", s, s + i); }
        i += n;
    }
    const char *p = s;
    if (strncmp(p, "<?xml ", 6) == 0) {
        p = strstr(p, "?>");
        if (p == NULL) { return xml_fail(err, "unterminated prolog", s, s); }
        p += 2;
    }
    int stack[256], depth = 0, roots = 0;
    n_elems = 0;
    while (*p) {
        if (*p != '<') { // text: only whitespace outside the root, entities well-formed
            if (depth == 0 && !isspace((unsigned char)*p)) { return xml_fail(err, "text outside the root", s, p); }
            if (*p == '&' && xml_entity(p) == 0) { return xml_fail(err, "bad entity", s, p); }
            p++;
            continue;
        }
        if (p[1] == '/') { // end tag: must close the innermost open element
            const char *q = p + 2;
            while (is_name_char(*q)) { q++; }
            if (depth == 0) { return xml_fail(err, "end tag with nothing open", s, p); }
            const char *open = elems[stack[depth - 1]].name;
            if ((size_t)(q - p - 2) != strlen(open) || strncmp(p + 2, open, strlen(open)) != 0 || *q != '>') {
                return xml_fail(err, "end tag does not match its start tag", s, p);
            }
            depth--;
            p = q + 1;
            continue;
        }
        const char *q = p + 1; // start tag
        while (is_name_char(*q)) { q++; }
        if (q == p + 1 || q - p - 1 >= 16) { return xml_fail(err, "bad element name", s, p); }
        if (n_elems >= MAX_ELEMS) { return xml_fail(err, "too many elements for the checker", s, p); }
        if (depth == 0 && roots++ > 0) { return xml_fail(err, "a second root element", s, p); }
        Elem *e = &elems[n_elems];
        memset(e, 0, sizeof(*e));
        memcpy(e->name, p + 1, (size_t)(q - p - 1));
        e->parent = depth > 0 ? stack[depth - 1] : -1;
        for (;;) { // attributes: name="value" or name='value'
            while (isspace((unsigned char)*q)) { q++; }
            if (*q == '>' || (q[0] == '/' && q[1] == '>')) { break; }
            const char *an = q;
            while (is_name_char(*q)) { q++; }
            if (q == an || *q != '=' || (q[1] != '"' && q[1] != '\'')) { return xml_fail(err, "bad attribute", s, an); }
            char quote = q[1];
            const char *v = q + 2, *ve = v;
            while (*ve && *ve != quote) {
                if (*ve == '<') { return xml_fail(err, "'<' in an attribute value", s, ve); }
                if (*ve == '&' && xml_entity(ve) == 0) { return xml_fail(err, "bad entity in an attribute", s, ve); }
                ve++;
            }
            if (*ve != quote) { return xml_fail(err, "unterminated attribute value", s, v); }
            if (q - an == 5 && strncmp(an, "class", 5) == 0 && ve - v < 32) { memcpy(e->cls, v, (size_t)(ve - v)); }
            if (q - an == 6 && strncmp(an, "points", 6) == 0) {
                for (const char *c = v; c < ve; c++) { e->n_points += *c == ','; }
            }
            q = ve + 1;
        }
        n_elems++;
        if (*q == '/') { p = q + 2; continue; } // empty element
        if (depth == 256) { return xml_fail(err, "nesting deeper than 256", s, p); }
        stack[depth++] = n_elems - 1;
        p = q + 1;
    }
    if (depth != 0) { return xml_fail(err, "element left open at the end", s, p); }
    if (roots != 1) { return xml_fail(err, "no root element", s, s); }
    return 0;
}

// Elements named name with class cls (NULL: any), whose parent has class parent_cls (NULL: any).
static int count(const char *name, const char *cls, const char *parent_cls) {
    int n = 0;
    for (int i = 0; i < n_elems; i++) {
        const Elem *e = &elems[i];
        if (strcmp(e->name, name) != 0 || (cls && strcmp(e->cls, cls) != 0)) { continue; }
        if (parent_cls && (e->parent < 0 || strcmp(elems[e->parent].cls, parent_cls) != 0)) { continue; }
        n++;
    }
    return n;
}

// A number attribute of the tag that starts at tag (dflt when absent).
static double attr(const char *tag, const char *name, double dflt) {
    char want[40];
    snprintf(want, sizeof(want), " %s=\"", name);
    const char *end = strchr(tag, '>'), *p = strstr(tag, want);
    return p != NULL && p < end ? strtod(p + strlen(want), NULL) : dflt;
}

// Whether every left-aligned text line ends inside the drawing's width, at 0.6 em per character
// (DejaVu Sans averages less). Prints the first that does not.
static int texts_fit(const char *s, double width) {
    for (const char *t = strstr(s, "<text "); t != NULL; t = strstr(t + 1, "<text ")) {
        const char *gt = strchr(t, '>'), *end = strstr(t, "</text>");
        if (gt == NULL || end == NULL) { return 0; }
        if (strstr(t, "text-anchor") != NULL && strstr(t, "text-anchor") < gt) { continue; }
        int chars = 0;
        for (const char *c = gt + 1; c < end; c++) {
            if (*c == '&') { c = strchr(c, ';'); }
            if (((unsigned char)*c & 0xC0) != 0x80) { chars++; }
        }
        double right = attr(t, "x", 0) + 0.6 * attr(t, "font-size", 12) * chars;
        if (right > width) {
            fprintf(stderr, "  text ends at %.0f px of %.0f: %.*s\n", right, width, (int)(end - gt - 1), gt + 1);
            return 0;
        }
    }
    return 1;
}

// The y extent of the first polyline of class cls (-1: none).
static double polyline_height(const char *s, const char *cls) {
    char want[64];
    snprintf(want, sizeof(want), "class=\"%s\"", cls);
    const char *p = strstr(s, want);
    if (p == NULL || (p = strstr(p, "points=\"")) == NULL) { return -1; }
    double lo = 1e30, hi = -1e30, x, y;
    int n;
    for (p += 8; sscanf(p, "%lf,%lf%n", &x, &y, &n) == 2; p += n) {
        lo = y < lo ? y : lo;
        hi = y > hi ? y : hi;
    }
    return hi - lo;
}

// Draws one panel into path and parses it; returns the text (the caller frees it), NULL if malformed.
static char *draw_and_parse(const char *path, const char *prompt, const char *model, int method, const SkipSet *skip,
                            int L, const SpecStats *st, const SetHistory *sets, double plain_tps) {
    FILE *f = fopen(path, "w");
    if (f == NULL) { fprintf(stderr, "test_svg: cannot write %s\n", path); exit(2); }
    svg_begin(f, L, method, 1);
    svg_layer_map(f, 0, 1, prompt, model, method, skip, L, st, plain_tps);
    svg_time_series(f, SVG_HEAD, method, sets, &st->hist, st->rounds, L, "sublayers/token");
    svg_end(f);
    fclose(f);
    char *s = read_or_exit(path, NULL), err[SS_ERR_LEN];
    if (!check(xml_check(s, err) == 0, "%s: not well-formed XML: %s", path, err)) { free(s); return NULL; }
    check(count("svg", NULL, NULL) == 1 && elems[0].parent == -1 && strcmp(elems[0].name, "svg") == 0,
          "%s: the root is not one <svg>", path);
    return s;
}

static int encode_text(const char *dir, const char *text, int *ids, int max) {
    char path[512], err[SS_ERR_LEN];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    Tokenizer *tok = build_tokenizer(path, err);
    if (tok == NULL) { fprintf(stderr, "test_svg: %s\n", err); exit(2); }
    int n = encode(tok, text, strlen(text), 1, ids, max, err);
    free_tokenizer(tok);
    return n;
}

// The demo's run: a static set, so one map and no set rows; a bar pair and a gamma point per round.
static void test_known_run(Model *m, const char *dir, const char *tmp) {
    char err[SS_ERR_LEN], path[256];
    int L = m->config.n_layers, prompt[64], out[64];
    int n_prompt = encode_text(dir, "And the LORD said unto Moses,", prompt, 64);
    SpecParams sp;
    check(parse_skip_spec("attn:2,4,6,8,10 mlp:3,5,7,9", L, &sp.skip, err) == 0, "%s", err);
    sp.max_draft = 12;
    sp.exit = draft_exit_default();
    Sampler greedy = {0.0f, 1.0f, {1}};
    SpecStats *st = (SpecStats *)malloc_check(sizeof(SpecStats));
    Output o = output(out, 64, NULL, NULL);
    generate_spec(m, prompt, n_prompt, &sp, NULL, &greedy, &o, st);
    int drafted = 0, accepted = 0;
    for (int r = 0; r < st->hist.n; r++) { drafted += st->hist.drafted[r]; accepted += st->hist.accepted[r]; }
    check(st->rounds > 10 && st->hist.n == st->rounds, "known run: %d rounds recorded of %d", st->hist.n, st->rounds);
    check(drafted == st->drafted && accepted == st->accepted, "known run: recorded rounds sum to %d/%d, totals %d/%d",
          accepted, drafted, st->accepted, st->drafted);
    check(st->hist.threshold[0] == st->threshold_first, "known run: first recorded gamma %g, want %g",
          st->hist.threshold[0], st->threshold_first);
    // the confidence recorded is the one the exit rule compared: a draft shorter than K (and
    // not cut by the tokens left) ended on a confidence below its gamma, a full one did not
    int short_drafts = 0, below = 0, full_ok = 1;
    for (int r = 0; r + 1 < st->hist.n; r++) { // the last round may be cut by -n
        float c = st->hist.confidence[r], g = st->hist.threshold[r];
        if (st->hist.drafted[r] < 12) { short_drafts++; below += c < g; } else { full_ok &= c >= g; }
        full_ok &= c >= 0 && c <= 1;
    }
    check(below == short_drafts && below > 5 && full_ok,
          "known run: %d of %d short drafts ended below gamma, or a full one did not", below, short_drafts);
    check(st->sets.n == 1 && memcmp(&st->sets.set[0], &sp.skip, sizeof(SkipSet)) == 0 && st->sets.at[0] == 0,
          "known run: a static set recorded as %d sets", st->sets.n);
    snprintf(path, sizeof(path), "%s/known.svg", tmp);
    char *s = draw_and_parse(path, "And the LORD said unto Moses,", dir, METHOD_STATIC, &sp.skip, L, st, &st->sets, 0);
    if (s != NULL) {
        int cells = count("rect", "attn", "panel") + count("rect", "mlp", "panel");
        int filled = count("rect", "attn skipped", "panel") + count("rect", "mlp skipped", "panel");
        check(cells + filled == 2 * L, "known run: %d map cells, want %d", cells + filled, 2 * L);
        check(filled == 9 && count("rect", "attn skipped", "panel") == 5, "known run: %d filled cells, want 9 (5 attn)", filled);
        check(count("rect", "drafted", "series") == st->rounds, "known run: %d drafted bars, want %d",
              count("rect", "drafted", "series"), st->rounds);
        check(count("rect", "accepted", "series") == st->rounds, "known run: %d accepted bars, want %d",
              count("rect", "accepted", "series"), st->rounds);
        int gamma = -1;
        for (int i = 0; i < n_elems; i++) { if (strcmp(elems[i].cls, "gamma") == 0) { gamma = elems[i].n_points; } }
        check(gamma == st->rounds, "known run: gamma line of %d points, want %d", gamma, st->rounds);
        // gamma moves by thousandths here: on its own zoomed axis the line spans at least half
        // of its 40 px; and each round's draft confidence is drawn beside it
        float glo = st->hist.threshold[0], ghi = glo;
        for (int r = 0; r < st->hist.n; r++) {
            glo = st->hist.threshold[r] < glo ? st->hist.threshold[r] : glo;
            ghi = st->hist.threshold[r] > ghi ? st->hist.threshold[r] : ghi;
        }
        check(ghi > glo && ghi - glo < 0.05f && polyline_height(s, "gamma-zoom") >= 20,
              "known run: gamma %.4f to %.4f drawn %.1f px tall, want a zoomed line >= 20 px", glo, ghi,
              polyline_height(s, "gamma-zoom"));
        int drafting = 0; // a round cut to no draft by -n has no confidence to draw
        for (int r = 0; r < st->hist.n; r++) { drafting += st->hist.drafted[r] > 0; }
        check(drafting > 10 && count("circle", "confidence", "series") == drafting,
              "known run: %d confidence dots, want %d", count("circle", "confidence", "series"), drafting);
        check(count("g", "set", NULL) == 0, "known run: a static method drew %d set rows", count("g", "set", NULL));
        check(strstr(s, "not measured (run with --compare)") != NULL, "known run: no plain time, but no \"not measured\"");
        check(strstr(s, "the final skip set") != NULL, "known run: the map does not say it is the final set");
        free(s);
    }
    free(st);
}

// CLaSp changes its set during decoding: one row per recorded set, each row that set's cells.
static void test_clasp_rows(Model *m, const char *dir, const char *tmp) {
    char path[256];
    int L = m->config.n_layers, prompt[64], out[64];
    int n_prompt = encode_text(dir, "In the beginning God created the heaven and the earth.", prompt, 64);
    MethodParams mp = method_params_default();
    mp.clasp.interval = 2;
    Selector sel;
    selector_init(&sel, METHOD_CLASP, &mp, L, 3);
    SpecParams sp;
    memset(&sp.skip, 0, sizeof(sp.skip));
    sp.max_draft = 12;
    sp.exit = draft_exit_default();
    Sampler greedy = {0.0f, 1.0f, {1}};
    SpecStats *st = (SpecStats *)malloc_check(sizeof(SpecStats));
    Output o = output(out, 48, NULL, NULL);
    generate_spec(m, prompt, n_prompt, &sp, &sel, &greedy, &o, st);
    check(st->sets.n >= 3, "clasp: only %d sets recorded in %d rounds", st->sets.n, st->rounds);
    int differ = 1, cells = 0;
    for (int i = 0; i < st->sets.n; i++) {
        if (i > 0) { differ &= memcmp(&st->sets.set[i], &st->sets.set[i - 1], sizeof(SkipSet)) != 0; }
        if (i > 0) { differ &= st->sets.at[i] > st->sets.at[i - 1]; }
        cells += skip_count(&st->sets.set[i], L);
    }
    check(differ, "clasp: consecutive recorded sets repeat, or their rounds do not increase");
    snprintf(path, sizeof(path), "%s/clasp.svg", tmp);
    char *s = draw_and_parse(path, "In the beginning", dir, METHOD_CLASP, &sp.skip, L, st, &st->sets, 150.0);
    if (s != NULL) {
        check(count("g", "set", "series") == st->sets.n, "clasp: %d set rows, want %d", count("g", "set", "series"),
              st->sets.n);
        int drawn = count("rect", "attn skipped", "set") + count("rect", "mlp skipped", "set");
        check(drawn == cells, "clasp: %d filled cells in the set rows, want %d", drawn, cells);
        check(strstr(s, "--compare)") != NULL && strstr(s, "not measured") == NULL, "clasp: measured speedup not drawn");
        free(s);
    }
    selector_free(&sel);
    free(st);
}

// Self-SD's search: one row per candidate (the empty set first), each with its cost bar.
static void test_selfsd_rows(Model *m, const char *dir, const char *tmp) {
    char path[256];
    int L = m->config.n_layers, prompt[64];
    int n_prompt = encode_text(dir, "And God said,", prompt, 64);
    const int *prompts[1] = {prompt};
    int lengths[1] = {n_prompt};
    Objective obj = {prompts, lengths, 1, 8, 12, 1, draft_exit_default(), {0.0f, 1.0f, {1}}, NULL};
    SetHistory *h = (SetHistory *)calloc_check(1, sizeof(SetHistory));
    MethodParams mp = method_params_default();
    mp.selfsd.iters = 6;
    SkipSet best = select_selfsd(m, &obj, &mp.selfsd, 7, 0, h);
    check(h->n == 7 && h->total == 7 && skip_count(&h->set[0], L) == 0, "selfsd: %d candidates recorded, want 7", h->n);
    int found = 0;
    for (int i = 0; i < h->n; i++) { found |= memcmp(&h->set[i], &best, sizeof(SkipSet)) == 0 && h->at[i] == i; }
    check(found, "selfsd: the chosen set is not among the recorded candidates");
    SpecStats *st = (SpecStats *)calloc_check(1, sizeof(SpecStats));
    snprintf(path, sizeof(path), "%s/selfsd.svg", tmp);
    char *s = draw_and_parse(path, "And God said,", dir, METHOD_SELFSD, &best, L, st, h, 0);
    if (s != NULL) {
        check(count("g", "set", "series") == 7 && count("rect", "cost", "series") == 7, "selfsd: %d rows, %d cost bars, want 7",
              count("g", "set", "series"), count("rect", "cost", "series"));
        check(strstr(s, "nothing drafted") != NULL, "selfsd: a run with no rounds does not say so");
        check(strstr(s, "sublayers/token") != NULL, "selfsd: the cost bars have no unit");
        free(s);
    }
    free(st);
    free(h);
}

// Text from the user (prompt, model folder) cannot break the file.
static void test_escaping(const char *tmp) {
    char path[256];
    SkipSet none;
    memset(&none, 0, sizeof(none));
    SpecStats *st = (SpecStats *)calloc_check(1, sizeof(SpecStats));
    snprintf(path, sizeof(path), "%s/escape.svg", tmp);
    const char *prompt = "<b>\"Tom & Jerry\"</b> \x01\xff\xe2\x82 caf\xc3\xa9 ]]> &amp; --> a long tail beyond sixty characters....";
    char *s = draw_and_parse(path, prompt, "dir&<name>", METHOD_NONE, &none, 4, st, &st->sets, 0);
    if (s != NULL) {
        check(strstr(s, "&lt;b&gt;\"Tom &amp; Jerry\"&lt;/b&gt;") != NULL && strstr(s, "caf\xc3\xa9") != NULL,
              "escaping: the prompt is not escaped as expected");
        check(strstr(s, "plain decoding: no draft") != NULL, "escaping: method none does not say it drafts nothing");
        check(strstr(s, "round 1") == NULL && strstr(s, "round 0") == NULL, "plain run: round labels without rounds");
        free(s);
    }
    free(st);
}

// A 30-layer model (SmolLM2's shape), a 60-character folder name and SWIFT's 40 sets over 100
// rounds: every header line fits the drawing's width, the set rows stay tall enough to read,
// every label is at least 9 px, and each set's first round is ticked under the rounds.
static void test_wide_and_rows(const char *tmp) {
    char path[256];
    int L = 30;
    SpecStats *st = (SpecStats *)calloc_check(1, sizeof(SpecStats));
    SetHistory *sets = (SetHistory *)calloc_check(1, sizeof(SetHistory));
    for (int i = 0; i < 40; i++) {
        SkipSet k;
        memset(&k, 0, sizeof(k));
        k.attn[i % L] = k.mlp[(i + 7) % L] = 1;
        set_history_add(sets, &k, 2 * i, -1.0f);
    }
    for (int r = 0; r < 100; r++) { record_round(st, 3, 2, 0, 0.6f + 0.001f * (r % 5), 0.6f, 0.5f); }
    st->draft_ms = 10;
    st->verify_ms = 20;
    st->gen.n_generated = 300;
    st->gen.decode_ms = 40;
    snprintf(path, sizeof(path), "%s/wide.svg", tmp);
    const char *model = "/home/someone/models/HuggingFaceTB-SmolLM2-135M-Instruct-f32";
    char *s = draw_and_parse(path, "Once upon a time there was a very long prompt that goes on", model, METHOD_SWIFT,
                             &sets->set[39], L, st, sets, 5000.0);
    if (s != NULL) {
        check(texts_fit(s, svg_width(L)), "30 layers: a text line runs past the right edge (%.0f px)", svg_width(L));
        check(strstr(s, "a draft pass") != NULL && strstr(s, "a verify pass") != NULL,
              "--compare: the figure does not give the passes' costs in plain steps");
        const char *row = strstr(s, "<g class=\"set\"><rect");
        double rh = row ? attr(row + 17, "height", 0) / 0.45 : 0;
        check(rh >= 9.99, "set rows %.1f px tall, want >= 10", rh);
        double smallest = 99;
        for (const char *t = strstr(s, "font-size=\""); t != NULL; t = strstr(t + 1, "font-size=\"")) {
            double fs = strtod(t + 11, NULL);
            smallest = fs < smallest ? fs : smallest;
        }
        check(smallest >= 9, "a label at font-size %g, want >= 9", smallest);
        check(count("line", "set-tick", "series") == 40, "%d set ticks under the rounds, want 40",
              count("line", "set-tick", "series"));
        free(s);
    }
    free(sets);
    free(st);
}

// The CLI: two prompts, one file, two panels, sized for two.
static void test_cli(const char *tmp) {
    char args[1024], path[256], prompts[256];
    snprintf(prompts, sizeof(prompts), "%s/prompts.txt", tmp);
    FILE *f = fopen(prompts, "w");
    if (f == NULL) { fprintf(stderr, "test_svg: cannot write %s\n", prompts); exit(2); }
    fprintf(f, "And the LORD said unto Moses,\nIn the beginning\n");
    fclose(f);
    snprintf(path, sizeof(path), "%s/cli.svg", tmp);
    snprintf(args, sizeof(args), "-m tiny_models/kjv-12l -f %s -n 12 --skip \"attn:3 mlp:5\" --svg %s", prompts, path);
    char *err_text;
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", args, NULL, &err_text);
    check(rc == 0, "cli: selfspec %s: exit %d:\n%s", args, rc, err_text);
    free(err_text);
    if (rc != 0) { return; }
    char *s = read_or_exit(path, NULL), err[SS_ERR_LEN], want[64];
    if (check(xml_check(s, err) == 0, "cli: not well-formed XML: %s", err)) {
        check(count("g", "panel", NULL) == 2 && count("g", "series", NULL) == 2, "cli: %d panels, want 2",
              count("g", "panel", NULL));
        check(count("rect", "attn skipped", "panel") == 2 && count("rect", "mlp skipped", "panel") == 2,
              "cli: %d + %d filled map cells, want 2 + 2", count("rect", "attn skipped", "panel"),
              count("rect", "mlp skipped", "panel"));
        snprintf(want, sizeof(want), "height=\"%.0f\"", 2 * svg_panel_height(METHOD_STATIC));
        check(strstr(s, want) != NULL, "cli: the file is not sized for two panels (%s)", want);
    }
    free(s);
}

int main(void) {
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "/tmp/selfspec-svg-XXXXXX");
    if (mkdtemp(tmp) == NULL) { fprintf(stderr, "test_svg: mkdtemp failed\n"); return 2; }
    const char *dir = "tiny_models/kjv-12l";
    Model m;
    char err[SS_ERR_LEN];
    if (check(build_model(&m, dir, 256, err) == 0, "%s", err)) {
        test_known_run(&m, dir, tmp);
        test_clasp_rows(&m, dir, tmp);
        test_selfsd_rows(&m, dir, tmp);
        free_model(&m);
    }
    test_escaping(tmp);
    test_wide_and_rows(tmp);
    test_cli(tmp);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) { fprintf(stderr, "test_svg: could not remove %s\n", tmp); }
    return test_summary("test_svg");
}
