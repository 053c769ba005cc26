// test_properties.c: documented behaviours, each stated as a property and checked directly on
// the engine's functions (never through the reference traces in test/refs/traces/, which a
// regeneration would bless); each expectation is computed here, not with the helper it checks:
//   - a round's end, drafted, accepted, emitted, leaf and verify rows replayed from its own draft
//     and verification, SWIFT's tree filling its pass and an EOS among kept drafts included;
//   - each method's K and exit rule against its paper's values, directly and in the CLI; the exit
//     confidence under sampling (the top-1 probability); random sets' overlap by enumeration;
//   - top-p against a brute-force nucleus on rows built to hit its edges;
//   - the draft exit's state across prompts; an EOS among the kept drafts cut from the statistics;
//   - CLaSp: the DP against a brute force of its recursion (set, closest decision, path, a planted
//     tie) and M's rounding; what it drafts with before its first DP; the DP runs at the last
//     accepted token's slot; M capped at the end of the context;
//   - SWIFT: the matchness window; the best set carried once the search ended; the patience
//     counter; App. C.2's ratio rule, at 0.7, per block; the budget counting the next step's
//     price; the GP's schedule and two-point wait; candidates capped at 2(L - 2);
//   - Self-SD's warm-up under measured scores; conf_mean null with nothing drafted.
// `./test/test_properties NAME...` runs only the tests named (main lists them).
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
    // quick (the sanitizer pass): shorter outputs still reach every end, a filled tree and a leaf
    ReplayRun chain = {3, 0, 0, quick(40, 24)};
    replay_run(&m, "static K 3, fixed 0.03", &sp, NULL, &chain, ends, &leaves, &filled);
    MethodParams mp = method_params_default();
    mp.swift.window = 1 << 20; // no optimization step: the tree of the starting set
    for (int exit_none = 1; exit_none >= 0; exit_none--) {
        Selector sel;
        selector_init(&sel, METHOD_SWIFT, &mp, L, 1);
        SpecParams sw = {sel.swift.best, 25, draft_exit_default(), NULL};
        method_drafting(METHOD_SWIFT, &sw.max_draft, &sw.exit);
        if (exit_none) { sw.exit.mode = EXIT_NONE; }
        ReplayRun tree = {25, exit_none, 1, quick(48, 32)};
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

// Each method's draft length K and exit rule, against the papers' values method_drafting's
// comment cites, written here once more: Self-SD Table 7 (K = 12; the adaptive rule from
// gamma_0 = 0.6 toward alpha = 0.9 in steps of eps = 0.01, beta1 = 0.5, beta2 = 0.9) for plain
// decoding, a static set, Self-SD and ASD (which keeps Self-SD's drafting); SWIFT App.
// B.2's N_D = 25 with the fixed epsilon 0.8 (hemingkx/SWIFT's stop_threshold; the paper gives no
// value); CLaSp Sec. 5.3.3's fixed 0.7, with Self-SD's K. Then the CLI: each --method's trace
// header shows the same K and rule.
typedef struct { int method; const char *name, *args; int K, mode; float gamma; } PaperDrafting;
static const PaperDrafting paper_drafting[] = {
    {METHOD_NONE, "plain", "", 12, EXIT_ADAPTIVE, 0.6f},
    {METHOD_STATIC, "static", "--skip attn:1", 12, EXIT_ADAPTIVE, 0.6f},
    {METHOD_SELFSD, "selfsd", "--method selfsd --iters 1 --objective cost", 12, EXIT_ADAPTIVE, 0.6f},
    {METHOD_SWIFT, "swift", "--method swift", 25, EXIT_FIXED, 0.8f},
    {METHOD_ASD, "asd", "--method asd", 12, EXIT_ADAPTIVE, 0.6f},
    {METHOD_CLASP, "clasp", "--method clasp", 12, EXIT_FIXED, 0.7f},
};

static double key_number(const Json *j, int obj, const char *key) {
    int v = obj >= 0 ? json_get(j, obj, key) : -1;
    return v > 0 && j->tok[v].type == JSMN_PRIMITIVE ? strtod(j->js + j->tok[v].start, NULL) : NAN;
}

static void test_method_drafting(void) {
    char tmp[] = "/tmp/selfspec_drafting_XXXXXX", args[512], path[300], err[SS_ERR_LEN];
    if (!check(mkdtemp(tmp) != NULL, "mkdtemp failed")) { return; }
    snprintf(path, sizeof(path), "%s/trace.jsonl", tmp);
    for (size_t k = 0; k < sizeof(paper_drafting) / sizeof(paper_drafting[0]); k++) {
        const PaperDrafting *w = &paper_drafting[k];
        int K;
        DraftExit d;
        method_drafting(w->method, &K, &d);
        int adaptive_ok = w->mode != EXIT_ADAPTIVE || (d.target == 0.9f && d.step == 0.01f && d.beta1 == 0.5f &&
                                                       d.beta2 == 0.9f && d.ar == 0.0f && d.rounds == 0);
        check(K == w->K && d.mode == w->mode && d.threshold == w->gamma && adaptive_ok, "method_drafting(%s): K %d, "
              "exit mode %d from gamma %g; its paper: K %d, mode %d, gamma %g", w->name, K, d.mode, d.threshold, w->K,
              w->mode, w->gamma);
        snprintf(args, sizeof(args), "-m tiny_models/llama2-tiny-random -n 2 %s --trace %s", w->args, path);
        int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", args, NULL, NULL);
        char *text = rc == 0 ? read_or_exit(path, NULL) : NULL;
        Json j;
        int parsed = text && json_parse(&j, text, strcspn(text, "\n"), path, err) == 0;
        int exit = parsed ? json_get(&j, 0, "exit") : -1, mode = exit > 0 ? json_get(&j, exit, "mode") : -1;
        static const char *modes[] = {"adaptive", "fixed", "none"};
        check(parsed && key_number(&j, 0, "K") == w->K && mode > 0 && json_eq(&j, mode, modes[w->mode]) &&
              (float)key_number(&j, exit, "gamma") == w->gamma && // %.9g: a float32 round-trips
              (w->mode != EXIT_ADAPTIVE || ((float)key_number(&j, exit, "alpha") == 0.9f &&
                                            (float)key_number(&j, exit, "step") == 0.01f &&
                                            (float)key_number(&j, exit, "beta1") == 0.5f &&
                                            (float)key_number(&j, exit, "beta2") == 0.9f)),
              "--method %s: the trace header's K and exit are not its paper's (K %d, %s from %g; exit %d): %.300s",
              w->name, w->K, modes[w->mode], w->gamma, rc, text ? text : "");
        if (parsed) { json_free(&j); }
        free(text);
    }
    snprintf(args, sizeof(args), "rm -rf %s", tmp);
    if (system(args) != 0) { fprintf(stderr, "could not remove %s\n", tmp); }
}

// The exit confidence under sampling (the Decision in draft_tokens): the top-1 probability of the
// draft's softmax at T = 1, as Self-SD Alg. 3 and SWIFT Sec. 4.2 write it, not the probability of
// the token sampled (dilab-zju/self-speculative-decoding's and hemingkx/SWIFT's choice). Drafts of
// 8 tokens sampled at T = 1 and at T = 0.7 / top-p 0.9 through draft_tokens; each step's logits
// are rebuilt by rerunning the drafted tokens, and its recorded confidence compared with both.
static void test_conf_sampling(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    enum { K = 8 };
    int V = m.config.vocab_size, prompt[4] = {1, 9, 17, 25}, row, bad = 0, steps = 0, told = 0;
    SpecScratch *s = build_spec_scratch(&m.config, K, 64);
    SpecParams sp = {alternate_layers(m.config.n_layers), K, draft_exit_default(), NULL};
    sp.exit.mode = EXIT_NONE;
    const float temps[2] = {1.0f, 0.7f}, tops[2] = {1.0f, 0.9f};
    for (int c = 0; c < 2; c++) {
        for (int seed = 0; seed < 12; seed++) {
            Sampler smp = {temps[c], tops[c], {0}};
            rng_seed(&smp.rng, (uint64_t)seed);
            Round r;
            memset(&r, 0, sizeof(r));
            r.pos = 4;
            prefill(&m, prompt, 4, NULL, NULL, &row);
            s->draft[0] = first_argmax(m.state.logits_host + (size_t)row * V, V);
            int k = draft_tokens(&m, &sp, &smp, K, s, &r);
            prefill(&m, prompt, 4, NULL, NULL, &row);
            for (int j = 0; j < k; j++, steps++) {
                forward(&m, &s->draft[j], 1, 4 + j, &sp.skip, NULL, NULL);
                const float *lg = m.state.logits_host;
                double top1 = top1_double(lg, V), max = lg[first_argmax(lg, V)], sum = 0;
                for (int i = 0; i < V; i++) { sum += exp((double)lg[i] - max); }
                int d = s->draft[j + 1];
                double sampled = exp((double)lg[d] - max) / sum, q = s->q_rows[(size_t)j * V + d];
                bad += fabs(r.conf[j] - top1) > 1e-6;
                told += fabs(top1 - sampled) > 1e-3 && fabs(top1 - q) > 1e-3; // the two readings differ here
            }
        }
    }
    check(bad == 0 && told > steps / 4, "exit confidence under sampling: %d of %d steps record another value than "
          "the draft's top-1 probability (%d steps tell it from the sampled token's)", bad, steps, told);
    free_spec_scratch(s);
    free_model(&m);
}

// The text report's CLaSp line compares consecutive DP sets with "two random sets of M layers":
// the mean Jaccard overlap of two sets of m of L layers drawn at random. Here by enumeration (by
// symmetry one set is the first m layers, the other every m-subset in turn), for L up to 14.
static void test_random_overlap(void) {
    int bad = 0;
    for (int L = 1; L <= 14; L++) {
        for (int mm = 0; mm <= L; mm++) {
            double sum = 0;
            long n = 0;
            for (int b = 0; b < (1 << L); b++) {
                if (__builtin_popcount((unsigned)b) != mm) { continue; }
                int both = __builtin_popcount((unsigned)(b & ((1 << mm) - 1)));
                sum += mm == 0 ? 1.0 : (double)both / (2 * mm - both);
                n++;
            }
            bad += fabs(random_overlap(mm, L) - sum / n) > 1e-9;
        }
    }
    check(bad == 0, "random_overlap: %d of the (m, L) pairs for L <= 14 differ from the enumeration", bad);
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

// CLaSp's DP (Eq. 2, Algorithm 1) against a brute force of its recursion: every state the DP
// holds, g(i, j) for the cells of the band that can still end at (L, M), is the token run through
// layers 1..i with a set of j of them skipped, and here each is recomputed from its set alone,
// by one forward pass with those layers skipped (its state after layer i), not from the DP's
// batched rows. Each decision is gain = cos(h_i, skip) - cos(h_i, run), the layer skipped when the
// gain is positive: a tie runs it (the Decision, zy-ning/Spec-Bench's rule). The set backtracked
// from (L, M), the closest decision (margin, layer, skips: the first smallest |gain|, layers then
// skips in order), and the gain along the path (the trace's `path`) must be select_clasp's.
typedef struct {
    SkipSet set;
    double margin;
    int layer, skips;
    double path[SS_MAX_LAYERS];
} BruteDp;

static double cos_double(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) { ab += (double)a[i] * b[i]; aa += (double)a[i] * a[i]; bb += (double)b[i] * b[i]; }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

// The state after layer i (1-based) of token seq[slot] run through the layers under set (the cache
// holding the full model's K/V of seq[0..slot-1]).
static void state_after(Model *m, int token, int slot, const SkipSet *set, int i, float *states, float *out) {
    int idx[1] = {0};
    Capture cap = {1, idx, states};
    forward(m, &token, 1, slot, set, NULL, &cap);
    memcpy(out, states + (size_t)(2 * i) * m->config.dim, (size_t)m->config.dim * sizeof(float));
}

static BruteDp brute_dp(Model *m, const int *seq, int slot, const float *h, int M) {
    int L = m->config.n_layers, dim = m->config.dim;
    SkipSet *sets = (SkipSet *)calloc_check((size_t)(L + 1) * (M + 1), sizeof(SkipSet)); // the set of cell (i, j)
    double *gain = (double *)calloc_check((size_t)(L + 1) * (M + 1), sizeof(double));
    float *states = (float *)malloc_check((size_t)(2 * L + 1) * dim * sizeof(float));
    float *a = (float *)malloc_check((size_t)dim * sizeof(float));
    float *b = (float *)malloc_check((size_t)dim * sizeof(float));
    BruteDp d;
    memset(&d, 0, sizeof(d));
    d.margin = INFINITY;
    d.layer = d.skips = -1;
    for (int i = 1; i <= L; i++) {
        const float *h_i = h + (size_t)(2 * i) * dim;
        int lo = M - (L - i) > 1 ? M - (L - i) : 1;
        for (int j = lo; j <= i && j <= M; j++) {
            SkipSet skip = sets[(i - 1) * (M + 1) + j - 1]; // g(i-1, j-1), then layer i skipped
            skip.attn[i - 1] = skip.mlp[i - 1] = 1;
            double g = INFINITY;
            if (j <= i - 1) { // g(i-1, j) then layer i run: both states, from their sets
                state_after(m, seq[slot], slot, &skip, i, states, a);
                state_after(m, seq[slot], slot, &sets[(i - 1) * (M + 1) + j], i, states, b);
                g = cos_double(h_i, a, dim) - cos_double(h_i, b, dim);
                if (fabs(g) < d.margin) { d.margin = fabs(g); d.layer = i - 1; d.skips = j; }
            }
            sets[i * (M + 1) + j] = g > 0 ? skip : sets[(i - 1) * (M + 1) + j];
            gain[i * (M + 1) + j] = g;
        }
    }
    d.set = sets[L * (M + 1) + M];
    for (int i = L, j = M; i > 0; i--) {
        d.path[i - 1] = j > 0 ? gain[i * (M + 1) + j] : NAN;
        j -= j > 0 && gain[i * (M + 1) + j] > 0;
    }
    free(sets); free(gain); free(states); free(a); free(b);
    return d;
}

// Whether select_clasp's decision record agrees with the brute force's.
static int same_dp(const SkipSet *got, const ClaspDp *dp, const BruteDp *want, int L) {
    int ok = same_set(got, &want->set, L) && dp->layer == want->layer && dp->skips == want->skips &&
             (dp->margin == want->margin || fabs(dp->margin - want->margin) < 1e-12);
    for (int l = 0; l < L && ok; l++) {
        double p = dp->path[l], w = (float)want->path[l];
        ok = (isnan(p) && isnan(w)) || p == w || fabs(p - w) <= 1e-6 * fabs(w);
    }
    return ok;
}

// Then ties, planted: with layers 0 and 1 made the identity (o_proj and down_proj zeroed), after
// layer 2 the states "layer 1 skipped" (g(1, 0), the full state h_1 = h_0) and "layer 1 run on
// g(1, 1) = h_0" are the same vector, a gain of exactly 0: the layer runs, so with M = 1 the DP
// skips layer 0 (where only skipping was left), and the closest decision is that tie. And M is
// round(r L), half away from zero: the CLI's --clasp-ratio through selector_init.
static void test_clasp_brute_force(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    int L = m.config.n_layers, dim = m.config.dim, seq[40], agree = 0, cases = 0;
    for (int t = 0; t < 40; t++) { seq[t] = (13 * t + 7) % m.config.vocab_size; }
    float *h = (float *)malloc_check((size_t)(2 * L + 1) * dim * sizeof(float));
    for (int slot = 12; slot < 36; slot += 11) {
        for (int M = 1; M < L; M++) {
            hidden_at(&m, seq, slot, h);
            BruteDp want = brute_dp(&m, seq, slot, h, M);
            hidden_at(&m, seq, slot, h); // the cache as the DP finds it: slot holds the token's own K/V
            ClaspDp dp;
            SkipSet got = select_clasp(&m, h, slot, M, &dp);
            agree += same_dp(&got, &dp, &want, L) && skip_count(&got, L) == 2 * M;
            cases++;
        }
    }
    check(agree == cases, "CLaSp: the DP's set, closest decision or path differs from the brute force's in %d of "
          "%d cases", cases - agree, cases);
    SkipSet identity;
    memset(&identity, 0, sizeof(identity));
    identity.attn[0] = identity.mlp[0] = identity.attn[1] = identity.mlp[1] = 1;
    plant(&m, &identity);
    hidden_at(&m, seq, 20, h);
    BruteDp want = brute_dp(&m, seq, 20, h, 1);
    hidden_at(&m, seq, 20, h);
    ClaspDp dp;
    SkipSet got = select_clasp(&m, h, 20, 1, &dp);
    check(same_dp(&got, &dp, &want, L) && got.attn[0] && !got.attn[1] && dp.margin == 0.0 && dp.layer == 1 &&
          dp.skips == 1, "CLaSp with a tie at layer 1: skips layer 0 %d, layer 1 %d, margin %g at (%d, %d); want "
          "layer 0 (the tie runs layer 1) and the tie as the closest decision", got.attn[0], got.attn[1], dp.margin,
          dp.layer, dp.skips);
    free(h);
    free_model(&m);
    const struct { float r; int L, M; } round_m[] = {{0.5f, 6, 3}, {0.25f, 6, 2}, {0.75f, 6, 5}, {0.45f, 12, 5},
                                                     {0.5f, 5, 3}, {0.125f, 12, 2}, {0.0f, 6, 0}, {1.0f, 6, 6}};
    int bad = 0;
    for (size_t k = 0; k < sizeof(round_m) / sizeof(round_m[0]); k++) {
        MethodParams mp = method_params_default();
        mp.clasp.skip_ratio = round_m[k].r;
        Selector sel;
        selector_init(&sel, METHOD_CLASP, &mp, round_m[k].L, 1);
        bad += sel.clasp_skip != round_m[k].M;
        selector_free(&sel);
    }
    check(bad == 0, "CLaSp's M: %d of the ratios are not rounded half away from zero (2.5 layers -> 3)", bad);
}

// What CLaSp drafts with before its first DP (the Decision in selector_after_prefill: no DP on the
// prefill), and what a DP replaces: each prompt's first rounds draft with alternate_layers, the
// DP after the interval-th verification (here 3) replaces it from the next round on, the set then
// holds until the next DP, and the next prompt of the run starts from alternate_layers again,
// whatever the last DP chose.
static void test_clasp_start(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, out[48], bad = 0, dps = 0, changed = 0;
    SkipSet start = alternate_layers(L);
    MethodParams mp = method_params_default();
    mp.clasp.interval = 3;
    Selector sel;
    selector_init(&sel, METHOD_CLASP, &mp, L, 1);
    for (int pi = 0; pi < 2; pi++) {
        int prompt[4] = {1, 9 + 4 * pi, 17, 25};
        SpecParams sp = {start, 3, draft_exit_default(), NULL};
        sp.exit.mode = EXIT_NONE;
        Observer watch = {&round_log, NULL, keep_round, NULL};
        sp.observer = &watch;
        if (pi == 1) { // what the caller holds after the first prompt: its last DP's set
            sp.skip = round_log.r[round_log.n - 1].next;
            bad += same_set(&sp.skip, &start, L);
        }
        round_log.n = 0;
        Sampler smp = greedy_sampler();
        SpecStats st;
        Output o = output(out, 40, NULL, NULL);
        generate_spec(&m, prompt, 4, &sp, &sel, &smp, &o, &st);
        for (int r = 0; r < round_log.n && r < MAX_ROUNDS; r++) {
            const Round *x = &round_log.r[r];
            int want_dp = (r + 1) % 3 == 0 && r + 1 < round_log.n;
            const SkipSet *want_skip = r < 3 ? &start : &round_log.r[r - 1].next;
            bad += x->dp != want_dp || !same_set(&x->skip, want_skip, L) ||
                   (!x->dp && !same_set(&x->next, &x->skip, L));
            dps += x->dp;
            changed += x->dp && !same_set(&x->next, &start, L);
        }
    }
    check(bad == 0 && dps >= 8 && changed > 0, "CLaSp's start: %d rounds drafted with another set than "
          "alternate_layers before the first DP, or the last DP's after it, or ran a DP off the interval (%d DPs, "
          "%d changed the start set)", bad, dps, changed);
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
            int want = count < 2 * (L - 2) ? count : 2 * (L - 2), attn = 0, gap_lo = L, gap_hi = 0;
            bad += skip_count(&s, L) != want || s.attn[0] || s.mlp[0] || s.attn[L - 1] || s.mlp[L - 1];
            // attention and MLP alternating: half of each (attention first); up to L - 2, one per
            // layer, spread evenly (the gaps between them differ by one at most)
            for (int l = 0, prev = -1; l < L; l++) {
                attn += s.attn[l];
                if (!(s.attn[l] || s.mlp[l])) { continue; }
                bad += want <= L - 2 && s.attn[l] && s.mlp[l];
                if (prev >= 0) { gap_lo = l - prev < gap_lo ? l - prev : gap_lo, gap_hi = l - prev > gap_hi ? l - prev : gap_hi; }
                prev = l;
            }
            bad += attn != (want + 1) / 2 || (want <= L - 2 && gap_hi > gap_lo + 1);
        }
        if (!check(bad == 0, "uniform_skip_set, %d layers: %d counts wrong, in the first or last layer, not alternating "
                   "attention and MLP, or not spread evenly", L, bad)) {
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

// SWIFT Eq. 2's schedule as decided in swift_step: step o = 1 scores the starting set (`start`),
// then step o is the GP's when o is a multiple of beta and the GP holds two points, else random.
// With App. B.2's beta = 25 the first GP step is the 25th (23 random steps after the start warm
// it up) and the next the 50th. After App. C.2's restart empties the GP, the next step is a start
// again, its one point the GP's only one: a multiple of beta right after it (here the 75th; the
// 50th in quick mode) is random, the two-point wait, and the GP's turn comes back at the 100th. With beta = 2 the wait
// comes at the second step of the run, so the first GP step is the 4th.
static void test_swift_schedule(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64], bad = 0, gp_steps = 0;
    int pos = past_swift_window(&m, seq);
    MethodParams mp = method_params_default();
    // quick (the sanitizer pass): the restart at step 49, so the wait falls on the 50th
    const int betas[2] = {25, 2}, lengths[2] = {quick(100, 51), 8}, restart_at = quick(74, 49);
    int waits = 0;
    for (int c = 0; c < 2; c++) {
        Swift w;
        swift_init(&w, &mp.swift, L, 5);
        w.p.bo_every = betas[c];
        w.p.budget = 1.0f;
        w.p.target = 1.01f;
        w.p.patience = w.p.max_steps = 1 << 30;
        int points = 0; // the GP's points before the step, counted here
        for (int o = 1; o <= lengths[c]; o++) {
            if (c == 0 && o == restart_at) { // a restart: 50 verifications of rejected drafts
                for (int v = 0; v < 50; v++) { swift_after_verify(&w, L, 1, 0); }
                bad += w.gp.n != 0;
                points = -1; // the next step starts over
            }
            swift_step(&w, &m, seq, 4, pos);
            int want = o == 1 || points < 0 ? 0 : o % betas[c] == 0 && points >= 2 ? 2 : 1;
            bad += w.phase != want || w.steps != o;
            gp_steps += w.phase == 2;
            waits += o > 1 && points == 1 && o % betas[c] == 0;
            points = points < 0 ? 1 : points + 1;
        }
        gp_free(&w.gp);
    }
    check(bad == 0 && gp_steps == quick(6, 4) && waits == 2, "SWIFT's schedule: %d steps took another phase than "
          "start at o = 1 (and after the restart), GP at multiples of beta once the GP holds two points, else random "
          "(%d GP steps, want 25, 50, 100 and 4, 6, 8; %d waits on one point, want 2)", bad, gp_steps, waits);
    free_model(&m);
}

// App. C.2 as decided in swift_after_verify: at every 50th verification, r drops by 0.05 when
// the drafts verified in the block of 50 since the last check were accepted below 0.7 (drafted
// tokens, not rounds, weighted). Exactly 0.7 (35 of 50) keeps r, 34 of 50 lowers it; 25 rounds of
// 4 kept drafts and 25 of 1 rejected are 100 of 125 (0.8), r stays (the rounds' mean rate, 0.5,
// would drop it), and 25 rounds keeping 1 of 4 with 25 keeping 1 of 1 are 50 of 125, r drops (50
// rounds that all kept something would not); and 30 rejected rounds straddling two blocks, each
// block at 0.7, keep it where a sliding window of the last 50 rounds (at 0.4) would drop it
// (README describes blocks).
static void test_swift_ratio_blocks(void) {
    const int L = 6;
    MethodParams mp = method_params_default();
    struct { const char *what; int n, drafted[2], accepted[2], split; float want; } cases[] = {
        {"35 of 50", 50, {1, 1}, {1, 0}, 35, 0.45f},
        {"34 of 50", 50, {1, 1}, {1, 0}, 34, 0.45f - 0.05f},
        {"100 of 125 drafts", 50, {4, 1}, {4, 0}, 25, 0.45f},
        {"50 of 125 drafts", 50, {4, 1}, {1, 1}, 25, 0.45f - 0.05f},
        {"49 rejected, no check yet", 49, {1, 1}, {0, 0}, 0, 0.45f},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        Swift w;
        swift_init(&w, &mp.swift, L, 1);
        for (int v = 0; v < cases[k].n; v++) {
            int b = v >= cases[k].split;
            swift_after_verify(&w, L, cases[k].drafted[b], cases[k].accepted[b]);
        }
        check(w.ratio == cases[k].want, "SWIFT App. C.2, %s: r %.2f, want %.2f", cases[k].what, w.ratio,
              cases[k].want);
        gp_free(&w.gp);
    }
    Swift w;
    swift_init(&w, &mp.swift, L, 1);
    for (int v = 0; v < 100; v++) { swift_after_verify(&w, L, 1, v < 35 || v >= 65); } // rounds 36-65 rejected
    check(w.ratio == 0.45f, "SWIFT App. C.2: two blocks at 0.7 with 30 rejected rounds across them: r %.2f, want "
          "0.45 (blocks, not a sliding window)", w.ratio);
    gp_free(&w.gp);
}

// A candidate skips round(r 2L) sublayers, never in the first or last layer (Sec. 4.1.2 as
// hemingkx/SWIFT does): above r = (L - 2) / L that count does not fit in the 2(L - 2) others, and
// every candidate skips all of them (README says so), the trace's ratio staying the r given.
static void test_swift_count_cap(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    m.config.n_eos = 0;
    int L = m.config.n_layers, seq[64], bad = 0;
    int pos = past_swift_window(&m, seq);
    MethodParams mp = method_params_default();
    const float ratios[3] = {0.45f, 0.66f, 0.9f};
    for (int c = 0; c < 3; c++) {
        Swift w;
        swift_init(&w, &mp.swift, L, 9);
        w.p.budget = 1.0f;
        w.p.target = 1.01f;
        w.ratio = ratios[c];
        long count = lroundf(ratios[c] * 2 * L), want = count < 2 * (L - 2) ? count : 2 * (L - 2);
        for (int o = 0; o < 6; o++) {
            swift_step(&w, &m, seq, 4, pos);
            bad += o > 0 && (skip_count(&w.cand, L) != want || w.cand.attn[0] || w.cand.mlp[0] ||
                             w.cand.attn[L - 1] || w.cand.mlp[L - 1] || w.cand_ratio != ratios[c]);
        }
        gp_free(&w.gp);
    }
    check(bad == 0, "SWIFT: %d candidates skip another count than min(round(r 2L), 2(L - 2)), or the first or "
          "last layer", bad);
    free_model(&m);
}

// Self-SD's search under --objective time scores a set by its measured time, and the GP is fitted
// to those scores: two runs propose the same random warm-up sets (the empty set, then the first
// iters / 5, drawn from the seed) and then sets that follow the measurements (README, Self-SD).
// Two searches whose scores are one landscape plus different noise (the test's score replaces
// decoding; the repeats of the time objective included).
typedef struct { Rng noise; } NoisyScore;
static double noisy_score(void *ctx, const SkipSet *s) {
    NoisyScore *n = (NoisyScore *)ctx;
    int k = 0;
    for (int l = 0; l < 6; l++) { k += s->attn[l] * (l + 1) + s->mlp[l] * (7 - l); }
    return 20.0 - 0.5 * k + rng_uniform(&n->noise);
}

static void test_selfsd_time_candidates(const char *dir) {
    Model m;
    if (!load_model(&m, dir, 0)) { return; }
    MethodParams mp = method_params_default();
    mp.selfsd.iters = 30;
    SkipSet cands[2][64];
    int n[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        NoisyScore ns;
        rng_seed(&ns.noise, 100 + (uint64_t)run);
        Objective obj;
        memset(&obj, 0, sizeof(obj));
        obj.score = noisy_score;
        obj.score_ctx = &ns;
        obj.observer = &engine_watcher;
        EngineLog *g = watch_engine();
        select_selfsd(&m, &obj, &mp.selfsd, 42);
        for (int c = 0; c < g->candidates && c < 64; c++) { cands[run][n[run]++] = g->cand[c]; }
    }
    unwatch_engine();
    int warm = 1 + mp.selfsd.iters / 5, same_warm = 0, same_after = 0, L = m.config.n_layers;
    for (int c = 0; c < n[0] && c < n[1]; c++) {
        int same = same_set(&cands[0][c], &cands[1][c], L);
        if (c < warm) { same_warm += same; } else { same_after += same; }
    }
    check(n[0] == n[1] && n[0] == 1 + mp.selfsd.iters && same_warm == warm && same_after < n[0] - warm,
          "Self-SD under measured scores: %d and %d candidates, %d of the %d warm-up ones the same in both runs, %d of "
          "the GP's %d", n[0], n[1], same_warm, warm, same_after, n[0] - warm);
    free_model(&m);
}

// With nothing drafted (an empty set drafts nothing) --json's conf_mean is null, as dp_overlap is
// with fewer than two DPs: a mean over no token is not 0.
static void test_conf_mean_null(void) {
    char tmp[] = "/tmp/selfspec_confmean_XXXXXX", args[256], *out;
    if (!check(mkdtemp(tmp) != NULL, "mkdtemp failed")) { return; }
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", "-m tiny_models/llama2-tiny-random -n 4 --skip - --json", &out,
                          NULL);
    check(rc == 0 && strstr(out, "\"drafted\": 0,") && strstr(out, "\"conf_mean\": null"), "--json with nothing "
          "drafted: want conf_mean null (exit %d): %.600s", rc, out);
    free(out);
    snprintf(args, sizeof(args), "rm -rf %s", tmp);
    if (system(args) != 0) { fprintf(stderr, "could not remove %s\n", tmp); }
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
    if (selected("method_drafting")) { test_method_drafting(); }
    if (selected("conf_sampling")) { test_conf_sampling("tiny_models/llama2-tiny-random"); }
    if (selected("random_overlap")) { test_random_overlap(); }
    if (selected("clasp_brute_force")) { test_clasp_brute_force("tiny_models/llama2-tiny-random"); }
    if (selected("clasp_start")) { test_clasp_start("tiny_models/llama2-tiny-random"); }
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
    if (selected("swift_schedule")) { test_swift_schedule("tiny_models/llama2-tiny-random"); }
    if (selected("swift_ratio_blocks")) { test_swift_ratio_blocks(); }
    if (selected("swift_count_cap")) { test_swift_count_cap("tiny_models/llama2-tiny-random"); }
    if (selected("selfsd_time_candidates")) { test_selfsd_time_candidates("tiny_models/llama2-tiny-random"); }
    if (selected("conf_mean_null")) { test_conf_mean_null(); }
    return test_summary("test_properties");
}
