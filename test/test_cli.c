// test_cli: what a new user meets first, through the selfspec binary ($SELFSPEC_BIN, else
// ./selfspec): the thread count it reports (--threads, OMP_NUM_THREADS, one per core), --help on
// stdout, --compare without a method, --json with -f as JSON Lines, Eq. 6 when nothing is accepted, Self-SD's progress lines
// and its search under a noisy objective, and Ctrl-C (SIGINT sent by the test) during a Self-SD
// search and test/bench/oracle's: the summary, the saved --save-skip file, a normal exit.
#define TESTING
#include "../selfspec.cu"
#include "testing.h"

#include <sys/wait.h>
#include <unistd.h>

static char tmp[64]; // the test's folder
static const char *RANDOM_MODEL = "tiny_models/llama2-tiny-random";

// Runs `env <env> selfspec args`; *out and *err get its stdout and stderr.
static int run(const char *env, const char *args, char **out, char **err) {
    return run_selfspec(tmp, env, args, out, err);
}

// A bad flag: exit 1 and one line "selfspec: error: " naming it.
static void bad_flag(const char *args, const char *want) {
    char *out, *err;
    int rc = run("", args, &out, &err);
    int lines = 0;
    for (const char *p = err; *p; p++) { lines += *p == '\n'; }
    check(rc == 1 && lines == 1 && strncmp(err, "selfspec: error: ", 17) == 0 && strstr(err, want) != NULL,
          "%s: exit %d, want 1 and one error line naming \"%s\": %s", args, rc, want, err);
    free(out);
    free(err);
}

static void test_threads(void) {
    char *out, *err;
    // --threads is reported in the line that names the device, and beats OMP_NUM_THREADS
    int rc = run("OMP_NUM_THREADS=2", "-n 4 --threads 1", &out, &err);
    check(rc == 0 && strstr(err, "CPU: 1 OpenMP thread (--threads)") != NULL, "--threads 1: exit %d, stderr:\n%s", rc, err);
    free(out); free(err);
    rc = run("", "-n 4 --threads 3", &out, &err);
    check(rc == 0 && strstr(err, "CPU: 3 OpenMP threads") != NULL, "--threads 3: exit %d, stderr:\n%s", rc, err);
    free(out); free(err);
    // without --threads, OMP_NUM_THREADS is honoured
    rc = run("OMP_NUM_THREADS=1", "-n 4", &out, &err);
    check(rc == 0 && strstr(err, "CPU: 1 OpenMP thread (OMP_NUM_THREADS)") != NULL, "OMP_NUM_THREADS=1: exit %d, stderr:\n%s", rc, err);
    free(out); free(err);
    // the default: one per core, libgomp's (omp_get_num_procs), named as such
    char want[64];
    snprintf(want, sizeof(want), "CPU: %d OpenMP thread%s (one per core)", omp_get_num_procs(),
             omp_get_num_procs() == 1 ? "" : "s");
    rc = run("-u OMP_NUM_THREADS", "-n 4", &out, &err);
    check(rc == 0 && strstr(err, want) != NULL, "default threads: exit %d, want \"%s\", stderr:\n%s", rc, want, err);
    free(out); free(err);
    bad_flag("--threads 0", "--threads 0: must be in [1, 1024]");
    bad_flag("--threads -2", "--threads -2: must be in");
    bad_flag("--threads two", "--threads two: not an integer");
    bad_flag("--threads 5000", "--threads 5000: must be in");
    bad_flag("--threads", "--threads: missing value");
    // an unknown flag and a missing value are told apart; a flag is never taken as a value
    bad_flag("--bogus 3", "--bogus: unknown flag");
    bad_flag("--save-skip -n 4", "--save-skip: missing value");
    bad_flag("-n 4 --save-skip", "--save-skip: missing value");
    bad_flag("--method selfsd --save-skip -x.json",
             "--save-skip: missing value (a path that starts with - is written ./-name)");
    remove("-x.json"); // what a binary that took it as the path wrote
    bad_flag("--svg x.svg", "--svg: unknown flag"); // pictures are drawn from --trace (test/bench/draw_trace.py)
    bad_flag("-m tiny_models/kjv-12l/model.safetensors", "model.safetensors/config.json: cannot open: Not a directory");
}

static void test_help_and_compare(void) {
    char *out, *err;
    int rc = run("", "--help", &out, &err);
    check(rc == 0 && strncmp(out, "usage: selfspec", 15) == 0 && strstr(out, "--threads N") != NULL && err[0] == '\0',
          "--help: exit %d, want usage with --threads on stdout and nothing on stderr; stdout:\n%s\nstderr:\n%s", rc, out,
          err);
    check(strstr(out, "JSON Lines") != NULL && strstr(out, "without the prompt") != NULL,
          "--help does not say --json -f prints JSON Lines and text leaves out the prompt");
    free(out); free(err);
    bad_flag("--compare", "--compare: compares a speculative method with plain decoding");
    bad_flag("--compare --method none -n 4", "--compare: compares a speculative method with plain decoding");
    bad_flag("--method oracle -n 2", "--method oracle: unknown method"); // (test/bench/oracle now)
}

// --json with -f: one object per prompt, one per line, each valid JSON; "text" has no prompt.
static void test_json_lines(void) {
    char path[128], args[512], err_buf[SS_ERR_LEN], *out, *err;
    snprintf(path, sizeof(path), "%s/prompts.txt", tmp);
    FILE *f = fopen(path, "w");
    fputs("In the beginning\nAnd the LORD said\nBlessed are\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "-f %s -n 6 --json --skip \"attn:2,4\" --compare", path);
    int rc = run("", args, &out, &err);
    check(rc == 0, "--json -f: exit %d: %s", rc, err);
    int lines = 0;
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n"), lines++) {
        Json j;
        int ok = json_parse(&j, line, strlen(line), "--json line", err_buf) == 0;
        check(ok && j.tok[0].type == JSMN_OBJECT && j.tok[0].end == (int)strlen(line),
              "--json line %d is not one JSON object: %s", lines + 1, ok ? line : err_buf);
        if (!ok) { continue; }
        size_t n;
        int t = json_get(&j, 0, "text");
        char *text = t >= 0 ? json_string(&j, t, &n) : NULL;
        check(text != NULL && strstr(text, "In the beginning") == NULL && strstr(text, "LORD said") == NULL,
              "--json line %d: \"text\" holds the prompt: %s", lines + 1, text ? text : "(none)");
        free(text);
        json_free(&j);
    }
    check(lines == 3, "--json -f with 3 prompts printed %d lines, want 3", lines);
    free(out); free(err);
}

// An empty prompt (-p "": BOS only): the continuation starts the text, so the decoder strips its
// leading space, as Hugging Face's decode and llama2.c's run.c do (" And" -> "And"), both in
// --json and on stdout. The first token must carry that space for the test to see anything.
static void test_empty_prompt(void) {
    char err_buf[SS_ERR_LEN], *out, *err;
    int rc = run("", "-p \"\" -n 4 --json", &out, &err);
    Json j;
    check(rc == 0 && json_parse(&j, out, strlen(out), "--json", err_buf) == 0, "-p \"\" --json: exit %d: %s", rc, err);
    if (rc != 0) { free(out); free(err); return; }
    long long first = -1;
    size_t n;
    int ids = json_get(&j, 0, "tokens"), t = json_get(&j, 0, "text");
    json_int(&j, ids >= 0 && j.tok[ids].size > 0 ? ids + 1 : -1, 0, 1 << 30, &first); // tokens[0]
    char *text = json_string(&j, t, &n);
    Tokenizer *tok = build_tokenizer("tiny_models/kjv-12l/tokenizer.json", err_buf);
    check(tok != NULL && first >= 0 && first < tok->vocab_size && strncmp(tok->tok[first].text, "\xE2\x96\x81", 3) == 0,
          "-p \"\": the first token (%lld) does not begin with a space: the test sees nothing", first);
    check(n > 0 && text[0] != ' ', "-p \"\" --json: the text keeps its leading space: \"%s\"", text);
    free(text); json_free(&j); free(out); free(err);
    if (tok) { free_tokenizer(tok); }
    rc = run("", "-p \"\" -n 4", &out, &err);
    check(rc == 0 && out[0] != '\0' && out[0] != ' ', "-p \"\": stdout keeps the leading space: \"%s\"", out);
    free(out); free(err);
}

// SWIFT Eq. 6 when every draft is rejected: drafting costs time, so less than 1x.
static void test_expected_speedup(void) {
    check(expected_speedup(1.0, 0.0, 0.5, 2.0) == 0.5, "Eq. 6 at alpha 0, c 0.5, 2 drafts per round = %g, want 0.5",
          expected_speedup(1.0, 0.0, 0.5, 2.0));
    check(expected_speedup(1.0, 0.0, 0.0, 0.0) == 1.0, "Eq. 6 with no drafts = %g, want 1",
          expected_speedup(1.0, 0.0, 0.0, 0.0));
    double e = expected_speedup(3.0, 0.8, 0.5, 3.0); // Eq. 6 itself: 3 * 0.8 / (2 * 0.5 + 0.8)
    check(fabs(e - 2.4 / 1.8) < 1e-12, "Eq. 6 at M 3, alpha 0.8, r 0.5 = %g, want %g", e, 2.4 / 1.8);
    char *out, *err;
    char args[256];
    snprintf(args, sizeof(args), "-m %s -n 16 --skip \"attn:0-5\"", RANDOM_MODEL); // random weights: 0 accepted
    int rc = run("", args, &out, &err);
    double x = 0;
    const char *at = strstr(err, "expected speedup (SWIFT Eq. 6) ");
    if (at) { x = atof(at + strlen("expected speedup (SWIFT Eq. 6) ")); }
    check(rc == 0 && strstr(err, "accepted 0,") != NULL && at != NULL && x < 0.99,
          "all drafts rejected: want expected speedup < 1, got %.2f (exit %d):\n%s", x, rc, err);
    free(out); free(err);
}

// A synthetic wall clock: every set that skips anything truly costs more than the empty set,
// and every fourth measurement comes out 0.3 of the truth (a moment the machine was quiet).
typedef struct { int n; } NoisyClock;
static double noisy_cost(void *ctx, const SkipSet *s) {
    NoisyClock *c = (NoisyClock *)ctx;
    double truth = 1.0 + 0.05 * skip_count(s, 6);
    return ++c->n % 4 == 2 ? 0.3 * truth : truth;
}

static void test_selfsd_noise(void) {
    Model m;
    char err[SS_ERR_LEN];
    if (build_model(&m, RANDOM_MODEL, 64, err)) { check(0, "%s", err); return; }
    NoisyClock clock = {0};
    Objective obj = {NULL, NULL, 0, 0, 12, 0, draft_exit_default(), {0.0f, 1.0f, {1}}, NULL, NULL, NULL};
    MethodParams mp = method_params_default();
    mp.selfsd.iters = 40;
    obj.score = noisy_cost;
    obj.score_ctx = &clock;
    SkipSet best = select_selfsd(&m, &obj, &mp.selfsd, 5);
    check(skip_count(&best, m.config.n_layers) == 0,
          "Self-SD under a noisy clock chose a set skipping %d sublayers, each of which truly costs more than none",
          skip_count(&best, m.config.n_layers));
    free_model(&m);
}

// The progress lines: iteration 0 is the empty set, so the best is never lower than a cost
// printed before it; each line says how long is left.
static void test_selfsd_progress(void) {
    char *out, *err, args[256];
    snprintf(args, sizeof(args), "-m %s -n 4 --method selfsd --iters 10", RANDOM_MODEL);
    int rc = run("", args, &out, &err);
    check(rc == 0 && strstr(err, "selfsd iter   0: cost ") != NULL, "selfsd prints no iteration 0 (exit %d):\n%s", rc, err);
    double lowest = INFINITY;
    int lines = 0;
    for (const char *p = strstr(err, "selfsd iter"); p != NULL; p = strstr(p + 1, "selfsd iter")) {
        const char *c = strstr(p, "cost "), *b = strstr(p, "best ");
        if (c == NULL) { break; }
        double cost = atof(c + 5);
        lowest = cost < lowest ? cost : lowest;
        if (lines++ == 0 || b == NULL || b > strchr(p, '\n')) { continue; }
        double best = atof(b + 5);
        check(fabs(best - lowest) < 1e-4, "selfsd progress: best %.4f, but the lowest cost printed is %.4f", best, lowest);
        check(strstr(p, "s left") != NULL && strstr(p, "s left") < strchr(p, '\n'), "selfsd progress line has no time left");
    }
    check(lines == 11, "selfsd --iters 10 printed %d progress lines, want 11", lines);
    free(out); free(err);
}

// Starts `bin args`, waits until its stderr holds `ready`, sends SIGINT, and returns the exit
// status; *err gets its stderr.
static int interrupt_run(const char *bin, const char *args, const char *ready, char **err) {
    char e[128], o[128], cmd[1024];
    snprintf(e, sizeof(e), "%s/int_stderr.txt", tmp);
    snprintf(o, sizeof(o), "%s/int_stdout.txt", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        snprintf(cmd, sizeof(cmd), "exec %s %s >%s 2>%s", bin, args, o, e);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    // up to 10 minutes, a guard against a hung binary only: a sanitized build on a loaded machine
    // took over 30 s to reach a Self-SD search's 20th iteration
    int seen = 0;
    for (int k = 0; k < 6000 && !seen; k++) {
        usleep(100000);
        FILE *f = fopen(e, "r");
        if (f == NULL) { continue; }
        char buf[8192];
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        seen = strstr(buf, ready) != NULL;
    }
    check(seen, "%s: \"%s\" never appeared on stderr", args, ready);
    kill(pid, SIGINT);
    int status;
    waitpid(pid, &status, 0);
    *err = read_or_exit(e, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void check_saved(const char *path, const char *what) {
    char err[SS_ERR_LEN];
    size_t len;
    char *text = read_file(path, &len, err);
    check(text != NULL, "%s: --save-skip %s not written", what, path);
    if (text == NULL) { return; }
    Json j;
    int ok = json_parse(&j, text, len, path, err) == 0;
    check(ok && json_get(&j, 0, "attn") >= 0 && json_get(&j, 0, "mlp") >= 0,
          "%s: the saved skip file is not {\"attn\": [..], \"mlp\": [..]}: %s", what, text);
    if (ok) { json_free(&j); }
    free(text);
}

static void test_ctrl_c(void) {
    char args[512], saved[128], *err;
    snprintf(saved, sizeof(saved), "%s/best.json", tmp);
    snprintf(args, sizeof(args), "-m %s -n 4 --method selfsd --iters 100000 --save-skip %s", RANDOM_MODEL, saved);
    int rc = interrupt_run(selfspec_bin(), args, "selfsd iter  20", &err);
    check(rc == 0, "selfsd, Ctrl-C: exit %d, want 0 (stop the search, decode with the best so far):\n%s", rc, err);
    check(strstr(err, "selfsd: interrupted after ") != NULL && strstr(err, "best so far skips") != NULL,
          "selfsd, Ctrl-C: no summary of the best set so far:\n%s", err);
    check(strstr(err, "tokens/s") != NULL, "selfsd, Ctrl-C: decoding did not go on to its report:\n%s", err);
    check_saved(saved, "selfsd, Ctrl-C");
    free(err);
    remove(saved);
    // the oracle prints its progress every 10 s; wait for its first line instead
    snprintf(args, sizeof(args), "-m %s --sets 100000 --save-skip %s", RANDOM_MODEL, saved);
    rc = interrupt_run("test/bench/oracle", args, "oracle: scoring 100000 random", &err);
    check(rc == 0 && strstr(err, "oracle: interrupted after ") != NULL && strstr(err, "wrote ") != NULL,
          "test/bench/oracle, Ctrl-C: exit %d, want 0, a summary and the set saved:\n%s", rc, err);
    check_saved(saved, "oracle, Ctrl-C");
    free(err);
}

// A JSON line's number or string field (NAN / NULL when absent); the caller frees the string.
static double json_num(const char *line, const char *key) {
    char want[64];
    snprintf(want, sizeof(want), "\"%s\": ", key);
    const char *p = strstr(line, want);
    return p ? strtod(p + strlen(want), NULL) : NAN;
}

// A method that did nothing visible says why, in the summary and in --json's "note"; with
// --compare, the passes' costs in plain steps and the speedup they predict.
static void test_method_notes(void) {
    char *out, *err, args[128];
    // SWIFT with the paper's schedule optimizes, and says how many steps ran (quick: 40 tokens,
    // steps from the 32nd on; this run was a third of the program's time under ASan at 64)
    snprintf(args, sizeof(args), "--method swift --swift-budget 1 -n %d --json --compare", quick(64, 40));
    int rc = run("OMP_NUM_THREADS=1", args, &out, &err);
    check(rc == 0 && json_num(out, "selections") > 1 && strstr(out, "\"note\": \"") != NULL &&
              strstr(out, "optimization steps in this prompt, the first at generated token 32 (a step "
                          "waits for the 32-token window)") != NULL,
          "swift --swift-budget 1: exit %d, want steps and a note saying so: %s", rc, out);
    // the same run: the steps that changed the set, fewer than the steps (the first scores the
    // starting set)
    const char *all = strstr(out, " in all, ");
    int steps = -1, changes = -1;
    if (all) { while (all > out && all[-1] >= '0' && all[-1] <= '9') { all--; } }
    check(all && sscanf(all, "%d in all, %d of which changed the set", &steps, &changes) == 2 &&
              steps == (int)json_num(out, "selections") && changes >= 0 && changes < steps,
          "swift --swift-budget 1: %d steps, %d changed the set: %s", steps, changes, out);
    double draft = json_num(out, "measured_draft_pass_steps"), verify = json_num(out, "measured_verify_pass_steps"),
           predicted = json_num(out, "measured_predicted_speedup");
    check(draft > 0 && verify > 0 && predicted > 0,
          "--compare --json: draft_pass_steps %g, verify_pass_steps %g, predicted_speedup %g, want all > 0", draft,
          verify, predicted);
    free(out); free(err);
    // one step is "1 optimization step", not "steps" (the default budget gives a 64-token prompt one)
    rc = run("OMP_NUM_THREADS=1", "--method swift -n 64 --json", &out, &err);
    check(rc == 0 && json_num(out, "selections") == 1 && strstr(out, "\"1 optimization step in this") != NULL,
          "swift, default budget: want one step said in the singular: %s", out);
    free(out); free(err);
    rc = run("OMP_NUM_THREADS=1", "--method swift -n 20", &out, &err);
    check(rc == 0 && strstr(err, "swift: no optimization step in this prompt (0 in all): a step scores a set on the "
                            "last 32 generated tokens") != NULL,
          "swift -n 20: exit %d, want the reason no step ran: %s", rc, err);
    free(out); free(err);
    rc = run("OMP_NUM_THREADS=1", "--skip attn:3 -n 8 --compare", &out, &err);
    check(rc == 0 && strstr(err, "in plain decoding steps: a draft pass ") != NULL && strstr(err, "alone predict") != NULL,
          "--compare: exit %d, want the passes' costs in plain steps: %s", rc, err);
    free(out); free(err);
    // a search that kept the empty set says so
    SpecStats st;
    memset(&st, 0, sizeof(st));
    SkipSet empty;
    memset(&empty, 0, sizeof(empty));
    Selector sel;
    memset(&sel, 0, sizeof(sel));
    char buf[1024];
    const char *note = method_note(METHOD_SELFSD, 0, &empty, 12, &st, 64, &sel, buf, sizeof(buf));
    check(note != NULL && strstr(note, "no skip set it scored cost less per token than plain decoding on the time") != NULL,
          "selfsd, empty set: note \"%s\"", note ? note : "(none)");
    empty.attn[3] = 1;
    check(method_note(METHOD_SELFSD, 0, &empty, 12, &st, 64, &sel, buf, sizeof(buf)) == NULL,
          "selfsd, a set found: a note anyway");
    // ASD says which sublayers each rule chose: exactly select_asd's set, the cosines with it
    MethodParams p = method_params_default();
    selector_init(&sel, METHOD_ASD, &p, 12, 1);
    for (int l = 0; l < 12; l++) { sel.asd_cos[l] = 0.9; }
    sel.asd_cos[4] = 0.99f;
    sel.asd_cos[7] = 0.985; // the threshold itself: C_l >= alpha
    sel.asd_cos[10] = 0.999; // one of the last n = 2 layers: never skipped
    SkipSet asd = select_asd(sel.asd_cos, 12, &sel.asd);
    note = method_note(METHOD_ASD, 0, &asd, 12, &st, 64, &sel, buf, sizeof(buf));
    check(note && strstr(note, "the cosine rule (C_l >= 0.985, layers 0-9) skips attn 4 (C_l 0.9900), attn 7 "
                               "(C_l 0.9850); the every-m-th rule (m = 3) skips attn and mlp of layers 2, 5, 8") &&
              skip_count(&asd, 12) == 8 && asd.attn[4] && asd.attn[7] && !asd.attn[10],
          "asd note: \"%s\" (%d sublayers skipped)", note ? note : "(none)", skip_count(&asd, 12));
    sel.asd_cos[4] = sel.asd_cos[7] = 0.98;
    note = method_note(METHOD_ASD, 0, &asd, 12, &st, 64, &sel, buf, sizeof(buf));
    check(note && strstr(note, "skips no attention sublayer (the highest C_l, 0.9800, is layer 4's)"),
          "asd note, nothing over the threshold: \"%s\"", note ? note : "(none)");
    selector_free(&sel);
}

// tie_word_embeddings true with an lm_head.weight that differs: one warning naming both tensors
// and the config (test_forward checks the logits against HF's, which use the file's head); a tied
// model without the tensor loads silently.
static void test_tied_head(void) {
    char *out, *err;
    int rc = run("OMP_NUM_THREADS=1", "-m tiny_models/llama3-tied-head -n 2", &out, &err);
    const char *w = strstr(err, "selfspec: warning: tiny_models/llama3-tied-head/model.safetensors: lm_head.weight "
                                "differs from model.embed_tokens.weight though tiny_models/llama3-tied-head/"
                                "config.json has tie_word_embeddings true; using lm_head.weight");
    check(rc == 0 && w != NULL && strstr(strstr(w, "differs") + 1, "differs") == NULL,
          "llama3-tied-head: exit %d, want one warning that the file's lm_head is used, stderr:\n%s", rc, err);
    free(out); free(err);
    rc = run("OMP_NUM_THREADS=1", "-m tiny_models/llama3-tiny-random -n 2", &out, &err);
    check(rc == 0 && strstr(err, "warning") == NULL, "llama3-tiny-random: exit %d, want no warning:\n%s", rc, err);
    free(out); free(err);
}

// The output ends in the middle of a character (the last token is the byte 0xDF, a lead byte):
// it is U+FFFD, as in HF's decode of the prompt and these 27 tokens (tokenizers 0.23.3), both in
// --json's "text" and on stdout.
static void test_incomplete_end(void) {
    const char *want = "\xD0\xB8M\xEF\xBF\xBDK J\xD0\xB8[ uponer7 sa~ ha un\xCE\xB5re mepM\xEF\xBF\xBDL thCT said"
                       "\xEF\xBF\xBD\xEF\xBF\xBD";
    char err_buf[SS_ERR_LEN], *out, *err;
    const char *args = "-m tiny_models/llama2-tiny-random -p \"In the beginning\" -n 27";
    char json_args[256];
    snprintf(json_args, sizeof(json_args), "%s --json", args);
    int rc = run("", json_args, &out, &err);
    Json j;
    int ok = rc == 0 && json_parse(&j, out, strlen(out), "--json", err_buf) == 0;
    size_t n = 0;
    char *text = ok ? json_string(&j, json_get(&j, 0, "text"), &n) : NULL;
    check(text != NULL && strcmp(text, want) == 0, "%s: exit %d, \"text\" %s, HF's decode ends in two U+FFFD",
          json_args, rc, text ? text : err);
    free(text);
    if (ok) { json_free(&j); }
    free(out); free(err);
    rc = run("", args, &out, &err);
    check(rc == 0 && strstr(out, want) != NULL, "%s: exit %d, stdout %s, HF's decode ends in two U+FFFD", args, rc, out);
    free(out); free(err);
}

// Issue 31's small fixes. --help: every line fits 100 columns, every flag's help starts in one
// column (--swift-budget B once pushed its own one further), and -h is listed.
static void test_help_layout(void) {
    char *out, *err;
    int rc = run("", "-h", &out, &err), line_no = 0, rows = 0;
    const char *first = strstr(out, "Hugging Face"), *nl = first;
    while (nl && nl > out && nl[-1] != '\n') { nl--; }
    int col = first ? (int)(first - nl) : -1; // where -m's help starts
    check(rc == 0 && col > 4, "-h: exit %d, no -m row:\n%s", rc, out);
    for (char *line = strtok(out, "\n"); line && col > 4; line = strtok(NULL, "\n")) {
        line_no++;
        int len = (int)strlen(line);
        check(len <= 100, "--help line %d is %d columns: %s", line_no, len, line);
        if (strncmp(line, "  -", 3) != 0) { continue; }
        rows++;
        check(len > col && line[col - 1] == ' ' && line[col] != ' ',
              "--help line %d: its help does not start in column %d, as -m's does: %s", line_no, col, line);
    }
    check(rows > 20, "--help lists %d flags", rows);
    free(out); free(err);
    rc = run("", "--help", &out, &err);
    check(strstr(out, "\n  -h, --help ") != NULL, "--help does not list -h, --help:\n%s", out);
    free(out); free(err);
}

// --exit none prints no gamma (there is no threshold): not in the summary, null in --json.
static void test_exit_none(void) {
    char *out, *err;
    int rc = run("OMP_NUM_THREADS=1", "-n 12 --skip attn:1,3 --exit none -K 3", &out, &err);
    check(rc == 0 && strstr(err, "no exit threshold (--exit none)") != NULL && strstr(err, "gamma") == NULL,
          "--exit none: exit %d, want no gamma in the summary:\n%s", rc, err);
    free(out); free(err);
    rc = run("OMP_NUM_THREADS=1", "-n 12 --skip attn:1,3 --exit none -K 3 --json", &out, &err);
    check(rc == 0 && strstr(out, "\"gamma_first\": null, \"gamma_last\": null, \"gamma_mean\": null") != NULL,
          "--exit none --json: exit %d, want the gammas null:\n%s", rc, out);
    free(out); free(err);
}

// One selection call is "1 selection call"; the selection line says what share of the passes'
// predicted speedup the selection time takes, and --compare's prediction with that time, both
// from the numbers printed beside them.
static void test_selection_share(void) {
    char *out, *err;
    int rc = run("OMP_NUM_THREADS=1", "-n 6 --method clasp --loi 3", &out, &err);
    check(rc == 0 && strstr(err, "clasp: 1 selection call, ") != NULL, "clasp --loi 3 -n 6: exit %d, want "
          "\"1 selection call,\":\n%s", rc, err);
    free(out); free(err);
    rc = run("OMP_NUM_THREADS=1", "-n 40 --method clasp --compare", &out, &err);
    const char *times = strstr(err, "| draft "), *share = strstr(err, "% of decode time, taking ");
    const char *pred = strstr(err, "these alone predict ");
    double draft = 0, verify = 0, select = 0, taken = -1, alone = 0, with = 0;
    int got = times && sscanf(times, "| draft %lf ms, verify %lf ms, select %lf ms", &draft, &verify, &select) == 3;
    got = got && share && sscanf(share, "%% of decode time, taking %lf%%", &taken) == 1;
    got = got && pred && sscanf(pred, "these alone predict %lfx, %lfx with the selection time", &alone, &with) == 2;
    double want = 100 * select / (draft + verify + select), want_with = alone * (draft + verify) / (draft + verify + select);
    // the printed times are rounded to 0.1 ms and the prediction to 0.01
    check(rc == 0 && got && fabs(taken - want) <= 1.0 && fabs(with - want_with) <= 0.02 && select > 0,
          "clasp --compare: exit %d, the share %g%% (want %.1f%% from draft %g, verify %g, select %g ms), "
          "the prediction with selection %gx (want %.3fx from %gx):\n%s", rc, taken, want, draft, verify, select,
          with, want_with, alone, err);
    free(out); free(err);
}

// The skip set a --json run chose: its "skip" field, {"attn": "...", "mlp": "..."}, into want.
static int chosen_skip(const char *out, char *skip, size_t cap) {
    const char *p = strstr(out, "\"skip\": {"), *e = p ? strchr(p, '}') : NULL;
    if (e == NULL) { return 0; }
    snprintf(skip, cap, "%.*s", (int)(e + 1 - p), p);
    return 1;
}

// Rounds in a trace: how many, how many drafted, and how many verified more rows than the
// chain's k + 1 (a SWIFT tree's leaves).
static void trace_rounds(const char *path, int *rounds, int *drafted, int *tree_rounds) {
    char *text = read_or_exit(path, NULL);
    *rounds = *drafted = *tree_rounds = 0;
    for (const char *p = strstr(text, "\"type\": \"round\""); p; p = strstr(p + 1, "\"type\": \"round\"")) {
        const char *d = strstr(p, "\"drafted\": "), *v = strstr(p, "\"verify\": ");
        int k = d ? atoi(d + 11) : -1, rows = v ? atoi(v + 10) : -1;
        *rounds += 1;
        *drafted += k > 0;
        *tree_rounds += rows > k + 1;
    }
    free(text);
}

// README's Usage runs the SmolLM2 getter as `sh tiny_models/get_smollm2.sh`, and sh is dash on
// Debian: the script must get past its `set` line there (it once asked for bash's pipefail). A
// virtualenv that does not exist stops it at its first use, before any download.
static void test_getter_posix_sh(void) {
    char cmd[512], path[256];
    snprintf(path, sizeof(path), "%s/getter.txt", tmp);
    snprintf(cmd, sizeof(cmd), "SMOLLM2_VENV=%s/no-venv SMOLLM2_OUT=%s/smol sh tiny_models/get_smollm2.sh "
             ">%s 2>&1 </dev/null", tmp, tmp, path);
    int status = system(cmd);
    char *text = read_or_exit(path, NULL);
    check(status != 0 && strstr(text, "Illegal option") == NULL && strstr(text, "installing numpy") != NULL &&
          strstr(text, "no-venv/bin/python") != NULL, "sh tiny_models/get_smollm2.sh with a missing "
          "SMOLLM2_VENV: want it to run until it uses that venv, and fail there:\n%s", text);
    free(text);
}

// Issue 38's knobs reach the code they name: ASD's alpha, m and n change select_asd's set as its
// rule says (on kjv-12l no C_l of layers 0-9 reaches 0.985; layer 6's is 0.9830), CLaSp's ratio
// the DP's M, SWIFT's tree on/off the rows each verification holds; each is in the trace
// header's params, and a bad value is one error line naming the flag.
static void test_knobs(void) {
    char *out, *err, skip[128], args[512], trace[256];
    // the last two also say in the note why nothing is skipped (once "layers 0--1" and a list
    // of no layers)
    const struct { const char *flags, *skip, *note; } asd[] = {
        {"", "\"skip\": {\"attn\": [2, 5, 8], \"mlp\": [2, 5, 8]}", NULL},
        {"--asd-alpha -1", "\"skip\": {\"attn\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], \"mlp\": [2, 5, 8]}", NULL},
        {"--asd-alpha 0.98", "\"skip\": {\"attn\": [2, 5, 6, 8], \"mlp\": [2, 5, 8]}", NULL},
        {"--asd-m 4", "\"skip\": {\"attn\": [3, 7], \"mlp\": [3, 7]}", NULL},
        {"--asd-n 0", "\"skip\": {\"attn\": [2, 5, 8, 10, 11], \"mlp\": [2, 5, 8, 11]}", NULL},
        {"--asd-n 12", "\"skip\": {\"attn\": [], \"mlp\": []}",
         "\"note\": \"n = 12 keeps every layer: neither rule skips a sublayer\""},
        {"--asd-m 13", "\"skip\": {\"attn\": [], \"mlp\": []}",
         "the every-m-th rule (m = 13) skips no layer\""},
    };
    for (int k = 0; k < 7; k++) {
        snprintf(args, sizeof(args), "--method asd -n 2 --json %s", asd[k].flags);
        int rc = run("OMP_NUM_THREADS=1", args, &out, &err);
        int got = chosen_skip(out, skip, sizeof(skip));
        check(rc == 0 && got && strcmp(skip, asd[k].skip) == 0 && (!asd[k].note || strstr(out, asd[k].note)),
              "asd %s: exit %d, chose %s, want %s%s%s:\n%s", asd[k].flags, rc, got ? skip : out, asd[k].skip,
              asd[k].note ? " and the note " : "", asd[k].note ? asd[k].note : "", out);
        free(out); free(err);
    }
    snprintf(trace, sizeof(trace), "%s/knobs.jsonl", tmp);
    snprintf(args, sizeof(args), "--method asd -n 2 --asd-alpha 0.98 --asd-m 4 --asd-n 1 --trace %s", trace);
    int rc = run("OMP_NUM_THREADS=1", args, &out, &err);
    char *text = rc == 0 ? read_or_exit(trace, NULL) : strdup("");
    check(strstr(text, "\"params\": {\"cos_threshold\": 0.98, \"every_m\": 4, \"keep_last_n\": 1}") != NULL,
          "asd --trace: exit %d, want the flags' values in the header's params:\n%.600s", rc, text);
    free(text); free(out); free(err);
    // CLaSp: a DP after every verification; the last set is a DP's, of M = round(R L) layers
    const struct { const char *flags; int M; } clasp[] = {{"", 6}, {"--clasp-ratio 0.25", 3}};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof(args), "--method clasp --loi 1 -n 12 --trace %s --json %s", trace, clasp[k].flags);
        rc = run("OMP_NUM_THREADS=1", args, &out, &err);
        text = rc == 0 ? read_or_exit(trace, NULL) : strdup("");
        char want[64];
        snprintf(want, sizeof(want), "\"M\": %d,", clasp[k].M);
        double ratio = json_num(out, "skip_ratio"), dps = json_num(out, "selections");
        check(rc == 0 && dps > 0 && fabs(ratio - clasp[k].M / 12.0) < 1e-3 && strstr(text, want) != NULL,
              "clasp %s: exit %d, %g DPs, skip ratio %g, want %d of 12 layers and %s in the header:\n%s",
              clasp[k].flags, rc, dps, ratio, clasp[k].M, want, out);
        free(text); free(out); free(err);
    }
}

// SWIFT's --swift-tree: the tree verifies more rows than the chain in some round; off, never.
static void test_swift_tree(void) {
    char *out, *err, *text, args[512], trace[256];
    int rc;
    snprintf(trace, sizeof(trace), "%s/knobs.jsonl", tmp);
    const struct { const char *flags, *header; int tree; } swift[] = {
        {"", "\"tree\": true}", 1}, {"--swift-tree off", "\"tree\": false}", 0}, {"--swift-tree on", "\"tree\": true}", 1}};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof(args), "--method swift -n 16 --trace %s %s", trace, swift[k].flags);
        rc = run("OMP_NUM_THREADS=1", args, &out, &err);
        int rounds = 0, drafted = 0, tree_rounds = 0;
        if (rc == 0) { trace_rounds(trace, &rounds, &drafted, &tree_rounds); }
        text = rc == 0 ? read_or_exit(trace, NULL) : strdup("");
        check(rc == 0 && drafted > 0 && (swift[k].tree ? tree_rounds > 0 : tree_rounds == 0) &&
              strstr(text, swift[k].header) != NULL, "swift %s: exit %d, %d of %d rounds drafted, %d verified "
              "more than the chain, want %s, and %s in the header", swift[k].flags, rc, drafted, rounds,
              tree_rounds, swift[k].tree ? "some" : "none", swift[k].header);
        free(text); free(out); free(err);
    }
    bad_flag("--method asd --asd-alpha 1.5", "--asd-alpha 1.5: must be in [-1, 1]");
    bad_flag("--method asd --asd-alpha x", "--asd-alpha x: not a number");
    bad_flag("--method asd --asd-m 0", "--asd-m 0: must be in [1, 256]");
    bad_flag("--method asd --asd-n -1", "--asd-n -1: must be in [0, 256]");
    bad_flag("--method clasp --clasp-ratio 0", "--clasp-ratio 0: must be in (0, 1]");
    bad_flag("--method swift --swift-tree maybe", "--swift-tree maybe: expected on or off");
    bad_flag("--method clasp --swift-tree off", "--swift-tree: only --method swift reads it");
    bad_flag("--method swift --asd-m 2", "--asd-m: only --method asd reads it");
    bad_flag("--asd-n 1", "--asd-n: only --method asd reads it");
    bad_flag("--method asd --clasp-ratio 0.3", "--clasp-ratio: only --method clasp reads it");
}

int main(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/selfspec-cli-XXXXXX");
    if (mkdtemp(tmp) == NULL) { fprintf(stderr, "test_cli: mkdtemp failed\n"); return 2; }
    test_threads();
    test_tied_head();
    test_incomplete_end();
    test_help_and_compare();
    test_json_lines();
    test_method_notes();
    test_empty_prompt();
    test_expected_speedup();
    test_selfsd_noise();
    test_selfsd_progress();
    test_ctrl_c();
    test_help_layout();
    test_exit_none();
    test_selection_share();
    test_getter_posix_sh();
    test_knobs();
    test_swift_tree();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0) { fprintf(stderr, "test_cli: could not remove %s\n", tmp); }
    return test_summary("test_cli");
}
