// test_bad_inputs: a table of bad files and bad flags given to the selfspec binary. Each case
// builds its input in a temporary folder (a copy of tiny_models/llama2-tiny-random with one
// thing broken, or a bad flag), runs the binary, and checks that it exits non-zero with exactly
// one line on stderr, "selfspec: error: ...", that names the file, tensor or flag and the
// problem, and that no sanitizer spoke. The binary is $SELFSPEC_BIN (make test-asan sets it to
// the sanitized build), else ./selfspec. VERBOSE=1 prints every case's message.
#define TESTING
#include "../selfspec.cu"
#include "testing.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp[64];          // the test's folder, removed at the end
static const char *SRC = "tiny_models/llama2-tiny-random";
static int n_cases;

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "test_bad_inputs: cannot write %s\n", path);
        exit(2);
    }
}

static void copy_file(const char *from, const char *to) {
    size_t len;
    char *s = read_or_exit(from, &len);
    spit(to, s, len);
    free(s);
}

// A fresh copy of the tiny model in tmp/name; returns its path (static buffer).
static const char *model_copy(const char *name) {
    static char dir[256];
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    snprintf(dir, sizeof(dir), "%s/%s", tmp, name);
    if (mkdir(dir, 0700) != 0) { fprintf(stderr, "test_bad_inputs: cannot create %s\n", dir); exit(2); }
    for (int k = 0; k < 3; k++) {
        char from[256], to[512];
        snprintf(from, sizeof(from), "%s/%s", SRC, files[k]);
        snprintf(to, sizeof(to), "%s/%s", dir, files[k]);
        copy_file(from, to);
    }
    return dir;
}

static void path_in(char *out, size_t cap, const char *dir, const char *file) {
    snprintf(out, cap, "%s/%s", dir, file);
}

// Replaces the first `from` in dir/file by `to` (the case is wrong if `from` is absent).
static void edit_text(const char *dir, const char *file, const char *from, const char *to) {
    char path[512];
    size_t len;
    path_in(path, sizeof(path), dir, file);
    char *s = read_or_exit(path, &len);
    char *at = strstr(s, from);
    if (at == NULL) { fprintf(stderr, "test_bad_inputs: \"%s\" not in %s\n", from, path); exit(2); }
    size_t nf = strlen(from), nt = strlen(to), head = (size_t)(at - s);
    char *out = (char *)malloc_check(len - nf + nt);
    memcpy(out, s, head);
    memcpy(out + head, to, nt);
    memcpy(out + head + nt, at + nf, len - head - nf);
    spit(path, out, len - nf + nt);
    free(out);
    free(s);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char path[512];
    path_in(path, sizeof(path), dir, file);
    spit(path, text, strlen(text));
}

// Writes text to tmp/file and runs a case with `flags` followed by that file's path.
static void run_file_case(const char *name, const char *flags, const char *file, const char *text, const char *want1,
                          const char *want2);

// Rewrites dir/model.safetensors: the header with its first `from` replaced by `to` (a NULL
// `from` replaces the whole header), the data kept, and the length field set to `length` when
// it is not 0 (else the new header's length).
static void edit_header(const char *dir, const char *from, const char *to, uint64_t length) {
    char path[512];
    size_t len;
    path_in(path, sizeof(path), dir, "model.safetensors");
    char *s = read_or_exit(path, &len);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) { n = (n << 8) | (unsigned char)s[k]; }
    char *header = (char *)malloc_check(n + 1);
    memcpy(header, s + 8, n);
    header[n] = '\0';
    const char *data = s + 8 + n;
    size_t data_len = len - 8 - n;
    char *at = from ? strstr(header, from) : header;
    if (at == NULL) { fprintf(stderr, "test_bad_inputs: \"%s\" not in the header\n", from); exit(2); }
    size_t nf = from ? strlen(from) : n, nt = strlen(to), head = (size_t)(at - header);
    size_t hn = n - nf + nt;
    char *out = (char *)malloc_check(8 + hn + data_len);
    uint64_t field = length ? length : hn;
    for (int k = 0; k < 8; k++) { out[k] = (char)(field >> (8 * k)); }
    memcpy(out + 8, header, head);
    memcpy(out + 8 + head, to, nt);
    memcpy(out + 8 + head + nt, at + nf, n - head - nf);
    memcpy(out + 8 + hn, data, data_len);
    spit(path, out, 8 + hn + data_len);
    free(out);
    free(header);
    free(s);
}

// Keeps the first `keep` bytes of dir/file.
static void truncate_file(const char *dir, const char *file, size_t keep) {
    char path[512];
    path_in(path, sizeof(path), dir, file);
    if (truncate(path, (off_t)keep) != 0) { fprintf(stderr, "test_bad_inputs: cannot truncate %s\n", path); exit(2); }
}

// Every case must finish within this: `timeout` kills a hung binary, and the case fails (a bad
// input once made selfspec block forever on a FIFO, or spend 14 minutes on one prompt line).
// The cases that must succeed get longer: one runs a Self-SD search over 65 prompts, which
// takes ~50 s under the sanitizers on a loaded 2-core machine (1 s in the normal build).
enum { CASE_SECONDS = 60, OK_CASE_SECONDS = 300 };

// Runs `bin args`, and checks: a non-zero exit, one line on stderr that starts with
// "selfspec: error: " and holds want1 and want2 (NULL: not checked), and no sanitizer report.
static void run_case(const char *name, const char *args, const char *want1, const char *want2) {
    char timeout[256], err_path[256];
    size_t len; // stderr's length in bytes, NULs included
    snprintf(timeout, sizeof(timeout), "timeout -s KILL %d", CASE_SECONDS);
    int rc = run_selfspec(tmp, timeout, args, NULL, NULL);
    check(rc != 137, "%s: still running after %d s, killed (a hang?) (%s)", name, CASE_SECONDS, args);
    snprintf(err_path, sizeof(err_path), "%s/stderr.txt", tmp); // where run_selfspec put it
    char *e = read_or_exit(err_path, &len);
    int lines = 0;
    for (size_t i = 0; i < len; i++) { lines += e[i] == '\n'; }
    n_cases++;
    if (getenv("VERBOSE") != NULL) { printf("%-42s %s", name, e); } // VERBOSE=1: every message
    check(rc != 0 && rc < 128, "%s: exit status %d, want 1 (%s)", name, rc, args);
    check(lines == 1 && e[len - 1] == '\n', "%s: %d lines on stderr, want 1:\n%s", name, lines, e);
    check(strncmp(e, "selfspec: error: ", 17) == 0, "%s: stderr does not start with \"selfspec: error: \": %s", name, e);
    check(want1 == NULL || strstr(e, want1) != NULL, "%s: stderr lacks \"%s\": %s", name, want1, e);
    check(want2 == NULL || strstr(e, want2) != NULL, "%s: stderr lacks \"%s\": %s", name, want2, e);
    check(strstr(e, "Sanitizer") == NULL && strstr(e, "runtime error") == NULL, "%s: sanitizer report:\n%s", name, e);
    free(e);
}

static void run_file_case(const char *name, const char *flags, const char *file, const char *text, const char *want1,
                          const char *want2) {
    char args[1024];
    write_text(tmp, file, text);
    snprintf(args, sizeof(args), "%s %s/%s", flags, tmp, file);
    run_case(name, args, want1, want2);
}

// Runs `bin args` on an input that is odd but fine, and checks: exit 0 and no sanitizer report
// (under make test-asan, LeakSanitizer speaks of what the run did not free).
static void run_ok_case(const char *name, const char *args) {
    char prefix[64], *e;
    snprintf(prefix, sizeof(prefix), "OMP_NUM_THREADS=1 timeout -s KILL %d", OK_CASE_SECONDS);
    int rc = run_selfspec(tmp, prefix, args, NULL, &e);
    n_cases++;
    check(rc == 0, "%s: exit status %d, want 0 (%s):\n%s", name, rc, args, e);
    check(strstr(e, "Sanitizer") == NULL && strstr(e, "runtime error") == NULL, "%s: sanitizer report:\n%s", name, e);
    free(e);
}

// Runs a case on a model folder: `-m dir` plus extra flags.
static void run_model_case(const char *name, const char *dir, const char *extra, const char *want1, const char *want2) {
    char args[8192];
    snprintf(args, sizeof(args), "-m %s -n 4 %s", dir, extra);
    run_case(name, args, want1, want2);
}

// The cases on one broken copy of the tiny model, one call each. The copy is tmp/broken-N (the
// case's name says what it is); the checks are run_model_case's, with no extra flags.
static const char *broken_copy(void) {
    static int n;
    char name[32];
    snprintf(name, sizeof(name), "broken-%d", ++n);
    return model_copy(name);
}

// The first `from` of file replaced by `to`.
static void text_case(const char *name, const char *file, const char *from, const char *to, const char *want1,
                      const char *want2) {
    const char *d = broken_copy();
    edit_text(d, file, from, to);
    run_model_case(name, d, "", want1, want2);
}

// model.safetensors' header edited as edit_header does it.
static void header_case(const char *name, const char *from, const char *to, uint64_t length, const char *want1,
                        const char *want2) {
    const char *d = broken_copy();
    edit_header(d, from, to, length);
    run_model_case(name, d, "", want1, want2);
}

// file cut to its first `keep` bytes.
static void truncated_case(const char *name, const char *file, size_t keep, const char *want1, const char *want2) {
    const char *d = broken_copy();
    truncate_file(d, file, keep);
    run_model_case(name, d, "", want1, want2);
}

// file's whole text replaced by text.
static void written_case(const char *name, const char *file, const char *text, const char *want1, const char *want2) {
    const char *d = broken_copy();
    write_text(d, file, text);
    run_model_case(name, d, "", want1, want2);
}

// file removed, or a FIFO or a folder put in its place (what fopen would block on or misread).
enum Swap { GONE, FIFO, FOLDER };
static void swapped_file_case(const char *name, const char *file, enum Swap swap, const char *want1,
                              const char *want2) {
    const char *d = broken_copy();
    char path[512];
    path_in(path, sizeof(path), d, file);
    remove(path);
    if (swap == FIFO) { mkfifo(path, 0600); }
    if (swap == FOLDER) { mkdir(path, 0700); }
    run_model_case(name, d, "", want1, want2);
}

// A case on the unbroken tiny model: `-m SRC` and the flags that fmt and what follows make
// (the wants come first, as fmt's arguments must come last).
static void flag_case(const char *name, const char *want1, const char *want2, const char *fmt, ...) {
    char flags[1024], args[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(flags, sizeof(flags), fmt, ap);
    va_end(ap);
    snprintf(args, sizeof(args), "-m %s %s", SRC, flags);
    run_case(name, args, want1, want2);
}


// Overwrites n bytes at byte `at` of dir/model.safetensors' data section (after its header).
static void poke_data(const char *dir, size_t at, const void *bytes, size_t n) {
    char path[512];
    unsigned char len[8];
    path_in(path, sizeof(path), dir, "model.safetensors");
    FILE *f = fopen(path, "r+b");
    uint64_t h = 0;
    if (f == NULL || fread(len, 1, 8, f) != 8) { fprintf(stderr, "test_bad_inputs: cannot read %s\n", path); exit(2); }
    for (int k = 7; k >= 0; k--) { h = (h << 8) | len[k]; }
    if (fseek(f, (long)(8 + h + at), SEEK_SET) != 0 || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "test_bad_inputs: cannot write %s\n", path);
        exit(2);
    }
}

// A copy of the tiny model cut to a vocabulary of 4 tokens: a, b, c and `fourth` (id 3), and no EOS.
static const char *vocab4_model(const char *name, const char *fourth) {
    const char *d = model_copy(name);
    char tok[1024];
    edit_text(d, "config.json", "\"vocab_size\": 512", "\"vocab_size\": 4");
    edit_text(d, "config.json", "\"eos_token_id\": 2", "\"eos_token_id\": null"); // (token 2 came at once)
    edit_header(d, "\"shape\":[512,64],\"data_offsets\":[0,131072]", "\"shape\":[4,64],\"data_offsets\":[0,1024]", 0);
    edit_header(d, "\"shape\":[512,64],\"data_offsets\":[131072,262144]",
                "\"shape\":[4,64],\"data_offsets\":[131072,132096]", 0);
    snprintf(tok, sizeof(tok), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"c\": 2, \"%s\": 3}, "
             "\"merges\": []}, \"decoder\": {\"type\": \"ByteLevel\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
             "\"add_prefix_space\": false}}", fourth);
    write_text(d, "tokenizer.json", tok);
    return d;
}

// The output-file cases: tmp/out/ holds one file, old.txt, with the text "old\n". After a run
// that must not write it (a failure, a refusal, a kill), it must still hold "old\n" and be the
// folder's only file (no temporary file left beside it).
static char out_dir[128], out_file[160];

static void reset_output(void) {
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", out_dir); // (what a failed case left)
    check(system(cmd) == 0 && mkdir(out_dir, 0700) == 0, "cannot make %s afresh", out_dir);
    spit(out_file, "old\n", 4);
}

static void check_output_kept(const char *name) {
    size_t len;
    char *s = read_or_exit(out_file, &len);
    check(len == 4 && memcmp(s, "old\n", 4) == 0, "%s: %s was changed (%zu bytes)", name, out_file, len);
    free(s);
    DIR *dir = opendir(out_dir);
    int n = 0;
    for (struct dirent *e; dir != NULL && (e = readdir(dir)) != NULL;) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0; // (a .selfspec-XXXXXX too)
    }
    if (dir) { closedir(dir); }
    check(n == 1, "%s: %d files in %s, want only old.txt (a temporary file left behind?)", name, n, out_dir);
}

// The temporary files (.selfspec-XXXXXX) in dir.
static int temporaries_in(const char *dir_path) {
    DIR *dir = opendir(dir_path);
    int n = 0;
    for (struct dirent *e; dir != NULL && (e = readdir(dir)) != NULL;) { n += strncmp(e->d_name, ".selfspec-", 10) == 0; }
    if (dir) { closedir(dir); }
    return n;
}

// A flag_case whose flags name the output file with %s (once or twice): it must fail with the
// wants, and leave the output file as it was.
static void kept_output_case(const char *name, const char *want1, const char *want2, const char *flags) {
    char f[1024];
    reset_output();
    snprintf(f, sizeof(f), flags, out_file, out_file);
    flag_case(name, want1, want2, "%s", f);
    check_output_kept(name);
}

// ---- round four (issue 33): numbers that went wrong without a word, and the stack
static void numbers_and_stack(void) {
    char buf[1024];
    flag_case("-n past LONG_MAX", "-n 99999999999999999999", "must be in [1, 1048576]", "-n 99999999999999999999");
    { // huge but finite weights: model.norm.weight at 3e38 overflows, and every logit is NaN or inf
        const char *d = broken_copy();
        float huge[64];
        for (int k = 0; k < 64; k++) { huge[k] = 3e38f; }
        poke_data(d, 1469440, huge, sizeof(huge));
        run_model_case("weights that overflow float32", d, "", "logits of generated token 1", "not finite");
        run_model_case("weights that overflow float32, --json", d, "--json", "not finite", NULL);
        run_model_case("weights that overflow float32, speculative", d, "--skip attn:1", "not finite", NULL);
    }
    { // Self-SD Eq. 3 has no bound: gamma stays in [0, 1] however long acceptance stays off alpha
        DraftExit up = draft_exit_default(), down = draft_exit_default();
        for (int k = 0; k < 2000; k++) {
            draft_exit_update(&up, 0, 4, 0);
            draft_exit_update(&down, 4, 4, 0);
        }
        check(up.threshold <= 1.0f && up.threshold > 0.99f && down.threshold >= 0.0f && down.threshold < 0.01f,
              "2000 rounds of acceptance 0 (1): gamma %g (%g), want it held in [0, 1]", up.threshold, down.threshold);
    }
    { // a 128 KB main-thread stack: decoding fits (two 60 KB SpecStats once lived there: SIGSEGV)
        static const char *const runs[] = {"-n 4", "-n 4 --skip attn:1 --compare", "-n 4 --method selfsd --iters 2"};
        for (int k = 0; k < 3; k++) {
            snprintf(buf, sizeof(buf), "sh -c 'ulimit -s 128 && exec %s -m %s %s' >/dev/null 2>%s/stack.txt",
                     selfspec_bin(), SRC, runs[k], tmp);
            int st = system(buf);
            path_in(buf, sizeof(buf), tmp, "stack.txt");
            char *e = read_or_exit(buf, NULL);
            n_cases++;
            check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ulimit -s 128, %s: status %d, want exit 0:\n%s", runs[k], st, e);
            free(e);
        }
    }
    { // a prompts file with a UTF-8 byte order mark: the same text as without it
        char *a, *b, *e;
        path_in(buf, sizeof(buf), tmp, "bom.txt");
        spit(buf, "\xEF\xBB\xBFIn the beginning\n", 20);
        snprintf(buf, sizeof(buf), "-m %s -n 4 --json -f %s/bom.txt", SRC, tmp);
        int rc = run_selfspec(tmp, "", buf, &a, &e);
        free(e);
        snprintf(buf, sizeof(buf), "-m %s -n 4 --json -p 'In the beginning'", SRC);
        int rc2 = run_selfspec(tmp, "", buf, &b, &e);
        free(e);
        n_cases++;
        const char *ta = strstr(a, "\"tokens\""), *tb = strstr(b, "\"tokens\""), *end = strstr(a, "\"tokens_per_s\"");
        check(rc == 0 && rc2 == 0 && ta && tb && end && strncmp(ta, tb, (size_t)(end - ta)) == 0,
              "-f with a UTF-8 BOM: not the prompt without it:\n%s\n%s", a, b);
        free(a);
        free(b);
    }
    { // the first Ctrl-C in a search stops within one decoding, not after the whole dev set
        Model m;
        char err[SS_ERR_LEN];
        if (check(build_model(&m, SRC, 64, err) == 0, "build_model: %s", err)) {
            int prompt[3] = {1, 300, 301}, *prompts[8], lens[8];
            for (int k = 0; k < 8; k++) { prompts[k] = prompt; lens[k] = 3; }
            Objective obj = {(const int *const *)prompts, lens, 8, 8, 4, 1, draft_exit_default(), {0, 1, {0}}, NULL, NULL, NULL};
            SkipSet s;
            memset(&s, 0, sizeof(s));
            s.attn[1] = 1;
            uint64_t before = m.state.n_sublayers;
            measure_objective(&m, &obj, &s);
            uint64_t one_run = m.state.n_sublayers - before;
            search_interrupted = 1;
            before = m.state.n_sublayers;
            measure_median(&m, &obj, &s, 3, NAN);
            check(one_run > 0 && m.state.n_sublayers == before,
                  "Ctrl-C before a measurement: %llu sublayers run, want 0 (one measurement: %llu)",
                  (unsigned long long)(m.state.n_sublayers - before), (unsigned long long)one_run);
            search_interrupted = 0;
            free_model(&m);
        }
    }
}

// ---- round four: configs transformers loads
static void configs_transformers_loads(void) {
    char buf[1024], *o, *e;
    const char *d = model_copy("swish");
    edit_text(d, "config.json", "\"silu\"", "\"swish\"");
    snprintf(buf, sizeof(buf), "-m %s -n 2", d);
    run_ok_case("hidden_act swish (transformers: SiLU)", buf);
    text_case("hidden_act gelu", "config.json", "\"silu\"", "\"gelu\"", "config.json", "hidden_act must be \"silu\"");
    text_case("attention_bias \"false\" (a string)", "config.json", "\"attention_bias\": false",
              "\"attention_bias\": \"false\"", "config.json", "attention_bias must be true or false");
    text_case("mlp_bias 0", "config.json", "\"mlp_bias\": false", "\"mlp_bias\": 0",
              "config.json", "mlp_bias must be true or false");
    text_case("attention_bias true", "config.json", "\"attention_bias\": false", "\"attention_bias\": true",
              "config.json", "attention_bias=true is not supported");
    { // eos_token_id in generation_config.json alone (Llama-3-Instruct): decoding stops there
        d = model_copy("gen-eos");
        edit_text(d, "config.json", "\"eos_token_id\": 2", "\"eos_token_id\": null");
        snprintf(buf, sizeof(buf), "-m %s -n 8 --json", d);
        int rc = run_selfspec(tmp, "", buf, &o, &e);
        const char *t = strstr(o, "\"tokens\": [");
        int first = t ? atoi(t + 11) : -1;
        check(rc == 0 && strstr(o, "\"n_tokens\": 8") != NULL && first >= 0, "no eos_token_id: exit %d, want 8 tokens:\n%s%s", rc, o, e);
        free(o);
        free(e);
        snprintf(buf, sizeof(buf), "{\"bos_token_id\": 1, \"eos_token_id\": [%d]}", first);
        write_text(d, "generation_config.json", buf);
        snprintf(buf, sizeof(buf), "-m %s -n 8 --json", d);
        rc = run_selfspec(tmp, "", buf, &o, &e);
        n_cases++;
        check(rc == 0 && strstr(o, "\"n_tokens\": 1,") != NULL,
              "eos_token_id %d in generation_config.json alone: exit %d, want decoding to stop at it:\n%s%s", first, rc, o, e);
        free(o);
        free(e);
        write_text(d, "generation_config.json", "{\"eos_token_id\": 99999}");
        run_model_case("generation_config.json eos_token_id past vocab_size", d, "", "generation_config.json",
                       "eos_token_id is not a token id below vocab_size");
        write_text(d, "generation_config.json", "{\"eos_token_id\": 2,");
        run_model_case("generation_config.json not JSON", d, "", "generation_config.json", "not valid JSON");
        write_text(d, "generation_config.json", "[2]");
        run_model_case("generation_config.json an array", d, "", "generation_config.json", "not a JSON object");
    }
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (int k = 0; k < 3; k++) { // each cause named, not one message for five
        char from[64], to[64], name[64];
        snprintf(from, sizeof(from), "\"%s\": false", flags[k]);
        snprintf(to, sizeof(to), "\"%s\": true", flags[k]);
        snprintf(name, sizeof(name), "added token with %s", flags[k]);
        snprintf(buf, sizeof(buf), "%s=true is not supported", flags[k]);
        text_case(name, "tokenizer.json", from, to, "added_tokens[0]", buf);
    }
    text_case("added token with empty content", "tokenizer.json", "\"content\": \"<unk>\"", "\"content\": \"\"",
              "added_tokens[0]", "no \"content\" text");
    text_case("added token not the vocab's text", "tokenizer.json", "\"content\": \"<unk>\"", "\"content\": \"<unq>\"",
              "added_tokens[0]", "not the vocab's text");
}

// A folder under tmp whose path is about `len` bytes (components of 200), made; into out.
static void long_folder(char *out, size_t cap, const char *tag, size_t len) {
    snprintf(out, cap, "%s/%s", tmp, tag);
    mkdir(out, 0700);
    while (strlen(out) + 201 < len) {
        size_t n = strlen(out);
        out[n] = '/';
        memset(out + n + 1, 'd', 200);
        out[n + 201] = '\0';
        mkdir(out, 0700);
    }
}

// A copy of the model in src (the tiny one when NULL) in a folder whose path is about len
// bytes; its path into out.
static void long_model(char *out, size_t cap, const char *tag, size_t len, const char *src) {
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json"};
    long_folder(out, cap, tag, len);
    for (int k = 0; k < 3; k++) {
        char from[256], *to = (char *)malloc_check(strlen(out) + 64);
        snprintf(from, sizeof(from), "%s/%s", src ? src : SRC, files[k]);
        sprintf(to, "%s/%s", out, files[k]);
        copy_file(from, to);
        free(to);
    }
}

// ---- round four: a message keeps its reason however long the path before it
static void messages_keep_their_reason(void) {
    char dir[4096], args[16384], file[4200];
    long_model(dir, sizeof(dir), "long-ok", 1250, NULL);
    snprintf(args, sizeof(args), "-m %s -n 2", dir);
    run_ok_case("-m a 1250-byte folder path", args);
    snprintf(file, sizeof(file), "%s/prompts.txt", dir);
    spit(file, "In the beginning\n", 17);
    snprintf(args, sizeof(args), "-m %s -n 2 -f %s", dir, file);
    run_ok_case("-f a 1270-byte path", args);
    spit(file, "one\ntwo\0three\n", 14);
    run_case("-f a 1270-byte path with a NUL byte", args, "line 2: a NUL byte", NULL);
    spit(file, "one\nAnd God said, Let there be light: and there was light\n", 58);
    snprintf(args, sizeof(args), "-m %s -n 2 -c 8 -f %s", dir, file);
    run_case("-f a 1270-byte path, line 2 too long", args, "prompts.txt line 2", "context of 8");
    snprintf(file, sizeof(file), "%s/skip.json", dir);
    spit(file, "{\"attn\": [1, 40]}", 17);
    snprintf(args, sizeof(args), "-m %s -n 2 --skip-file %s", dir, file);
    run_case("--skip-file a 1260-byte path, layer 40", args, "not a layer in [0, 5]", NULL);
    spit(file, "{\"attn\": [1,", 12);
    run_case("--skip-file a 1260-byte path, not JSON", args, "not valid JSON", NULL);
    const char *d = broken_copy();
    edit_header(d, "\"model.norm.weight\"", "\"model.norm.weigxx\"", 0);
    long_model(dir, sizeof(dir), "long-tensor", 1250, d);
    snprintf(args, sizeof(args), "-m %s -n 2", dir);
    run_case("a 1250-byte folder, a missing tensor", args, "missing tensor model.norm.weight", NULL);
    d = broken_copy();
    edit_text(d, "config.json", "{", "{{");
    long_model(dir, sizeof(dir), "long-config", 1250, d);
    snprintf(args, sizeof(args), "-m %s -n 2", dir);
    run_case("a 1250-byte folder, config.json not JSON", args, "config.json: not valid JSON", NULL);
    long_model(dir, sizeof(dir), "long-3800", 3800, NULL); // (PATH_MAX is 4096)
    snprintf(args, sizeof(args), "-m %s -n 2", dir);
    run_ok_case("-m a 3800-byte folder path", args);
    { // an index that leaves a tensor out: the index is named, not the first shard
        d = model_copy("index-omits");
        char from[512], to[512];
        edit_header(d, "\"model.norm.weight\"", "\"model.norm.weigxx\"", 0); // (in a shard the index omits)
        path_in(from, sizeof(from), d, "model.safetensors");
        path_in(to, sizeof(to), d, "model-00001-of-00002.safetensors");
        check(rename(from, to) == 0, "cannot rename %s", from);
        write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"lm_head.weight\": "
                   "\"model-00001-of-00002.safetensors\"}}");
        run_model_case("an index that omits a tensor's shard", d, "", "model.safetensors.index.json",
                       "missing tensor model.norm.weight");
    }
}

// Runs `sh -c 'script'` (selfspec as $B, the tiny model as $M, the test folder as $T) with its
// stdout and stderr into tmp/sh-out.txt and tmp/sh-err.txt unless the script redirects them;
// returns the exit status and *e its stderr.
static int shell_case(const char *script, char **e) {
    char cmd[4096], path[256];
    snprintf(cmd, sizeof(cmd), "B=%s M=%s T=%s sh -c '%s' >%s/sh-out.txt 2>%s/sh-err.txt", selfspec_bin(), SRC, tmp,
             script, tmp, tmp);
    int st = system(cmd);
    path_in(path, sizeof(path), tmp, "sh-err.txt");
    *e = read_or_exit(path, NULL);
    n_cases++;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// ---- round four: output files known by what they are
static void outputs_by_identity(void) {
    char buf[4096], *e, *text;
    int rc;
    const char *save = "--method selfsd --iters 1 --objective cost --save-skip";
    { // a shard of a sharded model, and generation_config.json: the model's files
        const char *d = model_copy("sharded-out");
        char from[512], to[512];
        path_in(from, sizeof(from), d, "model.safetensors");
        path_in(to, sizeof(to), d, "model-00002-of-00002.safetensors");
        check(rename(from, to) == 0, "cannot rename %s", from);
        write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"lm_head.weight\": "
                   "\"model-00002-of-00002.safetensors\"}}");
        write_text(d, "generation_config.json", "{\"eos_token_id\": 2}");
        static const char *const files[] = {"model-00002-of-00002.safetensors", "generation_config.json",
                                            "./model.safetensors.index.json", "../sharded-out/config.json"};
        for (int k = 0; k < 4; k++) {
            char name[128], target[600];
            size_t n0, n1;
            path_in(target, sizeof(target), d, files[k]);
            char *before = read_or_exit(target, &n0);
            snprintf(name, sizeof(name), "--save-skip the model's %s", files[k]);
            snprintf(buf, sizeof(buf), "%s %s", save, target);
            run_model_case(name, d, buf, "--save-skip", "is one of the run's input files");
            char *after = read_or_exit(target, &n1);
            check(n0 == n1 && memcmp(before, after, n0) == 0, "%s: %s was changed", name, target);
            free(before);
            free(after);
        }
    }
    { // a symlink is written through, as a shell's > does: the link stays, its target changes
        char link[256], target[256];
        reset_output();
        path_in(link, sizeof(link), out_dir, "latest.json");
        path_in(target, sizeof(target), out_dir, "old.txt");
        check(symlink("old.txt", link) == 0, "cannot link %s", link);
        snprintf(buf, sizeof(buf), "$B -m $M -n 2 %s $T/out/latest.json", save);
        rc = shell_case(buf, &e);
        struct stat sb;
        text = read_or_exit(target, NULL);
        check(rc == 0 && lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode) && strstr(text, "\"attn\"") != NULL,
              "--save-skip a symlink: exit %d, want the link kept and its target written (%s):\n%s", rc, text, e);
        free(text);
        free(e);
        remove(link);
        check(symlink("no-such-file", link) == 0, "cannot link %s", link);
        snprintf(buf, sizeof(buf), "%s %s", save, link);
        flag_case("--save-skip a dangling symlink", "--save-skip", "symbolic link to nothing", "%s", buf);
        remove(link);
    }
    { // a 1250-byte path
        char dir[2048];
        long_folder(dir, sizeof(dir), "long-out", 1250);
        snprintf(buf, sizeof(buf), "-m %s -n 2 %s %s/skip.json", SRC, save, dir);
        run_ok_case("--save-skip a 1270-byte path", buf);
        snprintf(buf, sizeof(buf), "%s/skip.json", dir);
        struct stat sb;
        text = stat(buf, &sb) == 0 ? read_or_exit(buf, NULL) : NULL;
        check(text && strstr(text, "\"mlp\"") != NULL, "--save-skip a 1270-byte path: not written:\n%s", text);
        free(text);
    }
}

// ---- round four, classes of our own: flag values at and past their edges, skip-file elements
// of every JSON type, config values of the wrong type, tokenizer structure, safetensors entries
static void new_classes(void) {
    static const char *const flags[][3] = { // flags, the flag named, the problem
        {"-s -1", "-s -1", "must be in [0, 2147483647]"},
        {"-s 99999999999", "-s 99999999999", "must be in [0, 2147483647]"},
        {"-t inf", "-t inf", "must be in [0, 100]"},
        {"-t 1 --top-p nan", "--top-p nan", "not a number"},
        {"--skip attn:1 --alpha 0", "--alpha 0", "must be in (0, 1]"},
        {"--skip attn:1 --exit fixed:", "--exit fixed:", "not a number"},
        {"--skip attn:1 --exit fixed:-0.1", "--exit fixed:-0.1", "must be in [0, 1]"},
        {"--skip attn:1 --exit bogus", "--exit bogus", "expected adaptive, fixed:GAMMA or none"},
        {"--method selfsd --iters 0", "--iters 0", "must be in [1, 100000]"},
        {"--method clasp --loi 0", "--loi 0", "must be in [1, 1048576]"},
        {"--method oracle", "--method oracle", "unknown method"}, // (test/bench/oracle now)
        {"--threads 0", "--threads 0", "must be in [1, 1024]"},
        {"--threads 2000", "--threads 2000", "must be in [1, 1024]"},
        {"-c 0x10", "-c 0x10", "not an integer"},
        {"-c 1e3", "-c 1e3", "not an integer"},
        {"--skip attn:", "--skip", "expected a layer number"},
        {"--skip attn:-1", "--skip", "expected a layer number at \"-1\""},
        {"--skip attn:99999999999999999999", "--skip", "layer 99999999999999999999 is out of range"},
        {"--skip mlp:2-99999999999999999999", "--skip", "layer 99999999999999999999 is out of range"},
    };
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
        flag_case(flags[k][0], flags[k][1], flags[k][2], "-n 2 %s", flags[k][0]);
    }
    static const char *const skips[][2] = { // a --skip-file's text, the problem
        {"{\"attn\": [-1]}", "not a layer in [0, 5]"},
        {"{\"attn\": [1.5]}", "not a layer in [0, 5]"},
        {"{\"attn\": [true]}", "not a layer in [0, 5]"},
        {"{\"attn\": [null]}", "not a layer in [0, 5]"},
        {"{\"attn\": [[1]]}", "not a layer in [0, 5]"},
        {"{\"attn\": [1e400]}", "not a layer in [0, 5]"},
        {"{\"attn\": \"1,2\"}", "\"attn\" must be an array"},
        {"{\"attn\": [1], \"mlp\": null}", "\"mlp\" must be an array"},
        {"{\"attn\": [1]} {\"mlp\": [2]}", "not valid JSON (text after its end)"},
        {"\xEF\xBB\xBF{\"attn\": [1]}", "not valid JSON"},
    };
    char buf[256];
    for (size_t k = 0; k < sizeof(skips) / sizeof(skips[0]); k++) {
        char name[96];
        snprintf(name, sizeof(name), "--skip-file %s", skips[k][0]);
        snprintf(buf, sizeof(buf), "-m %s -n 2 --skip-file", SRC);
        run_file_case(name, buf, "skip-new.json", skips[k][0], "skip-new.json", skips[k][1]);
    }
    static const char *const configs[][3] = { // config.json: from, to, the problem
        {"\"num_attention_heads\": 4", "\"num_attention_heads\": \"4\"", "\"num_attention_heads\" must be an integer"},
        {"\"hidden_size\": 64", "\"hidden_size\": true", "\"hidden_size\" must be an integer"},
        {"\"vocab_size\": 512", "\"vocab_size\": 1e30", "\"vocab_size\" must be an integer"},
        {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": \"1e-5\"", "\"rms_norm_eps\" must be a normal float"},
        {"\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0", "\"rms_norm_eps\" must be a normal float"},
        {"\"rope_theta\": 10000.0", "\"rope_theta\": 0", "\"rope_theta\" must be a normal float"},
        {"\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"false\"", "tie_word_embeddings must be true or false"},
        {"\"eos_token_id\": 2", "\"eos_token_id\": \"2\"", "eos_token_id is not a token id"},
        {"\"bos_token_id\": 1", "\"bos_token_id\": -1", "bos_token_id is not a token id"},
        {"\"hidden_act\": \"silu\"", "\"hidden_act\": [\"silu\"]", "hidden_act must be"},
    };
    for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
        text_case(configs[k][1], "config.json", configs[k][0], configs[k][1], "config.json", configs[k][2]);
    }
    static const char *const tokenizers[][3] = { // tokenizer.json: from, to, the problem
        {"\"type\": \"BPE\"", "\"type\": null", "unsupported model untyped"},
        {"\"added_tokens\": [", "\"added_tokens\": {\"a\": 1}, \"unused\": [", "added_tokens an array"},
        {"\"id\": 0,", "\"id\": -1,", "added_tokens[0]: id not in"},
        {"\"id\": 0,", "\"id\": 0.5,", "added_tokens[0]: id not in"},
        {"\"merges\": [", "\"merges\": 7, \"unused\": [", "merges must be an array"},
    };
    for (size_t k = 0; k < sizeof(tokenizers) / sizeof(tokenizers[0]); k++) {
        text_case(tokenizers[k][1], "tokenizer.json", tokenizers[k][0], tokenizers[k][1], "tokenizer.json", tokenizers[k][2]);
    }
    static const char *const entries[][3] = { // model.safetensors' header: from, to, the problem
        {"\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[1469440", "\"dtype\":\"F64\",\"shape\":[64],\"data_offsets\":[1469440",
         "unsupported dtype F64"},
        {"\"shape\":[64],\"data_offsets\":[1469440", "\"shape\":[-64],\"data_offsets\":[1469440", "model.norm.weight: needs"},
        {"\"data_offsets\":[1469440,1469696]", "\"data_offsets\":[1469440]", "model.norm.weight: needs"},
        {"\"data_offsets\":[1469440,1469696]", "\"data_offsets\":[1469696,1469440]", "model.norm.weight: needs"},
    };
    for (size_t k = 0; k < sizeof(entries) / sizeof(entries[0]); k++) {
        header_case(entries[k][1], entries[k][0], entries[k][1], 0, "model.safetensors", entries[k][2]);
    }
    { // a weight that is infinity or NaN: named with its index
        float bad[2] = {INFINITY, NAN};
        for (int k = 0; k < 2; k++) {
            const char *d = broken_copy();
            poke_data(d, 1469440 + 4 * 7, &bad[k], 4);
            run_model_case(k ? "a NaN weight" : "an infinite weight", d, "", "model.norm.weight: weight 7 is",
                           k ? "NaN" : "infinite");
        }
    }
    static const char *const prompts[][2] = { // a prompts file with no prompt in it
        {"\xEF\xBB\xBF\n", "a byte order mark alone"}, {"\r\n\r\n", "CRLF lines only"}};
    for (int k = 0; k < 2; k++) {
        snprintf(buf, sizeof(buf), "-m %s -n 2 -f", SRC);
        run_file_case(prompts[k][1], buf, "no-prompts.txt", prompts[k][0], "no-prompts.txt", "no prompts");
    }
}

static void round_four(void) {
    new_classes();
    numbers_and_stack();
    configs_transformers_loads();
    messages_keep_their_reason();
    outputs_by_identity();
}

// Rounds one to three (issues 9-21): the cases above round four.
static void rounds_one_to_three(void) {
    const char *d;
    char buf[1024];

    // ---- model.safetensors
    truncated_case("truncated before the header length", "model.safetensors", 5, "model.safetensors", "truncated");
    truncated_case("truncated in the data", "model.safetensors", 700000, "model.safetensors",
                   "past the end of the file");
    truncated_case("truncated in the header", "model.safetensors", 3000, "model.safetensors", "header length");
    header_case("header length 0", NULL, "", 0, "model.safetensors", "header length 0");
    header_case("header length huge", "{", "{", 0xFFFFFFFFFFFFFFF0ull, "model.safetensors", "header length");
    header_case("header length past the end of the file", "{", "{", 1475608 - 8 + 1, "model.safetensors",
                "runs past the end");
    header_case("header not JSON", "{\"__metadata__\"", "[\"__metadata__\"", 0, "model.safetensors", "not valid JSON");
    header_case("header length runs into the data", "{", "{", 5904 + 16, "model.safetensors", "not valid JSON");
    header_case("header length cuts the JSON off", "{", "{", 5904 - 16, "model.safetensors", "ends early");
    {
        char nested[512] = "{\"x\":";
        for (int k = 0; k < 100; k++) { strcat(nested, "["); }
        for (int k = 0; k < 100; k++) { strcat(nested, "]"); }
        strcat(nested, ",");
        header_case("header nested 100 deep", "{", nested, 0, "model.safetensors", "nested deeper");
    }
    header_case("header a JSON array", NULL, "[1, 2, 3]", 0, "model.safetensors", "not a JSON object");
    header_case("unknown dtype", "\"F32\"", "\"I8\"", 0, "lm_head.weight", "unsupported dtype I8");
    header_case("shape disagrees with config", "\"shape\":[64],\"data_offsets\":[1469440",
                "\"shape\":[32,2],\"data_offsets\":[1469440", 0, "model.norm.weight has shape [32, 2]",
                "config.json implies [64]");
    text_case("config disagrees with the shapes", "config.json", "\"intermediate_size\": 176",
              "\"intermediate_size\": 170", "mlp.gate_proj.weight", "config.json implies");
    header_case("missing tensor", "\"model.norm.weight\"", "\"model.norm.weigxx\"", 0, "model.norm.weight",
                "missing tensor");
    header_case("duplicated tensor (the last entry is read)", "\"model.layers.0.input_layernorm.weight\"",
                "\"model.norm.weight\"", 0, "missing tensor model.layers.0.input_layernorm.weight", NULL);
    { // overlapping byte ranges (the safetensors library refuses them) are read in bounds, as the offsets say
        d = broken_copy();
        edit_header(d, "\"data_offsets\":[1469440,1469696]", "\"data_offsets\":[0,256]", 0);
        snprintf(buf, sizeof(buf), "-m %s -n 2", d);
        run_ok_case("data offsets overlap", buf);
    }
    header_case("data offsets past the end", "\"data_offsets\":[1469440,1469696]", "\"data_offsets\":[1469696,1469952]",
                0, "model.norm.weight", "past the end of the file");
    header_case("data offsets disagree with the shape", "\"data_offsets\":[1469440,1469696]",
                "\"data_offsets\":[1469440,1469568]", 0, "model.norm.weight", "the shape needs 256");
    swapped_file_case("model.safetensors is a folder", "model.safetensors", FOLDER, "model.safetensors",
                      "not a regular file");
    swapped_file_case("model.safetensors is a FIFO", "model.safetensors", FIFO, "model.safetensors",
                      "not a regular file");
    swapped_file_case("config.json is a FIFO", "config.json", FIFO, "config.json", "not a regular file");
    swapped_file_case("tokenizer.json is a FIFO", "tokenizer.json", FIFO, "tokenizer.json", "not a regular file");

    // ---- sharded index
    d = model_copy("shard-missing");
    path_in(buf, sizeof(buf), d, "model.safetensors");
    remove(buf);
    write_text(d, "model.safetensors.index.json",
               "{\"metadata\": {}, \"weight_map\": {\"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}");
    run_model_case("index names a missing shard", d, "", "model-00001-of-00002.safetensors", "cannot open");
    d = model_copy("shard-path");
    path_in(buf, sizeof(buf), d, "model.safetensors");
    remove(buf);
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"lm_head.weight\": \"../x.safetensors\"}}");
    run_model_case("index names a path", d, "", "model.safetensors.index.json", "not a plain file name");
    swapped_file_case("no safetensors at all", "model.safetensors", GONE, "model.safetensors.index.json", NULL);

    // ---- config.json
    swapped_file_case("config.json missing", "config.json", GONE, "config.json", "cannot open");
    written_case("config.json not JSON", "config.json", "{\"hidden_size\": 64,", "config.json", "not valid JSON");
    text_case("config.json key without a value", "config.json", "\"attention_dropout\": 0.0",
              "\"attention_dropout\":, 0.0", "config.json", "not valid JSON");
    text_case("config.json with a UTF-8 BOM", "config.json", "{", "\xEF\xBB\xBF{", "config.json", "not valid JSON");
    {
        char nested[512] = "{\"x\": ";
        for (int k = 0; k < 80; k++) { strcat(nested, "["); }
        for (int k = 0; k < 80; k++) { strcat(nested, "]"); }
        strcat(nested, ",");
        text_case("config.json nested 80 deep", "config.json", "{", nested, "config.json", "nested deeper");
    }
    text_case("hidden_size 0", "config.json", "\"hidden_size\": 64", "\"hidden_size\": 0", "config.json",
              "hidden_size");
    text_case("num_hidden_layers negative", "config.json", "\"num_hidden_layers\": 6", "\"num_hidden_layers\": -6",
              "config.json", "num_hidden_layers");
    text_case("num_hidden_layers 257 (SkipSet holds 256)", "config.json", "\"num_hidden_layers\": 6",
              "\"num_hidden_layers\": 257", "config.json", "\"num_hidden_layers\" must be an integer in [1, 256]");
    text_case("vocab_size not an integer", "config.json", "\"vocab_size\": 512", "\"vocab_size\": 512.5", "config.json",
              "vocab_size");
    text_case("heads not divisible by kv heads", "config.json", "\"num_key_value_heads\": 4",
              "\"num_key_value_heads\": 3", "config.json", "of num_key_value_heads 3");
    text_case("sizes far beyond the checkpoint", "config.json", "\"hidden_size\": 64", "\"hidden_size\": 16000000",
              "model.embed_tokens.weight", "config.json implies [512, 16000000]");
    text_case("rope_theta beyond float", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 1e300",
              "config.json", "rope_theta");
    text_case("eos_token_id lists too many", "config.json", "\"eos_token_id\": 2", "\"eos_token_id\": [2, 3, 4, 5, 6]",
              "config.json", "eos_token_id");
    text_case("num_hidden_layers 3 on 6 layers", "config.json", "\"num_hidden_layers\": 6", "\"num_hidden_layers\": 3",
              "model.layers.3.input_layernorm.weight", "is not used");
    header_case("tie_word_embeddings false, no lm_head", "\"lm_head.weight\"", "\"lm_head.weigxx\"", 0,
                "missing tensor lm_head.weight", "tie_word_embeddings false");
    d = model_copy("tied-with-head");
    edit_text(d, "config.json", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
    snprintf(buf, sizeof(buf), "-m %s -n 2", d);
    run_ok_case("tie_word_embeddings true, lm_head.weight present", buf);
    // issue 48: Llama's architectures but model_type mistral and a sliding window ran full
    // attention; AutoModelForCausalLM builds Mistral from model_type, whatever architectures says
    text_case("model_type mistral, Llama architectures", "config.json", "\"model_type\": \"llama\"",
              "\"model_type\": \"mistral\", \"sliding_window\": 4", "config.json", "model_type is not \"llama\"");
    d = broken_copy();
    edit_text(d, "config.json", "\"model_type\": \"llama\",", "");
    run_model_case("no model_type (AutoConfig refuses it)", d, "", "config.json", "model_type is not \"llama\"");
    d = model_copy("arch-mistral");
    edit_text(d, "config.json", "\"LlamaForCausalLM\"", "\"MistralForCausalLM\"");
    snprintf(buf, sizeof(buf), "-m %s -n 2", d);
    run_ok_case("model_type llama, Mistral architectures (transformers builds LLaMA)", buf);

    // ---- tokenizer.json
    swapped_file_case("tokenizer.json missing", "tokenizer.json", GONE, "tokenizer.json", "cannot open");
    text_case("unsupported tokenizer model", "tokenizer.json", "\"type\": \"BPE\"", "\"type\": \"WordPiece\"",
              "tokenizer.json", "unsupported model WordPiece");
    text_case("tokenizer vocab larger than the config's", "tokenizer.json", "\"id\": 2,", "\"id\": 600,",
              "tokenizer.json", "vocab_size 512");
    truncated_case("tokenizer.json truncated", "tokenizer.json", 5000, "tokenizer.json", "not valid JSON");

    // ---- flags (on the unbroken tiny model)
    const char *m = "-m tiny_models/llama2-tiny-random";
    flag_case("prompt longer than the context", "-p", "context",
              "-c 8 -p 'a prompt much longer than eight tokens of context'");
    d = model_copy("empty-vocab");
    write_text(d, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}, \"decoder\": "
               "{\"type\": \"ByteLevel\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}}");
    run_model_case("-p hello with an empty vocab", d, "-p hello", "-p: the prompt encodes to no tokens", NULL);
    snprintf(buf, sizeof(buf), "%s -c 16 -n 2 -f", m);
    run_file_case("-f with a long second line", buf, "second-long.txt", "In the beginning\n\nAnd God said, Let there "
                  "be light: and there was light. And God saw the light\n", "second-long.txt line 3", "context of 16");
    {
        char path[512];
        path_in(path, sizeof(path), tmp, "nul.txt");
        spit(path, "one\ntwo\0three\nfour\n", 19);
        flag_case("-f with a NUL byte", "nul.txt line 2", "NUL byte", "-f %s", path);
    }
    { // 65 dev prompts (the old limit was 64): all of them are used and freed, and each is checked
        char path[512], text[4096] = "";
        for (int k = 1; k <= 65; k++) { snprintf(text + strlen(text), sizeof(text) - strlen(text), "prompt %d\n", k); }
        path_in(path, sizeof(path), tmp, "dev65.txt");
        write_text(tmp, "dev65.txt", text);
        snprintf(buf, sizeof(buf), "%s -n 4 -p hi --method selfsd --iters 1 --objective cost --dev-prompts %s", m, path);
        run_ok_case("--dev-prompts with 65 lines", buf);
        strcat(text, "And God said, Let there be light: and there was light. And God saw the light, that it was good\n");
        write_text(tmp, "dev66.txt", text);
        flag_case("--dev-prompts line 66 too long", "--dev-prompts", "dev66.txt line 66",
                  "-c 48 -n 4 -p hi --method selfsd --iters 1 --dev-prompts %s/dev66.txt", tmp);
        write_text(tmp, "dev-short.txt", "And God said, Let there be light\n");
        flag_case("--dev-prompts line + 32 tokens past -c", "dev-short.txt line 1", "32 tokens the search scores",
                  "-c 24 -n 4 -p hi --method selfsd --iters 1 --dev-prompts %s/dev-short.txt", tmp);
        // with no --dev-prompts the search runs on the prompt itself, under the same check (at
        // -c 3 it scored 1 of its 32 tokens, exit 0)
        flag_case("selfsd on the prompt + 32 tokens past -c", "the prompt the search runs on",
                  "2 prompt tokens + the 32 tokens the search scores exceed the context of 3",
                  "-c 3 -n 1 -p a --method selfsd --iters 1");
        snprintf(buf, sizeof(buf), "-m %s -c 33 -n 1 -p a --method selfsd --iters 1", SRC); // 2 + 32 - 1 = 33
        run_ok_case("selfsd on the prompt + 32 tokens filling -c", buf);
    }
    { // flags the chosen method never reads
        static const char *const conflicts[][3] = { // flags, the flag named, the problem
            {"--method none --skip attn:1", "--skip", "only --method static"},
            {"--method selfsd --skip-file F.json", "--skip-file", "only --method static"},
            {"--skip attn:1 --skip-file F.json", "--skip-file", "not both"},
            {"--skip attn:1 --save-skip F.json", "--save-skip", "only --method selfsd reads it"},
            {"--method swift --dev-prompts F.txt", "--dev-prompts", "only --method selfsd reads it"},
            {"--method asd --objective cost", "--objective", "only --method selfsd reads it"},
            {"--method clasp --iters 3", "--iters", "only --method selfsd reads it"},
            {"--method swift --loi 2", "--loi", "only --method clasp"},
            {"--method clasp --skip-ratio 0.3", "--skip-ratio", "only --method swift"},
            {"--method asd --swift-budget 0.5", "--swift-budget", "only --method swift"},
            {"-K 4", "-K", "--method none drafts nothing"},
            {"--exit none", "--exit", "--method none drafts nothing"},
            {"--skip attn:1 --exit fixed:0.5 --alpha 0.8", "--alpha", "only the adaptive draft exit"},
            {"--method swift --alpha 0.8", "--alpha", "only the adaptive draft exit"},
            {"--top-p 0.9", "--top-p", "greedy decoding"},
        };
        for (size_t k = 0; k < sizeof(conflicts) / sizeof(conflicts[0]); k++) {
            flag_case(conflicts[k][0], conflicts[k][1], conflicts[k][2], "%s", conflicts[k][0]);
        }
    }
    flag_case("--save-skip into a missing folder", "no-such-folder/skip.json", "cannot create a file beside",
              "--method selfsd --save-skip %s/no-such-folder/skip.json", tmp);
    flag_case("--save-skip a folder", "--save-skip", "cannot write: Is a directory", "--method selfsd --save-skip %s",
              tmp);
    flag_case("-c above max_position_embeddings", "-c 1000000", "max_position_embeddings 256", "-c 1000000");
    flag_case("-c one above max_position_embeddings", "-c 257", "max_position_embeddings 256", "-c 257");
    snprintf(buf, sizeof(buf), "%s -c 256 -n 2", m);
    run_ok_case("-c at max_position_embeddings", buf);
    flag_case("-p and -f", "-p", "not both", "-p hello -f %s/dev65.txt", tmp);
    { // one 1 MB line: one BPE word on kjv-12l (no pre-tokenizer), which once took 14 minutes
        size_t n = 1 << 20;
        char *line = (char *)malloc_check(n + 2), path[512];
        for (size_t i = 0; i < n; i++) { line[i] = "And the LORD said unto Moses, "[i % 30]; }
        line[n] = '\n';
        path_in(path, sizeof(path), tmp, "long-line.txt");
        spit(path, line, n + 1);
        snprintf(buf, sizeof(buf), "-m tiny_models/kjv-12l -f %s", path);
        run_case("-f with a 1 MB line on kjv-12l", buf, "long-line.txt line 1", "context");
        path_in(path, sizeof(path), tmp, "long-line-64k.txt");
        spit(path, line, 1 << 16);
        flag_case("-f with a 64 KB line", "long-line-64k.txt line 1", "context", "-f %s", path);
        free(line);
    }
    flag_case("-n 0", "-n 0", "must be in", "-n 0");
    flag_case("-n negative", "-n -3", "must be in", "-n -3");
    flag_case("-n huge", "-n 99999999999", NULL, "-n 99999999999");
    flag_case("-n past the context", "-n 1000", "context", "-n 1000");
    flag_case("-t negative", "-t -0.5", "must be in", "-t -0.5");
    flag_case("-t nan", "-t nan", "not a number", "-t nan");
    flag_case("--top-p 0", "--top-p 0", "must be in (0", "--top-p 0");
    flag_case("--top-p above 1", "--top-p 1.5", "must be in (0", "--top-p 1.5");
    flag_case("--skip malformed list", "--skip", "expected a layer number", "--skip 'attn:1,x'");
    flag_case("--skip unknown sublayer", "--skip", "expected attn:LIST or mlp:LIST", "--skip 'ffn:1'");
    flag_case("--skip backwards range", "--skip", "bad range", "--skip 'attn:3-1'");
    flag_case("--skip layer out of range", "--skip", "out of range", "--skip 'mlp:6'");
    flag_case("--method unknown", "--method bogus", "unknown method", "--method bogus --skip attn:1");
    flag_case("--skip-file unreadable", "no-such-file.json", "cannot open", "--skip-file %s/no-such-file.json", tmp);
    flag_case("--skip-file a folder", "--skip-file", "not a regular file", "--skip-file %s", tmp);
    path_in(buf, sizeof(buf), tmp, "skip.json");
    spit(buf, "{\"attn\": [1, 40]}", 17);
    flag_case("--skip-file layer out of range", "skip.json", "not a layer in [0, 5]", "--skip-file %s/skip.json", tmp);
    path_in(buf, sizeof(buf), tmp, "skip-bad.json");
    spit(buf, "{\"attn\": [1,", 12);
    flag_case("--skip-file not JSON", "skip-bad.json", "not valid JSON", "--skip-file %s/skip-bad.json", tmp);
    snprintf(buf, sizeof(buf), "%s --skip-file", m);
    run_file_case("--skip-file [1, 2, 3]", buf, "skip-e.json", "[1, 2, 3]", "skip-e.json", "not a JSON object");
    run_file_case("--skip-file {\"atn\": ..}", buf, "skip-f.json", "{\"atn\": [1, 2]}", "skip-f.json", "unknown key \"atn\"");
    flag_case("unknown flag", "--bogus", "unknown flag", "--bogus 1");
    flag_case("-c 1", "-c 1", "must be in", "-c 1");
    flag_case("-K 0", "-K 0", "must be in", "-K 0");
    flag_case("--exit gamma above 1", "--exit", "must be in", "--exit fixed:2");
    flag_case("--method static without a skip set", "--method static", "needs --skip", "--method static");
    flag_case("--swift-budget 0", "--swift-budget 0", "must be in (0", "--method swift --swift-budget 0");
    flag_case("--swift-budget above 1", "--swift-budget 1.5", "must be in (0", "--method swift --swift-budget 1.5");
    flag_case("--swift-budget not a number", "--swift-budget 2%", "not a number", "--method swift --swift-budget 2%%");
    flag_case("-f unreadable", "no-prompts.txt", "cannot open", "-f %s/no-prompts.txt", tmp);
    path_in(buf, sizeof(buf), tmp, "empty.txt");
    spit(buf, "\n\n", 2);
    flag_case("-f with no prompts", "empty.txt", "no prompts", "-f %s/empty.txt", tmp);
    snprintf(buf, sizeof(buf), "-m %s/no-such-model", tmp);
    run_case("-m names no folder", buf, "no-such-model/config.json", "cannot open");
    // --save-skip is opened before the model loads: a bad path is the error even with a bad model
    snprintf(buf, sizeof(buf), "-m %s/no-such-model --method selfsd --save-skip %s/no-such-dir/out.json", tmp, tmp);
    run_case("--save-skip unwritable, checked before the model", buf, "--save-skip", "No such file or directory");

    // ---- round two: special files, limits, and flags against flags
    path_in(buf, sizeof(buf), tmp, "fifo");
    mkfifo(buf, 0600);
    // a FIFO with no writer: refused, or (prompts, which may come from a pipe) read to its end at once
    static const char *const fifo_flags[] = {"-f", "--skip-file", "--method selfsd --dev-prompts"};
    for (int k = 0; k < 3; k++) {
        flag_case(fifo_flags[k], "fifo", k == 1 ? "not a regular file" : "no prompts", "%s %s", fifo_flags[k], buf);
    }
    flag_case("-f a character device", "/dev/null", "not a regular file", "-f /dev/null");
    flag_case("-f a folder", "-f", "not a regular file", "-f %s", tmp);
    d = model_copy("shard-fifo");
    path_in(buf, sizeof(buf), d, "model.safetensors");
    remove(buf);
    write_text(d, "model.safetensors.index.json", "{\"weight_map\": {\"lm_head.weight\": \"shard.safetensors\"}}");
    path_in(buf, sizeof(buf), d, "shard.safetensors");
    mkfifo(buf, 0600);
    run_model_case("a shard is a FIFO", d, "", "shard.safetensors", "not a regular file");
    d = model_copy("index-fifo");
    path_in(buf, sizeof(buf), d, "model.safetensors");
    remove(buf);
    path_in(buf, sizeof(buf), d, "model.safetensors.index.json");
    mkfifo(buf, 0600);
    run_model_case("model.safetensors.index.json is a FIFO", d, "", "model.safetensors.index.json", NULL);
    snprintf(buf, sizeof(buf), "-m tiny_models/llama2-tiny-random/config.json");
    run_case("-m names a file", buf, "tiny_models/llama2-tiny-random/config.json/config.json", "cannot open: Not a directory");
    written_case("config.json empty", "config.json", "", "config.json", "not valid JSON");
    written_case("config.json only whitespace", "config.json", " \n\t\n", "config.json", "not valid JSON");
    written_case("config.json null", "config.json", "null", "config.json", "not valid JSON");
    written_case("config.json [1]", "config.json", "[1]", "config.json", "not a JSON object");
    header_case("header dtype twice (the last, F16, is read)", "{\"dtype\":\"F32\"",
                "{\"dtype\":\"F32\",\"dtype\":\"F16\"", 0, "model.safetensors", "the shape needs 65536");
    text_case("tokenizer.json with a UTF-8 BOM", "tokenizer.json", "{", "\xEF\xBB\xBF{", "tokenizer.json",
              "not valid JSON");
    snprintf(buf, sizeof(buf), "%s --skip-file", m);
    run_file_case("--skip-file only whitespace", buf, "skip-h.json", "  \n", "skip-h.json", "not valid JSON");
    run_file_case("--skip-file with a BOM", buf, "skip-i.json", "\xEF\xBB\xBF{}", "skip-i.json", "not valid JSON");
    run_file_case("--skip-file a string", buf, "skip-j.json", "\"attn:1\"", "skip-j.json", "not a JSON object");
    flag_case("-n twice", "-n", "given twice", "-n 4 -n 5");
    flag_case("-p twice", "-p", "given twice", "-p a --json -p b");
    flag_case("--exit fixed:nan", "--exit fixed:nan", "not a number", "--skip attn:1 --exit fixed:nan");
    flag_case("-K 64", "-K 64", "must be in [1, 63]", "--skip attn:1 -K 64");
    flag_case("--iters 100001", "--iters 100001", "must be in", "--method selfsd --iters 100001");
    flag_case("--top-p 1 with -t 0", "--top-p", "greedy decoding", "-t 0 --top-p 1");
    flag_case("--objective with --method none", "--objective", "only --method selfsd reads it", "--objective cost");
    { // -n at the context's edge: prompt + n - 1 tokens fit exactly, one more does not
        char err[SS_ERR_LEN];
        int ids[64];
        Tokenizer *tok = build_tokenizer("tiny_models/llama2-tiny-random/tokenizer.json", err);
        int n = tok ? encode(tok, "In the beginning", 16, 1, ids, 64, err) : -1;
        free_tokenizer(tok);
        check(n > 0 && n < 20, "encoding the edge prompt gave %d tokens", n);
        snprintf(buf, sizeof(buf), "%s -c 24 -p 'In the beginning' -n %d", m, 24 - n + 1);
        run_ok_case("-n exactly filling -c", buf);
        flag_case("-n one past -c", "exceed the context of 24", NULL, "-c 24 -p 'In the beginning' -n %d", 24 - n + 2);
    }
    snprintf(buf, sizeof(buf), "%s -c 16 -n 2 -f", m);
    run_file_case("-f CRLF and blank lines, line 5 too long", buf, "crlf.txt", "a\r\n\r\n\n b\r\nAnd God said, Let there be "
                  "light: and there was light. And God saw the light\r\n", "crlf.txt line 5", "context of 16");
    write_text(tmp, "crlf-ok.txt", "In the\r\n\r\nbeginning\\n\r\n");
    snprintf(buf, sizeof(buf), "%s -n 2 -f %s/crlf-ok.txt", m, tmp);
    run_ok_case("-f CRLF lines, blank lines and \\n", buf);
    {
        char path[512];
        path_in(path, sizeof(path), tmp, "dev-nul.txt");
        spit(path, "one\n\ntwo\0", 9);
        flag_case("--dev-prompts with a NUL byte", "dev-nul.txt line 3", "NUL byte", "--method selfsd --dev-prompts %s",
                  path);
    }

    // ---- round three: out-of-bounds reads
    header_case("a shape of 5 dims", "\"shape\":[64],\"data_offsets\":[1469440", "\"shape\":[64,1,1,1,1],\"data_offsets\":[1469440",
                0, "model.norm.weight", "a shape of at most 4 sizes");
    { // a vocabulary of 4 tokens, smaller than SWIFT's tree width (up to 10): no alternative is id -1
        d = vocab4_model("vocab-4", "d");
        snprintf(buf, sizeof(buf), "-m %s -p abcd -n 24 --method swift --json", d);
        run_ok_case("SWIFT on a 4-token vocabulary", buf);
        char *o = read_or_exit(strcat(strcpy(buf, tmp), "/stdout.txt"), NULL);
        check(strstr(o, "\"drafted\": 0,") == NULL && strstr(o, "\"drafted\": ") != NULL, "SWIFT drafted nothing:\n%s", o);
        free(o);
    }

    // ---- round three: quadratic work before any limit (each must finish inside CASE_SECONDS)
    { // config.json: an id2label of 300k keys, one of them twice (the last copy is read), loads at once
        size_t cap = 8 << 20, n = 0;
        char *big = (char *)malloc_check(cap);
        n += (size_t)snprintf(big + n, cap - n, "\"id2label\": {");
        for (int k = 0; k < 300000; k++) { n += (size_t)snprintf(big + n, cap - n, "\"%d\": \"L\", ", k); }
        n += (size_t)snprintf(big + n, cap - n, "\"299999\": \"L\"}, \"hidden_act\":");
        d = model_copy("id2label-300k");
        edit_text(d, "config.json", "\"hidden_act\":", big);
        snprintf(big, cap, "-m %s -n 2", d);
        run_ok_case("config.json id2label of 300k keys, one twice", big);
        free(big);
    }
    // ---- round three: JSON keys are compared as text, escapes resolved
    d = model_copy("escaped-key");
    edit_text(d, "config.json", "\"hidden_size\"", "\"hidden_\\u0073ize\"");
    snprintf(buf, sizeof(buf), "-m %s -n 2", d);
    run_ok_case("config.json \"hidden_\\u0073ize\"", buf);
    header_case("header dtype and d\\u0074ype (the last, F16, is read)", "{\"dtype\":\"F32\"",
                "{\"dtype\":\"F32\",\"d\\u0074ype\":\"F16\"", 0, "model.safetensors", "the shape needs 65536");

    { // escapes in keys and values read as the text they stand for
        static const char *const ok[][4] = { // name, file, from, to
            {"tokenizer.json \"m\\u006fdel\"", "tokenizer.json", "\"model\": {", "\"m\\u006fdel\": {"},
            {"hidden_act \"s\\u0069lu\"", "config.json", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"s\\u0069lu\""},
            {"header \"__m\\u0065tadata__\"", "model.safetensors", "{\"__metadata__\"", "{\"__m\\u0065tadata__\""},
            {"rope_parameters {\"rope_th\\u0065ta\": 1e4}", "config.json", "\"rope_theta\": 10000.0",
             "\"rope_parameters\": {\"rope_th\\u0065ta\": 1e4}"},
        };
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof(name), "escaped-%d", k);
            d = model_copy(name);
            if (strcmp(ok[k][1], "model.safetensors") == 0) {
                edit_header(d, ok[k][2], ok[k][3], 0);
            } else {
                edit_text(d, ok[k][1], ok[k][2], ok[k][3]);
            }
            snprintf(buf, sizeof(buf), "-m %s -n 2", d);
            run_ok_case(ok[k][0], buf);
        }
        d = model_copy("escaped-model-type"); // no architectures: model_type decides
        edit_text(d, "config.json", "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ],", "");
        edit_text(d, "config.json", "\"model_type\": \"llama\"", "\"model_type\": \"ll\\u0061ma\"");
        snprintf(buf, sizeof(buf), "-m %s -n 2", d);
        run_ok_case("model_type \"ll\\u0061ma\"", buf);
        snprintf(buf, sizeof(buf), "%s --skip-file", m);
        write_text(tmp, "skip-esc.json", "{\"\\u0061ttn\": [1]}");
        snprintf(buf, sizeof(buf), "%s -n 2 --skip-file %s/skip-esc.json", m, tmp);
        run_ok_case("--skip-file {\"\\u0061ttn\": [1]}", buf);
    }

    // ---- round three: rope_parameters as transformers 5 writes it, and config floats that are
    // subnormal as floats
    {
        Config c3, c5;
        char err[SS_ERR_LEN];
        d = model_copy("rope-params-theta"); // theta only in rope_parameters
        edit_text(d, "config.json", "\"rope_theta\": 10000.0", "\"rope_parameters\": {\"rope_theta\": 500000.0, "
                  "\"rope_type\": \"default\"}");
        check(read_config(&c5, d, err) == 0 && c5.rope_theta == 500000.0f && !c5.rope_llama3,
              "rope_parameters.rope_theta 500000: read as %g (%s)", c5.rope_theta, err);
        d = model_copy("rope-params-llama3"); // llama3 scaling only in rope_parameters
        edit_text(d, "config.json", "\"rope_theta\": 10000.0", "\"rope_parameters\": {\"rope_type\": \"llama3\", "
                  "\"rope_theta\": 500000.0, \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                  "\"original_max_position_embeddings\": 64}");
        check(read_config(&c3, "tiny_models/llama3-tiny-random", err) == 0, "llama3-tiny-random: %s", err);
        check(read_config(&c5, d, err) == 0 && c5.rope_llama3 && c5.rope_theta == c3.rope_theta &&
              c5.rope_factor == c3.rope_factor && c5.rope_low_freq == c3.rope_low_freq &&
              c5.rope_high_freq == c3.rope_high_freq && c5.rope_orig_max == c3.rope_orig_max,
              "llama3 in rope_parameters: llama3 %d, theta %g, factor %g, orig %d (%s)", c5.rope_llama3,
              c5.rope_theta, c5.rope_factor, c5.rope_orig_max, err);
    }
    text_case("rope_theta 1e4 and rope_parameters' 10000.0 agree, yarn refused", "config.json", "\"rope_theta\": 10000.0",
              "\"rope_theta\": 1e4, \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"yarn\"}", "config.json",
              "rope_type \"yarn\" is not supported");
    // (where rope_scaling and rope_parameters both hold settings, test_forward's HF config cases
    // check that rope_scaling's are read, as transformers reads them)
    text_case("rope_theta 1e-45 (a float subnormal)", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 1e-45",
              "config.json", "\"rope_theta\" must be a normal float in (1, ");
    text_case("rope_parameters.rope_theta 1e-39", "config.json", "\"rope_theta\": 10000.0",
              "\"rope_parameters\": {\"rope_theta\": 1e-39}", "config.json", "\"rope_theta\" must be");
    text_case("rms_norm_eps 1e-40", "config.json", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-40", "config.json",
              "\"rms_norm_eps\" must be");
    text_case("llama3 factor 1e-40", "config.json", "\"rope_scaling\": null",
              "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1e-40, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
              "4.0, \"original_max_position_embeddings\": 64}", "config.json", "\"factor\" must be");
    text_case("rope_theta 3.5e38 (above FLT_MAX)", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 3.5e38",
              "config.json", "\"rope_theta\" must be");
    text_case("rope_theta -0.0", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": -0.0", "config.json",
              "\"rope_theta\" must be");

    text_case("rope_theta 1 (every frequency 1)", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 1",
              "config.json", "\"rope_theta\" must be a normal float in (1, 3.40282e+38]");
    text_case("rope_theta 1e-400 (0 as a double)", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 1e-400",
              "config.json", "\"rope_theta\" must be");
    text_case("rope_theta 1e400 (inf as a double)", "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 1e400",
              "config.json", "\"rope_theta\" must be");
    text_case("rms_norm_eps 2", "config.json", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 2", "config.json",
              "\"rms_norm_eps\" must be a normal float in (0, 1]");
    { // a number of 73 characters, read as Python's json reads it (json_number refused 64 and more)
        const char *d = broken_copy();
        char args[512];
        edit_text(d, "config.json", "\"rms_norm_eps\": 1e-05",
                  "\"rms_norm_eps\": 0.00001000000000000000000000000000000000000000000000000000000000000000000");
        snprintf(args, sizeof(args), "-m %s -n 2", d);
        run_ok_case("rms_norm_eps 1e-05 in 73 characters", args);
    }
    text_case("llama3 high_freq_factor 3.5e38", "config.json", "\"rope_scaling\": null",
              "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
              "3.5e38, \"original_max_position_embeddings\": 64}", "config.json", "\"high_freq_factor\" must be");
    d = model_copy("theta-flt-max");
    edit_text(d, "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 3.4028235e38");
    snprintf(buf, sizeof(buf), "-m %s -n 2", d);
    run_ok_case("rope_theta FLT_MAX", buf);

    // ---- round three: float flags are range-checked as the float they become (1e-300 is 0.0f)
    flag_case("--top-p 1e-300", "--top-p 1e-300", "must be in (0", "-t 1 --top-p 1e-300");
    flag_case("--top-p 1e-46", "--top-p 1e-46", "must be in (0", "-t 1 --top-p 1e-46");
    flag_case("--top-p 0x1p-150", "--top-p 0x1p-150", "must be in (0", "-t 1 --top-p 0x1p-150");
    flag_case("--top-p 1.0000001", "--top-p 1.0000001", "must be in (0", "-t 1 --top-p 1.0000001");
    flag_case("--alpha 1e-300", "--alpha 1e-300", "must be in (0", "--skip attn:1 --exit adaptive --alpha 1e-300");
    flag_case("--swift-budget 1e-300", "--swift-budget 1e-300", "must be in (0", "--method swift --swift-budget 1e-300");
    flag_case("--skip-ratio 1e-46", "--skip-ratio 1e-46", "must be in (0", "--method swift --skip-ratio 1e-46");
    flag_case("-t 1e39 (inf as a float)", "-t 1e39", "must be in [0", "-t 1e39");
    flag_case("-t -inf", "-t -inf", "must be in [0", "-t -inf");

    // ---- round three: weights are checked finite where they are converted to fp32
    {
        const float bad[3] = {NAN, INFINITY, -INFINITY};
        const char *names[3] = {"NaN", "infinite", "infinite"};
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof(name), "an F32 weight %g in model.norm.weight", bad[k]);
            d = broken_copy();
            poke_data(d, 1469440 + 4 * 5, &bad[k], 4);
            run_model_case(name, d, "", "model.norm.weight: weight 5 is", names[k]);
        }
        const uint16_t half_nan = 0x7E00, half_inf = 0xFC00, bf16_nan = 0x7FC0;
        d = broken_copy(); // model.norm.weight as F16: its first 128 bytes, one of them a NaN
        edit_header(d, "{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[1469440,1469696]",
                    "{\"dtype\":\"F16\",\"shape\":[64],\"data_offsets\":[1469440,1469568]", 0);
        poke_data(d, 1469440 + 2 * 63, &half_nan, 2);
        run_model_case("an F16 NaN weight", d, "", "model.norm.weight: weight 63 is", "NaN");
        d = broken_copy();
        edit_header(d, "{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[1469440,1469696]",
                    "{\"dtype\":\"F16\",\"shape\":[64],\"data_offsets\":[1469440,1469568]", 0);
        poke_data(d, 1469440, &half_inf, 2);
        run_model_case("an F16 -inf weight", d, "", "model.norm.weight: weight 0 is", "infinite");
        d = broken_copy();
        edit_header(d, "{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[1469440,1469696]",
                    "{\"dtype\":\"BF16\",\"shape\":[64],\"data_offsets\":[1469440,1469568]", 0);
        poke_data(d, 1469440 + 2, &bf16_nan, 2);
        run_model_case("a BF16 NaN weight", d, "", "model.norm.weight: weight 1 is", "NaN");
    }

    // ---- round three: names, links and messages
    header_case("tensor name \"model.norm.weight\\u0000evil\"", "\"model.norm.weight\"",
                "\"model.norm.weight\\u0000evil\"", 0, "model.safetensors", "a NUL byte");
    header_case("tensor name with a lone surrogate", "\"model.norm.weight\"", "\"model.norm.weight\\udc00\"", 0,
                "model.safetensors", "bad tensor name");
    header_case("a tensor of shape [4294967296, 0]", "\"shape\":[512,64],\"data_offsets\":[131072,262144]",
                "\"shape\":[4294967296,0],\"data_offsets\":[131072,131072]", 0,
                "model.embed_tokens.weight has shape [4294967296, 0]", "config.json implies [512, 64]");
    d = broken_copy();
    edit_text(d, "config.json", "\"head_dim\": 16,", "");
    edit_text(d, "config.json", "\"num_attention_heads\": 4", "\"num_attention_heads\": 128");
    run_model_case("128 heads on hidden_size 64, no head_dim", d, "", "config.json",
                   "hidden_size 64 must be a multiple of num_attention_heads 128");
    {
        char link[512];
        d = broken_copy(); // a Hugging Face cache whose blob is missing
        path_in(link, sizeof(link), d, "model.safetensors");
        remove(link);
        check(symlink("../blobs/missing", link) == 0, "cannot make the symlink %s", link);
        run_model_case("model.safetensors a dangling symlink", d, "", "model.safetensors: cannot open",
                       "No such file or directory");
        d = broken_copy();
        path_in(link, sizeof(link), d, "model.safetensors");
        remove(link);
        check(symlink("model.safetensors", link) == 0, "cannot make the symlink %s", link);
        run_model_case("model.safetensors a symlink loop", d, "", "model.safetensors: cannot open",
                       "symbolic links");
    }

    text_case("post_processor without special_tokens", "tokenizer.json", "\"special_tokens\": {",
              "\"special_tokenz\": {", "tokenizer.json", "post_processor: special_tokens has no \"<s>\"");
    text_case("post_processor special_tokens without <s>", "tokenizer.json", "\"special_tokens\": {\n      \"<s>\": {",
              "\"special_tokens\": {\n      \"<t>\": {", "tokenizer.json", "special_tokens has no \"<s>\"");

    { // --json writes UTF-8: a folder name with byte 0xFF is written with U+FFFD
        d = model_copy("bad\xff-name");
        snprintf(buf, sizeof(buf), "-m '%s' -n 2 --json", d);
        run_ok_case("--json -m with byte 0xFF", buf);
        size_t len;
        char *o = read_or_exit(strcat(strcpy(buf, tmp), "/stdout.txt"), &len);
        int bad = 0, cp;
        for (size_t i = 0; i < len; i += utf8_decode(o, len, i, &cp)) { bad |= (utf8_decode(o, len, i, &cp), cp < 0); }
        check(!bad && strstr(o, "bad\\ufffd-name") != NULL, "--json -m with byte 0xFF: not UTF-8 JSON:\n%.200s", o);
        free(o);
    }

    { // a vocabulary token of 300 bytes is written whole (it was cut to 255), in text and JSON
        char long_token[301], *o;
        memset(long_token, 'd', 300);
        long_token[299] = 'X'; // (cut to 255 bytes, no token's X is left)
        long_token[300] = '\0';
        d = vocab4_model("vocab-long", long_token);
        for (int json = 0; json < 2; json++) {
            snprintf(buf, sizeof(buf), "-m %s -p abc -n 24%s", d, json ? " --json" : "");
            run_ok_case("a 300-byte vocabulary token", buf);
            o = read_or_exit(strcat(strcpy(buf, tmp), "/stdout.txt"), NULL);
            check(strstr(o, long_token) != NULL && (!json || strstr(o, ", 3") != NULL),
                  "a 300-byte token (id 3): not written whole (%s):\n%.400s", json ? "--json" : "text", o);
            free(o);
        }
    }

    // ---- round three (issue 21): an output is written to a temporary file beside its file and
    // renamed over it when the run succeeds (README "Scope and limits", item 4)
    snprintf(out_dir, sizeof(out_dir), "%s/out", tmp);
    snprintf(out_file, sizeof(out_file), "%s/old.txt", out_dir);
    kept_output_case("--save-skip kept when -c is refused", "-c 1000", "max_position_embeddings",
                     "--method selfsd -c 1000 --save-skip %s");
    kept_output_case("--save-skip kept on a prompt past -c", "-p", "context", "--method selfsd -c 8 -p 'a prompt much "
                     "longer than eight tokens of context' --save-skip %s");
    kept_output_case("--save-skip names the -f file", "--save-skip", "is one of the run's input files",
                     "--method selfsd -f %s --save-skip %s");
    kept_output_case("--save-skip names --dev-prompts", "--save-skip", "input files",
                     "--method selfsd --dev-prompts %s --save-skip %s");
    // --trace (issue 31) goes through the same checks: the inputs, a refused run
    kept_output_case("--trace names the -f file", "--trace", "input files", "-f %s --trace %s");
    kept_output_case("--trace kept when the skip set is refused", "--skip", "out of range", "--skip mlp:6 --trace %s");
    flag_case("--trace into a missing folder", "--trace", "no-such-dir/t.jsonl: No such file or directory",
              "--trace %s/no-such-dir/t.jsonl", tmp);
    {
        char link[256], f[512];
        snprintf(link, sizeof(link), "%s/prompts-link.txt", tmp);
        reset_output();
        if (symlink(out_file, link) != 0) { fprintf(stderr, "test_bad_inputs: cannot link %s\n", link); exit(2); }
        snprintf(f, sizeof(f), "--method selfsd -f %s --save-skip %s", link, out_file);
        flag_case("--save-skip names -f through a symlink", "--save-skip", "input files", "%s", f);
        check_output_kept("--save-skip names -f through a symlink");
        reset_output();
        snprintf(buf, sizeof(buf), "-m %s/no-such-model -n 4 --method selfsd --save-skip %s", tmp, out_file);
        run_case("--save-skip kept when the model folder is missing", buf, "no-such-model", "cannot open");
        check_output_kept("--save-skip kept when the model folder is missing");
    }
    static const char *const model_files[] = {"tokenizer.json", "config.json", "model.safetensors"};
    for (int k = 0; k < 3; k++) { // the model's own files: the rename would have replaced them
        char target[512], from[256], f[600], name[96];
        size_t n0, n1;
        d = broken_copy();
        path_in(target, sizeof(target), d, model_files[k]);
        snprintf(f, sizeof(f), "--method selfsd --save-skip %s", target);
        snprintf(name, sizeof(name), "--save-skip names the model's %s", model_files[k]);
        run_model_case(name, d, f, "--save-skip", "input files");
        snprintf(from, sizeof(from), "%s/%s", SRC, model_files[k]);
        char *a = read_or_exit(from, &n0), *b = read_or_exit(target, &n1);
        check(n0 == n1 && memcmp(a, b, n0) == 0, "%s: %s was changed", name, target);
        free(a);
        free(b);
    }
    { // stopped, after the temporary files exist: SIGTERM in a search, Ctrl-C while decoding. The
      // old file is kept, no temporary file is left, and the signal ends the run (128 + its number)
        static const struct { int sig; const char *name, *model, *flags; int temporaries; } kills[] = {
            {SIGTERM, "SIGTERM", "tiny_models/llama2-tiny-random",
             "-n 4 --method selfsd --iters 100000 --save-skip %s --trace %s/t.jsonl", 2},
            {SIGINT, "SIGINT", "tiny_models/kjv-12l", "-c 512 -n 500 -p a --trace %s", 1}};
        for (int k = 0; k < 2; k++) {
            char name[64], flags[512];
            snprintf(name, sizeof(name), "%s while the outputs are open", kills[k].name);
            snprintf(flags, sizeof(flags), kills[k].flags, out_file, out_dir);
            reset_output();
            pid_t pid = fork();
            if (pid == 0) { // the signals at their default, whatever this test inherited (nohup)
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                snprintf(buf, sizeof(buf), "exec %s -m %s %s >/dev/null 2>&1", selfspec_bin(), kills[k].model,
                         flags);
                execl("/bin/sh", "sh", "-c", buf, (char *)NULL);
                _exit(127);
            }
            int polls = 0, status = 0;
            while (polls < 600 && temporaries_in(out_dir) < kills[k].temporaries) { usleep(100000), polls++; }
            kill(pid, kills[k].sig);
            waitpid(pid, &status, 0);
            n_cases++;
            check(polls < 600, "%s: %d temporary files never appeared beside %s (the outputs stream into them)",
                  name, kills[k].temporaries, out_file);
            check(WIFSIGNALED(status) && WTERMSIG(status) == kills[k].sig, "%s: status %d, want the run ended by it",
                  name, status);
            check_output_kept(name);
        }
    }
    { // stdout into a full disk: the lost text is an error line and exit 1
        for (int json = 0; json < 2; json++) {
            snprintf(buf, sizeof(buf), "%s -m %s -n 4 %s >/dev/full 2>%s/full.txt", selfspec_bin(), SRC, json ? "--json" : "", tmp);
            int st = system(buf);
            path_in(buf, sizeof(buf), tmp, "full.txt");
            char *e = read_or_exit(buf, NULL);
            check(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(e, "selfspec: error: writing to stdout failed\n") != NULL,
                  "%s into /dev/full: exit status %d, want 1 and an error line:\n%s", json ? "--json" : "text", st, e);
            free(e);
        }
    }
    { // paths checked before the run, where the temporary file is made: an empty name, a folder
      // no file can be made in, a name too long
        char name[600];
        flag_case("--save-skip ''", "--save-skip", "the path is empty", "--method selfsd --save-skip ''");
        flag_case("--save-skip in /proc", "/proc/out.json", "cannot create a file beside",
                  "--method selfsd --save-skip /proc/out.json");
        memset(name, 'a', 300);
        name[300] = '\0';
        flag_case("--save-skip a 300-byte name", "--save-skip", "File name too long",
                  "--method selfsd --save-skip %s/%s.json", out_dir, name);
    }
    { // --save-skip is written at the end too: a run that fails after the search keeps the old file
        reset_output();
        snprintf(buf, sizeof(buf), "%s -m %s -n 4 --method selfsd --iters 2 --save-skip %s >/dev/full 2>/dev/null",
                 selfspec_bin(), SRC, out_file);
        int st = system(buf);
        check(WIFEXITED(st) && WEXITSTATUS(st) == 1, "--save-skip, stdout /dev/full: exit status %d, want 1", st);
        check_output_kept("--save-skip kept when stdout fails after the search");
    }
    kept_output_case("--save-skip FILE/ (a file named as a folder)", "--save-skip", "Not a directory",
                     "--method selfsd --save-skip %s/");
    flag_case("-t 100.00001", "-t 100.00001", "must be in [0, 100]", "-t 100.00001");
    { // two runs saving one --save-skip file at once: it holds one of the two, whole
        reset_output();
        snprintf(buf, sizeof(buf), "for s in 1 2; do %s -m %s -n 4 --method selfsd --iters 20 -s $s --save-skip %s "
                 ">/dev/null 2>&1 & done; wait", selfspec_bin(), SRC, out_file);
        check(system(buf) != -1, "system failed");
        size_t len;
        char *text = read_or_exit(out_file, &len), err[SS_ERR_LEN];
        Json j;
        check(json_parse(&j, text, len, out_file, err) == 0 && strstr(text, "\"mlp\"") != NULL,
              "two runs saving one file: %s:\n%s", err, text);
        json_free(&j);
        free(text);
    }
    { // a run that succeeds replaces the file whole and says so
        char *e;
        reset_output();
        snprintf(buf, sizeof(buf), "%s -n 4 --method selfsd --iters 2 --save-skip %s", m, out_file);
        int rc = run_selfspec(tmp, "", buf, NULL, &e);
        size_t len;
        char *saved = read_or_exit(out_file, &len);
        snprintf(buf, sizeof(buf), "wrote %s\n", out_file);
        check(rc == 0 && strstr(e, buf) != NULL && strncmp(saved, "{\"attn\": [", 10) == 0,
              "--save-skip over an old file: exit %d, want the set and \"%s\" on stderr:\n%s", rc, buf, e);
        free(saved);
        free(e);
        spit(out_file, "old\n", 4); // (the one file left, as check_output_kept wants)
        check_output_kept("--save-skip over an old file");
    }

    // ---- round three: the added-token scan is not line length x added tokens (both hung > 60 s)
    {
        // (40 MB: the old scan took 24 MB past 60 s on one run and under it on another)
        size_t n = 40u << 20;
        char *line = (char *)malloc_check(n + 2), path[256];
        memset(line, '<', n); // every byte starts kjv-12l's 259 added tokens (<s>, <0x00>, ...)
        line[n] = '\n', line[n + 1] = '\0';
        path_in(path, sizeof(path), tmp, "angles.txt");
        spit(path, line, n + 1);
        snprintf(buf, sizeof(buf), "-m tiny_models/kjv-12l -n 1 -f %s", path);
        run_case("a 40 MB line of '<' on kjv-12l", buf, "angles.txt line 1", "does not fit the context");
        line[1 << 20] = '\n', line[(1 << 20) + 1] = '\0';
        spit(path, line, (1u << 20) + 1);
        free(line);
        d = broken_copy(); // 20000 copies of <s> in added_tokens, and a 1 MB line of '<'
        char *many = (char *)malloc_check(20000 * 120 + 64), *at = many;
        at += sprintf(at, "\"added_tokens\": [");
        for (int k = 0; k < 20000; k++) {
            at += sprintf(at, "{\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false},");
        }
        edit_text(d, "tokenizer.json", "\"added_tokens\": [", many);
        free(many);
        snprintf(buf, sizeof(buf), "-f %s", path);
        run_model_case("20000 added <s> and a 1 MB line of '<'", d, buf, "angles.txt line 1", "context");
    }

    // ---- round three, in-process: the two out-of-bounds reads the sanitizers found
    { // a shape of 5 dims is refused, and the entry left holds no n_dim past shape[4]
        static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}";
        Json j;
        Shard sh;
        TensorInfo t;
        char err[SS_ERR_LEN];
        memset(&sh, 0, sizeof(sh));
        memset(&t, 0, sizeof(t));
        sh.size = 8 + sizeof(header) - 1 + 4;
        sh.data_start = 8 + sizeof(header) - 1;
        check(json_parse(&j, header, sizeof(header) - 1, "header", err) == 0, "5-dim header: %s", err);
        check(parse_tensor_entry(&j, 1, &sh, &t) != 0 && strstr(err, "at most 4") != NULL,
              "5-dim shape: accepted (%s)", err);
        check(t.n_dim <= 4, "5-dim shape: the refused entry has n_dim %d; build_model reads shape[0..n_dim)", t.n_dim);
        free(t.name);
        json_free(&j);
    }
    { // SWIFT's tree alternatives on a vocabulary smaller than the tree width: real ids only
        SwiftParams p;
        memset(&p, 0, sizeof(p));
        for (int k = 0; k < 4; k++) { p.tree.width[k] = 8; }
        float logits[3] = {0.5f, 2.0f, 1.0f};
        int alts[MAX_ALTS], n = top_alternatives(logits, 3, 0.5f, &p.tree, MAX_ALTS, alts);
        check(n == 2 && alts[0] == 2 && alts[1] == 0,
              "top_alternatives on vocab 3, width 8: %d alternatives (%d, %d), want 2: (2, 0); an id -1 "
              "reads token_embedding[-dim]", n, n > 0 ? alts[0] : -9, n > 1 ? alts[1] : -9);
    }
}

// ---- round five (issue 40): outputs, generation_config.json, degenerate numbers
static const char *SAVE = "--method selfsd --iters 1 --objective cost --save-skip";

// Outputs that are not regular files are written in place; the temporary file's short name
static void outputs_in_place(void) {
    char buf[4096], path[600], *e, *text;
    int rc;
    struct stat sb;
    { // a 255-byte file name: the temporary name beside it is short
        char name[256];
        memset(name, 'n', 255);
        name[255] = '\0';
        snprintf(buf, sizeof(buf), "-m %s -n 2 %s %s/%s", SRC, SAVE, out_dir, name);
        run_ok_case("--save-skip a 255-byte file name", buf);
        snprintf(path, sizeof(path), "%s/%s", out_dir, name);
        text = stat(path, &sb) == 0 ? read_or_exit(path, NULL) : NULL;
        check(text && strstr(text, "\"attn\""), "--save-skip a 255-byte file name: not written");
        free(text);
        remove(path);
    }
    { // not a regular file: written in place, never renamed onto (/dev/null stays a device; a FIFO's reader gets it)
        snprintf(buf, sizeof(buf), "-m %s -n 2 %s /dev/null", SRC, SAVE);
        run_ok_case("--save-skip /dev/null", buf);
        check(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode), "--save-skip /dev/null: no longer a device");
        snprintf(buf, sizeof(buf), "mkfifo $T/out/fifo && { timeout -s KILL 60 cat $T/out/fifo > $T/out/got & } && timeout -s KILL 60 "
                 "$B -m $M -n 2 --trace $T/out/fifo; rc=$?; [ $rc = 0 ] || : > $T/out/fifo; wait; exit $rc");
        rc = shell_case(buf, &e);
        path_in(path, sizeof(path), out_dir, "fifo");
        check(rc == 0 && lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode), "--trace FIFO: exit %d, the FIFO replaced?\n%s", rc, e);
        free(e);
        remove(path);
        path_in(path, sizeof(path), out_dir, "got");
        text = read_or_exit(path, NULL);
        check(strstr(text, "\"summary\"") != NULL, "--trace FIFO: the reader got no trace:\n%.200s", text);
        free(text);
        remove(path);
    }
}

// generation_config.json: its eos_token_id replaces config.json's when it has one, as
// transformers' generate() does; a key twice is read from its last copy, as Python's json does
static void generation_config_cases(void) {
    const char *d;
    static const char *const gens[] = {"{\"eos_token_id\": [5, 7]}", "{\"eos_token_id\": 9}",
                                       "{\"bos_token_id\": 1}", "{\"eos_token_id\": null}",
                                       "{\"bos_token_id\": 1, \"eos_token_id\": 2, \"eos_token_id\": 3}"};
    static const int want[][3] = {{2, 5, 7}, {1, 9, 0}, {1, 2, 0}, {1, 2, 0}, {1, 3, 0}}; // n_eos, the ids
    for (int k = 0; k < 5; k++) {
        Config c;
        char err[SS_ERR_LEN];
        d = broken_copy();
        write_text(d, "generation_config.json", gens[k]);
        int rc = read_config(&c, d, err);
        n_cases++;
        check(rc == 0 && c.n_eos == want[k][0] && c.eos_ids[0] == want[k][1] &&
              (c.n_eos < 2 || c.eos_ids[1] == want[k][2]),
              "generation_config.json %s over config.json's eos 2: rc %d, %d ids (%d, %d) (%s)", gens[k], rc,
              c.n_eos, c.eos_ids[0], c.n_eos > 1 ? c.eos_ids[1] : -1, rc ? err : "");
    }
}

// Degenerate numbers: finite weights whose products overflow RMSNorm's sum of squares make its
// scale 0 and every later logit 0 (all equal, not NaN): one error line
static void degenerate_numbers(void) {
    static float big[64 * 176];
    const char *d = broken_copy();
    for (int k = 0; k < 64 * 64; k++) { big[k] = 1e19f; } // layer 0's o_proj: |x| ~ 1e20, x^2 past FLT_MAX
    poke_data(d, 414208, big, 64 * 64 * sizeof(float));
    static const char *const extra[] = {"", "--json", "--skip attn:1", "--method swift"};
    for (int k = 0; k < 4; k++) {
        char name[96];
        snprintf(name, sizeof(name), "RMSNorm's scale 0, all logits equal %s", extra[k]);
        run_model_case(name, d, extra[k], "logits of generated token 1 are all equal", NULL);
    }
    d = broken_copy();
    for (int k = 0; k < 64 * 176; k++) { big[k] = 3e38f; } // layer 2's down_proj: its output is inf
    poke_data(d, 664832, big, 64 * 176 * sizeof(float));
    run_model_case("layer 2's MLP output not finite", d, "", "logits of generated token 1 are not finite", NULL);
    // a run that dies there (in a search, both outputs open): the old file kept, no temporary left
    char flags[512];
    reset_output();
    snprintf(flags, sizeof(flags), "--method selfsd --iters 1 --save-skip %s --trace %s/t.jsonl", out_file, out_dir);
    run_model_case("a run that dies in its search", d, flags, "logits of generated token 1 are not finite", NULL);
    check_output_kept("a run that dies in its search");
}

// A prompts file whose size the kernel reports as 0 (a /proc pseudo-file) is read to its end
static void pseudo_file_prompts(void) {
    char buf[512], *out;
    snprintf(buf, sizeof(buf), "-m %s -n 2 --json -f /proc/sys/kernel/ostype", SRC);
    run_ok_case("-f a /proc file whose size reads 0", buf);
    int rc = run_selfspec(tmp, "OMP_NUM_THREADS=1", buf, &out, NULL);
    check(rc == 0 && strstr(out, "\"n_prompt\": ") != NULL && strstr(out, "\"n_prompt\": 0,") == NULL,
          "-f /proc/sys/kernel/ostype: exit %d, no prompt read:\n%s", rc, out);
    free(out);
}

// The bench scripts behind make bench-guard: numbers in a folder of their own (another run
// writing the old fixed names changes nothing), a build that fails every run is an error, and
// TERM under dash removes guard.sh's temporary build folder. Fake builds print a fixed speed.
static void bench_scripts(void) {
    char *e;
    static const char *const fakes[][2] = {
        {"old", "#!/bin/sh\necho 1 >> /tmp/compare_new.txt\necho '{\"tokens_per_s\": 100.0}'\n"},
        {"new", "#!/bin/sh\necho '{\"tokens_per_s\": 200.0}'\n"}, {"bad", "#!/bin/sh\nexit 1\n"}};
    char dir[256], path[300];
    path_in(dir, sizeof(dir), tmp, "fake");
    mkdir(dir, 0700);
    for (int k = 0; k < 3; k++) {
        path_in(path, sizeof(path), dir, fakes[k][0]);
        spit(path, fakes[k][1], strlen(fakes[k][1]));
        chmod(path, 0700);
    }
    int rc = shell_case("REPEATS=3 sh test/bench/compare_builds.sh $T/fake/old $T/fake/new m > $T/fake/table; rc=$?; "
                        "rm -f /tmp/compare_new.txt; cat $T/fake/table >&2; exit $rc", &e);
    int rows = 0;
    for (const char *p = e; (p = strstr(p, "| 100.0 | 200.0 | 2.000 |")) != NULL; p++) { rows++; }
    check(rc == 0 && rows == 5, "compare_builds.sh beside a run writing /tmp/compare_new.txt: exit %d, %d of 5 rows "
          "with its own numbers:\n%s", rc, rows, e);
    free(e);
    rc = shell_case("REPEATS=3 sh test/bench/compare_builds.sh $T/fake/bad $T/fake/new m", &e);
    check(rc == 1 && strstr(e, "the old build") && strstr(e, "in 0 of 3 runs"),
          "compare_builds.sh with an old build that fails every run: exit %d, want 1 and its error:\n%s", rc, e);
    free(e);
    // guard.sh killed by TERM (under dash) while it builds: its folder from mktemp is removed
    rc = shell_case("git rev-parse --git-dir >/dev/null 2>&1 || exit 77; mkdir $T/tt && export TMPDIR=$T/tt && "
                    "{ setsid sh test/bench/guard.sh >/dev/null 2>&1 & p=$!; } && i=0 && "
                    "until ls $T/tt/*/selfspec.cu >/dev/null 2>&1 || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done; "
                    "kill -TERM -$p; wait $p; echo \"polls $i, left: $(ls $T/tt)\" >&2; [ -z \"$(ls $T/tt)\" ] && [ $i -lt 600 ]", &e);
    check(rc == 0 || rc == 77, "guard.sh killed by TERM: exit %d, its temporary folder left:\n%s", rc, e);
    free(e);
}

// ---- round five, classes of our own: outputs reached by hard links and symlinks, an output that
// fails in place beside one renamed, names no loader reads, the umask, pseudo-files as other
// inputs, generation_config.json's other faults
static void round_five_own(void) {
    char buf[2048], a[300], b[300], *e, *text;
    struct stat sb;
    int rc;
    const char *d = model_copy("own5");
    reset_output();
    path_in(b, sizeof(b), out_dir, "hard.json");
    path_in(a, sizeof(a), d, "config.json");
    check(link(a, b) == 0, "cannot link %s", b);
    snprintf(buf, sizeof(buf), "%s %s", SAVE, b);
    run_model_case("--save-skip a hard link to the model's config.json", d, buf, "--save-skip",
                   "is one of the run's input files");
    remove(b);
    path_in(a, sizeof(a), tmp, "five.txt");
    spit(a, "In the beginning\n", 17);
    check(symlink(a, b) == 0, "cannot link %s", b);
    flag_case("--trace a symlink to -f's file", "--trace", "one of the run's input files", "-f %s --trace %s", a, b);
    remove(b);
    check_output_kept("outputs by hard links and symlinks");
    rc = shell_case("$B -m $M -n 2 --method selfsd --iters 1 --objective cost --save-skip $T/out/old.txt --trace /dev/full", &e);
    const char *last = strstr(e, "selfspec: error: ");
    check(rc == 1 && last && strstr(last, "--trace /dev/full: cannot write: No space left on device\n") == last + 17 &&
          !strstr(e, "wrote"), "--save-skip F --trace /dev/full: exit %d, want the error last:\n%s", rc, e);
    free(e);
    check_output_kept("--save-skip F --trace /dev/full: F kept");
    static const char *const fine[] = {"own5/skip.json", "out/model.safetensors"}; // no loader reads these
    for (int k = 0; k < 2; k++) {
        snprintf(buf, sizeof(buf), "-m %s -n 2 %s %s/%s", d, SAVE, tmp, fine[k]);
        snprintf(a, sizeof(a), "--save-skip %s", fine[k]);
        run_ok_case(a, buf);
        snprintf(a, sizeof(a), "%s/%s", tmp, fine[k]);
        check(stat(a, &sb) == 0 && sb.st_size > 0, "--save-skip %s: not written", fine[k]);
        remove(a);
    }
    rc = shell_case("umask 077 && $B -m $M -n 2 --method selfsd --iters 1 --objective cost --save-skip $T/out/u.json", &e);
    path_in(a, sizeof(a), out_dir, "u.json");
    check(rc == 0 && stat(a, &sb) == 0 && (sb.st_mode & 0777) == 0600, "--save-skip a new file under umask 077: exit %d, "
          "mode %o, want 0600", rc, (unsigned)(sb.st_mode & 0777));
    free(e);
    remove(a);
    flag_case("--skip-file a /proc file (size 0)", "--skip-file /proc/sys/kernel/ostype", "not valid JSON",
              "--skip-file /proc/sys/kernel/ostype");
    // (a link of its own to /dev/stdout: a build that renamed over it would replace only that)
    rc = shell_case("ln -s /dev/stdout $T/out/so && $B -m $M -n 2 --trace $T/out/so | cat > $T/out/piped", &e);
    path_in(a, sizeof(a), out_dir, "piped");
    path_in(b, sizeof(b), out_dir, "so");
    text = read_or_exit(a, NULL);
    check(rc == 0 && strstr(text, "\"type\": \"summary\"") != NULL && lstat(b, &sb) == 0 && S_ISLNK(sb.st_mode),
          "--trace a link to /dev/stdout into a pipe: exit %d, the link kept %d, no trace:\n%.300s\n%s", rc,
          lstat(b, &sb) == 0 && S_ISLNK(sb.st_mode), text, e);
    free(text);
    free(e);
    remove(a);
    remove(b);
    static const char *const gens[][2] = {
        {"{\"eos_token_id\": [1, 2, 3, 4, 5]}", "at most 4"}, {"{\"eos_token_id\": 100000}", "not a token id"},
        {"[1]", "not a JSON object"}, {"{\"eos_token_id\": ", "not valid JSON"},
        {"{\"eos_token_id\": 2.5}", "not a token id"}};
    for (int k = 0; k < 5; k++) {
        write_text(d, "generation_config.json", gens[k][0]);
        snprintf(a, sizeof(a), "generation_config.json %s", gens[k][0]);
        run_model_case(a, d, "", "generation_config.json", gens[k][1]);
    }
}

// Each line's text from `from` up to `to` (its timings and device left out), one a line.
static char *json_spans(const char *o, const char *from, const char *to) {
    char *out = (char *)calloc_check(strlen(o) + 1, 1);
    for (const char *a = strstr(o, from), *b; a != NULL && (b = strstr(a, to)) != NULL; a = strstr(b, from)) {
        strncat(out, a, (size_t)(b - a));
        strcat(out, "\n");
    }
    return out;
}

// ---- issue 46: the loaders to the contract. A key given twice is read from its last copy, as
// Python's json reads it (python3 -c 'import json; print(json.loads("{\"a\": 1, \"a\": 2}"))' says
// {'a': 2}); prompts may come from a pipe; nesting is bounded before jsmn, whose time grows with it.
static void loaders_to_the_contract(void) {
    char buf[1024], err[SS_ERR_LEN], *o, *e;
    Config c;
    const char *d = model_copy("twice-config");
    edit_text(d, "config.json", "\"rope_theta\": 10000.0", "\"rope_theta\": 10000.0, \"rope_\\u0074heta\": 500000.0");
    edit_text(d, "config.json", "\"eos_token_id\": 2", "\"eos_token_id\": 2, \"eos_token_id\": [2, 5]");
    n_cases++;
    int rc = read_config(&c, d, err);
    check(rc == 0 && c.rope_theta == 500000.0f && c.n_eos == 2 && c.eos_ids[1] == 5,
          "config.json with rope_theta and eos_token_id twice: theta %g, %d EOS ids, want the last copies (%s)",
          c.rope_theta, c.n_eos, rc ? err : "");
    write_text(tmp, "twice.json", "{\"attn\": [1], \"mlp\": [4], \"\\u0061ttn\": [2, 3]}");
    snprintf(buf, sizeof(buf), "-m %s -n 2 --json --skip-file %s/twice.json", SRC, tmp);
    rc = run_selfspec(tmp, "", buf, &o, &e);
    n_cases++;
    check(rc == 0 && strstr(o, "\"skip\": {\"attn\": [2, 3], \"mlp\": [4]}") != NULL,
          "--skip-file with attn twice: exit %d, want the last list, attn 2 and 3:\n%s%s", rc, o, e);
    free(o);
    free(e);
    { // model.norm.weight given twice in the header: the last entry's bytes (lm_head.weight's first 64 floats)
        Model m, ref;
        d = broken_copy();
        edit_header(d, "{\"__metadata__\"", "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":"
                    "[1469440,1469696]},\"__metadata__\"", 0);
        edit_header(d, "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[1469440,1469696]}}",
                    "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[64],\"data_offsets\":[0,256]}}", 0);
        n_cases++;
        if (check(build_model(&m, d, 8, err) == 0 && build_model(&ref, SRC, 8, err) == 0, "norm twice: %s", err)) {
            check(memcmp(m.weights.rms_final, ref.weights.lm_head, 64 * sizeof(float)) == 0,
                  "model.norm.weight twice in the header: not its last entry's bytes");
            free_model(&m);
            free_model(&ref);
        }
    }
    // -f from a pipe (issue 48: -f /dev/stdin was refused): every line read, as from a file
    write_text(tmp, "two.txt", "In the beginning\nAnd God said\n");
    snprintf(buf, sizeof(buf), "-m %s -n 4 --json -f %s/two.txt", SRC, tmp);
    rc = run_selfspec(tmp, "", buf, &o, &e);
    free(e);
    char *p;
    rc |= shell_case("printf \"In the beginning\\nAnd God said\\n\" | $B -m $M -n 4 --json -f /dev/stdin", &e);
    path_in(buf, sizeof(buf), tmp, "sh-out.txt");
    p = read_or_exit(buf, NULL);
    char *from_file = json_spans(o, "\"text\"", "\"tokens_per_s\""), *from_pipe = json_spans(p, "\"text\"", "\"tokens_per_s\"");
    const char *second = strchr(from_file, '\n');
    check(rc == 0 && second && strchr(second + 1, '\n') && strcmp(from_file, from_pipe) == 0,
          "-f /dev/stdin from a pipe: exit %d, not the two prompts of the file:\n%s\n%s%s", rc, o, p, e);
    free(from_file);
    free(from_pipe);
    free(o);
    free(p);
    free(e);
    { // 2 MB of '[': refused at once (jsmn alone would take hours: its time is length x depth)
        size_t n = 1 << 20;
        char *deep = (char *)malloc_check(2 * n + 16);
        memset(deep, '[', n);
        memset(deep + n, ']', n);
        strcpy(deep + 2 * n, ",");
        memmove(deep + 6, deep, 2 * n + 2);
        memcpy(deep, "{\"x\": ", 6);
        text_case("config.json nested a million deep", "config.json", "{", deep, "config.json", "nested deeper than 64");
        free(deep);
    }
}

static void round_five(void) {
    outputs_in_place();
    generation_config_cases();
    degenerate_numbers();
    pseudo_file_prompts();
    bench_scripts();
    round_five_own();
    loaders_to_the_contract();
}

int main(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/selfspec-bad-XXXXXX");
    if (mkdtemp(tmp) == NULL) { fprintf(stderr, "test_bad_inputs: mkdtemp failed\n"); return 2; }
    char buf[128];
    snprintf(out_dir, sizeof(out_dir), "%s/out", tmp);
    snprintf(out_file, sizeof(out_file), "%s/old.txt", out_dir);
    if (getenv("ROUND5") == NULL) { // ROUND5=1: round five's cases alone
        if (getenv("ROUND4") == NULL) { rounds_one_to_three(); } // ROUND4=1: round four's and five's
        round_four();
    }
    round_five();

    snprintf(buf, sizeof(buf), "rm -rf '%s'", tmp);
    if (system(buf) != 0) { fprintf(stderr, "test_bad_inputs: could not remove %s\n", tmp); }
    printf("test_bad_inputs: %d cases against %s\n", n_cases, selfspec_bin());
    return test_summary("test_bad_inputs");
}
