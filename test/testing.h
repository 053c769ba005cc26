// testing.h: the few helpers every test file shares. A test file does
//   #define TESTING
//   #include "../selfspec.cu"
//   #include "testing.h"
// so it reaches every internal function, counts checks with check(), and ends main with
// `return test_summary("name");`, which prints "N passed, M failed" and returns non-zero on failure.
// The tests that run the selfspec binary share selfspec_bin, read_or_exit and run_selfspec.
#ifndef SELFSPEC_TESTING_H
#define SELFSPEC_TESTING_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int tests_passed, tests_failed;

// Counts one check; on failure prints what differed (the message) and keeps going.
static int check(int ok, const char *fmt, ...) {
    if (ok) {
        tests_passed++;
        return 1;
    }
    tests_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 0;
}

#ifndef __CUDACC__
// Every test program runs on one thread unless OMP_NUM_THREADS says otherwise: the tests' models
// are tiny, and on a shared machine spinning threads cost more than they bring (README, Threads).
// libgomp read the variable before this runs, so the count is also set here; the ./selfspec runs
// a test starts (run_selfspec) inherit it, unless their prefix unsets it.
__attribute__((constructor)) static void one_thread_unless_told(void) {
    if (getenv("OMP_NUM_THREADS") != NULL) { return; }
    setenv("OMP_NUM_THREADS", "1", 1);
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
}
#endif

// The engine's rounds and Self-SD candidates, logged through its Observer: watch_engine() starts
// an empty log (one log, reused), which sees what a generate_spec (SpecParams.observer) or a
// search (Objective.observer) given &engine_watcher does; unwatch_engine() frees it. A log keeps
// the first LOG_MAX of each, and counts all.
enum { LOG_MAX = 1024 };
typedef struct {
    int rounds, candidates;                  // seen
    int leaves;                              // rounds whose SWIFT tree kept a leaf (Round.leaf)
    SkipSet skip[LOG_MAX];                   // the set each round drafted with
    int drafted[LOG_MAX], accepted[LOG_MAX]; // each round's k and accepted tokens
    SkipSet cand[LOG_MAX];                   // Self-SD's candidates, in order
    int it[LOG_MAX];                         // each one's iteration (0: the empty set)
    double cost[LOG_MAX];                    // and cost
} EngineLog;
static EngineLog *engine_log;

static void log_round(void *ctx, const Round *r, const Selector *sel) {
    EngineLog *g = engine_log;
    (void)ctx, (void)sel;
    if (g->rounds < LOG_MAX) {
        g->skip[g->rounds] = r->skip;
        g->drafted[g->rounds] = r->drafted;
        g->accepted[g->rounds] = r->accepted;
    }
    g->rounds++;
    g->leaves += r->leaf;
}

static void log_candidate(void *ctx, const Candidate *c) {
    EngineLog *g = engine_log;
    (void)ctx;
    if (c->done) { return; }
    if (g->candidates < LOG_MAX) {
        g->cand[g->candidates] = c->skip;
        g->it[g->candidates] = c->i;
        g->cost[g->candidates] = c->objective;
    }
    g->candidates++;
}

static const Observer engine_watcher = {NULL, NULL, log_round, log_candidate};

static EngineLog *watch_engine(void) {
    if (engine_log == NULL) { engine_log = (EngineLog *)calloc_check(1, sizeof(EngineLog)); }
    engine_log->rounds = engine_log->candidates = engine_log->leaves = 0;
    return engine_log;
}

static void unwatch_engine(void) {
    free(engine_log);
    engine_log = NULL;
}

// A 4-token prompt and 40 plain greedy tokens into seq (64 ints) and the cache: 39 generated
// tokens sit in the cache, past SWIFT's window of 32. Returns the position of the last one.
static int past_swift_window(Model *m, int *seq) {
    int prompt[4] = {1, 9, 17, 25}, out[48];
    Sampler greedy = {0.0f, 1.0f, {1}};
    GenStats gs;
    Output o = output(out, 40, NULL, NULL);
    int n = generate_plain(m, prompt, 4, NULL, &greedy, &o, &gs);
    memcpy(seq, prompt, sizeof(prompt));
    memcpy(seq + 4, out, (size_t)n * sizeof(int));
    return 4 + n - 1;
}

// The workload: the full one, or with SELFSPEC_TEST_QUICK set (and not "0") a reduced one that
// still reaches every path the full one does (make test-asan-quick: the whole suite under the
// sanitizers in CI's time). A loop bound or size reads quick(full, reduced); only counts shrink,
// never which tests or paths run, and a statistical test keeps enough samples to stay meaningful.
__attribute__((unused)) static int quick(int full, int reduced) {
    const char *q = getenv("SELFSPEC_TEST_QUICK");
    return q != NULL && *q != '\0' && strcmp(q, "0") != 0 ? reduced : full;
}

// The tests a program runs: all of them, or only those named on its command line
// (`./test/test_decode bonus_token`: test/bug_zoo runs the one test that must catch a bug). A name
// no test answered to is a failure at the summary, so a misspelt name cannot pass unseen.
enum { MAX_SELECTED = 16 };
static int n_selected, selected_used[MAX_SELECTED];
static char **selected_names;
__attribute__((unused)) static void select_tests(int argc, char **argv) {
    n_selected = argc - 1 < MAX_SELECTED ? argc - 1 : MAX_SELECTED;
    selected_names = argv + 1;
}
__attribute__((unused)) static int selected(const char *name) {
    int hit = n_selected == 0;
    for (int k = 0; k < n_selected; k++) {
        if (strcmp(selected_names[k], name) == 0) { hit = selected_used[k] = 1; }
    }
    return hit;
}

static int test_summary(const char *name) {
    for (int k = 0; k < n_selected; k++) {
        check(selected_used[k], "%s: no test is named %s", name, selected_names[k]);
    }
    printf("%s: %d passed, %d failed\n", name, tests_passed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}

// The binary the CLI tests run: $SELFSPEC_BIN (make test-asan sets it to the sanitized build),
// else the build of this test's own kind: ./selfspec, or ./selfspec-cuda for a CUDA test.
static const char *selfspec_bin(void) {
    const char *bin = getenv("SELFSPEC_BIN");
#ifdef __CUDACC__
    return bin != NULL ? bin : "./selfspec-cuda";
#else
    return bin != NULL ? bin : "./selfspec";
#endif
}

// The whole of a file the test wrote or needs (len may be NULL). Without it the test cannot go
// on, so it ends the program with exit 2 and the reason, which run_tests.sh reports as a crash.
static char *read_or_exit(const char *path, size_t *len) {
    char err[SS_ERR_LEN];
    size_t n;
    char *s = read_file(path, len != NULL ? len : &n, err);
    if (s == NULL) {
        fprintf(stderr, "test: %s\n", err);
        exit(2);
    }
    return s;
}

// With SELFSPEC_LOG=FILE, appends each run's arguments, exit status, stderr and stdout to FILE,
// the temporary folder written as DIR: two builds' logs diff to show the same behaviour
// (test/same_behaviour.sh).
static void record_text(FILE *f, const char *text, const char *dir) {
    size_t n = strlen(dir);
    for (const char *s = text; *s != '\0'; s++) {
        if (strncmp(s, dir, n) == 0) {
            fputs("DIR", f);
            s += n - 1;
        } else {
            fputc(*s, f);
        }
    }
}

static void record_run(const char *dir, const char *args, int rc, const char *o, const char *e) {
    const char *log = getenv("SELFSPEC_LOG");
    FILE *f = log != NULL ? fopen(log, "a") : NULL;
    if (f == NULL) { return; }
    char *out = read_or_exit(o, NULL), *err = read_or_exit(e, NULL);
    fputs("=== ", f);
    record_text(f, args, dir);
    fprintf(f, "\nrc %d\n", rc);
    record_text(f, err, dir);
    fputs("--- stdout\n", f);
    record_text(f, out, dir);
    fclose(f);
    free(out);
    free(err);
}

// Runs `env <prefix> <selfspec_bin()> <args>` through the shell with stdin from /dev/null and
// stdout and stderr into dir/stdout.txt and dir/stderr.txt. prefix sets the environment or
// wraps the binary ("OMP_NUM_THREADS=1", "-u OMP_NUM_THREADS", "timeout -s KILL 60"; "" for
// none). *out and *err get the two texts when not NULL (the caller frees them). Returns the
// exit status, or 128 + the signal that ended the shell.
static int run_selfspec(const char *dir, const char *prefix, const char *args, char **out, char **err) {
    char cmd[8192], o[256], e[256];
    snprintf(o, sizeof(o), "%s/stdout.txt", dir);
    snprintf(e, sizeof(e), "%s/stderr.txt", dir);
    snprintf(cmd, sizeof(cmd), "env %s %s %s >%s 2>%s </dev/null", prefix, selfspec_bin(), args, o, e);
    int status = system(cmd);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    record_run(dir, args, rc, o, e);
    if (out != NULL) { *out = read_or_exit(o, NULL); }
    if (err != NULL) { *err = read_or_exit(e, NULL); }
    return rc;
}

// Device memory operations only the tests and bench tools need (the engine copies whole buffers
// with copy_to_device and copy_to_host): the CUDA call in the CUDA build, its host twin in the
// CPU build. "unused" keeps nvcc from warning about a static function a file does not call.
#ifdef __CUDACC__
__attribute__((unused)) static void device_memset(void *dst, int value, size_t bytes) {
    cuda_check(cudaMemset(dst, value, bytes));
}
__attribute__((unused)) static void copy_on_device(void *dst, const void *src, size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
__attribute__((unused)) static void device_sync(void) { cuda_check(cudaDeviceSynchronize()); }
#else
static inline void device_memset(void *dst, int value, size_t bytes) { memset(dst, value, bytes); }
static inline void copy_on_device(void *dst, const void *src, size_t bytes) {
    memmove(dst, src, bytes);
}
static inline void device_sync(void) {}
#endif

// Zeroes o_proj of the given attention sublayers and down_proj of the given MLP sublayers, so
// they add exactly 0 to the residual stream: a draft skipping them is the full model.
__attribute__((unused)) static void plant(Model *m, const SkipSet *s) {
    const Config *c = &m->config;
    size_t dim = (size_t)c->dim, q_dim = (size_t)c->n_heads * c->head_dim, hid = (size_t)c->hidden_dim;
    for (int l = 0; l < c->n_layers; l++) {
        if (s->attn[l]) { device_memset(m->weights.wo + l * dim * q_dim, 0, dim * q_dim * sizeof(float)); }
        if (s->mlp[l]) { device_memset(m->weights.w_down + l * dim * hid, 0, dim * hid * sizeof(float)); }
    }
}

// Multiplies n floats of device memory by k (a test sharpens the output head this way): through
// the host, since in the CUDA build the weights are not host memory.
__attribute__((unused)) static void scale_on_device(float *p, size_t n, float k) {
    float *h = (float *)malloc_check(n * sizeof(float));
    copy_to_host(h, p, n * sizeof(float));
    for (size_t i = 0; i < n; i++) { h[i] *= k; }
    copy_to_device(p, h, n * sizeof(float));
    free(h);
}

#endif
