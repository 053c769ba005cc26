// test_tokenizer.c: the tokenizer section against Hugging Face `tokenizers`.
//
// Every test/refs/<name>/tokens.txt (written by test/make_refs.py) holds per line a UTF-8 string,
// the ids of HF's encode(s, add_special_tokens=True) and the text of HF's
// decode(ids, skip_special_tokens=True). encode must give the same ids, and decode_token, fed the
// ids one at a time, must give the same text. Then robustness: random bytes and invalid UTF-8
// never crash and decode to valid UTF-8, a 10,000-letter word is quick, and damaged or
// unsupported tokenizer.json files fail with one line naming the file.
//
//   make test/test_tokenizer && ./test/test_tokenizer      (from the repository root)
#define TESTING
#include "../selfspec.cu"
#include "testing.h"

#include <dirent.h>

enum { MAX_IDS = 1 << 16, TEXT_CAP = 1 << 18 };

static size_t unhex(const char *h, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) { out[k++] = (char)(hex_value(h[i]) * 16 + hex_value(h[i + 1])); }
    return k;
}

// s as a C string literal, for failure messages
static const char *escaped(const char *s, size_t n) {
    static char buf[600];
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < sizeof(buf); i++) {
        unsigned char c = (unsigned char)s[i];
        int plain = c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, plain ? "%c" : "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

// Decodes ids one token at a time, as a generation loop does, into out (TEXT_CAP bytes).
static size_t decode_stream(const Tokenizer *t, const int *ids, int n, char *out) {
    DecodeState st;
    char piece[256];
    size_t len = 0;
    decode_begin(&st);
    for (int i = 0; i < n; i++) {
        size_t k = decode_token(t, &st, ids[i], piece, sizeof(piece));
        if (len + k < TEXT_CAP) { memcpy(out + len, piece, k); len += k; }
    }
    size_t k = decode_end(t, &st, piece, sizeof(piece));
    if (len + k < TEXT_CAP) { memcpy(out + len, piece, k); len += k; }
    return len;
}

static int valid_utf8(const char *s, size_t n) {
    int cp = 0;
    for (size_t i = 0; i < n && cp >= 0; i += utf8_decode(s, n, i, &cp)) {}
    return cp >= 0;
}

// The HF fixture of one target; returns the tokenizer (NULL if its file is absent or broken).
static Tokenizer *test_fixture(const char *name, int *ids, char *buf, char *text) {
    char path[1200], err[SS_ERR_LEN];
    size_t len, n_lines = 0, enc_bad = 0, dec_bad = 0;
    snprintf(path, sizeof(path), "test/refs/%s/tokens.txt", name);
    char *refs = read_file(path, &len, err);
    if (refs == NULL) { return NULL; } // not a tokenizer target
    snprintf(path, sizeof(path), "test/refs/%s/model.txt", name);
    size_t dir_len;
    char *dir = read_file(path, &dir_len, err);
    if (!check(dir != NULL, "%s", err)) { free(refs); return NULL; }
    while (dir_len > 0 && (dir[dir_len - 1] == '\n' || dir[dir_len - 1] == '\r')) { dir[--dir_len] = '\0'; }
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    free(dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { printf("%s: skipped, %s is not here\n", name, path); free(refs); return NULL; }
    fclose(f);
    Tokenizer *t = build_tokenizer(path, err);
    if (!check(t != NULL, "%s: %s", name, err)) { free(refs); return NULL; }
    snprintf(path, sizeof(path), "test/refs/%s/tokens.txt", name);
    for (char *line = refs; line < refs + len; n_lines++) {
        char *end = strchr(line, '\n'), *tab1 = strchr(line, '\t');
        char *tab2 = tab1 != NULL ? strchr(tab1 + 1, '\t') : NULL;
        if (end == NULL) { end = refs + len; }
        if (!check(tab2 != NULL && tab2 < end, "%s line %zu: not three fields", path, n_lines + 1)) { break; }
        size_t n_in = unhex(line, (size_t)(tab1 - line), buf);
        size_t n_want = unhex(tab2 + 1, (size_t)(end - tab2 - 1), text);
        int want[4096], n_ids = 0;
        for (char *p = tab1 + 1; p < tab2 && n_ids < 4096; n_ids++) { want[n_ids] = (int)strtol(p, &p, 10); }
        int got = encode(t, buf, n_in, 1, ids, MAX_IDS, err), i = 0;
        while (i < got && i < n_ids && ids[i] == want[i]) { i++; }
        enc_bad += !check(got == n_ids && i == n_ids,
                          "%s: encode \"%s\": %d ids (HF %d), first difference at %d: HF %d, ours %d%s%s",
                          name, escaped(buf, n_in), got, n_ids, i, i < n_ids ? want[i] : -1,
                          i < got ? ids[i] : -1, got < 0 ? ": " : "", got < 0 ? err : "");
        size_t n_dec = decode_stream(t, want, n_ids, buf);
        dec_bad += !check(n_dec == n_want && memcmp(buf, text, n_want) == 0, "%s: decode of line %zu: \"%s\"",
                          name, n_lines + 1, escaped(buf, n_dec));
        line = end + 1;
    }
    printf("%s: %zu lines, %zu encode and %zu decode mismatches\n", name, n_lines, enc_bad, dec_bad);
    free(refs);
    return t;
}

// The quadratic merge loop bpe_word had before its heap, as the reference for merge order
// (lowest rank first, leftmost on ties): symbols are w's characters, every one a vocab token.
// Returns the count, or -1 if some character is not in the vocab.
static int bpe_reference(const Tokenizer *t, const char *w, size_t len, int *sym) {
    int n = 0, cp, whole = t->ignore_merges ? vocab_find(t, w, len) : -1;
    if (whole >= 0) { sym[0] = whole; return 1; }
    for (size_t i = 0, cl; i < len; i += cl) {
        cl = utf8_decode(w, len, i, &cp);
        if ((sym[n++] = vocab_find(t, w + i, cl)) < 0) { return -1; }
    }
    for (;;) {
        int best = -1, best_rank = INT_MAX;
        for (int i = 0; i + 1 < n; i++) {
            int r = merge_rank(t, sym[i], sym[i + 1]);
            if (r < best_rank) { best = i, best_rank = r; }
        }
        if (best < 0) { return n; }
        sym[best] = t->merges[merge_slot(t, sym[best], sym[best + 1])].id;
        memmove(sym + best + 1, sym + best + 2, (size_t)(n - best - 2) * sizeof(int));
        n--;
    }
}

// bpe_word's heap gives the reference's tokens on words glued from random vocab texts.
static void test_merge_order(const Tokenizer *t, const char *name, int *ids, char *buf) {
    Rng rng;
    char err[SS_ERR_LEN];
    int *want = (int *)malloc_check(MAX_IDS * sizeof(int)), words = 0, bad = 0;
    rng_seed(&rng, 7);
    for (int k = 0; k < 300; k++) {
        size_t n = 0;
        for (int parts = 1 + (int)(rng_uniform(&rng) * 60), tries = 0; parts > 0 && tries < 10000; tries++) {
            const TokenText *x = &t->tok[(int)(rng_uniform(&rng) * (float)t->vocab_size) % t->vocab_size];
            if (x->text == NULL || n + (size_t)x->len >= 4096 || bpe_reference(t, x->text, (size_t)x->len, want) < 0) {
                continue; // a text with a character outside the vocab (a byte or special token)
            }
            memcpy(buf + n, x->text, (size_t)x->len);
            n += (size_t)x->len, parts--;
        }
        int n_want = bpe_reference(t, buf, n, want);
        if (n == 0 || n_want < 0) { continue; }
        Encoder e;
        memset(&e, 0, sizeof(e));
        e.t = t, e.ids = ids, e.max = MAX_IDS, e.err = err;
        bpe_word(&e, buf, n);
        words++;
        if (e.n != n_want || memcmp(ids, want, (size_t)n_want * sizeof(int)) != 0) {
            int i = 0;
            while (i < e.n && i < n_want && ids[i] == want[i]) { i++; }
            if (bad++ < 3) {
                check(0, "%s: bpe_word on \"%s\": %d tokens, the reference %d; first difference at %d", name,
                      escaped(buf, n), e.n, n_want, i);
            }
        }
    }
    check(words >= 100 && bad == 0, "%s: merge order: %d of %d words differ from the reference", name, bad, words);
    free(want);
}

// This thread's CPU time in ms.
static double thread_cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Random bytes and broken UTF-8 never crash, give ids in range, and decode to valid UTF-8;
// random ids (out of range included) decode to valid UTF-8 too.
static void test_robust(const Tokenizer *t, const char *name, int *ids, char *buf, char *text) {
    static const char *const bits[] = {"\xE4\xBD", "\xA0", "\xF0\x9F\x98", "\xC0\xAF", "\xED\xA0\x80",
                                       "\xFF", "<s>", "</s>", "<|begin_of_text|>", " ", "\n", "'s", "12345",
                                       "\xE2\x96\x81"};
    Rng rng;
    char err[SS_ERR_LEN];
    int bad = 0, vocab = tokenizer_vocab_size(t);
    rng_seed(&rng, 42);
    for (int k = 0; k < 300; k++) {
        size_t n = 0;
        for (int parts = (int)(rng_uniform(&rng) * 12); parts > 0; parts--) {
            const char *b = bits[(int)(rng_uniform(&rng) * 14)];
            if (rng_uniform(&rng) < 0.5f) {
                buf[n++] = (char)(rng_uniform(&rng) * 256);
            } else {
                memcpy(buf + n, b, strlen(b));
                n += strlen(b);
            }
        }
        int got = encode(t, buf, n, k % 2, ids, MAX_IDS, err), ok = got >= 0;
        for (int i = 0; i < got; i++) { ok = ok && ids[i] >= 0 && ids[i] < vocab; }
        for (int i = 0; i < 8; i++) { // and a few random ids, some out of range
            ids[(got > 0 ? got : 0) + i] = (int)(rng_uniform(&rng) * (float)(vocab + 20)) - 10;
        }
        size_t n_dec = decode_stream(t, ids, (got > 0 ? got : 0) + 8, text);
        if (!ok || !valid_utf8(text, n_dec)) {
            bad++;
            check(0, "%s: random input \"%s\": encode %d", name, escaped(buf, n), got);
        }
    }
    check(bad == 0, "%s: %d of 300 random inputs", name, bad);
    // A long word must not be quadratic in its length (BPE is O(n log n) per word): 8 times the
    // bytes cost about 8 times the work (10 with the log), a quadratic merge loop 64 times. The
    // work is this thread's CPU time, so other processes' load does not count; the least of 5
    // runs, the two sizes taken in turn, as the machine's speed may change between runs.
    const char *fills[] = {"a", " ", "ab", "7"};
    for (int f = 0; f < 4; f++) {
        double ms[2] = {1e30, 1e30};
        int got = 0;
        for (int run = 0; run < 10; run++) {
            size_t n = run % 2 ? 16000 : 2000;
            for (size_t i = 0; i < n; i++) { buf[i] = fills[f][i % strlen(fills[f])]; }
            double t0 = thread_cpu_ms();
            got = encode(t, buf, n, 1, ids, MAX_IDS, err);
            ms[run % 2] = fmin(ms[run % 2], thread_cpu_ms() - t0);
        }
        check(got > 0 && ms[1] < 24 * ms[0], "%s: 16,000 x \"%s\" cost %.2f ms, 2,000 x %.2f ms (%d ids)",
              name, fills[f], ms[1], ms[0], got);
    }
    char tiny[4];
    DecodeState st;
    decode_begin(&st);
    check(encode(t, "hello world", 11, 1, ids, 1, err) == -1 && strstr(err, "more than") != NULL,
          "%s: max_ids not enforced", name);
    check(decode_token(t, &st, -1, tiny, 4) == 0 && decode_token(t, &st, vocab, tiny, 4) == 0,
          "%s: out-of-range ids decode to something", name);
    for (int id = 0; id < vocab && id < 2000; id++) { // cap 4 holds one character at most
        size_t k = decode_token(t, &st, id, tiny, sizeof(tiny));
        check(k < sizeof(tiny) && tiny[k] == '\0', "%s: decode_token overflowed cap", name);
    }
}

// text with its first `from` replaced by `to` (unchanged when from is NULL or absent), in a new
// buffer
static char *edited(const char *text, const char *from, const char *to) {
    const char *at = from != NULL ? strstr(text, from) : NULL;
    size_t head = at != NULL ? (size_t)(at - text) : strlen(text), nt = at != NULL ? strlen(to) : 0;
    const char *tail = at != NULL ? at + strlen(from) : "";
    to = at != NULL ? to : ""; // (memcpy of 0 bytes still wants a pointer)
    char *out = (char *)malloc_check(head + nt + strlen(tail) + 1);
    memcpy(out, text, head);
    memcpy(out + head, to, nt);
    strcpy(out + head + nt, tail);
    return out;
}

// Writes text with the first `from` replaced by `to` to a file, and loads it.
static Tokenizer *load_edited(const char *text, const char *from, const char *to, char *err) {
    const char *path = "test/test_tokenizer_tmp.json";
    char *s = edited(text, from, to);
    FILE *f = fopen(path, "wb");
    if (f != NULL) {
        fputs(s, f);
        fclose(f);
    }
    free(s);
    Tokenizer *t = f != NULL ? build_tokenizer(path, err) : NULL;
    remove(path);
    return t;
}

// What neither recipe holds is refused by name (the component, its type, a Sequence's steps);
// truncated or corrupted files never crash the loader.
static const char *const LOADER_FILES[] = {"tiny_models/llama2-tiny-random/tokenizer.json",
                                           "tiny_models/llama3-tiny-random/tokenizer.json",
                                           "tiny_models/tokenizers/metaspace/tokenizer.json",
                                           "tiny_models/tokenizers/gpt2-digits/tokenizer.json"};
enum { N_LOADER_FILES = 4 };

static void test_loader(int *ids, char *text) {
    static const struct { int file; const char *from, *to, *want; } cases[] = { // file: LOADER_FILES
        {0, "\"pre_tokenizer\": null", "\"pre_tokenizer\": {\"type\": \"Whitespace\"}",
         "unsupported pre_tokenizer Whitespace"},
        {0, "\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "unsupported model WordPiece"},
        {0, "\"type\": \"Prepend\"", "\"type\": \"NFKC\"", "unsupported normalizer Sequence[NFKC, Replace]"},
        {0, "\"prepend\": \"\xE2\x96\x81\"", "\"prepend\": \"_\"", "unsupported normalizer Sequence[Prepend, Replace]"},
        {0, "\"type\": \"Fuse\"", "\"type\": \"CTC\"", "unsupported decoder Sequence[Replace, ByteFallback, CTC, Strip]"},
        {0, "\"start\": 1", "\"start\": 2", "unsupported decoder Sequence[Replace, ByteFallback, Fuse, Strip]"},
        {0, "\"decoder\": {", "\"decoder\": null, \"unused\": {", "unsupported decoder null"},
        {0, "\"type\": \"TemplateProcessing\"", "\"type\": \"BertProcessing\"", "unsupported post_processor BertProcessing"},
        {0, "\"dropout\": null", "\"dropout\": 0.1", "unsupported model.dropout"},
        {0, "\"end_of_word_suffix\": null", "\"end_of_word_suffix\": \"</w>\"", "unsupported model.end_of_word_suffix"},
        {0, "\"unk_token\": \"<unk>\"", "\"unk_token\": \"<unq>\"", "model.unk_token is not in the vocab"},
        {0, "\"single_word\": false", "\"single_word\": true", "added_tokens[0]: single_word=true is not supported"},
        {0, "\"rstrip\": false", "\"rstrip\": true", "added_tokens[0]: rstrip=true is not supported"},
        {0, "\"normalized\": false", "\"normalized\": true", // "\u2581<unk>", where the vocab has "<unk>"
         "added_tokens[0]: \"content\", normalized, is not the vocab's text for its id"},
        {1, "\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"", "unsupported pre_tokenizer Sequence[Split, ByteLevel]"},
        {1, "(?i:'s|", "(?i:'S|", "unsupported pre_tokenizer Sequence[Split, ByteLevel]"},
        {1, "\"use_regex\": false\n      }", "\"use_regex\": false}, {\"type\": \"Digits\"}",
         "unsupported pre_tokenizer Sequence[Split, ByteLevel, Digits]"},
        {1, "\"add_prefix_space\": false", "\"add_prefix_space\": true", "unsupported pre_tokenizer Sequence[Split, ByteLevel]"},
        {1, "\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}", "unsupported normalizer NFC"},
        {2, "\"prepend_scheme\": \"first\"", "\"prepend_scheme\": \"never\"", "unsupported pre_tokenizer Metaspace"},
        {2, "\"split\": false", "\"split\": true", "unsupported pre_tokenizer Metaspace"},
        {2, "\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKC\"}", "unsupported normalizer NFKC"},
        {2, "\"decoder\": {", "\"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\"}, \"unused\": {",
         "unsupported decoder Metaspace"},
        {3, "\"use_regex\": true", "\"use_regex\": false", "unsupported pre_tokenizer Sequence[Digits, ByteLevel]"},
    };
    char err[SS_ERR_LEN];
    size_t len;
    char *json[N_LOADER_FILES];
    for (int f = 0; f < N_LOADER_FILES; f++) {
        json[f] = read_file(LOADER_FILES[f], &len, err);
        if (!check(json[f] != NULL, "%s", err)) { return; }
    }
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *base = json[cases[k].file];
        check(strstr(base, cases[k].from) != NULL, "loader case %zu: \"%s\" not in the file", k, cases[k].from);
        Tokenizer *t = load_edited(base, cases[k].from, cases[k].to, err);
        int named = strncmp(err, "test/test_tokenizer_tmp.json: ", 30) == 0; // the error names the file
        check(t == NULL && named && strstr(err, cases[k].want) != NULL,
              "edit %s: expected \"%s\", got \"%s\"", cases[k].to, cases[k].want, t == NULL ? err : "(loaded)");
        free_tokenizer(t);
    }
    Rng rng;
    rng_seed(&rng, 7);
    len = strlen(json[0]);
    for (int k = 0; k < 60; k++) { // cut the file short, or change one byte
        char *copy = (char *)malloc_check(len + 1);
        size_t at = (size_t)(rng_uniform(&rng) * (float)len);
        memcpy(copy, json[0], len + 1);
        if (k % 2 == 0) { copy[at] = '\0'; } else { copy[at] = "{}[]\":,0 \\x"[k % 11]; }
        Tokenizer *t = load_edited(copy, NULL, NULL, err);
        check(k % 2 == 1 || t == NULL, "truncated at %zu but loaded", at);
        if (t != NULL) { decode_stream(t, ids, encode(t, "Hello, world", 12, 1, ids, MAX_IDS, err), text); }
        free_tokenizer(t);
        free(copy);
    }
    for (int f = 0; f < N_LOADER_FILES; f++) { free(json[f]); }
}

// Files the recipes hold beyond the bundled ones, each against the unedited file: truncation and
// padding are not read (transformers turns them off to encode one text); Llama 3's
// post-processor Sequence[ByteLevel, TemplateProcessing] adds BOS as its template alone does; a
// vocab token given twice keeps its last id (Python's json, HF's map); Metaspace's prepend_scheme
// "always" puts a "\u2581" before the text after an added token where "first" does not (the
// transformers documentation of add_tokens).
static void test_recipe_loads(int *ids, int *want) {
    static const struct { int file; const char *from, *to, *from2, *to2, *text; } cases[] = {
        {0, "\"truncation\": null", "\"truncation\": {\"max_length\": 3, \"strategy\": \"LongestFirst\"}",
         "\"padding\": null", "\"padding\": {\"strategy\": {\"Fixed\": 20}, \"pad_id\": 0}", "hello world how are you"},
        {1, "\"post_processor\": {", "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": "
         "\"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, {",
         "  },\n  \"decoder\"", "}]},\n  \"decoder\"", "Hello, world"},
        {0, "\"<unk>\": 0,", "\"a\": 600, \"<unk>\": 0,", NULL, NULL, "a b a"},
        {2, "\"prepend_scheme\": \"first\"", "\"prepend_scheme\": \"always\"", NULL, NULL, "a<s>b"},
    };
    char err[SS_ERR_LEN];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        size_t len, n_text = strlen(cases[k].text);
        char *base = read_file(LOADER_FILES[cases[k].file], &len, err), *once = NULL;
        Tokenizer *t0 = base != NULL ? build_tokenizer(LOADER_FILES[cases[k].file], err) : NULL;
        if (!check(t0 != NULL && strstr(base, cases[k].from) != NULL, "recipe case %zu: %s", k, err)) {
            free(base);
            continue;
        }
        once = edited(base, cases[k].from, cases[k].to);
        check(cases[k].from2 == NULL || strstr(once, cases[k].from2) != NULL, "recipe case %zu: no %s", k, cases[k].from2);
        Tokenizer *t = load_edited(once, cases[k].from2, cases[k].to2, err);
        int n0 = encode(t0, cases[k].text, n_text, 1, want, MAX_IDS, err), n = -1, same = 1;
        if (check(t != NULL, "recipe case %zu (%s) refused: %s", k, cases[k].to, err)) {
            n = encode(t, cases[k].text, n_text, 1, ids, MAX_IDS, err);
        }
        if (k == 3) { // "always": "\u2581b" after <s>, where "first" has "b"
            same = n == n0 && n > 0 && want[n - 1] == vocab_find(t0, "b", 1) &&
                   ids[n - 1] == vocab_find(t, "\xE2\x96\x81" "b", 4);
            n--;
        }
        for (int i = 0; i < n && same; i++) { same = ids[i] == want[i]; }
        check(n >= 0 && (k == 3 || n == n0) && same, "recipe case %zu: \"%s\" encodes to %d ids, %d unedited (first "
              "ids %d %d)", k, cases[k].text, n, n0, n > 0 ? ids[0] : -1, n0 > 0 ? want[0] : -1);
        if (k == 1) { check(n > 0 && ids[0] == 766, "recipe case 1: no BOS"); }
        if (k == 2) { // the first "a" (id 600) lost its text to the second
            char piece[8];
            DecodeState st;
            decode_begin(&st);
            check(tokenizer_vocab_size(t) == 601 && decode_token(t, &st, 600, piece, sizeof(piece)) == 0,
                  "recipe case 2: id 600 kept the text \"a\"");
        }
        free_tokenizer(t);
        free_tokenizer(t0);
        free(once);
        free(base);
    }
}

// Added tokens that share prefixes ("<a", "<ab", "<abc", "<abc" listed twice, "b<"), matched in
// random text: the ids encode() cuts out must be the leftmost-longest matches a scan of every
// token at every position finds (find_added narrows a sorted list instead, issue 21).
static void test_added_prefixes(int *ids) {
    static const char *const added[] = {"<a", "<ab", "<abc", "<abc", "b<"};
    static const int added_id[] = {600, 601, 602, 602, 603};
    char err[SS_ERR_LEN], to[1024], text[64];
    size_t len;
    char *json = read_file("tiny_models/llama2-tiny-random/tokenizer.json", &len, err);
    if (!check(json != NULL, "%s", err)) { return; }
    int n = snprintf(to, sizeof(to), "\"added_tokens\": [");
    for (int k = 0; k < 5; k++) {
        n += snprintf(to + n, sizeof(to) - (size_t)n, "{\"id\": %d, \"content\": \"%s\", \"special\": true, "
                      "\"normalized\": false}, ", added_id[k], added[k]);
    }
    Tokenizer *t = load_edited(json, "\"added_tokens\": [", to, err);
    free(json);
    if (!check(t != NULL, "added prefixes: %s", err)) { return; }
    Rng rng;
    rng_seed(&rng, 11);
    int matched = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int tl = 1 + (int)(rng_uniform(&rng) * 20), want[64], n_want = 0, n_got = 0;
        for (int i = 0; i < tl; i++) { text[i] = "<<abcx"[(int)(rng_uniform(&rng) * 6) % 6]; }
        text[tl] = '\0';
        for (int i = 0; i < tl;) { // leftmost-longest, by brute force
            int best = -1;
            for (int k = 0; k < 5; k++) {
                int al = (int)strlen(added[k]);
                if (al <= tl - i && memcmp(text + i, added[k], (size_t)al) == 0 &&
                    (best < 0 || al > (int)strlen(added[best]))) {
                    best = k;
                }
            }
            if (best >= 0) { want[n_want++] = added_id[best]; i += (int)strlen(added[best]); } else { i++; }
        }
        int n_ids = encode(t, text, (size_t)tl, 0, ids, MAX_IDS, err), same = n_ids >= 0;
        for (int k = 0; same && k < n_ids; k++) {
            if (ids[k] >= 600) { same = n_got < n_want && ids[k] == want[n_got++]; }
        }
        matched += n_want;
        if (!check(same && n_got == n_want, "added prefixes: \"%s\" cut out other added tokens than "
                   "leftmost-longest (%d of %d)", text, n_got, n_want)) {
            break;
        }
    }
    check(matched > 1000, "added prefixes: only %d matches in the random texts", matched);
    free_tokenizer(t);
}

// A character left incomplete at the end of the output decodes as HF's decode does (tokenizers
// 0.23.3): "a" then the bytes of an unfinished character give U+FFFD once per byte with byte
// fallback, once for a byte-level decoder; the same bytes before "a" are the mid-stream control.
static void test_incomplete_end(void) {
    static const struct { const char *bytes, *fallback, *byte_level; int a_first; } cases[] = {
        {"\xE4", "a\xEF\xBF\xBD", "a\xEF\xBF\xBD", 1},
        {"\xE4\xBD", "a\xEF\xBF\xBD\xEF\xBF\xBD", "a\xEF\xBF\xBD", 1},
        {"\xF0\x9F\x98", "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", "a\xEF\xBF\xBD", 1},
        {"\xE4\xBD", "\xEF\xBF\xBD\xEF\xBF\xBD a", "\xEF\xBF\xBD" "a", 0},
    };
    const char *files[] = {"tiny_models/llama2-tiny-random/tokenizer.json",
                           "tiny_models/llama3-tiny-random/tokenizer.json"};
    for (int f = 0; f < 2; f++) {
        char err[SS_ERR_LEN], text[64];
        Tokenizer *t = build_tokenizer(files[f], err);
        if (!check(t != NULL, "%s: %s", files[f], err)) { continue; }
        int a, n_a = encode(t, "a", 1, 0, &a, 1, err);
        for (int k = 0; k < 4; k++) {
            int ids[8], n = 0;
            if (cases[k].a_first) { ids[n++] = a; }
            for (const char *b = cases[k].bytes; *b; b++) {
                unsigned char c = (unsigned char)*b;
                char name[8];
                size_t len = 0;
                if (f == 0) { len = (size_t)snprintf(name, sizeof(name), "<0x%02X>", c); }
                if (f == 1) { put_utf8((unsigned int)t->byte_char[c], name, &len); }
                ids[n++] = vocab_find(t, name, len);
            }
            if (!cases[k].a_first) { ids[n++] = a; }
            const char *want = f == 0 ? cases[k].fallback : cases[k].byte_level;
            size_t got = decode_stream(t, ids, n, text);
            check(n_a == 1 && ids[0] >= 0 && ids[n - 2] >= 0 && got == strlen(want) && memcmp(text, want, got) == 0,
                  "%s: ids %d %d ... decode to \"%s\", HF gives \"%s\"", files[f], ids[0], ids[1],
                  escaped(text, got), want);
        }
        free_tokenizer(t);
    }
}

int main(void) {
    int *ids = (int *)malloc_check(MAX_IDS * sizeof(int));
    char *buf = (char *)malloc_check(TEXT_CAP), *text = (char *)malloc_check(TEXT_CAP);
    DIR *refs = opendir("test/refs");
    if (!check(refs != NULL, "test/refs not found: run from the repository root")) {
        return test_summary("test_tokenizer");
    }
    for (struct dirent *d = readdir(refs); d != NULL; d = readdir(refs)) {
        if (d->d_name[0] == '.') { continue; }
        Tokenizer *t = test_fixture(d->d_name, ids, buf, text);
        if (t != NULL) { test_robust(t, d->d_name, ids, buf, text); }
        if (t != NULL) { test_merge_order(t, d->d_name, ids, buf); }
        free_tokenizer(t);
    }
    closedir(refs);
    test_loader(ids, text);
    test_recipe_loads(ids, (int *)buf);
    test_added_prefixes(ids);
    test_incomplete_end();
    free(ids);
    free(buf);
    free(text);
    return test_summary("test_tokenizer");
}
