// test_properties.c: documented behaviours, each stated as a property and checked directly on
// the engine's functions (never through the reference traces in test/refs/traces/, which a
// regeneration would bless); each expectation is computed here, not with the helper it checks:
//   - a round's end, drafted, accepted, emitted, leaf and verify rows replayed from its own draft
//     and verification, SWIFT's tree filling its pass and an EOS among kept drafts included;
//   - top-p against a brute-force nucleus on rows built to hit its edges;
//   - the draft exit's state across prompts; an EOS among the kept drafts cut from the statistics;
//   - CLaSp: the DP runs at the last accepted token's slot; M capped at the end of the context;
//   - SWIFT: the matchness window; the best set carried once the search ended; the patience
//     counter; App. C.2's ratio rule; the budget counting the next step's price.
#define TESTING
#include "../selfspec.cu"
#include "testing.h"

#include <unistd.h>

static int load_model(Model *m, const char *dir, int ctx) {
    char err[SS_ERR_LEN];
    return check(build_model(m, dir, ctx, err) == 0, "%s", err);
}

static int same_set(const SkipSet *a, const SkipSet *b, int L) {
    for (int l = 0; l < L; l++) {
        if (a->attn[l] != b->attn[l] || a->mlp[l] != b->mlp[l]) { return 0; }
    }
    return 1;
}

// ---------------------------------------------------------------------------- top-p

static int compare_desc_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

// The nucleus by its definition, with no shortcut: softmax(logits / T) (the same float operations
// as warp_probs), every token sorted by probability (ties: lower id first), the mass cumulated in
// that order, the cut after the first token where it reaches top_p, renormalized by that mass.
static void brute_nucleus(const float *logits, int n, float T, float top_p, float *out) {
    int top = 0, order[256];
    for (int i = 1; i < n; i++) { top = logits[i] > logits[top] ? i : top; }
    float sum = 0.0f, p[256];
    for (int i = 0; i < n; i++) {
        p[i] = expf((logits[i] - logits[top]) / T);
        sum += p[i];
    }
    for (int i = 0; i < n; i++) { p[i] /= sum; }
    for (int i = 0; i < n; i++) { // insertion sort, stable: equal probabilities keep id order
        int j = i;
        for (; j > 0 && p[order[j - 1]] < p[i]; j--) { order[j] = order[j - 1]; }
        order[j] = i;
    }
    if (top_p >= 1.0f) { // off: the softmax itself
        memcpy(out, p, (size_t)n * sizeof(float));
        return;
    }
    int keep = n; // if rounding never lets the mass reach top_p: all n
    float mass = 0.0f;
    for (int k = 0; k < n; k++) {
        mass += p[order[k]];
        if (mass >= top_p) {
            keep = k + 1;
            break;
        }
    }
    memset(out, 0, (size_t)n * sizeof(float));
    for (int k = 0; k < keep; k++) { out[order[k]] = p[order[k]] / mass; }
}

// warp_probs against the brute force, element by element and bitwise (the same float operations
// in the same order), and against want (NULL: none) within 1e-6; sample_probs must then draw from
// the nucleus only, each token over an interval of u as wide as its probability.
static void check_nucleus(const char *what, const float *logits, int n, float T, float top_p, const float *want) {
    float got[256], brute[256];
    ProbIndex scratch[256];
    warp_probs(logits, n, T, top_p, got, scratch);
    brute_nucleus(logits, n, T, top_p, brute);
    int bad = -1, bad_want = -1;
    for (int i = 0; i < n; i++) {
        if (got[i] != brute[i] && bad < 0) { bad = i; }
        if (want && fabsf(got[i] - want[i]) > 1e-6f && bad_want < 0) { bad_want = i; }
    }
    check(bad < 0, "top-p %s (n %d, T %g, top-p %.9g): token %d warped to %.9g, the brute-force nucleus %.9g", what,
          n, T, top_p, bad, bad < 0 ? 0 : got[bad], bad < 0 ? 0 : brute[bad]);
    if (want) {
        check(bad_want < 0, "top-p %s (top-p %.9g): token %d warped to %.9g, want %.9g", what, top_p, bad_want,
              bad_want < 0 ? 0 : got[bad_want], bad_want < 0 ? 0 : want[bad_want]);
    }
    float cdf = 0.0f;
    int outside = 0;
    for (int i = 0; i < n; i++) {
        if (brute[i] == 0.0f) { continue; }
        float mid = cdf + 0.5f * brute[i]; // the middle of token i's interval of u
        cdf += brute[i];
        outside += sample_probs(got, n, mid) != i;
    }
    for (int k = 0; k < 64; k++) {
        int t = sample_probs(got, n, k / 64.0f);
        outside += brute[t] == 0.0f;
    }
    check(outside == 0, "top-p %s: sample_probs drew %d times outside its token's interval or the nucleus", what,
          outside);
}

// Rows that hit the nucleus's edges, each with the distribution worked by hand where probabilities
// are exact in float (equal logits: 1/n for n a power of two; -inf: exactly 0), then random rows
// with ties whose top_p is set to a cumulative mass exactly. The prefilter's row: token 1 sits
// exactly at the cutoff (1 - top_p) / (n - 1) in float and is in the nucleus, since token 0 falls
// one ulp short of top_p.
static void test_top_p_brute_force(void) {
    float L4[4] = {0, 0, 0, 0}, want[256];
    float half[4] = {0.5f, 0.5f, 0, 0};
    check_nucleus("4 equal, mass reaches 0.5 exactly", L4, 4, 1.0f, 0.5f, half);
    float three[4] = {1.0f / 3, 1.0f / 3, 1.0f / 3, 0};
    check_nucleus("4 equal, 0.5 + 1 ulp", L4, 4, 1.0f, nextafterf(0.5f, 1.0f), three);
    float one[4] = {1, 0, 0, 0};
    check_nucleus("4 equal, top-p 1e-6 (ties at the top: lowest id)", L4, 4, 1.0f, 1e-6f, one);
    float quarter[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    check_nucleus("4 equal, top-p just under 1", L4, 4, 1.0f, nextafterf(1.0f, 0.0f), quarter);
    check_nucleus("4 equal, top-p 0.75 exactly", L4, 4, 1.0f, 0.75f, three);
    float lone = 3.0f, sure[1] = {1};
    check_nucleus("a single token, top-p 1e-6", &lone, 1, 1.0f, 1e-6f, sure);
    check_nucleus("a single token, top-p 0.5", &lone, 1, 0.7f, 0.5f, sure);
    float masked[6] = {-INFINITY, 2.0f, -INFINITY, 2.0f, 2.0f, 2.0f}; // four live tokens, exactly .25 each
    float live[6] = {0, 0.5f, 0, 0.5f, 0, 0};
    check_nucleus("4 live of 6, mass reaches 0.5 exactly", masked, 6, 0.8f, 0.5f, live);
    float many[64];
    for (int i = 0; i < 64; i++) { many[i] = -1.5f; }
    for (int i = 0; i < 64; i++) { want[i] = i < 16 ? 1.0f / 16 : 0.0f; }
    check_nucleus("64 equal, top-p 0.25 exactly", many, 64, 1.0f, 0.25f, want);
    for (int i = 0; i < 64; i++) { want[i] = i < 17 ? 1.0f / 17 : 0.0f; }
    check_nucleus("64 equal, top-p 0.25 + 1 ulp", many, 64, 1.0f, nextafterf(0.25f, 1.0f), want);
    // near 1: (0, 0, 0, -3) has p3 = e^-3 / (3 + e^-3) = 0.016326; 0.98 keeps three, 0.99 all four
    float tail[4] = {0, 0, 0, -3}, soft[4];
    check_nucleus("a small tail, top-p 0.98", tail, 4, 1.0f, 0.98f, three);
    double e3 = exp(-3.0);
    for (int i = 0; i < 4; i++) { soft[i] = (float)((i < 3 ? 1.0 : e3) / (3 + e3)); }
    check_nucleus("a small tail, top-p 0.99", tail, 4, 1.0f, 0.99f, soft);
    // the prefilter's cutoff
    float edge[3] = {0, -0.0003f, -0.0003f}, p[3], cut[3];
    ProbIndex scratch[3];
    warp_probs(edge, 3, 1.0f, 1.0f, p, scratch);
    float top_p = nextafterf(p[0], 1.0f), cutoff = (1.0f - top_p) / 2;
    check(p[1] == cutoff && p[2] == cutoff && p[0] < top_p,
          "the prefilter's row no longer sits on the cutoff: p (%.9g, %.9g), cutoff %.9g", p[0], p[1], cutoff);
    cut[0] = p[0] / (p[0] + p[1]);
    cut[1] = p[1] / (p[0] + p[1]);
    cut[2] = 0.0f;
    check_nucleus("token 1 exactly at the prefilter's cutoff", edge, 3, 1.0f, top_p, cut);
    // random rows: few distinct logits (ties), every size to 200, top_p at each cumulative mass
    // (reached exactly), one ulp either side of it, and uniform ones
    Rng r;
    rng_seed(&r, 39);
    float row[256], warped[256];
    for (int trial = 0; trial < 400; trial++) {
        int n = 1 + (int)(rng_uniform(&r) * 200), levels = 1 + (int)(rng_uniform(&r) * 6);
        float T = trial % 3 == 0 ? 1.0f : 0.3f + 1.5f * rng_uniform(&r);
        for (int i = 0; i < n; i++) { row[i] = (float)(int)(rng_uniform(&r) * levels) * 0.7f - 2.0f; }
        brute_nucleus(row, n, T, 1.0f, warped);
        float sorted[256], mass = 0.0f;
        memcpy(sorted, warped, (size_t)n * sizeof(float));
        qsort(sorted, (size_t)n, sizeof(float), compare_desc_float);
        int k = (int)(rng_uniform(&r) * n);
        for (int j = 0; j <= k; j++) { mass += sorted[j]; }
        float tps[5] = {mass, nextafterf(mass, 0.0f), nextafterf(mass, 2.0f), rng_uniform(&r), 1e-7f};
        for (int j = 0; j < 5; j++) {
            if (tps[j] > 0.0f && tps[j] < 1.0f) { check_nucleus("random row", row, n, T, tps[j], NULL); }
        }
    }
}

// ---------------------------------------------------------------------------- the decoding loop

static Sampler greedy_sampler(void) {
    Sampler s = {0.0f, 1.0f, {1}};
    return s;
}

// Self-SD Sec. 3.4's exit rule carries its whole state (gamma, AR and the update count, which
// makes beta1 = 0 in the very first round only) from one prompt to the next: replaying Eq. 2-4
// over both prompts' rounds from gamma_0 must give the state generate_spec left, and the second
// prompt starts from the first's gamma. Then the CLI, over a two-prompt -f file: the second
// prompt's gamma_first is the first's gamma_last.
static void test_exit_across_prompts(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    // quick: 24 tokens a prompt still give over 10 rounds and a gamma moved from gamma_0
    int L = m.config.n_layers, K = 6, out[64], n_new = quick(40, 24);
    SpecParams sp = {alternate_layers(L), K, draft_exit_default(), NULL};
    DraftExit replay = draft_exit_default(), after_first;
    EngineLog *g = watch_engine();
    sp.observer = &engine_watcher;
    int r0 = 0, ok = 1;
    for (int pi = 0; pi < 2; pi++) {
        int prompt[4] = {1, 5 + 7 * pi, 9, 30}, n = 1;
        Sampler smp = greedy_sampler();
        SpecStats st;
        Output o = output(out, n_new, NULL, NULL);
        generate_spec(&m, prompt, 4, &sp, NULL, &smp, &o, &st);
        if (pi == 1) {
            check(st.threshold_first == after_first.threshold, "exit rule: the second prompt started at gamma "
                  "%.6f, the first ended at %.6f", st.threshold_first, after_first.threshold);
        }
        for (int r = r0; r < g->rounds && r < LOG_MAX; r++) { // Eq. 2-4 by hand, round by round
            int pos = 4 + n - 1, limit = K;
            if (limit > m.config.seq_len - 1 - pos) { limit = m.config.seq_len - 1 - pos; }
            if (limit > n_new - n - 1) { limit = n_new - n - 1; }
            draft_exit_update(&replay, g->accepted[r], g->drafted[r], g->drafted[r] == limit);
            n += g->accepted[r] + 1;
        }
        ok &= n == o.n;
        r0 = g->rounds;
        after_first = sp.exit;
    }
    check(ok && g->rounds < LOG_MAX && replay.rounds > 10 && after_first.ar > 0.0f, "exit rule: the rounds logged do "
          "not add up to the output, or the first prompt left AR at 0 (a reset could not be seen)");
    check(sp.exit.threshold == replay.threshold && sp.exit.ar == replay.ar && sp.exit.rounds == replay.rounds,
          "exit rule across prompts: gamma %.9g AR %.9g after %d updates, replayed from gamma_0 over both prompts: "
          "%.9g %.9g %d", sp.exit.threshold, sp.exit.ar, sp.exit.rounds, replay.threshold, replay.ar, replay.rounds);
    unwatch_engine();
    free_model(&m);
    // the CLI keeps it between the prompts of -f
    char tmp[] = "/tmp/selfspec_props_XXXXXX", path[256], args[1024], *text;
    if (!check(mkdtemp(tmp) != NULL, "mkdtemp failed")) { return; }
    snprintf(path, sizeof(path), "%s/prompts.txt", tmp);
    FILE *f = fopen(path, "w");
    fputs("In the beginning\nAnd God said\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "-m tiny_models/kjv-12l -f %s -n %d --skip attn:2-5 --json", path, n_new);
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", args, &text, NULL);
    const char *a = strstr(text, "\"gamma_last\": "), *b = a ? strstr(a, "\"gamma_first\": ") : NULL;
    float last = a ? strtof(a + 14, NULL) : -1, first = b ? strtof(b + 15, NULL) : -2;
    check(rc == 0 && a && b && first == last && last != 0.6f, "CLI -f: the second prompt's gamma_first %.4f, the "
          "first's gamma_last %.4f (rc %d)", first, last, rc);
    free(text);
    snprintf(args, sizeof(args), "rm -rf %s", tmp);
    if (system(args) != 0) { fprintf(stderr, "could not remove %s\n", tmp); }
}

// An EOS among the kept drafts ends the output there, and the round counts as if drafting had
// stopped before it (the EOS the round's own token): every round emits accepted + 1 tokens, so
// accepted + rounds = generated - 1 (the first token is the prefill's). The draft is planted to
// be the full model and K = 4 with no exit, so every round keeps 4 drafts; the EOS is a token
// whose first appearance is a round's last kept draft (then one whose first is an earlier one).
static void test_eos_in_draft(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, prompt[4] = {1, 9, 17, 25}, plain[48], out[48];
    SkipSet skip = alternate_layers(L);
    plant(&m, &skip);
    Sampler smp = greedy_sampler();
    GenStats gs;
    Output po = output(plain, 41, NULL, NULL);
    int n = generate_plain(&m, prompt, 4, NULL, &smp, &po, &gs);
    for (int want_j = 3; want_j >= 1; want_j -= 2) { // the last kept draft, then the second
        int at = -1;
        for (int i = 1; i < n && at < 0; i++) {
            int first = 1;
            for (int t = 0; t < i; t++) { first &= plain[t] != plain[i]; }
            if (first && (i - 1) % 5 == want_j) { at = i; }
        }
        if (!check(at > 0, "EOS test: no token first appears at a round's kept draft %d", want_j)) { continue; }
        m.config.n_eos = 1;
        m.config.eos_ids[0] = plain[at];
        SpecParams sp = {skip, 4, draft_exit_default(), NULL};
        sp.exit.mode = EXIT_NONE;
        SpecStats st;
        Output o = output(out, 41, NULL, NULL);
        int got = generate_spec(&m, prompt, 4, &sp, NULL, &smp, &o, &st);
        check(got == at + 1 && memcmp(out, plain, (size_t)got * sizeof(int)) == 0,
              "EOS at kept draft %d: %d tokens, want %d equal to plain decoding's", want_j, got, at + 1);
        check(st.accepted + st.rounds == got - 1 && st.drafted == st.accepted && st.rounds == (at + 4) / 5,
              "EOS as kept draft %d: %d rounds drafted %d, accepted %d for %d tokens; want accepted + rounds = %d "
              "and nothing after the EOS counted", want_j, st.rounds, st.drafted, st.accepted, got, got - 1);
    }
    free_model(&m);
}

// A run's rounds, whole (the Round the observer sees), for the replays below.
enum { MAX_ROUNDS = 256 };
typedef struct {
    int n;
    Round r[MAX_ROUNDS];
} RoundLog;
static RoundLog round_log;

static void keep_round(void *ctx, const Round *r, const Selector *sel) {
    RoundLog *g = (RoundLog *)ctx;
    (void)sel;
    if (g->n < MAX_ROUNDS) { g->r[g->n] = *r; }
    g->n++;
}

// The draft's top-1 probability, max softmax(logits) at T = 1, in double.
static double top1_double(const float *logits, int V) {
    double max = logits[0], sum = 0;
    for (int i = 1; i < V; i++) { max = logits[i] > max ? logits[i] : max; }
    for (int i = 0; i < V; i++) { sum += exp((double)logits[i] - max); }
    return 1.0 / sum;
}

static int first_argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) { best = v[i] > v[best] ? i : best; }
    return best;
}

// SWIFT's tree leaves at one draft step, by their definition (Sec. 4.2; hemingkx/SWIFT's greedy
// widths 3, 5, 8, 10 for a confidence above 0.95, 0.8, 0.5, else): the width - 1 tokens after the
// argmax in decreasing logit, ties to the lower id, at most `room` of them (and 16, MAX_ALTS).
static int tree_leaves(const float *logits, int V, float conf, int room, int *alts) {
    int width = conf > 0.95f ? 3 : conf > 0.8f ? 5 : conf > 0.5f ? 8 : 10, n = 0, top = first_argmax(logits, V);
    for (int want = width - 1 < 16 ? width - 1 : 16; n < want && n < room && n < V - 1; n++) {
        int best = -1;
        for (int i = 0; i < V; i++) {
            int used = i == top;
            for (int q = 0; q < n; q++) { used |= alts[q] == i; }
            if (!used && (best < 0 || logits[i] > logits[best])) { best = i; }
        }
        alts[n] = best;
    }
    return n;
}

// What one round of greedy decoding must have done, replayed from the text alone: the cache
// rebuilt by the full model over seq[0..pos-1], the draft run token by token under the round's
// set, its confidences, the rules README "The trace" gives for `end` (in that order: SWIFT's tree
// filling the pass, then the exit rule below gamma before the round's limit, then the limit: K,
// or `room` below K), accepted as the longest prefix of the draft that is plain decoding's text
// seq (with a tree, then one more when plain decoding's token is a leaf of the first rejected
// depth), emitted one more, cut at an EOS (then drafted and accepted too, and `end` eos), and the
// rows of the verification pass. Counts each field that differs from r's into *bad.
typedef struct { int K, exit_none, tree, max_new; } ReplayRun;
static void replay_round(Model *m, const int *seq, int n_seq, const Round *r, const ReplayRun *run, int before,
                         int *bad, int *leaves_seen, int *filled) {
    const Config *c = &m->config;
    int V = c->vocab_size, pos = r->pos, row, draft[MAX_DRAFT + 2], alts[MAX_DRAFT + 1][16], n_alts[MAX_DRAFT + 1];
    int limit = run->K;
    if (limit > c->seq_len - 1 - pos) { limit = c->seq_len - 1 - pos; }
    if (limit > run->max_new - before - 1) { limit = run->max_new - before - 1; }
    if (skip_count(&r->skip, c->n_layers) == 0) { limit = 0; }
    int room = c->seq_len - pos < m->state.max_tokens ? c->seq_len - pos : m->state.max_tokens;
    int end = limit == run->K ? END_K : END_ROOM, k = 0, leaves = 0, conf_bad = 0;
    prefill(m, seq, pos, NULL, NULL, &row);
    draft[0] = seq[pos];
    while (k < limit) {
        forward(m, &draft[k], 1, pos + k, &r->skip, NULL, NULL);
        const float *logits = m->state.logits_host;
        conf_bad += fabs(top1_double(logits, V) - r->conf[k]) > 1e-6;
        float conf = r->conf[k]; // the recorded float: the threshold decisions are taken on it
        draft[++k] = first_argmax(logits, V);
        if (run->tree) {
            n_alts[k] = tree_leaves(logits, V, conf, room - 1 - k - leaves, alts[k]);
            leaves += n_alts[k];
            if (1 + k + leaves == room) { end = END_ROOM; break; }
        }
        if (!run->exit_none && k < limit && conf < r->gamma_before) { end = END_EXIT; break; }
    }
    int a = 0, leaf = 0;
    while (a < k && pos + 1 + a < n_seq && draft[a + 1] == seq[pos + 1 + a]) { a++; }
    if (run->tree && a < k && pos + 1 + a < n_seq) {
        for (int q = 0; q < n_alts[a + 1]; q++) { leaf |= alts[a + 1][q] == seq[pos + 1 + a]; }
        a += leaf;
    }
    int emitted = a + 1, drafted = k;
    for (int e = 0; e < a && c->n_eos > 0; e++) { // an EOS among the kept drafts ends the output there
        if (is_eos(c, seq[pos + 1 + e])) { emitted = e + 1; drafted = a = e; end = END_EOS; leaf = 0; break; }
    }
    int rows = run->tree ? 1 + k + leaves : k + 1, ok = conf_bad == 0 && r->end == end && r->drafted == drafted &&
           r->accepted == a && r->emitted == emitted && r->leaf == leaf && r->verify_rows == rows;
    if (!ok && *bad < 5) {
        fprintf(stderr, "  round %d at pos %d: end %d drafted %d accepted %d emitted %d leaf %d verify %d (%d "
                "confidences off); replayed: %d %d %d %d %d %d\n", r->round, pos, r->end, r->drafted, r->accepted,
                r->emitted, r->leaf, r->verify_rows, conf_bad, end, drafted, a, emitted, leaf, rows);
    }
    *bad += !ok;
    *leaves_seen += leaf;
    *filled += run->tree && rows == room && end == END_ROOM;
}

// Greedy self-speculative decoding under one setting, then each of its rounds replayed
// (replay_round); the output must be plain decoding's. Adds the rounds seen by end to ends[].
static void replay_run(Model *m, const char *what, const SpecParams *sp_in, Selector *sel, const ReplayRun *run,
                       int *ends, int *leaves, int *filled) {
    int prompt[4] = {1, 9, 17, 25}, seq[600], plain[512], spec[512];
    Sampler greedy = greedy_sampler();
    GenStats gs;
    Output po = output(plain, run->max_new, NULL, NULL), so = output(spec, run->max_new, NULL, NULL);
    int np = generate_plain(m, prompt, 4, NULL, &greedy, &po, &gs);
    SpecParams sp = *sp_in;
    Observer watch = {&round_log, NULL, keep_round, NULL};
    sp.observer = &watch;
    round_log.n = 0;
    SpecStats st;
    int ns = generate_spec(m, prompt, 4, &sp, sel, &greedy, &so, &st);
    check(ns == np && memcmp(plain, spec, (size_t)np * sizeof(int)) == 0 && round_log.n <= MAX_ROUNDS,
          "%s: greedy output differs from plain decoding (%d vs %d tokens)", what, ns, np);
    memcpy(seq, prompt, sizeof(prompt));
    memcpy(seq + 4, plain, (size_t)np * sizeof(int));
    int bad = 0, before = 1; // the prefill's token
    for (int i = 0; i < round_log.n && i < MAX_ROUNDS; i++) {
        const Round *r = &round_log.r[i];
        replay_round(m, seq, 4 + np, r, run, before, &bad, leaves, filled);
        ends[r->end]++;
        before += r->emitted;
    }
    check(bad == 0 && before == np, "%s: %d of %d rounds differ from their replay (end, counts, leaf, verify rows), "
          "or the rounds emit %d tokens of %d", what, bad, round_log.n, before, np);
}

// A round's `end`, `drafted`, `accepted`, `emitted`, `leaf` and `verify` from the round's own
// draft and verification (replay_round), over settings that reach every end: a static set whose
// drafts end by the fixed threshold, at K and at the tokens wanted; a 24-token context (room);
// SWIFT's tree with no exit rule (each depth's 9 leaves fill the 64-token pass at depth 7) and
// with its 0.8 (leaves kept); an EOS among kept drafts (the draft planted to be the full model).
static void test_round_accounting(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, ends[4] = {0, 0, 0, 0}, leaves = 0, filled = 0;
    SpecParams sp = {alternate_layers(L), 3, draft_exit_default(), NULL};
    sp.exit.mode = EXIT_FIXED;
    sp.exit.threshold = 0.03f; // about half of this model's draft confidences
    ReplayRun chain = {3, 0, 0, 40};
    replay_run(&m, "static K 3, fixed 0.03", &sp, NULL, &chain, ends, &leaves, &filled);
    MethodParams mp = method_params_default();
    mp.swift.window = 1 << 20; // no optimization step: the tree of the starting set
    for (int exit_none = 1; exit_none >= 0; exit_none--) {
        Selector sel;
        selector_init(&sel, METHOD_SWIFT, &mp, L, 1);
        SpecParams sw = {sel.swift.best, 25, draft_exit_default(), NULL};
        method_drafting(METHOD_SWIFT, &sw.max_draft, &sw.exit);
        if (exit_none) { sw.exit.mode = EXIT_NONE; }
        ReplayRun tree = {25, exit_none, 1, 48};
        replay_run(&m, exit_none ? "swift tree, no exit" : "swift tree, fixed 0.8", &sw, &sel, &tree, ends, &leaves,
                   &filled);
        selector_free(&sel);
    }
    free_model(&m);
    if (!load_model(&m, dir, 24)) { return; }
    m.config.n_eos = 0;
    SpecParams cut = {alternate_layers(L), 12, draft_exit_default(), NULL};
    cut.exit.mode = EXIT_NONE;
    ReplayRun to_end = {12, 1, 0, 40};
    replay_run(&m, "static K 12 to the end of a 24-token context", &cut, NULL, &to_end, ends, &leaves, &filled);
    free_model(&m);
    if (!load_model(&m, dir, 0)) { return; }
    SkipSet planted = alternate_layers(L);
    plant(&m, &planted);
    m.config.n_eos = 0;
    int prompt[4] = {1, 9, 17, 25}, plain[48], eos = -1;
    Sampler greedy = greedy_sampler();
    GenStats gs;
    Output po = output(plain, 41, NULL, NULL);
    int n = generate_plain(&m, prompt, 4, NULL, &greedy, &po, &gs);
    for (int i = 6; i < n && eos < 0; i++) { // rounds of 4 kept drafts: token i is round (i - 1) / 5's
        int first = (i - 1) % 5 == 2;
        for (int t = 0; t < i; t++) { first &= plain[t] != plain[i]; }
        eos = first ? plain[i] : -1;
    }
    m.config.n_eos = eos >= 0;
    m.config.eos_ids[0] = eos;
    SpecParams all = {planted, 4, draft_exit_default(), NULL};
    all.exit.mode = EXIT_NONE;
    ReplayRun with_eos = {4, 1, 0, 41};
    replay_run(&m, "static K 4 planted, an EOS among the kept drafts", &all, NULL, &with_eos, ends, &leaves, &filled);
    free_model(&m);
    printf("  rounds replayed: ends exit %d, K %d, room %d (%d of them a tree filling its pass), eos %d; %d leaves "
           "kept\n", ends[END_EXIT], ends[END_K], ends[END_ROOM], filled, ends[END_EOS], leaves);
    check(eos >= 0 && ends[END_EXIT] > 0 && ends[END_K] > 0 && ends[END_ROOM] > filled && filled > 0 &&
          ends[END_EOS] == 1 && leaves > 0, "round replay: an end, a filled tree or a kept leaf went unseen");
}

// ---------------------------------------------------------------------------- CLaSp

// The full model's hidden states (2L + 1, dim) of seq[slot] after seq[0..slot-1], the cache
// holding the full model's K/V of those.
static void hidden_at(Model *m, const int *seq, int slot, float *states) {
    int row, idx[1] = {0};
    prefill(m, seq, slot, NULL, NULL, &row);
    Capture cap = {1, idx, states};
    forward(m, seq + slot, 1, slot, NULL, NULL, &cap);
}

// CLaSp's DP (Algorithm 1) runs on the last accepted token's states, at that token's own cache
// slot pos + accepted (attending to what precedes it): after every round but the last, the next
// round's set must be select_clasp's on the full model's states of that token, recomputed here
// from the output alone. On kjv-12l drafts are often kept, and the same states at the round's
// first slot pos give another set, so the check tells the slots apart.
static void test_clasp_dp_slot(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    // quick: 20 tokens (each round's DP recomputed from a fresh prefill costs the most here) still
    // give rounds that kept a draft and DPs whose set depends on the slot
    int L = m.config.n_layers, prompt[4] = {1, 9, 17, 25}, seq[64], out[48], n_new = quick(40, 20);
    MethodParams mp = method_params_default();
    mp.clasp.interval = 1;
    Selector sel;
    selector_init(&sel, METHOD_CLASP, &mp, L, 1);
    SpecParams sp = {alternate_layers(L), 3, draft_exit_default(), NULL};
    sp.exit.mode = EXIT_NONE;
    Sampler smp = greedy_sampler();
    SpecStats st;
    Output o = output(out, n_new, NULL, NULL);
    EngineLog *g = watch_engine();
    sp.observer = &engine_watcher;
    int n = generate_spec(&m, prompt, 4, &sp, &sel, &smp, &o, &st);
    int rounds = g->rounds;
    EngineLog log = *g;
    unwatch_engine();
    memcpy(seq, prompt, sizeof(prompt));
    memcpy(seq + 4, out, (size_t)n * sizeof(int));
    float *h = (float *)malloc_check((size_t)(2 * L + 1) * m.config.dim * sizeof(float));
    int pos = 4, same = 0, kept_some = 0, telling = 0;
    for (int r = 0; r + 1 < rounds && r + 1 < LOG_MAX; r++) {
        int slot = pos + log.accepted[r];
        hidden_at(&m, seq, slot, h);
        SkipSet want = select_clasp(&m, h, slot, sel.clasp_skip, NULL);
        same += same_set(&want, &log.skip[r + 1], L);
        kept_some += log.accepted[r] > 0;
        if (log.accepted[r] > 0) { // the same states at the round's first slot give another set
            SkipSet early = select_clasp(&m, h, pos, sel.clasp_skip, NULL);
            telling += !same_set(&early, &want, L);
        }
        pos += log.accepted[r] + 1;
    }
    check(rounds > 3 && st.selections == rounds - 1 && same == rounds - 1,
          "CLaSp: %d of %d DPs chose select_clasp's set at the last accepted token's slot", same, rounds - 1);
    printf("  CLaSp: %d DPs, %d after a kept draft, %d of them with another set at the round's first slot\n",
           rounds - 1, kept_some, telling);
    check(kept_some > 0 && telling > 0, "CLaSp slot test: %d rounds kept a draft, %d DPs depend on the slot "
          "(the test cannot tell slots apart)", kept_some, telling);
    free(h);
    selector_free(&sel);
    free_model(&m);
}

// CLaSp's M is capped at the context's end (the DP writes the K/V of M states at slots
// slot..slot+M-1): in a 16-token context a DP at slot 13, 14, 15 skips exactly min(M, 16 - slot)
// layers, and leaves the cache as it found it. Then CLaSp decodes to the end of a 24-token
// context, a DP after every round, and equals plain decoding.
static void test_clasp_context_end(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 16)) { return; }
    int L = m.config.n_layers, seq[16], M = L / 2;
    for (int t = 0; t < 16; t++) { seq[t] = (11 * t + 3) % m.config.vocab_size; }
    float *h = (float *)malloc_check((size_t)(2 * L + 1) * m.config.dim * sizeof(float));
    size_t cache = (size_t)L * m.config.seq_len * m.config.n_kv_heads * m.config.head_dim;
    float *before = (float *)malloc_check(cache * sizeof(float));
    for (int slot = 13; slot < 16; slot++) {
        hidden_at(&m, seq, slot, h);
        memcpy(before, m.state.key_cache, cache * sizeof(float));
        SkipSet s = select_clasp(&m, h, slot, M, NULL);
        int want = M < 16 - slot ? M : 16 - slot;
        check(m.config.seq_len == 16 && skip_count(&s, L) == 2 * want, "CLaSp at slot %d of 16: skips %d sublayers, "
              "want M = %d layers", slot, skip_count(&s, L), want);
        check(memcmp(before, m.state.key_cache, cache * sizeof(float)) == 0, "CLaSp's DP at slot %d changed the cache",
              slot);
    }
    free(before);
    free(h);
    free_model(&m);
    if (!load_model(&m, dir, 24)) { return; }
    m.config.n_eos = 0;
    int prompt[4] = {1, 9, 17, 25}, a[48], b[48];
    MethodParams mp = method_params_default();
    mp.clasp.interval = 1;
    Selector sel;
    selector_init(&sel, METHOD_CLASP, &mp, L, 1);
    SpecParams sp = {alternate_layers(L), 6, draft_exit_default(), NULL};
    Sampler smp = greedy_sampler();
    SpecStats st;
    GenStats gs;
    Output oa = output(a, 40, NULL, NULL), ob = output(b, 40, NULL, NULL);
    int na = generate_plain(&m, prompt, 4, NULL, &smp, &oa, &gs);
    int nb = generate_spec(&m, prompt, 4, &sp, &sel, &smp, &ob, &st);
    check(na == nb && nb >= 24 - 4 && memcmp(a, b, (size_t)na * sizeof(int)) == 0 && st.selections >= 3,
          "CLaSp to the end of a 24-token context: %d tokens (plain %d), %d DPs", nb, na, st.selections);
    selector_free(&sel);
    free_model(&m);
}

// ---------------------------------------------------------------------------- SWIFT

// SWIFT Eq. 3-4's matchness over a window of gamma tokens ends one token before the newest: the
// inputs seq[pos-gamma-1 .. pos-2] predict seq[pos-gamma .. pos-1] (seq[pos] is not in the cache
// yet). With the full model as the draft and gamma the 39 generated tokens, every prediction is
// right (1 exactly), though seq[pos] is made wrong and the prompt's last token is not the model's
// greedy choice. Under a skip set, the score equals a token-by-token count from the same cache.
static void test_swift_window_ends(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64], V = m.config.vocab_size;
    int pos = past_swift_window(&m, seq);
    seq[pos] = (seq[pos] + 1) % V; // the newest token, which no window may score
    SkipSet none, alt = alternate_layers(L);
    memset(&none, 0, sizeof(none));
    double full = swift_matchness(&m, seq, pos, pos - 4, &none);
    check(full == 1.0, "SWIFT matchness of the full model over the %d generated tokens: %.4f, want 1", pos - 4, full);
    const int windows[2] = {32, 39};
    for (int k = 0; k < 2; k++) {
        int w = windows[k], start = pos - w - 1, row, match = 0;
        double got = swift_matchness(&m, seq, pos, w, &alt);
        prefill(&m, seq, start, NULL, NULL, &row);
        for (int t = start; t <= pos - 2; t++) {
            forward(&m, seq + t, 1, t, &alt, NULL, NULL);
            match += argmax(m.state.logits_host, V) == seq[t + 1];
        }
        check(got == (double)match / w && match > 0, "SWIFT matchness, window %d: %.4f, want %d / %d counted token by "
              "token over seq[%d..%d]", w, got, match, w, start + 1, pos - 1);
        prefill(&m, seq, pos, NULL, NULL, &row); // the cache as decoding left it
    }
    free_model(&m);
}

// Once SWIFT's search has ended, its best set is the draft of every later prompt (the state lives
// for the run): a search of 3 steps ends on the first prompt; the best set is then replaced by
// one no step proposes (3 sublayers), and the second prompt drafts every round with it, with no
// step.
static void test_swift_best_carried(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, out[48];
    MethodParams mp = method_params_default();
    mp.swift.window = 8;
    mp.swift.budget = 1.0f;
    mp.swift.max_steps = 3;
    Selector sel;
    selector_init(&sel, METHOD_SWIFT, &mp, L, 2);
    SkipSet x;
    memset(&x, 0, sizeof(x));
    x.attn[1] = x.mlp[2] = x.attn[L - 2] = 1;
    for (int pi = 0; pi < 2; pi++) {
        int prompt[4] = {1, 9 + pi, 17, 25};
        Sampler smp = greedy_sampler();
        SpecParams sp = {alternate_layers(L), 6, draft_exit_default(), NULL};
        SpecStats st;
        Output o = output(out, 40, NULL, NULL);
        generate_spec(&m, prompt, 4, &sp, &sel, &smp, &o, &st);
        if (pi == 0) {
            check(sel.swift.done && sel.swift.steps == 3, "SWIFT: the search did not end after 3 steps (%d)",
                  sel.swift.steps);
            sel.swift.best = x;
            continue;
        }
        check(st.selections == 0 && sel.swift.steps == 3 && st.drafted > 0 && same_set(&sp.skip, &x, L) &&
              st.skipped == (long)st.drafted * skip_count(&x, L), "SWIFT after its search: the next prompt ran %d "
              "steps and drafted %d tokens with %ld sublayers skipped, want every draft under the best set's %d",
              st.selections, st.drafted, st.skipped, skip_count(&x, L));
    }
    selector_free(&sel);
    free_model(&m);
}

// SWIFT's patience counts the steps since the best set last improved: a step whose candidate beats
// the kept set (re-scored on the same window) resets it to 0, any other adds 1; the search ends
// exactly when it reaches the patience.
static void test_swift_patience(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64], bad = 0, resets = 0;
    MethodParams mp = method_params_default();
    int pos = past_swift_window(&m, seq);
    const int patiences[2] = {1 << 30, 4}; // never reached, then reached
    int max_steps = quick(60, 20);         // quick: 20 steps still see resets and patience 4 reached
    for (int k = 0; k < 2; k++) {
        int patience = patiences[k];
        Swift w;
        swift_init(&w, &mp.swift, L, 7);
        w.p.budget = 1.0f;
        w.p.target = 1.01f; // never stops on the score
        w.p.patience = patience;
        w.ratio = 2.0f / (2 * L); // candidates skip 2 sublayers: they often beat one another
        for (int step = 0; step < max_steps && !w.done; step++) {
            int since = w.since_best;
            swift_step(&w, &m, seq, 4, pos);
            int better = w.cand_score > w.kept_score;
            bad += w.since_best != (better ? 0 : since + 1);
            resets += better && since > 0;
            bad += w.done != (w.since_best >= patience);
        }
        check(patience == 4 ? w.done && w.steps < max_steps : !w.done, "SWIFT patience %d: done %d after %d steps", patience,
              w.done, w.steps);
        gp_free(&w.gp);
    }
    check(bad == 0 && resets > 0, "SWIFT patience: %d steps counted wrong, %d resets after a miss", bad, resets);
    free_model(&m);
}

// App. C.2's ratio rule (the long version), as decided: every 50 verifications, if the drafts
// verified in those 50 were accepted below 0.7, r drops by 0.05; acceptance is judged over that
// window only, not since the run began. The draft becomes the uniform set at the new count, never
// in the first or last layer, and the next step is a `start` (phase 0) that scores that set.
static void test_swift_ratio_rule(const char *dir) {
    for (int L = 3; L <= SS_MAX_LAYERS; L++) {
        int bad = 0;
        for (int count = 0; count <= 2 * L; count++) {
            SkipSet s = uniform_skip_set(L, count);
            int want = count < 2 * (L - 2) ? count : 2 * (L - 2);
            bad += skip_count(&s, L) != want || s.attn[0] || s.mlp[0] || s.attn[L - 1] || s.mlp[L - 1];
        }
        if (!check(bad == 0, "uniform_skip_set, %d layers: %d counts wrong or in the first or last layer", L, bad)) {
            break;
        }
    }
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64];
    MethodParams mp = method_params_default();
    int pos = past_swift_window(&m, seq);
    Swift w;
    swift_init(&w, &mp.swift, L, 3);
    w.p.budget = 1.0f;
    w.p.target = 1.01f;
    swift_step(&w, &m, seq, 4, pos);
    swift_step(&w, &m, seq, 4, pos);
    float r0 = w.ratio;
    check(w.phase == 1 && w.gp.n == 2, "SWIFT: the second step is not a random one (phase %d)", w.phase);
    // acceptance per window of 50: 1.0, then 0.5 (0.75 since the start): r drops once
    for (int v = 0; v < 100; v++) { swift_after_verify(&w, L, 2, v < 50 ? 2 : 1); }
    float r1 = w.ratio;
    SkipSet uniform = uniform_skip_set(L, (int)lroundf(r1 * 2 * L));
    check(r1 == r0 - 0.05f && same_set(&w.best, &uniform, L) && w.best_score < 0 && w.gp.n == 0,
          "SWIFT App. C.2: r %.2f -> %.2f after windows at 1.0 and 0.5, want one drop to the uniform set", r0, r1);
    swift_step(&w, &m, seq, 4, pos);
    check(w.phase == 0 && same_set(&w.cand, &uniform, L) && w.gp.n == 1 && w.best_score >= 0,
          "SWIFT: the step after r dropped is phase %d, not a start on the new uniform set", w.phase);
    // windows at 0.0 (a drop) then 1.0 (0.625 since the start, 0.5 over both): the 1.0 window keeps r
    for (int v = 0; v < 100; v++) { swift_after_verify(&w, L, 2, v < 50 ? 0 : 2); }
    check(w.ratio == r1 - 0.05f, "SWIFT App. C.2: r %.2f after windows at 0.0 and 1.0, want %.2f (judged per window)",
          w.ratio, r1 - 0.05f);
    gp_free(&w.gp);
    free_model(&m);
}

static double fake_now;
static double fake_clock(void) { return fake_now; }

// The budget rule prices the step it is about to run: a step runs only if the time in steps so
// far plus the next step's likely price (the last step's) stays within budget x the decoding time.
// With a clock the test sets: 100 ms decoded, budget 10%, 5 ms in steps and a last step of 6 ms,
// no step runs (5 alone would fit); at a last step of 5 ms it runs.
static void test_swift_budget_price(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64];
    MethodParams mp = method_params_default();
    int pos = past_swift_window(&m, seq);
    for (int price = 6; price >= 5; price--) {
        Swift w;
        swift_init(&w, &mp.swift, L, 3);
        w.clock = fake_clock;
        w.p.budget = 0.1f;
        w.opt_ms = 5.0;
        w.step_ms = price;
        w.last_ms = 1000.0;
        fake_now = 1100.0;
        swift_step(&w, &m, seq, 4, pos);
        check(w.run_ms == 100.0 && w.steps == (price == 5), "SWIFT budget: 5 ms of steps, next priced %d ms, 100 ms "
              "decoded, budget 10%%: %d steps, want %d", price, w.steps, price == 5);
        gp_free(&w.gp);
    }
    free_model(&m);
}

int main(int argc, char **argv) {
    select_tests(argc, argv);
    if (selected("round_accounting")) { test_round_accounting("tiny_models/llama2-tiny-random"); }
    if (selected("top_p")) { test_top_p_brute_force(); }
    if (selected("exit_across_prompts")) { test_exit_across_prompts("tiny_models/kjv-12l"); }
    if (selected("eos_in_draft")) { test_eos_in_draft("tiny_models/llama2-tiny-random"); }
    if (selected("clasp_dp_slot")) { test_clasp_dp_slot("tiny_models/kjv-12l"); }
    if (selected("clasp_context_end")) { test_clasp_context_end("tiny_models/llama2-tiny-random"); }
    if (selected("swift_window_ends")) { test_swift_window_ends("tiny_models/llama2-tiny-random"); }
    if (selected("swift_best_carried")) { test_swift_best_carried("tiny_models/llama2-tiny-random"); }
    if (selected("swift_patience")) { test_swift_patience("tiny_models/llama2-tiny-random"); }
    if (selected("swift_ratio_rule")) { test_swift_ratio_rule("tiny_models/llama2-tiny-random"); }
    if (selected("swift_budget_price")) { test_swift_budget_price("tiny_models/llama2-tiny-random"); }
    return test_summary("test_properties");
}
