// test_trace: --trace FILE against the reference traces in test/refs/traces/ (one per line of
// commands.txt: ./selfspec -m tiny_models/kjv-12l ARGS, greedy, one thread). Each is regenerated
// and compared line by line, the timings masked (the top-level keys ending in _ms or _per_s, and
// "device"); the first differing line is printed. Then each trace is checked against itself:
// every line is strict JSON with a "type"; per prompt the rounds add up to the summary (rounds,
// drafted, accepted, n_tokens = 1 + the tokens emitted), each round starts where the last one
// ended (pos + accepted + 1), gamma_before is the last round's gamma_after, conf has one entry per
// drafted token, a chain's verify pass is drafted + 1 rows, and the events are the summary's
// "selections"; the summary's statistics are recomputed from the rounds without the engine's
// helpers (conf_mean, null when nothing was drafted; gamma_first, gamma_last, gamma_mean;
// dp_overlap), and CLaSp's text line against them and against random sets by enumeration.
// Each method's own records are reached (SWIFT steps, CLaSp DPs with a margin, ASD's
// C_l, the searches' candidates). Regenerate the references with sh test/refs/traces/make.sh.
#define TESTING
#include "../selfspec.cu"
#include "testing.h"
#include <poll.h>

static char tmp[64]; // the test's folder
static const char *REFS = "test/refs/traces";

// The lines of a file, split in place (the file's text is *text, freed by the caller).
static int split_lines(char *text, char ***lines) {
    int n = 0, cap = 16;
    *lines = (char **)malloc_check((size_t)cap * sizeof(char *));
    for (char *p = text; *p;) {
        char *end = strchr(p, '\n');
        if (n == cap) { *lines = (char **)realloc_check(*lines, (size_t)(cap *= 2) * sizeof(char *)); }
        (*lines)[n++] = p;
        if (end == NULL) { break; }
        *end = '\0';
        p = end + 1;
    }
    return n;
}

static int ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

// Quick (SELFSPEC_TEST_QUICK, make test-asan-quick): each reference command runs on the first of
// its three prompts (test/refs/traces/prompts.txt's first line), and its trace must equal the
// reference's first records, the header's prompt count aside; the other prompts' records are
// checked by make test.
static int quick_mode;

// line with the values of its top-level timing keys (and "device"; in quick mode "prompts")
// replaced by "*", into out. Returns 0, or -1 when the line is not a JSON object.
static int mask_line(const char *line, char *out, size_t cap) {
    Json j;
    char err[SS_ERR_LEN];
    if (json_parse(&j, line, strlen(line), "trace line", err) || j.tok[0].type != JSMN_OBJECT) {
        return -1;
    }
    size_t n = 0, from = 0;
    for (int k = 0, key = 1; k < j.tok[0].size; k++, key = json_skip(&j, key + 1)) {
        const jsmntok_t *kt = &j.tok[key], *vt = &j.tok[key + 1];
        size_t klen = (size_t)(kt->end - kt->start);
        const char *name = line + kt->start;
        if (!ends_with(name, klen, "_ms") && !ends_with(name, klen, "_per_s") &&
            !(klen == 6 && memcmp(name, "device", 6) == 0) &&
            !(quick_mode && klen == 7 && memcmp(name, "prompts", 7) == 0) &&
            !(klen > 9 && memcmp(name, "measured_", 9) == 0)) {
            continue;
        }
        size_t start = (size_t)vt->start - (vt->type == JSMN_STRING),
               end = (size_t)vt->end + (vt->type == JSMN_STRING);
        n += (size_t)snprintf(out + n, cap - n, "%.*s*", (int)(start - from), line + from);
        from = end;
    }
    snprintf(out + n, cap - n, "%s", line + from);
    json_free(&j);
    return 0;
}

// Compares a regenerated trace with its reference, masked, line by line (quick: with the
// reference's first lines, as many as the trace has).
static void compare_trace(const char *name, const char *got_path, const char *ref_path) {
    char *got = read_or_exit(got_path, NULL), *ref = read_or_exit(ref_path, NULL);
    char **a, **b;
    int na = split_lines(got, &a), nb = split_lines(ref, &b), first = -1;
    size_t cap = 1 << 20;
    char *ma = (char *)malloc_check(cap), *mb = (char *)malloc_check(cap);
    for (int i = 0; i < na && i < nb && first < 0; i++) {
        if (mask_line(a[i], ma, cap) || mask_line(b[i], mb, cap) || strcmp(ma, mb) != 0) {
            first = i;
        }
    }
    if (first < 0 && (quick_mode ? na > nb || na < 3 : na != nb)) { first = na < nb ? na : nb; }
    check(first < 0, "%s: trace line %d differs from %s:\n  got:  %.400s\n  want: %.400s", name,
          first + 1, ref_path, first >= 0 && first < na ? a[first] : "(no line)",
          first >= 0 && first < nb ? b[first] : "(no line)"); // a passing check reads no line
    free(ma); free(mb); free(a); free(b); free(got); free(ref);
}

static double num(const Json *j, int obj, const char *key) {
    int v = json_get(j, obj, key);
    if (v < 0 || j->tok[v].type != JSMN_PRIMITIVE) { return NAN; }
    return strtod(j->js + j->tok[v].start, NULL); // null: NAN
}

static int is_null(const Json *j, int obj, const char *key) {
    int v = json_get(j, obj, key);
    return v >= 0 && j->tok[v].type == JSMN_PRIMITIVE && j->js[j->tok[v].start] == 'n';
}

// The text of the value at key of obj into buf ("" when absent): two skip sets compare as text.
static void value_text(const Json *j, int obj, const char *key, char *buf, size_t cap) {
    int v = json_get(j, obj, key);
    snprintf(buf, cap, "%.*s", v > 0 ? j->tok[v].end - j->tok[v].start : 0, v > 0 ? j->js + j->tok[v].start : "");
}

static int record_is(const Json *j, const char *type) {
    int v = json_get(j, 0, "type");
    return v >= 0 && json_eq(j, v, type);
}

// A trace's skip set {"attn": [...], "mlp": [...]} at obj as a SkipSet.
static SkipSet skip_at(const Json *j, int obj) {
    SkipSet s;
    memset(&s, 0, sizeof(s));
    for (int k = 0; k < 2; k++) {
        int a = json_get(j, obj, k ? "mlp" : "attn");
        for (int e = 0; a > 0 && e < j->tok[a].size; e++) {
            int l = (int)strtol(j->js + j->tok[a + 1 + e].start, NULL, 10);
            if (l >= 0 && l < SS_MAX_LAYERS) { (k ? s.mlp : s.attn)[l] = 1; }
        }
    }
    return s;
}

// README "The trace" lists each record's keys in a table (a dot names a key inside an object);
// every key a trace here holds must be listed for its record, and each listed key must turn up.
enum { MAX_DOC = 512 };
typedef struct {
    char type[32], key[64];
    int seen;
} DocKey;
static DocKey doc[MAX_DOC];
static int n_doc;

static void read_documented_keys(void) {
    char *text = read_or_exit("README.md", NULL), **lines;
    int n = split_lines(text, &lines), in = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(lines[i], "## ", 3) == 0) { in = strcmp(lines[i], "## The trace") == 0; }
        char type[32];
        if (!in || sscanf(lines[i], "| `%31[a-z_]` |", type) != 1) { continue; }
        for (char *k = strchr(strchr(lines[i] + 2, '|'), '`'); k && n_doc < MAX_DOC; k = strchr(k, '`')) {
            char *e = strchr(k + 1, '`');
            if (e == NULL) { break; }
            snprintf(doc[n_doc].type, sizeof(doc[n_doc].type), "%s", type);
            snprintf(doc[n_doc].key, sizeof(doc[n_doc].key), "%.*s", (int)(e - k - 1), k + 1);
            doc[n_doc++].seen = 0;
            k = e + 1;
        }
    }
    free(lines);
    free(text);
}

// Each key of the object at obj (its path after prefix) against the README's table for type.
static int check_keys_documented(const Json *j, int obj, const char *type, const char *prefix,
                                 const char *where) {
    int ok = 1;
    for (int k = 0, key = obj + 1; k < j->tok[obj].size; k++, key = json_skip(j, key + 1)) {
        char path[160];
        snprintf(path, sizeof(path), "%s%.*s", prefix, j->tok[key].end - j->tok[key].start,
                 j->js + j->tok[key].start);
        int found = 0;
        for (int d = 0; d < n_doc; d++) {
            if (strcmp(doc[d].type, type) == 0 && strcmp(doc[d].key, path) == 0) { doc[d].seen = found = 1; }
        }
        ok &= check(found, "%s: the %s record's key %s is not in README's trace table", where, type, path);
        const jsmntok_t *v = &j->tok[key + 1];
        int skip_set = v->type == JSMN_OBJECT && v->size == 2 && json_get(j, key + 1, "attn") > 0;
        if (v->type == JSMN_OBJECT && !skip_set) {
            char inner[170];
            snprintf(inner, sizeof(inner), "%s.", path);
            ok &= check_keys_documented(j, key + 1, type, inner, where);
        }
    }
    return ok;
}

// Issue 47: the parameters of each sublayer of tiny_models/kjv-12l, counted from the shapes in its
// safetensors header, not from the engine's formula (draft_weight_share): attn[l] and mlp[l]
// with their norms, and what every pass reads, the final norm and the head (the tied embedding).
static double sub_attn[SS_MAX_LAYERS], sub_mlp[SS_MAX_LAYERS], sub_head;

static void read_weight_counts(const char *path) {
    size_t len;
    char *bytes = read_or_exit(path, &len), err[SS_ERR_LEN], rest[128];
    uint64_t n = 0;
    memcpy(&n, bytes, 8); // the header's length, little-endian (as on the machines tested)
    Json j;
    if (n + 8 > len || json_parse(&j, bytes + 8, (size_t)n, path, err)) { die(__FILE__, __LINE__, "%s: %s", path, err); }
    int lm_head = 0;
    for (int k = 0, key = 1; k < j.tok[0].size; k++, key = json_skip(&j, key + 1)) {
        char name[160];
        int l, shape = json_get(&j, key + 1, "shape");
        double count = 1;
        snprintf(name, sizeof(name), "%.*s", j.tok[key].end - j.tok[key].start, j.js + j.tok[key].start);
        for (int d = 0; shape > 0 && d < j.tok[shape].size; d++) { count *= strtod(j.js + j.tok[shape + 1 + d].start, NULL); }
        if (shape < 0) { continue; } // __metadata__
        if (sscanf(name, "model.layers.%d.%127s", &l, rest) == 2 && l >= 0 && l < SS_MAX_LAYERS) {
            int attn = strncmp(rest, "self_attn.", 10) == 0 || strcmp(rest, "input_layernorm.weight") == 0;
            *(attn ? &sub_attn[l] : &sub_mlp[l]) += count;
        } else if (strcmp(name, "model.norm.weight") == 0 || strcmp(name, "lm_head.weight") == 0) {
            sub_head += count;
            lm_head |= name[0] == 'l';
        } else if (strcmp(name, "model.embed_tokens.weight") == 0) {
            sub_head += count; // tied: the head (kjv-12l has no lm_head.weight)
        }
    }
    check(!lm_head && sub_head > 0 && sub_attn[0] > 0 && sub_mlp[11] > 0, "%s: counts read", path);
    json_free(&j);
    free(bytes);
}

// The share of those weights a pass under s reads.
static double weights_read(const SkipSet *s, int L) {
    double all = sub_head, read = sub_head;
    for (int l = 0; l < L; l++) {
        all += sub_attn[l] + sub_mlp[l];
        read += (s->attn[l] ? 0 : sub_attn[l]) + (s->mlp[l] ? 0 : sub_mlp[l]);
    }
    return read / all;
}

// What the method's records must show, counted over a trace.
typedef struct {
    int swift, clasp, asd, search, search_done, rounds, drafted, prompts, restarts, ends[4];
    int rejected, leaves, tokens; // rounds with a rejected draft token, a kept leaf; tokens checked
    int gp;                       // search records the GP proposed
    int shares, break_evens;      // summaries whose draft_weight_share, break-even were checked
} Seen;

// A summary's array `key` (numbers) against want[0..n-1], to tol.
static int array_is(const Json *j, const char *key, const double *want, int n, double tol) {
    int a = json_get(j, 0, key), ok = a > 0 && j->tok[a].type == JSMN_ARRAY && j->tok[a].size == n;
    for (int i = 0; ok && i < n; i++) { ok = fabs(strtod(j->js + j->tok[a + 1 + i].start, NULL) - want[i]) <= tol; }
    return ok;
}

// The Jaccard overlap of two skip sets, |a and b| / |a or b| over their sublayers, counted here by
// inclusion-exclusion (|a| + |b| - |a and b|), not with the engine's jaccard; 1 for two empty sets.
static double overlap(const SkipSet *a, const SkipSet *b, int L) {
    int na = skip_count(a, L), nb = skip_count(b, L), both = 0;
    for (int l = 0; l < L; l++) { both += (a->attn[l] && b->attn[l]) + (a->mlp[l] && b->mlp[l]); }
    return na + nb - both > 0 ? (double)both / (na + nb - both) : 1.0;
}

// The rounds of one trace against its summaries; returns what it saw.
static Seen check_consistency(const char *name, const char *path) {
    Seen seen;
    memset(&seen, 0, sizeof(seen));
    char *text = read_or_exit(path, NULL), err[SS_ERR_LEN];
    char **lines;
    int n = split_lines(text, &lines), L = 0, rounds = 0, drafted = 0, accepted = 0, emitted = 0;
    int events = 0, pos = -1, prompt = -1, bad = 0, fixed_gamma = 0, none = 0, swift = 0, K = 0, plain = 0;
    int selfsd = 0, iters = 0, kjv = 0;
    double gamma_first = NAN, gamma_last = NAN, gamma_sum = 0; // this prompt's rounds' thresholds
    // this prompt's rounds by draft length, and by draft position: reached, and kept
    int lengths[MAX_DRAFT + 1], reached[MAX_DRAFT], kept[MAX_DRAFT], longest = 0;
    double last_ratio = NAN; // SWIFT's r at its last step or restart
    // this prompt's rounds by end, their draft confidences, and CLaSp's DP sets' overlaps
    int by_end[4] = {0, 0, 0, 0}, n_conf = 0, dps = 0;
    double conf_sum = 0, overlap_sum = 0, share_sum = 0; // and the weights each draft token read
    SkipSet last_dp;
    double gamma = NAN, cos_threshold = NAN;
    enum { MAX_OUT = 4096 };
    int out_ids[MAX_OUT], n_out = 0; // this prompt's tokens from its rounds (after the prefill's)
    int every_m = 0, keep_last_n = 0;
    // the set each round must draft with: ASD's for the whole prompt, a DP's from the next round,
    // a SWIFT candidate from its own round when it replaced the kept set, else the last round's
    char asd_skip[512] = "", dp_skip[512] = "", last_skip[512] = "", skip[512], cand[512];
    for (int i = 0; i < n && !bad; i++) {
        if (lines[i][0] == '\0' && i == n - 1) { break; }
        Json j;
        if (!check(json_parse(&j, lines[i], strlen(lines[i]), path, err) == 0 &&
                   j.tok[0].type == JSMN_OBJECT && json_get(&j, 0, "type") > 0,
                   "%s line %d: not a JSON object with a \"type\": %s", name, i + 1, err)) {
            break;
        }
        char where[96], type[32];
        snprintf(where, sizeof(where), "%s line %d", name, i + 1);
        value_text(&j, 0, "type", type, sizeof(type));
        bad |= !check_keys_documented(&j, 0, type, "", where);
        if (record_is(&j, "header")) {
            L = (int)num(&j, 0, "n_layers");
            K = (int)num(&j, 0, "K");
            int exit = json_get(&j, 0, "exit"), mode = json_get(&j, exit, "mode");
            none = json_eq(&j, mode, "none");
            plain = json_eq(&j, json_get(&j, 0, "method"), "plain");
            fixed_gamma = json_eq(&j, mode, "fixed");
            swift = json_eq(&j, json_get(&j, 0, "method"), "swift");
            selfsd = json_eq(&j, json_get(&j, 0, "method"), "selfsd");
            kjv = json_eq(&j, json_get(&j, 0, "model"), "tiny_models/kjv-12l"); // read_weight_counts'
            int params = json_get(&j, 0, "params");
            iters = (int)num(&j, params, "iters");
            cos_threshold = num(&j, params, "cos_threshold");
            every_m = (int)num(&j, params, "every_m");
            keep_last_n = (int)num(&j, params, "keep_last_n");
            bad |= !check(L > 0 && exit > 0, "%s: a header with n_layers and exit", where);
        } else if (record_is(&j, "search") || record_is(&j, "search_done")) {
            seen.search += record_is(&j, "search");
            seen.search_done += record_is(&j, "search_done");
            bad |= !check(!record_is(&j, "search_done") || num(&j, 0, "scored") == seen.search,
                          "%s: search_done scored %g, after %d search records", where, num(&j, 0, "scored"),
                          seen.search);
            bad |= !check(json_get(&j, 0, "skip") > 0 && isfinite(num(&j, 0, "objective")),
                          "%s: a search record without its set or objective", where);
            // how the set was proposed (issue 47): Self-SD's empty set at 0, random for the first
            // iters / 5, then the GP's; the oracle's at random (6 of C(24, 11) sets here)
            if (record_is(&j, "search")) {
                int i = (int)num(&j, 0, "i"), ph = json_get(&j, 0, "phase");
                const char *want = !selfsd ? "random" : i == 0 ? "empty" : i <= iters / 5 ? "random" : "gp";
                bad |= !check(ph > 0 && json_eq(&j, ph, want), "%s: search %d's phase is not %s", where, i, want);
                seen.gp += ph > 0 && json_eq(&j, ph, "gp");
            }
        } else if (record_is(&j, "prefill")) {
            prompt = (int)num(&j, 0, "prompt");
            pos = (int)num(&j, 0, "tokens");
            rounds = drafted = accepted = emitted = events = longest = 0;
            memset(lengths, 0, sizeof(lengths));
            memset(reached, 0, sizeof(reached));
            memset(kept, 0, sizeof(kept));
            memset(by_end, 0, sizeof(by_end));
            n_conf = dps = n_out = 0;
            conf_sum = overlap_sum = share_sum = gamma_sum = 0;
            gamma_first = gamma_last = NAN;
            int ids = json_get(&j, 0, "ids");
            bad |= !check(ids > 0 && j.tok[ids].size == pos, "%s: %d prompt ids, want tokens %d", where,
                          ids > 0 ? j.tok[ids].size : -1, pos);
            value_text(&j, 0, "asd_skip", asd_skip, sizeof(asd_skip));
            dp_skip[0] = last_skip[0] = '\0';
            int cos = json_get(&j, 0, "asd_cos");
            if (cos > 0) {
                seen.asd++;
                bad |= !check(j.tok[cos].size == L && json_get(&j, 0, "asd_skip") > 0,
                              "%s: asd_cos has %d entries, want n_layers %d", where, j.tok[cos].size, L);
                // ASD Algorithm 1 from the trace alone: attention l when C_l >= alpha, attention and
                // MLP of every m-th layer (1-based), never in the last n layers
                char want[512], attn[256] = "", mlp[256] = "";
                for (int l = 0, e = cos + 1; l < L && !bad; l++, e++) {
                    double c = strtod(j.js + j.tok[e].start, NULL);
                    int kept = l + 1 <= L - keep_last_n, mth = (l + 1) % every_m == 0;
                    if (kept && (c >= cos_threshold || mth)) { sprintf(attn + strlen(attn), "%s%d", attn[0] ? ", " : "", l); }
                    if (kept && mth) { sprintf(mlp + strlen(mlp), "%s%d", mlp[0] ? ", " : "", l); }
                }
                snprintf(want, sizeof(want), "{\"attn\": [%s], \"mlp\": [%s]}", attn, mlp);
                bad |= !check(every_m > 0 && strcmp(asd_skip, want) == 0, "%s: asd_skip %s, but the rule on asd_cos "
                              "and the header's params gives %s", where, asd_skip, want);
            }
        } else if (record_is(&j, "round")) {
            int k = (int)num(&j, 0, "drafted"), a = (int)num(&j, 0, "accepted");
            int e = (int)num(&j, 0, "emitted"), conf = json_get(&j, 0, "conf");
            int event = json_get(&j, 0, "event"), end = json_get(&j, 0, "end");
            SkipSet round_skip = skip_at(&j, json_get(&j, 0, "skip"));
            static const char *ends[] = {"exit", "K", "room", "eos"};
            int why = -1;
            for (int w = 0; w < 4; w++) { why = end > 0 && json_eq(&j, end, ends[w]) ? w : why; }
            double last_conf = k > 0 ? strtod(j.js + j.tok[conf + k].start, NULL) : NAN;
            // why drafting stopped, from the round alone: gamma, a last confidence below the
            // threshold before K (exit); K, K tokens; room, fewer than K and no confidence below gamma
            // (the context, the tokens wanted, the tree); eos, cut at a kept EOS
            bad |= !check(why == END_EXIT ? !none && k > 0 && k < K && last_conf < num(&j, 0, "gamma_before")
                          : why == END_K ? k == K : why == END_ROOM ? k < K : why == END_EOS,
                          "%s: drafting ended by %.*s after %d of K %d tokens (the last confidence %g)", where,
                          end > 0 ? j.tok[end].end - j.tok[end].start : 1, end > 0 ? j.js + j.tok[end].start : "?",
                          k, K, last_conf);
            bad |= !check(json_get(&j, 0, "leaf") > 0, "%s: no leaf key", where);
            // the round's tokens (issue 47): the draft's ids, the first `accepted` of them kept
            // (a kept leaf in the slot of the chain token it beat, which is `rejected`), else
            // `rejected` the first one not kept (null when all were, or the round was cut at an
            // EOS); the kept ones and `token` are what the round emitted
            int ids = json_get(&j, 0, "ids"), leaf = j.js[j.tok[json_get(&j, 0, "leaf")].start] == 't';
            int rej = is_null(&j, 0, "rejected") ? -1 : (int)num(&j, 0, "rejected");
            int id_at_a = ids > 0 && a < k ? (int)strtol(j.js + j.tok[ids + 1 + a].start, NULL, 10) : -1;
            int leaf_id = ids > 0 && a > 0 ? (int)strtol(j.js + j.tok[ids + a].start, NULL, 10) : -1;
            bad |= !check(ids > 0 && j.tok[ids].size == k && isfinite(num(&j, 0, "token")) &&
                          (why == END_EOS ? rej < 0 : leaf ? leaf_id >= 0 && rej >= 0 && rej != leaf_id
                                                    : a < k ? rej == id_at_a : rej < 0),
                          "%s: ids of %d for %d drafted, rejected %d (the first unkept id %d), leaf %d", where,
                          ids > 0 ? j.tok[ids].size : -1, k, rej, id_at_a, leaf);
            for (int q = 0; q < a && ids > 0 && n_out < MAX_OUT; q++) {
                out_ids[n_out++] = (int)strtol(j.js + j.tok[ids + 1 + q].start, NULL, 10);
            }
            if (n_out < MAX_OUT) { out_ids[n_out++] = (int)num(&j, 0, "token"); }
            seen.rejected += rej >= 0;
            seen.leaves += leaf;
            if (why >= 0) { seen.ends[why]++; }
            share_sum += k * weights_read(&round_skip, L);
            lengths[k < MAX_DRAFT ? k : MAX_DRAFT]++;
            if (why >= 0) { by_end[why]++; }
            for (int q = 0; q < k; q++, n_conf++) { conf_sum += strtod(j.js + j.tok[conf + 1 + q].start, NULL); }
            longest = k > longest ? k : longest;
            for (int q = 0; q < k && q < MAX_DRAFT; q++) { reached[q]++; kept[q] += q < a; }
            bad |= !check(num(&j, 0, "prompt") == prompt && num(&j, 0, "round") == rounds &&
                          num(&j, 0, "pos") == pos,
                          "%s: prompt %g round %g at pos %g, want prompt %d round %d at pos %d", where,
                          num(&j, 0, "prompt"), num(&j, 0, "round"), num(&j, 0, "pos"), prompt, rounds, pos);
            bad |= !check(conf > 0 && j.tok[conf].size == k && a <= k && e == a + 1,
                          "%s: drafted %d, %d confidences, accepted %d, emitted %d", where, k,
                          conf > 0 ? j.tok[conf].size : -1, a, e);
            bad |= !check(swift || num(&j, 0, "verify") == k + 1, "%s: a chain's verify pass is %d rows, "
                          "got %g", where, k + 1, num(&j, 0, "verify"));
            if (none) {
                bad |= !check(is_null(&j, 0, "gamma_before") && is_null(&j, 0, "gamma_after"),
                              "%s: --exit none has no gamma, want null", where);
            } else {
                double g0 = num(&j, 0, "gamma_before"), g1 = num(&j, 0, "gamma_after");
                bad |= !check((isnan(gamma) || g0 == gamma) && (!fixed_gamma || g0 == g1),
                              "%s: gamma_before %.9g, the last round's gamma_after %.9g", where, g0, gamma);
                gamma = g1;
                gamma_first = rounds == 0 ? g0 : gamma_first;
                gamma_last = g1;
                gamma_sum += g1;
            }
            value_text(&j, 0, "skip", skip, sizeof(skip));
            bad |= !check(!asd_skip[0] || strcmp(skip, asd_skip) == 0, "%s: drafted with %s, ASD chose %s",
                          where, skip, asd_skip);
            bad |= !check(!dp_skip[0] || strcmp(skip, dp_skip) == 0, "%s: drafted with %s, the last DP chose %s",
                          where, skip, dp_skip);
            dp_skip[0] = '\0';
            if (event > 0 && j.tok[event].type == JSMN_OBJECT) {
                int sw = json_get(&j, event, "swift"), cl = json_get(&j, event, "clasp");
                int rs = json_get(&j, event, "restart");
                events += (sw > 0) + (cl > 0); // a restart is no selection call
                if (sw > 0) { // the step's candidate has the size r gives: r is the one it ran under
                    // (but the very first step scores the starting set, alternate layers)
                    double ratio = num(&j, sw, "ratio");
                    int c = json_get(&j, sw, "candidate"), n_skip = 0;
                    int first = json_eq(&j, json_get(&j, sw, "phase"), "start") && seen.restarts == 0;
                    for (int q = 0; q < 2 && c > 0; q++) { n_skip += j.tok[json_get(&j, c, q ? "mlp" : "attn")].size; }
                    // round(r 2L) sublayers, never in the first or last layer: at most 2(L - 2)
                    long count = lround(ratio * 2 * L) < 2 * (L - 2) ? lround(ratio * 2 * L) : 2 * (L - 2);
                    bad |= !check((first || n_skip == count) && (isnan(last_ratio) || ratio == last_ratio),
                                  "%s: a SWIFT step's candidate skips %d, but its ratio %g gives %ld (r before: %g)",
                                  where, n_skip, ratio, count, last_ratio);
                    last_ratio = ratio;
                }
                if (rs > 0) { // App. C.2: r down by 0.05, the draft the uniform set of the new size
                    double ratio = num(&j, rs, "ratio");
                    int c = json_get(&j, rs, "skip"), n_skip = 0;
                    for (int q = 0; q < 2 && c > 0; q++) { n_skip += j.tok[json_get(&j, c, q ? "mlp" : "attn")].size; }
                    bad |= !check(fabs(last_ratio - 0.05 - ratio) < 1e-6 && n_skip == lround(ratio * 2 * L),
                                  "%s: a restart to ratio %g skipping %d, from %g", where, ratio, n_skip, last_ratio);
                    last_ratio = ratio;
                    seen.restarts++;
                }
                if (sw > 0) { // the round drafts with the kept set after the step
                    int replaced = j.js[j.tok[json_get(&j, sw, "replaced")].start] == 't';
                    int start = json_eq(&j, json_get(&j, sw, "phase"), "start");
                    value_text(&j, sw, "candidate", cand, sizeof(cand));
                    bad |= !check(replaced || start ? strcmp(skip, cand) == 0
                                                    : !last_skip[0] || strcmp(skip, last_skip) == 0,
                                  "%s: drafted with %s after a step %s candidate %s", where, skip,
                                  replaced ? "that kept its" : "that did not keep its", cand);
                }
                if (cl > 0) {
                    value_text(&j, cl, "skip", dp_skip, sizeof(dp_skip));
                    SkipSet dp = skip_at(&j, json_get(&j, cl, "skip"));
                    overlap_sum += dps++ ? overlap(&last_dp, &dp, L) : 0;
                    last_dp = dp;
                }
                seen.swift += sw > 0;
                seen.clasp += cl > 0;
                if (sw > 0) {
                    bad |= !check(json_get(&j, sw, "candidate") > 0 && isfinite(num(&j, sw, "matchness")),
                                  "%s: a SWIFT step without its candidate or matchness", where);
                }
                if (cl > 0) {
                    double margin = num(&j, cl, "margin");
                    bad |= !check(json_get(&j, cl, "skip") > 0 && margin >= 0 && margin < 2,
                                  "%s: a CLaSp DP's margin %g, want in [0, 2)", where, margin);
                }
            }
            memcpy(last_skip, skip, sizeof(skip));
            rounds++;
            drafted += k;
            accepted += a;
            emitted += e;
            pos += a + 1;
            seen.rounds++;
            seen.drafted += k;
        } else if (record_is(&j, "summary")) {
            seen.prompts++;
            // the rounds' tokens are the output's, after the first (the prefill's, plain decoding's)
            int toks = json_get(&j, 0, "tokens"), same = toks > 0 && j.tok[toks].size == n_out + (rounds > 0);
            for (int q = 0; same && q < n_out; q++) {
                same = strtol(j.js + j.tok[toks + 2 + q].start, NULL, 10) == out_ids[q];
            }
            bad |= !check(rounds == 0 || same, "%s: the rounds' kept ids and tokens (%d) are not the "
                          "summary's tokens after the first (%d)", where, n_out, toks > 0 ? j.tok[toks].size - 1 : -1);
            seen.tokens += rounds > 0 ? n_out : 0;
            // the share of the weights the drafts read (each sublayer by its parameters, the head
            // included), from the rounds' sets and the checkpoint's shapes; and --compare's
            // break-even: the M at which the passes' prediction is 1, so M / predicted, and the
            // drafts per round times the draft pass plus the verify pass
            SkipSet last = skip_at(&j, json_get(&j, 0, "skip")); // nothing drafted: the last set's
            double share = drafted > 0 ? share_sum / drafted : weights_read(&last, L);
            bad |= !check(!kjv || fabs(num(&j, 0, "draft_weight_share") - share) <= 5.1e-5,
                          "%s: draft_weight_share %g, the rounds' sets read %.6f of the weights", where,
                          num(&j, 0, "draft_weight_share"), share);
            seen.shares += kjv;
            double be = num(&j, 0, "measured_break_even"), pred = num(&j, 0, "measured_predicted_speedup");
            if (json_get(&j, 0, "measured_break_even") > 0 && rounds > 0) {
                double cost = (double)drafted / rounds * num(&j, 0, "measured_draft_pass_steps") +
                              num(&j, 0, "measured_verify_pass_steps");
                bad |= !check(fabs(be - cost) <= 1e-4 * (2.0 + (double)drafted / rounds) &&
                              fabs(be * pred - num(&j, 0, "mean_accepted")) <= 1e-4 * (1 + be + pred),
                              "%s: break-even %g, predicted %g, M %g; a round costs %g", where, be, pred,
                              num(&j, 0, "mean_accepted"), cost);
                seen.break_evens++;
            }
            // Issue 38's statistics: draft_lengths[i], the rounds that drafted i tokens;
            // accept_by_position[i], the share of the rounds reaching position i + 1 that kept it
            double want_len[MAX_DRAFT + 1], want_acc[MAX_DRAFT];
            int n_len = rounds > 0 ? longest + 1 : 0;
            for (int q = 0; q < n_len; q++) { want_len[q] = lengths[q]; }
            for (int q = 0; q + 1 < n_len; q++) { want_acc[q] = (double)kept[q] / reached[q]; }
            // draft_ends, the rounds by end; conf_mean, the draft tokens' mean confidence;
            // dp_overlap, the mean Jaccard overlap of consecutive DP sets (null under two)
            int ends = json_get(&j, 0, "draft_ends");
            bad |= !check(ends > 0 && num(&j, ends, "exit") == by_end[END_EXIT] && num(&j, ends, "K") == by_end[END_K] &&
                          num(&j, ends, "room") == by_end[END_ROOM] && num(&j, ends, "eos") == by_end[END_EOS],
                          "%s: the summary's draft_ends differ from the rounds' ends %d %d %d %d", where,
                          by_end[0], by_end[1], by_end[2], by_end[3]);
            bad |= !check(n_conf == 0 ? is_null(&j, 0, "conf_mean")
                                     : fabs(num(&j, 0, "conf_mean") - conf_sum / n_conf) <= 5.1e-5,
                          "%s: conf_mean %g, the rounds' %d confidences average %g (none: null)", where,
                          num(&j, 0, "conf_mean"), n_conf, n_conf ? conf_sum / n_conf : NAN);
            // gamma_first, the first round's gamma_before; gamma_last, the last round's gamma_after;
            // gamma_mean, the mean of the rounds' gamma_after; null without a threshold (4 decimals)
            int no_gamma = plain || none;
            const char *gk[3] = {"gamma_first", "gamma_last", "gamma_mean"};
            double gw[3] = {gamma_first, gamma_last, rounds > 0 ? gamma_sum / rounds : NAN};
            for (int q = 0; q < 3 && (no_gamma || rounds > 0); q++) {
                bad |= !check(no_gamma ? is_null(&j, 0, gk[q]) : fabs(num(&j, 0, gk[q]) - gw[q]) <= 5.1e-5,
                              "%s: %s %g, the rounds give %g", where, gk[q], num(&j, 0, gk[q]), gw[q]);
            }
            bad |= !check(dps < 2 ? is_null(&j, 0, "dp_overlap")
                                  : fabs(num(&j, 0, "dp_overlap") - overlap_sum / (dps - 1)) <= 5.1e-5,
                          "%s: dp_overlap %g after %d DPs, the rounds' sets give %g", where,
                          num(&j, 0, "dp_overlap"), dps, dps > 1 ? overlap_sum / (dps - 1) : NAN);
            bad |= !check(array_is(&j, "draft_lengths", want_len, n_len, 0) &&
                          array_is(&j, "accept_by_position", want_acc, n_len > 0 ? n_len - 1 : 0, 5.1e-5),
                          "%s: the summary's draft_lengths or accept_by_position differ from the rounds'", where);
            bad |= !check(num(&j, 0, "prompt") == prompt && num(&j, 0, "rounds") == rounds &&
                          num(&j, 0, "drafted") == drafted && num(&j, 0, "accepted") == accepted &&
                          (rounds == 0 || num(&j, 0, "n_tokens") == emitted + 1) &&
                          num(&j, 0, "selections") == events,
                          "%s: summary of prompt %g: rounds %g drafted %g accepted %g n_tokens %g "
                          "selections %g; the rounds add up to %d, %d, %d, %d, %d", where,
                          num(&j, 0, "prompt"), num(&j, 0, "rounds"), num(&j, 0, "drafted"),
                          num(&j, 0, "accepted"), num(&j, 0, "n_tokens"), num(&j, 0, "selections"),
                          rounds, drafted, accepted, emitted + 1, events);
        }
        json_free(&j);
    }
    free(lines);
    free(text);
    return seen;
}

// --show-rounds' quoted token at *p (a JSON string) appended to out, unescaped;
// *p moves past it. Returns 0 when *p holds no quoted token.
static int read_quoted(const char **p, char *out, size_t cap) {
    const char *s = *p;
    size_t n = strlen(out);
    if (*s++ != '"') { return 0; }
    for (; *s && *s != '"' && n + 1 < cap; s++) {
        if (*s != '\\') { out[n++] = *s; continue; }
        s++;
        if (*s == 'n') { out[n++] = '\n'; }
        else if (*s == 'u' && strspn(s + 1, "0123456789abcdef") >= 4) { // json_field's: < 0x20, U+FFFD
            char hex[5] = {s[1], s[2], s[3], s[4], 0};
            long cp = strtol(hex, NULL, 16);
            if (cp < 0x80) { out[n++] = (char)cp; } else if (n + 3 < cap) { memcpy(out + n, "\xEF\xBF\xBD", 3), n += 3; }
            s += 4;
        }
        else { out[n++] = *s; }
    }
    out[n] = '\0';
    *p = *s == '"' ? s + 1 : s;
    return *s == '"';
}

// Reads `word` at *p and moves past it; 0 when *p does not start with it.
static int skip_word(const char **p, const char *word) {
    size_t n = strlen(word);
    if (strncmp(*p, word, n) != 0) { return 0; }
    *p += n;
    return 1;
}

// One line of --show-rounds against its trace round record j: "round R at P: draft "t" 0.39,
// ... (why) | kept A of K[, the last a next-best leaf "l"] | full model "u" for "t"" (or "(the
// bonus)", or "| ends at "u"" when an EOS cut the round). The round's emitted text (its kept
// tokens, then the full model's) is appended to text.
static Tokenizer *kjv_tok; // tiny_models/kjv-12l's, for the view's tokens

// The text of token id alone, as in the middle of a text (its leading space kept).
static void piece_of(int id, char *buf, size_t cap) {
    DecodeState st;
    decode_begin(&st);
    st.at_start = 0;
    size_t n = decode_token(kjv_tok, &st, id, buf, cap);
    decode_end(kjv_tok, &st, buf + n, cap - n);
}

static int view_line_matches(const char *p, const Json *j, char *text, size_t cap, int *events) {
    int k = (int)num(j, 0, "drafted"), a = (int)num(j, 0, "accepted"), conf = json_get(j, 0, "conf");
    int leaf = j->js[j->tok[json_get(j, 0, "leaf")].start] == 't', rejected = !is_null(j, 0, "rejected");
    char head[64], kept[64], draft[64][256], piece[256] = "";
    snprintf(kept, sizeof(kept), ") | kept %d of %d", a, k);
    int event = json_get(j, 0, "event"), sw = event > 0 ? json_get(j, event, "swift") : -1;
    int dp = event > 0 && json_get(j, event, "clasp") > 0, restart = event > 0 && json_get(j, event, "restart") > 0;
    char step[128];
    snprintf(head, sizeof(head), "round %d at %d: ", (int)num(j, 0, "round"), (int)num(j, 0, "pos"));
    int ok = skip_word(&p, head);
    if (ok && sw > 0) { // SWIFT's step before the round: its proposal and matchness, the kept set's
        int ph = json_get(j, sw, "phase");
        snprintf(step, sizeof(step), "SWIFT step (%.*s) matchness %.2f", j->tok[ph].end - j->tok[ph].start,
                 j->js + j->tok[ph].start, num(j, sw, "matchness"));
        ok = skip_word(&p, step);
        if (ok && !is_null(j, sw, "kept_matchness")) {
            snprintf(step, sizeof(step), ", the kept set's %.2f", num(j, sw, "kept_matchness"));
            ok = skip_word(&p, step);
        }
        ok = ok && skip_word(&p, " | ");
    }
    ok = ok && skip_word(&p, k ? "draft" : "no draft");
    for (int q = 0; ok && q < k && q < 64; q++) { // each draft token of the chain, its confidence
        char *end;
        draft[q][0] = '\0';
        ok = skip_word(&p, q ? ", " : " ") && read_quoted(&p, draft[q], sizeof(draft[q]));
        ok = ok && fabs(strtod(p, &end) - strtod(j->js + j->tok[conf + 1 + q].start, NULL)) <= 0.0051;
        p = end;
        // the chain's token: ids[q], but where a leaf was kept, the one it beat (rejected)
        int ids = json_get(j, 0, "ids");
        int id = leaf && q == a - 1 ? (int)num(j, 0, "rejected") : (int)strtol(j->js + j->tok[ids + 1 + q].start, NULL, 10);
        char want[256];
        piece_of(id, want, sizeof(want));
        ok = ok && strcmp(want, draft[q]) == 0;
    }
    p = ok ? strchr(p, ')') : NULL; // why drafting stopped
    ok = p && (k ? skip_word(&p, kept) : skip_word(&p, ")"));
    if (ok && leaf) { ok = skip_word(&p, ", the last a next-best leaf ") && read_quoted(&p, piece, sizeof(piece)); }
    for (int q = 0; ok && q < a; q++) {
        strncat(text, q == a - 1 && leaf ? piece : draft[q], cap - strlen(text) - 1);
    }
    int ends = ok && skip_word(&p, " | ends at ");
    char own[256] = "", instead[256] = "";
    ok = ok && (ends || skip_word(&p, " | full model ")) && read_quoted(&p, own, sizeof(own));
    strncat(text, own, cap - strlen(text) - 1);
    if (ok && !ends && rejected && !leaf) { // the full model's token in place of the draft's
        ok = skip_word(&p, " for ") && read_quoted(&p, instead, sizeof(instead)) && strcmp(instead, draft[a]) == 0;
    } else if (ok && !ends) {
        ok = skip_word(&p, " (the bonus)");
    }
    if (ok && dp) { ok = skip_word(&p, " | DP: a new set") || skip_word(&p, " | DP: the same set"); }
    if (ok && restart) {
        snprintf(step, sizeof(step), " | App. C.2 restart: r %.2f", num(j, json_get(j, event, "restart"), "ratio"));
        ok = skip_word(&p, step);
    }
    events[0] += (sw > 0) + dp + restart;
    events[1] += sw > 0 && json_eq(j, json_get(j, sw, "phase"), "gp");
    events[2] += restart;
    return ok && (*p == '\n' || *p == '\0');
}

// Issue 47's view of the rounds, from one run and its trace: --show-rounds prints one line per
// round after the text, each the trace's round in words (view_line_matches), and the rounds'
// kept tokens and full-model tokens, after the prefill's token, end the text stdout streamed;
// in a pipe the text has no colour. Returns the rounds checked; *leaves counts SWIFT's leaves.
static int check_round_view(const char *name, const char *args, int *leaves, int *events) {
    char cmd[2048], trace[512], *out = NULL, *err = NULL;
    snprintf(trace, sizeof(trace), "%s/%s-view.jsonl", tmp, name);
    snprintf(cmd, sizeof(cmd), "-m tiny_models/kjv-12l %s --show-rounds --trace %s", args, trace);
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", cmd, &out, &err), n = 0;
    check(rc == 0 && strstr(out, "\033[") == NULL && strstr(err, "colours:") == NULL,
          "%s: exit %d, or colour in a pipe: %s", name, rc, err);
    char *tr = read_or_exit(trace, NULL), **recs;
    size_t cap = strlen(out) + 1;
    char *text = (char *)calloc(1, cap);
    int n_recs = split_lines(tr, &recs);
    const char *line = strstr(err, "\nround 0 at ");
    for (int i = 0; i < n_recs && line != NULL; i++) {
        Json j;
        char e[SS_ERR_LEN];
        if (json_parse(&j, recs[i], strlen(recs[i]), trace, e)) { break; }
        if (record_is(&j, "round")) {
            check(view_line_matches(line + 1, &j, text, cap, events), "%s: the view's line is not trace line %d's round:"
                  "\n  %.*s\n  %s", name, i + 1, (int)strcspn(line + 1, "\n"), line + 1, recs[i]);
            *leaves += j.js[j.tok[json_get(&j, 0, "leaf")].start] == 't';
            n++;
            line = strchr(line + 1, '\n');
        }
        json_free(&j);
    }
    size_t lo = strlen(out), lt = strlen(text);
    check(n > 0 && lo > lt && out[lo - 1] == '\n' && memcmp(out + lo - 1 - lt, text, lt) == 0,
          "%s: the view's tokens (%d rounds) do not end the streamed text:\n  view:   %s\n  stdout: %s", name,
          n, text, out);
    free(recs); free(tr); free(text); free(out); free(err);
    return n;
}

// On a terminal the streamed text is coloured by origin (issue 47), and in a pipe never: run
// under a pseudo-terminal, the text without its escapes is the pipe's, the green spans are, in
// order, each round's kept draft tokens (the trace's ids, decoded), and stderr has the legend.
static void check_colours(const char *args) {
    char cmd[4096], errs[600], trace[512], *pipe_out = NULL;
    snprintf(trace, sizeof(trace), "%s/colour.jsonl", tmp);
    snprintf(cmd, sizeof(cmd), "-m tiny_models/kjv-12l %s --trace %s", args, trace);
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", cmd, &pipe_out, NULL);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (rc != 0 || master < 0 || grantpt(master) || unlockpt(master)) {
        check(0, "colours: exit %d, or no pseudo-terminal (posix_openpt)", rc);
        return;
    }
    snprintf(errs, sizeof(errs), "%s/colour-err.txt", tmp);
    snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=1 %s -m tiny_models/kjv-12l %s >%s 2>%s </dev/null",
             selfspec_bin(), args, ptsname(master), errs);
    pid_t pid = fork();
    if (pid == 0) { execl("/bin/sh", "sh", "-c", cmd, (char *)NULL); _exit(127); }
    size_t n = 0, cap = 1 << 16;
    char *tty = (char *)calloc(1, cap + 1);
    for (int status, done = 0; !done;) { // read the terminal until the run is over and it is drained
        struct pollfd pf = {master, POLLIN, 0};
        ssize_t got = poll(&pf, 1, 100) > 0 ? read(master, tty + n, cap - n) : 0;
        if (got > 0) { n += (size_t)got; continue; }
        done = waitpid(pid, &status, WNOHANG) == pid || got < 0 || n == cap;
    }
    close(master);
    // the terminal's text: \r\n back to \n, each green span noted, the escapes removed
    char *plain = (char *)calloc(1, n + 1), spans[256][512];
    int n_spans = 0, green = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(tty + i, "\033[32m", 5) == 0) { green = 1, i += 4; if (n_spans < 256) { spans[n_spans][0] = 0; } continue; }
        if (strncmp(tty + i, "\033[0m", 4) == 0) { // (a round that kept nothing: an empty span)
            green = 0, i += 3, n_spans += n_spans < 256 && spans[n_spans][0];
            continue;
        }
        if (tty[i] == '\r') { continue; }
        plain[k++] = tty[i];
        if (green && n_spans < 256 && strlen(spans[n_spans]) < 500) { strncat(spans[n_spans], tty + i, 1); }
    }
    // the kept draft tokens of each round that kept any, from the pipe run's trace
    char *tr = read_or_exit(trace, NULL), **recs, *legend = read_or_exit(errs, NULL);
    int n_recs = split_lines(tr, &recs), r = 0, same = 1;
    for (int i = 0; i < n_recs; i++) {
        Json j;
        char e[SS_ERR_LEN], kept[512] = "", piece[256];
        if (json_parse(&j, recs[i], strlen(recs[i]), trace, e)) { break; }
        int ids = json_get(&j, 0, "ids"), a = record_is(&j, "round") ? (int)num(&j, 0, "accepted") : 0;
        for (int q = 0; q < a; q++) {
            piece_of((int)strtol(j.js + j.tok[ids + 1 + q].start, NULL, 10), piece, sizeof(piece));
            strncat(kept, piece, sizeof(kept) - strlen(kept) - 1);
        }
        if (a > 0) { same &= r < n_spans && strcmp(spans[r], kept) == 0, r++; }
        json_free(&j);
    }
    check(strcmp(plain, pipe_out) == 0, "colours: the terminal's text without its colours differs from the pipe's:"
          "\n  tty:  %s\n  pipe: %s", plain, pipe_out);
    check(same && r == n_spans && r > 3, "colours: %d green spans, %d rounds that kept a draft token, "
          "or a span that is not the round's kept tokens", n_spans, r);
    check(strstr(legend, "colours: \033[32mgreen\033[0m, the draft tokens the full model kept") != NULL,
          "colours: no legend on stderr: %s", legend);
    free(recs); free(tr); free(legend); free(plain); free(tty); free(pipe_out);
}

// The text report's CLaSp line, per prompt with two DPs or more: "consecutive DP sets overlap X
// (mean Jaccard of N pairs; two random sets of M layers: Y)". X must be the summary's dp_overlap
// (2 decimals), and Y the mean overlap of two random sets of M of the L layers, here by
// enumeration (by symmetry one set is the first M layers, the other every M-subset in turn).
static void check_dp_report(const char *name, const char *err, const char *path) {
    char *text = read_or_exit(path, NULL), **lines, e[SS_ERR_LEN];
    int n = split_lines(text, &lines), L = 0, M = 0, k = 0, bad = 0, seen = 0;
    double dp[64];
    for (int i = 0; i < n; i++) {
        Json j;
        if (lines[i][0] == '\0' || json_parse(&j, lines[i], strlen(lines[i]), path, e)) { continue; }
        if (record_is(&j, "header")) {
            L = (int)num(&j, 0, "n_layers");
            M = (int)num(&j, json_get(&j, 0, "params"), "M");
        } else if (record_is(&j, "summary") && !is_null(&j, 0, "dp_overlap") && k < 64) {
            dp[k++] = num(&j, 0, "dp_overlap");
        }
        json_free(&j);
    }
    double sum = 0;
    int subsets = 0;
    for (int b = 0; b < (1 << L) && L <= 20; b++) {
        if (__builtin_popcount((unsigned)b) != M) { continue; }
        int both = __builtin_popcount((unsigned)(b & ((1 << M) - 1)));
        sum += M > 0 ? (double)both / (2 * M - both) : 1.0;
        subsets++;
    }
    for (const char *at = strstr(err, "consecutive DP sets overlap "); at; at = strstr(at + 1, "consecutive DP sets overlap ")) {
        double x, y;
        int pairs, m;
        int ok = sscanf(at, "consecutive DP sets overlap %lf (mean Jaccard of %d pairs; two random sets of %d layers: %lf)",
                        &x, &pairs, &m, &y) == 4;
        bad += !ok || seen >= k || fabs(x - dp[seen]) > 0.0051 || m != M || fabs(y - sum / subsets) > 0.0051;
        seen++;
    }
    check(bad == 0 && seen == k && k > 0 && subsets > 0, "%s: the text report's DP overlap lines (%d, %d with a "
          "difference) against the %d summaries' dp_overlap and the mean overlap of random sets of %d of %d layers, "
          "%.4f by enumeration", name, seen, bad, k, M, L, subsets ? sum / subsets : NAN);
    free(lines);
    free(text);
}

// Quick mode's prompts file: the first line of the reference prompts, alone.
static void write_first_prompt(const char *path) {
    char *all = read_or_exit("test/refs/traces/prompts.txt", NULL);
    FILE *f = fopen(path, "w");
    if (f == NULL) { die(__FILE__, __LINE__, "cannot write %s", path); }
    fprintf(f, "%.*s\n", (int)strcspn(all, "\n"), all);
    fclose(f);
    free(all);
}

int main(void) {
    quick_mode = quick(0, 1);
    read_documented_keys();
    read_weight_counts("tiny_models/kjv-12l/model.safetensors");
    check(n_doc > 100, "README's trace table: %d keys read", n_doc);
    snprintf(tmp, sizeof(tmp), "/tmp/test_trace.XXXXXX");
    if (mkdtemp(tmp) == NULL) { die(__FILE__, __LINE__, "mkdtemp failed"); }
    char path[1024], *commands = read_or_exit("test/refs/traces/commands.txt", NULL), **lines;
    int n = split_lines(commands, &lines), ran = 0, n_prompts = quick(3, 1);
    char first_prompt[512];
    snprintf(first_prompt, sizeof(first_prompt), "%s/prompt0.txt", tmp);
    if (quick_mode) { write_first_prompt(first_prompt); }
    for (int i = 0; i < n; i++) {
        char name[64], args[1024], quoted[2048], got[512], ref[512], *err = NULL;
        if (sscanf(lines[i], "%63s %1023[^\n]", name, args) != 2) { continue; }
        // each argument single-quoted: the shell of run_selfspec must not read "attn:1;mlp:2"
        size_t q = (size_t)snprintf(quoted, sizeof(quoted), "-m tiny_models/kjv-12l");
        for (char *a = strtok(args, " "); a; a = strtok(NULL, " ")) {
            if (quick_mode && strcmp(a, "test/refs/traces/prompts.txt") == 0) { a = first_prompt; }
            q += (size_t)snprintf(quoted + q, sizeof(quoted) - q, " '%s'", a);
        }
        snprintf(got, sizeof(got), "%s/%s.jsonl", tmp, name);
        snprintf(ref, sizeof(ref), "%s/%s.jsonl", REFS, name);
        snprintf(quoted + q, sizeof(quoted) - q, " --trace %s", got);
        int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", quoted, NULL, &err);
        check(rc == 0 && strstr(err, "wrote ") != NULL, "%s: exit %d: %s", name, rc, err);
        if (rc != 0) { free(err); continue; }
        ran++;
        compare_trace(name, got, ref);
        Seen seen = check_consistency(name, got);
        check(seen.prompts == n_prompts, "%s: %d summaries, want one per prompt (%d)", name, seen.prompts, n_prompts);
        int drafts = strcmp(name, "plain") != 0;
        check(!drafts || seen.drafted > 0, "%s: drafted %d tokens: the round records went untested",
              name, seen.drafted);
        check((!drafts || seen.tokens > 0) && seen.shares == n_prompts, "%s: %d tokens, %d weight shares: "
              "the rounds' ids or the summaries' shares went untested", name, seen.tokens, seen.shares);
        if (strcmp(name, "swift") == 0) {
            check(seen.swift > 2 && seen.leaves > 0, "swift: %d optimization steps, %d kept leaves in the trace",
                  seen.swift, seen.leaves);
        } else if (strcmp(name, "clasp") == 0) {
            check(seen.clasp > 2, "clasp: %d DPs in the trace", seen.clasp);
            check_dp_report(name, err, got);
        } else if (strcmp(name, "static") == 0) {
            check(seen.ends[END_EXIT] > 0 && seen.rejected > 0, "static: %d drafts ended at the exit "
                  "threshold, %d rounds rejected a draft token", seen.ends[END_EXIT], seen.rejected);
            check(seen.break_evens == n_prompts, "static --compare: %d break-evens checked", seen.break_evens);
        } else if (strcmp(name, "static-exit-none") == 0) {
            check(seen.ends[END_K] == seen.rounds - seen.ends[END_ROOM] && seen.ends[END_K] > 0,
                  "--exit none: %d of %d drafts ended at K", seen.ends[END_K], seen.rounds);
        } else if (strcmp(name, "asd") == 0) {
            check(seen.asd == n_prompts, "asd: %d prefills with C_l, want %d", seen.asd, n_prompts);
        } else if (strcmp(name, "selfsd") == 0) {
            check(seen.search > 3 && seen.search_done == 1, "%s: %d candidates, %d chosen sets",
                  name, seen.search, seen.search_done);
            check((seen.gp > 0) == (strcmp(name, "selfsd") == 0), "%s: %d GP proposals", name, seen.gp);
        }
        check(seen.swift + seen.clasp == 0 || strcmp(name, "swift") == 0 || strcmp(name, "clasp") == 0,
              "%s: SWIFT or CLaSp events in another method's trace", name);
        free(err);
    }
    check(ran >= 7, "%d of the reference traces ran, want 7", ran);
    // SWIFT App. C.2 on a model whose drafts stay under 0.7 acceptance: r steps down by 0.05, each
    // restart is recorded, and every step's ratio is the r it ran under (check_consistency)
    char *err = NULL, got[512];
    snprintf(got, sizeof(got), "%s/restart.jsonl", tmp);
    // (quick: 160 tokens still give 2 restarts and over 50 steps)
    snprintf(path, sizeof(path), "-m tiny_models/llama2-tiny-random -p Hello -n %d --method swift "
             "--swift-budget 1 --trace %s", quick(240, 160), got);
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", path, NULL, &err);
    check(rc == 0, "swift restart run: exit %d: %s", rc, err);
    free(err);
    if (rc == 0) {
        Seen seen = check_consistency("swift-restart", got);
        check(seen.restarts >= 2 && seen.swift > 50, "swift-restart: %d restarts, %d steps", seen.restarts,
              seen.swift);
    }
    // --show-rounds: a static set (rejections and bonuses), and SWIFT's tree (kept leaves)
    char terr[SS_ERR_LEN];
    kjv_tok = build_tokenizer("tiny_models/kjv-12l/tokenizer.json", terr);
    if (kjv_tok == NULL) { die(__FILE__, __LINE__, "%s", terr); }
    // (SWIFT's chain: a GP step at the 25th step, App. C.2 after 50 rounds of acceptance under 0.7)
    int leaves = 0, events[3] = {0, 0, 0}, viewed = check_round_view("view-static", "-p 'And the LORD said unto Moses,' -n 40 "
                                                           "--skip 'attn:2,4,6,8,10 mlp:3,5,7,9'", &leaves, events);
    viewed += check_round_view("view-swift", "--method swift --swift-budget 1 -n 40", &leaves, events);
    viewed += check_round_view("view-clasp", "--method clasp -n 24", &leaves, events);
    if (!quick_mode) { viewed += check_round_view("view-swift-chain", "--method swift --swift-budget 1 --swift-tree off -n 100", &leaves, events); }
    check(viewed > 20 && leaves > 0 && events[0] > 3 && (quick_mode || (events[1] > 0 && events[2] > 0)),
          "--show-rounds: %d rounds viewed, %d leaves, %d events, %d GP steps, %d restarts", viewed, leaves, events[0],
          events[1], events[2]);
    check_colours("-p 'And the LORD said unto Moses,' -n 40 --skip 'attn:2,4,6,8,10 mlp:3,5,7,9'");
    free_tokenizer(kjv_tok);
    // above r = (L - 2) / L a candidate skips the 2(L - 2) sublayers outside the first and last
    // layers, fewer than round(r 2L), and its ratio is still the r given (README, The trace)
    snprintf(got, sizeof(got), "%s/cap.jsonl", tmp);
    snprintf(path, sizeof(path), "-m tiny_models/llama2-tiny-random -p Hello -n 48 --method swift --swift-budget 1 "
             "--skip-ratio 0.9 --trace %s", got);
    rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", path, NULL, &err);
    check(rc == 0, "swift at r 0.9: exit %d: %s", rc, err);
    free(err);
    if (rc == 0) {
        Seen seen = check_consistency("swift-cap", got);
        check(seen.swift > 3, "swift at r 0.9: %d steps", seen.swift);
    }
    for (int d = 0; d < n_doc; d++) {
        check(doc[d].seen, "README's trace table lists the %s record's key %s, which no trace here holds", doc[d].type,
              doc[d].key);
    }
    snprintf(path, sizeof(path), "rm -rf %s", tmp);
    if (system(path) != 0) { fprintf(stderr, "test_trace: could not remove %s\n", tmp); }
    free(lines);
    free(commands);
    return test_summary("test_trace");
}
