// oracle.c: a baseline search in none of the papers, to see how far the methods land. It scores
// every skip set of one size (round(r 2L) sublayers, r = 0.45 by default: SWIFT's) when there
// are at most --sets N of them, else N random ones, each by Self-SD's objective (selfspec.cu's
// measure_objective: the search prompts decoded with the set, 32 tokens each, greedy, cost per
// token; the sublayers run by default, which is deterministic). Only when it scored every set is
// its best a bound on what a set of that size can do; on a 12-layer model (C(24, 11) = 2.5
// million sets) it is a sample, and a search such as Self-SD's may beat it.
//   usage: test/bench/oracle [-m DIR] [-p TEXT | -f FILE] [--sets N] [--ratio R] [-s SEED]
//                            [--objective cost|time] [-K N] [--exit adaptive|none]
//                            [--save-skip FILE] [--trace FILE]
// Prints its progress and the best set on stderr; --save-skip writes that set for ./selfspec
// --skip-file, --trace the search records in the trace's format (README: the trace), which
// test/bench/draw_trace.py draws. The first Ctrl-C stops the search with the best set so far.
// test_select includes this file for select_oracle alone (TESTING is defined there).
#ifndef TESTING
#define TESTING
#define ORACLE_PROGRAM
#include "../../selfspec.cu"
#endif

// Every skip set with exactly `count` skipped sublayers when there are at most max_sets of them,
// else max_sets random ones, scored by the objective; each is handed to the observer (the last
// with done set). It stops early on Ctrl-C (search_interrupted).
static SkipSet select_oracle(Model *m, const Objective *obj, int count, long max_sets,
                             uint64_t seed, long *n_tried) {
    int L = m->config.n_layers, slots = 2 * L;
    double total = 1; // C(2L, count)
    for (int k = 0; k < count; k++) { total = total * (slots - k) / (k + 1); }
    SkipSet best, cand;
    memset(&best, 0, sizeof(best));
    double best_cost = INFINITY;
    Rng r;
    rng_seed(&r, seed);
    int idx[GP_MAX_DIM];
    for (int k = 0; k < count; k++) { idx[k] = k; }
    long tried = 0, n_sets = total <= (double)max_sets ? (long)total : max_sets;
    Candidate c = {-1, 0, (int)n_sets, best, best, 0, 0, 0, 0};
    while (tried < n_sets && !search_interrupted) {
        if (n_sets == (long)total) { // every set, in lexicographic order of idx
            memset(&cand, 0, sizeof(cand));
            for (int k = 0; k < count; k++) {
                if (idx[k] < L) { cand.attn[idx[k]] = 1; } else { cand.mlp[idx[k] - L] = 1; }
            }
            int k = count - 1; // the next combination
            while (k >= 0 && idx[k] == slots - count + k) { k--; }
            if (k >= 0) {
                idx[k]++;
                for (int q = k + 1; q < count; q++) { idx[q] = idx[q - 1] + 1; }
            }
        } else {
            random_skip_set(&r, 0, count, 0, L - 1, &cand);
        }
        double cost = measure_objective(m, obj, &cand);
        if (search_interrupted) { break; } // a cost over part of the prompts is not a score
        if (cost < best_cost) { best_cost = cost; best = cand; }
        c.i = (int)tried++, c.skip = cand, c.objective = cost, c.best = best;
        c.best_objective = best_cost;
        observe(obj, &c);
    }
    c.done = 1, c.i = (int)tried, c.skip = c.best = best, c.objective = best_cost;
    observe(obj, &c);
    *n_tried = tried;
    return best;
}

#ifdef ORACLE_PROGRAM
typedef struct {
    FILE *trace;         // --trace's stream, or NULL
    int L, count, every; // the model's layers, the sublayers each set skips, every set scored
    const char *unit;    // the objective's
    double t0, shown;    // the search's start, and its last progress line
} Watch;

// Each scored set: a "search" record (the last: "search_done"), and a progress line every 10 s.
static void watch_set(void *ctx, const Candidate *c) {
    Watch *w = (Watch *)ctx;
    double now = time_ms();
    if (w->trace && c->done) {
        fprintf(w->trace, "{\"type\": \"search_done\", \"method\": \"oracle\", \"scored\": %d, "
                "\"interrupted\": %s", c->i, search_interrupted ? "true" : "false");
    } else if (w->trace) {
        fprintf(w->trace, "{\"type\": \"search\", \"method\": \"oracle\", \"i\": %d, \"phase\": \"%s\"",
                c->i, w->every ? "every" : "random");
    }
    if (w->trace) {
        write_skip(w->trace, ", \"skip\": ", &c->skip, w->L);
        trace_float(w->trace, ", \"objective\": ", c->objective);
        fprintf(w->trace, "}\n");
    }
    if (c->done && search_interrupted) {
        fprintf(stderr, "oracle: interrupted after %d of %d sets: best so far costs %.4f %s\n",
                c->i, c->of, c->objective, w->unit);
    } else if (c->done) {
        fprintf(stderr, "oracle: the best of %d %ssets of %d sublayers costs %.4f %s%s\n", c->i,
                w->every ? "" : "random ", w->count, c->objective, w->unit,
                w->every ? " (every set there is: a bound for that size)" : "");
    } else if (now - w->shown > 10e3) {
        w->shown = now;
        fprintf(stderr, "oracle: %d of %d sets scored, best cost %.4f, ~%.0f s left\n", c->i + 1,
                c->of, c->best_objective, (now - w->t0) / (c->i + 1) * (c->of - c->i - 1) / 1e3);
    }
}

static void on_interrupt(int sig) {
    search_interrupted = 1;
    signal(sig, on_stop); // a second Ctrl-C quits
}

// One line on stderr and exit status 1 (with the usage when a flag is wrong).
static void fail_exit(const char *why, int show_usage) {
    fprintf(stderr, "oracle: error: %s\n", why);
    if (show_usage) {
        fprintf(stderr, "usage: test/bench/oracle [-m DIR] [-p TEXT | -f FILE] [--sets N] "
                "[--ratio R] [-s SEED]\n       [--objective cost|time] [-K N] "
                "[--exit adaptive|none] [--save-skip FILE] [--trace FILE]\n");
    }
    exit(1);
}

// The search prompts: -p's text, or -f's non-empty lines (a two-character \\n in one stands for
// a newline, as ./selfspec reads them), each encoded and checked against the context with the
// n_new tokens each scoring decodes, into ids and lens (the first max). Returns how many.
static int load_search_prompts(const Tokenizer *tok, const Config *c, const char *text,
                               const char *file, int n_new, int **ids, int *lens, int max) {
    size_t len = 0;
    char err[SS_ERR_LEN], *all = file ? read_file(file, &len, err) : NULL, *rest;
    if (file && all == NULL) { fail_exit(err, 0); }
    int n = 0;
    for (char *s = file ? strtok_r(all, "\r\n", &rest) : (char *)text; s && n < max;
         s = file ? strtok_r(NULL, "\r\n", &rest) : NULL) {
        char *o = file ? s : NULL; // (-p's text is used as given)
        for (const char *q = s; o && *q; q++) {
            int newline = q[0] == '\\' && q[1] == 'n';
            *o++ = newline ? '\n' : *q;
            q += newline;
        }
        if (o) { *o = '\0'; }
        ids[n] = (int *)malloc_check((size_t)c->seq_len * sizeof(int));
        lens[n] = encode(tok, s, strlen(s), 1, ids[n], c->seq_len, err);
        if (lens[n] <= 0 || lens[n] + n_new > c->seq_len) {
            fail_exit("a search prompt and the tokens it scores do not fit the context", 0);
        }
        n++;
    }
    free(all);
    return n;
}

// The trace's header for the search alone (README: the trace; draw_trace.py reads it).
static void oracle_header(FILE *f, const char *dir, const Objective *obj, int L, long sets,
                          int count, double ratio, int dev_prompts) {
    json_field(f, "{\"type\": \"header\", \"model\": ", dir);
    fprintf(f, ", \"method\": \"oracle\", \"n_layers\": %d, \"K\": %d, \"params\": {\"objective\": "
            "\"%s\", \"search_on\": \"%s\", \"dev_tokens\": %d, \"max_sets\": %ld, \"count\": %d",
            L, obj->max_draft, obj->use_cost_model ? "cost" : "time",
            dev_prompts ? "dev-prompts" : "prompt", obj->n_new, sets, count);
    trace_float(f, ", \"skip_ratio\": ", ratio);
    fprintf(f, "}}\n");
}

// The program's settings: its flags, with ./selfspec's defaults (kjv-12l, its default prompt).
typedef struct {
    const char *dir, *prompt, *file;  // -m, -p, -f
    const char *paths[2];             // --save-skip, --trace (NULL: not given)
    long sets;                        // --sets
    double ratio;                     // --ratio
    int seed, cost_model, max_draft;  // -s, --objective, -K
    int exit_none;                    // --exit none (else adaptive)
} Flags;

static Flags parse_flags(int argc, char **argv) {
    Flags f = {"tiny_models/kjv-12l", "In the beginning God created", NULL, {NULL, NULL}, 400,
               0.45, 42, 1, 12, 0};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) { fail_exit("a flag without its value", 1); }
        if (!strcmp(a, "-m")) { f.dir = v; }
        else if (!strcmp(a, "-p")) { f.prompt = v; }
        else if (!strcmp(a, "-f")) { f.file = v; }
        else if (!strcmp(a, "--sets")) { f.sets = atol(v); }
        else if (!strcmp(a, "--ratio")) { f.ratio = atof(v); }
        else if (!strcmp(a, "-s")) { f.seed = atoi(v); }
        else if (!strcmp(a, "--objective")) { f.cost_model = strcmp(v, "time") != 0; }
        else if (!strcmp(a, "-K")) { f.max_draft = atoi(v); }
        else if (!strcmp(a, "--exit")) { f.exit_none = !strcmp(v, "none"); }
        else if (!strcmp(a, "--save-skip")) { f.paths[0] = v; }
        else if (!strcmp(a, "--trace")) { f.paths[1] = v; }
        else { fail_exit("an unknown flag", 1); }
    }
    if (f.sets < 1 || f.ratio <= 0 || f.ratio > 1 || f.max_draft < 1 || f.max_draft > MAX_DRAFT) {
        fail_exit("--sets must be at least 1, --ratio in (0, 1], -K in [1, MAX_DRAFT]", 1);
    }
    return f;
}

int main(int argc, char **argv) {
    Flags f = parse_flags(argc, argv);
    signal(SIGINT, on_stop); // the outputs as selfspec writes them (README "Scope and limits")
    signal(SIGTERM, on_stop);
    atexit(remove_temporaries);
    char err[SS_ERR_LEN];
    OutputFile outs[MAX_OUTPUTS];
    memset(outs, 0, sizeof(outs));
    const char *inputs[1] = {f.file}, *names[2] = {"--save-skip", "--trace"};
    int n_outs = 0;
    for (int k = 0; k < 2; k++) {
        int slot = n_outs;
        if (f.paths[k] && open_output(&outs[n_outs++], slot, names[k], f.paths[k], inputs, 1,
                                      f.dir, err)) {
            fail_exit(err, 0);
        }
    }
    Model m;
    Tokenizer *tok = NULL;
    char *path = join_path(f.dir, "tokenizer.json");
    if (build_model(&m, f.dir, 4096, err) || (tok = build_tokenizer(path, err)) == NULL) {
        fail_exit(err, 0);
    }
    free(path);
    int L = m.config.n_layers, count = (int)lround(f.ratio * 2 * L), n_new = 32, *ids[64], lens[64];
    int n = load_search_prompts(tok, &m.config, f.prompt, f.file, n_new, ids, lens, 64);
    double total = 1; // C(2L, count): every set is scored when there are at most --sets
    for (int k = 0; k < count; k++) { total = total * (2 * L - k) / (k + 1); }
    Watch w = {f.paths[1] ? outs[n_outs - 1].f : NULL, L, count, total <= (double)f.sets,
               f.cost_model ? "sublayers/token" : "ms/token", time_ms(), time_ms()};
    Observer watch = {&w, NULL, NULL, watch_set};
    DraftExit exit_rule = draft_exit_default(); // ./selfspec's, which --skip-file's set gets
    if (f.exit_none) { exit_rule.mode = EXIT_NONE; }
    Objective obj = {(const int *const *)ids, lens, n, n_new, f.max_draft, f.cost_model,
                     exit_rule, {0.0f, 1.0f, {0}}, &watch, NULL, NULL};
    if (w.trace) { oracle_header(w.trace, f.dir, &obj, L, f.sets, count, f.ratio, f.file != NULL); }
    signal(SIGINT, on_interrupt); // (before the line that says the search started)
    fprintf(stderr, "oracle: scoring %ld random skip sets of %d sublayers (every one when there "
            "are at most that many) on %s\n", f.sets, count, f.file ? f.file : "the prompt");
    long tried;
    SkipSet best = select_oracle(&m, &obj, count, f.sets, (uint64_t)f.seed, &tried);
    signal(SIGINT, on_stop);
    char attn[SS_MAX_LAYERS + 1], mlp[SS_MAX_LAYERS + 1];
    layer_map(&best, L, attn, mlp);
    fprintf(stderr, "  attn %s\n  mlp  %s\n", attn, mlp);
    if (f.paths[0]) {
        write_skip(outs[0].f, "", &best, L);
        fputc('\n', outs[0].f);
    }
    int failed = commit_outputs(outs, n_outs, err);
    if (failed) { fprintf(stderr, "oracle: error: %s\n", err); }
    free_outputs(outs, n_outs);
    for (int k = 0; k < n; k++) { free(ids[k]); }
    free_tokenizer(tok);
    free_model(&m);
    return failed ? 1 : 0;
}
#endif
