// selfspec: self-speculative decoding for LLaMA models, in one C/CUDA file.
//
// A model drafts tokens with some of its own sublayers skipped, then the full model verifies the
// whole draft in one forward pass. Greedy output is exactly the full model's; sampled output is
// drawn from exactly its distribution. The layer-selection methods of four papers choose what to
// skip: Self-SD (Bayesian optimization), SWIFT (on-the-fly search), ASD (cosine rule) and CLaSp
// (dynamic programming).
//
// Papers (see README.md):
//   Self-SD  Zhang et al., Draft & Verify: Lossless LLM Acceleration via Self-Speculative Decoding
//   SWIFT    Xia et al., SWIFT: On-the-Fly Self-Speculative Decoding
//   ASD      Metel et al., Draft on the Fly: Adaptive Self-Speculative Decoding using Cosine Similarity
//   CLaSp    CLaSp: In-Context Layer Skip for Self-Speculative Decoding
//   Leviathan et al. 2023 / Chen et al. 2023 for speculative sampling.
//
// Non-goals: batching, quantized weights, speed tricks that hurt readability. Kernels are naive:
// one thread per output element or row, no shared memory, no warp functions, no atomics. The
// same kernels run on the CPU through the launch shim below, so the CPU tests check GPU code.
//
// Build and run:
//   make && ./selfspec -p "In the beginning"        (CPU: cc -x c selfspec.cu -fopenmp)
//   make cuda && ./selfspec-cuda -p "..."           (GPU: nvcc selfspec.cu)
//   make test

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define JSMN_STATIC
#define JSMN_STRICT
#define JSMN_PARENT_LINKS
#include <jsmn.h>

#include "selfspec.h"

// ----------------------------------------------------------------------------
// utilities: error reporting, checked allocation, timing

// Formats one error line into err (SS_ERR_LEN bytes) and returns -1, so loaders can write
// `return fail(err, "%s: ...", path)`.
static int fail(char *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, SS_ERR_LEN, fmt, ap);
    va_end(ap);
    return -1;
}

// Fatal errors that are not the user's input (out of memory, CUDA failures) exit here.
static void die(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "selfspec: error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (%s:%d)\n", file, line);
    exit(EXIT_FAILURE);
}

static void *malloc_check_(size_t size, const char *file, int line) {
    void *p = malloc(size > 0 ? size : 1);
    if (p == NULL) {
        die(file, line, "out of host memory allocating %zu bytes; try a smaller model or -c", size);
    }
    return p;
}
#define malloc_check(size) malloc_check_((size), __FILE__, __LINE__)

static void *calloc_check_(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n > 0 ? n : 1, size > 0 ? size : 1);
    if (p == NULL) {
        die(file, line, "out of host memory allocating %zu x %zu bytes", n, size);
    }
    return p;
}
#define calloc_check(n, size) calloc_check_((n), (size), __FILE__, __LINE__)

// a * b for sizes, or SIZE_MAX when it overflows (the llama2.c 13B int-overflow lesson)
static size_t mul_size(size_t a, size_t b) {
    if (a != 0 && b > SIZE_MAX / a) { return SIZE_MAX; }
    return a * b;
}

static double time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Reads a whole file into a NUL-terminated buffer. Returns NULL with err set.
static char *read_file(const char *path, size_t *len_out, char *err) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        fail(err, "%s: cannot seek (not a regular file?)", path);
        return NULL;
    }
    long size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        fail(err, "%s: cannot determine the file size", path);
        return NULL;
    }
    char *buf = (char *)malloc_check((size_t)size + 1);
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        fail(err, "%s: read %zu of %ld bytes", path, got, size);
        return NULL;
    }
    buf[size] = '\0';
    *len_out = (size_t)size;
    return buf;
}

// ----------------------------------------------------------------------------
// the launch shim: one kernel source, two builds
//
// nvcc: kernels launch with <<<grid, block>>> and every CUDA call is checked.
// C compiler: blockIdx/threadIdx are thread-local variables and LAUNCH runs the grid as a host
// loop, OpenMP over blocks. That is exact because no kernel uses shared memory, __syncthreads,
// warp functions or atomics, and no thread reads what another thread of the same launch writes.
// The block size never changes a result (kernels only use the flat index), so each build picks
// its own. launch_reverse runs blocks and threads in reverse order: the tests use it to show that
// no kernel depends on execution order.

#ifdef __CUDACC__
enum { BLOCK_SIZE = 128 };

#define cuda_check(call) cuda_check_((call), #call, __FILE__, __LINE__)
static void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) { die(file, line, "CUDA: %s failed: %s", what, cudaGetErrorString(e)); }
}

#define LAUNCH(kernel, n_threads, ...)                                                      \
    do {                                                                                    \
        int n_ = (n_threads);                                                               \
        if (n_ > 0) {                                                                       \
            kernel<<<(n_ + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(__VA_ARGS__);        \
            cuda_check(cudaGetLastError());                                                 \
        }                                                                                   \
    } while (0)

static void *device_malloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) {
        die(__FILE__, __LINE__, "out of GPU memory allocating %zu bytes: %s", bytes, cudaGetErrorString(e));
    }
    return p;
}
static void device_free(void *p) { cuda_check(cudaFree(p)); }
static void copy_to_device(void *dst, const void *src, size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void copy_to_host(void *dst, const void *src, size_t bytes) {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static const char *device_name(void) {
    static char name[300];
    cudaDeviceProp prop;
    cuda_check(cudaGetDeviceProperties(&prop, 0));
    snprintf(name, sizeof(name), "GPU: %s", prop.name);
    return name;
}
#else
enum { BLOCK_SIZE = 16 };
#define __global__ static
#define __device__ static inline
#ifdef __cplusplus
#define THREAD_LOCAL thread_local
#else
#define THREAD_LOCAL _Thread_local
#endif
typedef struct { int x; } GridIndex;
static THREAD_LOCAL GridIndex blockIdx, threadIdx;
static GridIndex blockDim = {BLOCK_SIZE};
static int launch_reverse; // 1: run blocks and threads in reverse order (tests)

#define LAUNCH(kernel, n_threads, ...)                                                      \
    do {                                                                                    \
        int grid_ = ((n_threads) + BLOCK_SIZE - 1) / BLOCK_SIZE;                            \
        _Pragma("omp parallel for schedule(static) if (grid_ > 1)")                         \
        for (int b_ = 0; b_ < grid_; b_++) {                                                \
            blockIdx.x = launch_reverse ? grid_ - 1 - b_ : b_;                              \
            for (int t_ = 0; t_ < BLOCK_SIZE; t_++) {                                       \
                threadIdx.x = launch_reverse ? BLOCK_SIZE - 1 - t_ : t_;                    \
                kernel(__VA_ARGS__);                                                        \
            }                                                                               \
        }                                                                                   \
    } while (0)

static void *device_malloc(size_t bytes) { return malloc_check(bytes); }
static void device_free(void *p) { free(p); }
static void copy_to_device(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void copy_to_host(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static const char *device_name(void) {
#ifdef _OPENMP
    static char name[64];
    snprintf(name, sizeof(name), "CPU: %d OpenMP threads", omp_get_max_threads());
    return name;
#else
    return "CPU: 1 thread";
#endif
}
#endif

// ----------------------------------------------------------------------------
// JSON: jsmn tokens over a buffer, and the few look-ups the loaders need

typedef struct {
    const char *js;  // the text (not owned)
    jsmntok_t *tok;  // (n_tok) tokens in document order
    int n_tok;
} Json;

enum { JSON_MAX_DEPTH = 64 };

static void json_free(Json *j) {
    free(j->tok);
    j->tok = NULL;
}

// Index of the token after the whole value at i (iterative: children counts, no recursion).
static int json_skip(const Json *j, int i) {
    int pending = 1;
    while (pending > 0 && i < j->n_tok) {
        pending += j->tok[i].size - 1;
        i++;
    }
    return i;
}


// Parses js; rejects nesting deeper than JSON_MAX_DEPTH so no later walk can blow up.
static int json_parse(Json *j, const char *js, size_t len, const char *what, char *err) {
    j->js = js;
    j->tok = NULL;
    j->n_tok = 0;
    if (len >= (size_t)INT_MAX) { return fail(err, "%s: JSON too large (%zu bytes)", what, len); }
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = js[i];
        if (in_string) {
            if (c == '\\') { i++; } else if (c == '"') { in_string = 0; }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_MAX_DEPTH) {
                return fail(err, "%s: JSON nested deeper than %d levels", what, JSON_MAX_DEPTH);
            }
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    jsmn_parser p;
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, len, NULL, 0);
    if (n <= 0) { return fail(err, "%s: not valid JSON (jsmn error %d)", what, n); }
    j->tok = (jsmntok_t *)malloc_check(mul_size((size_t)n, sizeof(jsmntok_t)));
    jsmn_init(&p);
    j->n_tok = jsmn_parse(&p, js, len, j->tok, (unsigned int)n);
    if (j->n_tok != n) {
        free(j->tok);
        j->tok = NULL;
        return fail(err, "%s: not valid JSON", what);
    }
    // jsmn accepts several top-level values; a checkpoint file holds exactly one
    if (json_skip(j, 0) != n) {
        json_free(j);
        return fail(err, "%s: trailing data after the JSON value", what);
    }
    return 0;
}

static int json_eq(const Json *j, int i, const char *s) {
    const jsmntok_t *t = &j->tok[i];
    size_t n = strlen(s);
    return t->type == JSMN_STRING && (size_t)(t->end - t->start) == n &&
           memcmp(j->js + t->start, s, n) == 0;
}

// Value token of key in the object at obj, or -1. A key given twice is an error (-2), since
// JSON parsers disagree on which copy wins.
static int json_get(const Json *j, int obj, const char *key) {
    if (obj < 0 || j->tok[obj].type != JSMN_OBJECT) { return -1; }
    int found = -1, i = obj + 1;
    for (int k = 0; k < j->tok[obj].size; k++) {
        if (json_eq(j, i, key)) {
            if (found >= 0) { return -2; }
            found = i + 1;
        }
        i = json_skip(j, i + 1);
    }
    return found;
}

// i-th element of the array at arr, or -1.
static int json_at(const Json *j, int arr, int index) {
    if (arr < 0 || j->tok[arr].type != JSMN_ARRAY || index < 0 || index >= j->tok[arr].size) {
        return -1;
    }
    int i = arr + 1;
    for (int k = 0; k < index; k++) { i = json_skip(j, i); }
    return i;
}

static int json_is_null(const Json *j, int i) {
    return i < 0 || (j->tok[i].type == JSMN_PRIMITIVE && j->js[j->tok[i].start] == 'n');
}

// Number at token i into *out; 0 if it is a JSON number, -1 otherwise.
static int json_number(const Json *j, int i, double *out) {
    if (i < 0 || j->tok[i].type != JSMN_PRIMITIVE) { return -1; }
    const char *s = j->js + j->tok[i].start;
    if (!(*s == '-' || (*s >= '0' && *s <= '9'))) { return -1; }
    char buf[64];
    int n = j->tok[i].end - j->tok[i].start;
    if (n <= 0 || n >= (int)sizeof(buf)) { return -1; }
    memcpy(buf, s, (size_t)n);
    buf[n] = '\0';
    char *end = NULL;
    *out = strtod(buf, &end);
    return (end == buf + n && isfinite(*out)) ? 0 : -1;
}

// Integer at token i that fits in [lo, hi]; 0 on success.
static int json_int(const Json *j, int i, long long lo, long long hi, long long *out) {
    double d;
    if (json_number(j, i, &d) != 0 || d != floor(d) || d < (double)lo || d > (double)hi) {
        return -1;
    }
    *out = (long long)d;
    return 0;
}

static int json_bool(const Json *j, int i, int *out) {
    if (i < 0 || j->tok[i].type != JSMN_PRIMITIVE) { return -1; }
    char c = j->js[j->tok[i].start];
    if (c != 't' && c != 'f') { return -1; }
    *out = (c == 't');
    return 0;
}

static void put_utf8(unsigned int cp, char *out, size_t *n) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') { return c - '0'; }
    if (c >= 'a' && c <= 'f') { return c - 'a' + 10; }
    if (c >= 'A' && c <= 'F') { return c - 'A' + 10; }
    return -1;
}

// Unescapes the JSON string at token i into a new NUL-terminated UTF-8 buffer (*len bytes,
// which may contain NUL from \u0000). Returns NULL if i is not a string or an escape is bad.
static char *json_string(const Json *j, int i, size_t *len) {
    if (i < 0 || j->tok[i].type != JSMN_STRING) { return NULL; }
    const char *s = j->js + j->tok[i].start;
    size_t n = (size_t)(j->tok[i].end - j->tok[i].start), o = 0;
    char *out = (char *)malloc_check(n + 1); // unescaping never grows the text
    for (size_t k = 0; k < n; k++) {
        if (s[k] != '\\') { out[o++] = s[k]; continue; }
        if (++k >= n) { free(out); return NULL; }
        char e = s[k];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple != NULL) {
            out[o++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            continue;
        }
        if (e != 'u' || k + 4 >= n) { free(out); return NULL; }
        unsigned int cp = 0;
        for (int h = 1; h <= 4; h++) {
            int v = hex_value(s[k + h]);
            if (v < 0) { free(out); return NULL; }
            cp = cp * 16 + (unsigned int)v;
        }
        k += 4;
        if (cp >= 0xD800 && cp < 0xDC00) { // a high surrogate must pair with a low one
            unsigned int lo = 0;
            if (k + 6 >= n || s[k + 1] != '\\' || s[k + 2] != 'u') { free(out); return NULL; }
            for (int h = 3; h <= 6; h++) {
                int v = hex_value(s[k + h]);
                if (v < 0) { free(out); return NULL; }
                lo = lo * 16 + (unsigned int)v;
            }
            if (lo < 0xDC00 || lo > 0xDFFF) { free(out); return NULL; }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            k += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            free(out);
            return NULL;
        }
        put_utf8(cp, out, &o);
    }
    out[o] = '\0';
    *len = o;
    return out;
}

// ----------------------------------------------------------------------------
// config: config.json of a Hugging Face LlamaForCausalLM

// Reads an optional positive int key; *out keeps its default when the key is absent or null.
static int config_int(const Json *j, const char *key, int required, int *out, const char *path,
                      char *err) {
    int i = json_get(j, 0, key);
    if (i == -2) { return fail(err, "%s: key \"%s\" appears twice", path, key); }
    if (json_is_null(j, i)) {
        return required ? fail(err, "%s: missing \"%s\"", path, key) : 0;
    }
    long long v;
    if (json_int(j, i, 1, 1 << 24, &v) != 0) {
        return fail(err, "%s: \"%s\" must be an integer in [1, %d]", path, key, 1 << 24);
    }
    *out = (int)v;
    return 0;
}

static int config_float(const Json *j, int obj, const char *key, float *out, const char *path,
                        char *err) {
    int i = json_get(j, obj, key);
    if (json_is_null(j, i)) { return 0; }
    double v;
    if (json_number(j, i, &v) != 0 || !(v > 0)) {
        return fail(err, "%s: \"%s\" must be a positive number", path, key);
    }
    *out = (float)v;
    return 0;
}

// A bias or non-SiLU activation would change the math; refuse rather than compute garbage.
static int config_check_unsupported(const Json *j, const char *path, char *err) {
    int arch = json_get(j, 0, "architectures");
    if (!json_is_null(j, arch)) {
        int ok = 0;
        for (int k = 0; k < (j->tok[arch].type == JSMN_ARRAY ? j->tok[arch].size : 0); k++) {
            ok |= json_eq(j, json_at(j, arch, k), "LlamaForCausalLM");
        }
        if (!ok) { return fail(err, "%s: architectures is not [\"LlamaForCausalLM\"]; only LLaMA models are supported", path); }
    } else if (!json_eq(j, json_get(j, 0, "model_type"), "llama")) {
        return fail(err, "%s: neither architectures nor model_type says LLaMA", path);
    }
    int act = json_get(j, 0, "hidden_act");
    if (!json_is_null(j, act) && !json_eq(j, act, "silu")) {
        return fail(err, "%s: hidden_act must be \"silu\"", path);
    }
    const char *biases[] = {"attention_bias", "mlp_bias"};
    for (int k = 0; k < 2; k++) {
        int b = 0, i = json_get(j, 0, biases[k]);
        if (!json_is_null(j, i) && (json_bool(j, i, &b) != 0 || b)) {
            return fail(err, "%s: %s=true is not supported", path, biases[k]);
        }
    }
    return 0;
}

// rope_scaling: null, or {"rope_type": "llama3", ...} (Llama 3.1/3.2). Others are refused.
static int config_rope_scaling(Config *c, const Json *j, const char *path, char *err) {
    int rs = json_get(j, 0, "rope_scaling");
    if (json_is_null(j, rs)) { return 0; }
    int type = json_get(j, rs, "rope_type");
    if (type < 0) { type = json_get(j, rs, "type"); }
    if (json_eq(j, type, "default")) { return 0; }
    if (!json_eq(j, type, "llama3")) {
        return fail(err, "%s: rope_scaling type is not supported (only \"llama3\")", path);
    }
    c->rope_llama3 = 1;
    c->rope_factor = c->rope_low_freq = c->rope_high_freq = 0;
    long long orig = 0;
    if (config_float(j, rs, "factor", &c->rope_factor, path, err) ||
        config_float(j, rs, "low_freq_factor", &c->rope_low_freq, path, err) ||
        config_float(j, rs, "high_freq_factor", &c->rope_high_freq, path, err)) {
        return -1;
    }
    if (json_int(j, json_get(j, rs, "original_max_position_embeddings"), 1, 1 << 24, &orig) ||
        c->rope_factor <= 0 || c->rope_low_freq <= 0 || c->rope_high_freq <= c->rope_low_freq) {
        return fail(err, "%s: rope_scaling llama3 needs factor, low_freq_factor < high_freq_factor "
                    "and original_max_position_embeddings", path);
    }
    c->rope_orig_max = (int)orig;
    return 0;
}

static int config_token_ids(Config *c, const Json *j, const char *path, char *err) {
    long long v;
    int bos = json_get(j, 0, "bos_token_id"), eos = json_get(j, 0, "eos_token_id");
    c->bos_id = -1;
    c->n_eos = 0;
    if (!json_is_null(j, bos)) {
        if (json_int(j, bos, 0, c->vocab_size - 1, &v)) {
            return fail(err, "%s: bos_token_id is not a token id below vocab_size", path);
        }
        c->bos_id = (int)v;
    }
    if (json_is_null(j, eos)) { return 0; }
    int is_list = j->tok[eos].type == JSMN_ARRAY;
    int n = is_list ? j->tok[eos].size : 1;
    for (int k = 0; k < n && k < SS_MAX_EOS; k++) {
        if (json_int(j, is_list ? json_at(j, eos, k) : eos, 0, c->vocab_size - 1, &v)) {
            return fail(err, "%s: eos_token_id is not a token id below vocab_size", path);
        }
        c->eos_ids[c->n_eos++] = (int)v;
    }
    return 0;
}

static int read_config(Config *c, const char *dir, char *err) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    size_t len;
    char *text = read_file(path, &len, err);
    if (text == NULL) { return -1; }
    Json j;
    int rc = json_parse(&j, text, len, path, err);
    if (rc == 0 && j.tok[0].type != JSMN_OBJECT) { rc = fail(err, "%s: not a JSON object", path); }
    memset(c, 0, sizeof(*c));
    c->rope_theta = 10000.0f; // LlamaConfig defaults
    c->norm_eps = 1e-6f;
    c->head_dim = 0;
    if (rc == 0) {
        rc = config_check_unsupported(&j, path, err);
    }
    if (rc == 0) {
        rc = config_int(&j, "hidden_size", 1, &c->dim, path, err) ||
             config_int(&j, "intermediate_size", 1, &c->hidden_dim, path, err) ||
             config_int(&j, "num_hidden_layers", 1, &c->n_layers, path, err) ||
             config_int(&j, "num_attention_heads", 1, &c->n_heads, path, err) ||
             config_int(&j, "vocab_size", 1, &c->vocab_size, path, err) ||
             config_int(&j, "max_position_embeddings", 1, &c->max_pos, path, err) ? -1 : 0;
    }
    if (rc == 0) {
        c->n_kv_heads = c->n_heads;
        c->head_dim = c->dim / c->n_heads;
        rc = config_int(&j, "num_key_value_heads", 0, &c->n_kv_heads, path, err) ||
             config_int(&j, "head_dim", 0, &c->head_dim, path, err) ||
             config_float(&j, 0, "rope_theta", &c->rope_theta, path, err) ||
             config_float(&j, 0, "rms_norm_eps", &c->norm_eps, path, err) ||
             config_rope_scaling(c, &j, path, err) || config_token_ids(c, &j, path, err) ? -1 : 0;
    }
    if (rc == 0) {
        int tie = json_get(&j, 0, "tie_word_embeddings");
        if (!json_is_null(&j, tie) && json_bool(&j, tie, &c->tied) != 0) {
            rc = fail(err, "%s: tie_word_embeddings must be true or false", path);
        }
    }
    if (rc == 0 && c->n_layers > SS_MAX_LAYERS) {
        rc = fail(err, "%s: num_hidden_layers %d exceeds the supported %d", path, c->n_layers, SS_MAX_LAYERS);
    } else if (rc == 0 && c->n_heads % c->n_kv_heads != 0) {
        rc = fail(err, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                  c->n_heads, c->n_kv_heads);
    } else if (rc == 0 && (c->head_dim % 2 != 0 || c->head_dim < 2)) {
        rc = fail(err, "%s: head_dim %d must be even (RoPE rotates pairs)", path, c->head_dim);
    }
    json_free(&j);
    free(text);
    return rc;
}

// ----------------------------------------------------------------------------
// weights: model.safetensors (or sharded), F32/F16/BF16 converted to fp32 at load

enum { DTYPE_F32, DTYPE_F16, DTYPE_BF16 };

typedef struct {
    char *name;     // owned
    int dtype;
    int n_dim;
    size_t shape[4];
    size_t begin;   // byte range within the file's data section
    size_t end;
    int file;       // index into the shard list
} TensorInfo;

typedef struct {
    char path[1100];
    char *bytes;       // the whole file
    size_t size;
    size_t data_start; // 8 + header length
} Shard;

typedef struct {
    Shard *shards;
    int n_shards;
    TensorInfo *tensors;
    int n_tensors;
} TensorFiles;

static int compare_by_begin(const void *a, const void *b) {
    const TensorInfo *x = *(const TensorInfo *const *)a, *y = *(const TensorInfo *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

// Parses one tensor entry of a safetensors header and checks its dtype, shape and byte range.
static int parse_tensor_entry(const Json *j, int key, const Shard *sh, TensorInfo *t, char *err) {
    size_t name_len;
    t->name = json_string(j, key, &name_len);
    if (t->name == NULL) { return fail(err, "%s: bad tensor name in header", sh->path); }
    int v = key + 1, dt = json_get(j, v, "dtype"), shp = json_get(j, v, "shape");
    int off = json_get(j, v, "data_offsets");
    if (dt < 0 || shp < 0 || off < 0 || j->tok[shp].type != JSMN_ARRAY ||
        j->tok[off].type != JSMN_ARRAY || j->tok[off].size != 2) {
        return fail(err, "%s: tensor %s: needs dtype, shape and two data_offsets", sh->path, t->name);
    }
    size_t esize;
    if (json_eq(j, dt, "F32")) { t->dtype = DTYPE_F32; esize = 4; }
    else if (json_eq(j, dt, "F16")) { t->dtype = DTYPE_F16; esize = 2; }
    else if (json_eq(j, dt, "BF16")) { t->dtype = DTYPE_BF16; esize = 2; }
    else {
        return fail(err, "%s: tensor %s: unsupported dtype %.*s (F32, F16, BF16 only)", sh->path,
                    t->name, j->tok[dt].end - j->tok[dt].start, j->js + j->tok[dt].start);
    }
    t->n_dim = j->tok[shp].size;
    if (t->n_dim > 4) { return fail(err, "%s: tensor %s: more than 4 dimensions", sh->path, t->name); }
    size_t numel = 1;
    for (int d = 0; d < t->n_dim; d++) {
        long long s;
        if (json_int(j, json_at(j, shp, d), 0, LLONG_MAX / 2, &s)) {
            return fail(err, "%s: tensor %s: bad shape", sh->path, t->name);
        }
        t->shape[d] = (size_t)s;
        numel = mul_size(numel, t->shape[d]);
    }
    long long b, e;
    if (json_int(j, json_at(j, off, 0), 0, LLONG_MAX / 2, &b) ||
        json_int(j, json_at(j, off, 1), 0, LLONG_MAX / 2, &e) || b > e) {
        return fail(err, "%s: tensor %s: bad data_offsets", sh->path, t->name);
    }
    t->begin = (size_t)b;
    t->end = (size_t)e;
    if (t->end > sh->size - sh->data_start) {
        return fail(err, "%s: tensor %s: data_offsets run past the end of the file", sh->path, t->name);
    }
    if (mul_size(numel, esize) != t->end - t->begin) {
        return fail(err, "%s: tensor %s: data_offsets span %zu bytes but the shape needs %zu",
                    sh->path, t->name, t->end - t->begin, mul_size(numel, esize));
    }
    return 0;
}

// Reads one .safetensors file and appends its tensors to tf: an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, then the raw data.
static int load_shard(TensorFiles *tf, const char *path, char *err) {
    Shard *sh = &tf->shards[tf->n_shards];
    snprintf(sh->path, sizeof(sh->path), "%s", path);
    sh->bytes = read_file(path, &sh->size, err);
    if (sh->bytes == NULL) { return -1; }
    tf->n_shards++;
    if (sh->size < 8) { return fail(err, "%s: truncated: %zu bytes, no header", path, sh->size); }
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) { n = (n << 8) | (unsigned char)sh->bytes[k]; }
    if (n == 0 || n > sh->size - 8) {
        return fail(err, "%s: header length %llu is zero or runs past the end of the file (%zu bytes)",
                    path, (unsigned long long)n, sh->size);
    }
    sh->data_start = 8 + (size_t)n;
    Json j;
    if (json_parse(&j, sh->bytes + 8, (size_t)n, path, err)) { return -1; }
    int rc = j.tok[0].type == JSMN_OBJECT ? 0 : fail(err, "%s: header is not a JSON object", path);
    int n_entries = rc == 0 ? j.tok[0].size : 0, first = tf->n_tensors;
    tf->tensors = (TensorInfo *)realloc(tf->tensors, (size_t)(tf->n_tensors + n_entries + 1) * sizeof(TensorInfo));
    if (tf->tensors == NULL) { die(__FILE__, __LINE__, "out of memory for the tensor table"); }
    for (int k = 0, key = 1; rc == 0 && k < n_entries; k++, key = json_skip(&j, key + 1)) {
        if (json_eq(&j, key, "__metadata__")) { continue; }
        TensorInfo *t = &tf->tensors[tf->n_tensors++];
        memset(t, 0, sizeof(*t));
        t->file = tf->n_shards - 1;
        rc = parse_tensor_entry(&j, key, sh, t, err);
    }
    json_free(&j);
    if (rc != 0) { return rc; }
    // byte ranges must not overlap: sort this file's tensors by start and compare neighbours
    int count = tf->n_tensors - first;
    TensorInfo **order = (TensorInfo **)malloc_check((size_t)(count + 1) * sizeof(TensorInfo *));
    for (int k = 0; k < count; k++) { order[k] = &tf->tensors[first + k]; }
    qsort(order, (size_t)count, sizeof(TensorInfo *), compare_by_begin);
    for (int k = 1; k < count && rc == 0; k++) {
        if (order[k]->begin < order[k - 1]->end) {
            rc = fail(err, "%s: tensors %s and %s overlap in the file", path, order[k - 1]->name, order[k]->name);
        }
    }
    free(order);
    return rc;
}

static void free_tensor_files(TensorFiles *tf) {
    for (int k = 0; k < tf->n_shards; k++) { free(tf->shards[k].bytes); }
    for (int k = 0; k < tf->n_tensors; k++) { free(tf->tensors[k].name); }
    free(tf->shards);
    free(tf->tensors);
    memset(tf, 0, sizeof(*tf));
}

// Opens model.safetensors, or every shard named by model.safetensors.index.json.
static int open_tensor_files(TensorFiles *tf, const char *dir, char *err) {
    memset(tf, 0, sizeof(*tf));
    char path[1100];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    FILE *single = fopen(path, "rb");
    if (single != NULL) {
        fclose(single);
        tf->shards = (Shard *)calloc_check(1, sizeof(Shard));
        return load_shard(tf, path, err);
    }
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    size_t len;
    char *text = read_file(path, &len, err);
    if (text == NULL) {
        return fail(err, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    Json j;
    int rc = json_parse(&j, text, len, path, err);
    int map = rc == 0 ? json_get(&j, 0, "weight_map") : -1;
    if (rc == 0 && (map < 0 || j.tok[map].type != JSMN_OBJECT)) {
        rc = fail(err, "%s: no weight_map object", path);
    }
    int n = rc == 0 ? j.tok[map].size : 0;
    tf->shards = (Shard *)calloc_check((size_t)n + 1, sizeof(Shard));
    char **names = (char **)calloc_check((size_t)n + 1, sizeof(char *));
    int n_names = 0;
    for (int k = 0, key = map + 1; rc == 0 && k < n; k++, key = json_skip(&j, key + 1)) {
        size_t flen;
        char *file = json_string(&j, key + 1, &flen);
        if (file == NULL || flen == 0 || strlen(file) != flen || strchr(file, '/') != NULL) {
            free(file);
            rc = fail(err, "%s: weight_map entry %d is not a plain file name", path, k);
            break;
        }
        int seen = 0;
        for (int s = 0; s < n_names; s++) { seen |= strcmp(names[s], file) == 0; }
        if (seen) { free(file); continue; }
        names[n_names++] = file;
        char shard_path[1100];
        snprintf(shard_path, sizeof(shard_path), "%s/%s", dir, file);
        rc = load_shard(tf, shard_path, err);
    }
    for (int s = 0; s < n_names; s++) { free(names[s]); }
    free(names);
    json_free(&j);
    free(text);
    return rc;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);     // inf or nan
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13); // normal: rebias 15 -> 127
    } else if (man == 0) {
        bits = sign;                                      // signed zero
    } else {                                              // subnormal: normalize the mantissa
        int e = -1;
        do { man <<= 1; e++; } while ((man & 0x400) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Finds tensor name, checks its shape, converts it to fp32 into dst. Little-endian host assumed.
static int load_tensor(const TensorFiles *tf, const char *name, size_t rows, size_t cols, float *dst,
                       char *err) {
    const TensorInfo *t = NULL;
    for (int k = 0; k < tf->n_tensors; k++) {
        if (strcmp(tf->tensors[k].name, name) != 0) { continue; }
        if (t != NULL) { return fail(err, "%s: tensor %s appears twice", tf->shards[tf->tensors[k].file].path, name); }
        t = &tf->tensors[k];
    }
    if (t == NULL) { return fail(err, "%s: missing tensor %s", tf->shards[0].path, name); }
    const Shard *sh = &tf->shards[t->file];
    int want_dims = cols == 0 ? 1 : 2;
    if (t->n_dim != want_dims || t->shape[0] != rows || (cols != 0 && t->shape[1] != cols)) {
        return fail(err, "%s: tensor %s has shape [%zu%s%zu] but config.json implies [%zu%s%zu]",
                    sh->path, name, t->shape[0], t->n_dim > 1 ? ", " : "", t->n_dim > 1 ? t->shape[1] : (size_t)0,
                    rows, cols ? ", " : "", cols);
    }
    size_t n = cols == 0 ? rows : rows * cols;
    const unsigned char *src = (const unsigned char *)sh->bytes + sh->data_start + t->begin;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == DTYPE_F32) {
            memcpy(&dst[i], src + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            if (t->dtype == DTYPE_F16) {
                dst[i] = half_to_float(h);
            } else {
                uint32_t bits = (uint32_t)h << 16; // bf16 is the top half of an fp32
                memcpy(&dst[i], &bits, 4);
            }
        }
    }
    return 0;
}

static int has_tensor(const TensorFiles *tf, const char *name) {
    for (int k = 0; k < tf->n_tensors; k++) {
        if (strcmp(tf->tensors[k].name, name) == 0) { return 1; }
    }
    return 0;
}

// RoPE inverse frequencies theta^(-2i/d), with Llama 3's rope_scaling: long wavelengths are
// slowed down by factor, short ones kept, and the band between blended smoothly.
static void rope_frequencies(const Config *c, float *inv_freq) {
    for (int i = 0; i < c->head_dim / 2; i++) {
        float f = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        if (c->rope_llama3) {
            double wavelen = 2.0 * M_PI / f;
            double low_wavelen = c->rope_orig_max / c->rope_low_freq;
            double high_wavelen = c->rope_orig_max / c->rope_high_freq;
            if (wavelen > low_wavelen) {
                f = f / c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                float smooth = (float)((c->rope_orig_max / wavelen - c->rope_low_freq) /
                                       (c->rope_high_freq - c->rope_low_freq));
                f = (1.0f - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}

// Carves the Weights pointers out of one buffer; returns the number of floats used. With
// base == NULL it only counts (size_t arithmetic throughout, overflow-checked by the caller).
static size_t layout_weights(Weights *w, float *base, const Config *c) {
    size_t L = (size_t)c->n_layers, dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t off = 0;
    float **slots[] = {&w->token_embedding, &w->rms_att, &w->wq, &w->wk, &w->wv, &w->wo,
                       &w->rms_ffn, &w->w_gate, &w->w_up, &w->w_down, &w->rms_final,
                       &w->lm_head, &w->rope_inv_freq};
    size_t sizes[] = {(size_t)c->vocab_size * dim, L * dim, L * q_dim * dim, L * kv_dim * dim,
                      L * kv_dim * dim, L * dim * q_dim, L * dim, L * hid * dim, L * hid * dim,
                      L * dim * hid, dim, c->tied ? 0 : (size_t)c->vocab_size * dim,
                      (size_t)c->head_dim / 2};
    for (int k = 0; k < 13; k++) {
        *slots[k] = base ? base + off : NULL;
        off += sizes[k];
    }
    if (c->tied) { w->lm_head = w->token_embedding; }
    return off;
}

static int load_weights(Weights *w, const Config *c, const TensorFiles *tf, char *err) {
    size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    if (load_tensor(tf, "model.embed_tokens.weight", (size_t)c->vocab_size, dim, w->token_embedding, err) ||
        load_tensor(tf, "model.norm.weight", dim, 0, w->rms_final, err)) {
        return -1;
    }
    if (!c->tied && load_tensor(tf, "lm_head.weight", (size_t)c->vocab_size, dim, w->lm_head, err)) {
        return -1;
    }
    for (int l = 0; l < c->n_layers; l++) {
        // per layer: (name, rows, cols, destination) in the order of the HF module tree
        const char *names[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                               "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
        size_t rows[] = {dim, q_dim, kv_dim, kv_dim, dim, dim, hid, hid, dim};
        size_t cols[] = {0, dim, dim, dim, q_dim, 0, dim, dim, hid};
        float *dst[] = {w->rms_att + l * dim, w->wq + l * q_dim * dim, w->wk + l * kv_dim * dim,
                        w->wv + l * kv_dim * dim, w->wo + l * dim * q_dim, w->rms_ffn + l * dim,
                        w->w_gate + l * hid * dim, w->w_up + l * hid * dim, w->w_down + l * dim * hid};
        for (int k = 0; k < 9; k++) {
            char name[128];
            snprintf(name, sizeof(name), "model.layers.%d.%s.weight", l, names[k]);
            if (load_tensor(tf, name, rows[k], cols[k], dst[k], err)) { return -1; }
        }
    }
    rope_frequencies(c, w->rope_inv_freq);
    return 0;
}

static void build_run_state(RunState *s, const Config *c, int max_tokens);

int build_model(Model *m, const char *dir, int seq_len_cap, char *err) {
    memset(m, 0, sizeof(*m));
    snprintf(m->dir, sizeof(m->dir), "%s", dir);
    Config *c = &m->config;
    if (read_config(c, dir, err)) { return -1; }
    c->seq_len = seq_len_cap > 0 && seq_len_cap < c->max_pos ? seq_len_cap : c->max_pos;
    TensorFiles tf;
    int rc = open_tensor_files(&tf, dir, err);
    if (rc == 0 && !c->tied && !has_tensor(&tf, "lm_head.weight")) {
        c->tied = 1; // no lm_head.weight: the output projection is the embedding (HF does the same)
    }
    Weights host;
    size_t n = layout_weights(&host, NULL, c);
    // the layout sums products of config ints that are each < 2^24: bound it before allocating
    if (rc == 0 && (n == 0 || n > ((size_t)1 << 37))) {
        rc = fail(err, "%s/config.json: the model would need %zu floats; sizes are implausible", dir, n);
    }
    float *host_memory = NULL;
    if (rc == 0) {
        host_memory = (float *)malloc_check(mul_size(n, sizeof(float)));
        layout_weights(&host, host_memory, c);
        rc = load_weights(&host, c, &tf, err);
    }
    free_tensor_files(&tf);
    if (rc != 0) {
        free(host_memory);
        return -1;
    }
#ifdef __CUDACC__
    m->memory = (float *)device_malloc(n * sizeof(float));
    copy_to_device(m->memory, host_memory, n * sizeof(float));
    free(host_memory);
#else
    m->memory = host_memory;
#endif
    m->n_floats = n;
    layout_weights(&m->weights, m->memory, c);
    build_run_state(&m->state, c, c->seq_len < 64 ? c->seq_len : 64);
    return 0;
}

// ----------------------------------------------------------------------------
// kernels: one thread per output element or row, serial reductions in a fixed order

// one thread per (token, i): x[t] = token_embedding[tokens[t]]
__global__ void embed_kernel(float *x, const float *token_embedding, const int *tokens, int n, int dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * dim) { return; }
    int t = i / dim, d = i % dim;
    x[i] = token_embedding[(size_t)tokens[t] * dim + d];
}

// one thread per token: out = x / sqrt(mean(x^2) + eps) * w   (PyTorch: LlamaRMSNorm)
__global__ void rmsnorm_kernel(float *out, const float *x, const float *w, int n, int dim, float eps) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) { return; }
    const float *xt = x + (size_t)t * dim;
    float ss = 0.0f;
    for (int d = 0; d < dim; d++) { ss += xt[d] * xt[d]; }
    float scale = 1.0f / sqrtf(ss / dim + eps);
    for (int d = 0; d < dim; d++) { out[(size_t)t * dim + d] = w[d] * (xt[d] * scale); }
}

// one thread per output row r, looping over the n tokens: out[t][r] = dot(w[r], x[t]).
// Each weight row is read once per pass and reused for all n tokens, which is what makes
// verifying k draft tokens cost about one token on a memory-bound CPU or GPU. Each dot product
// keeps 8 interleaved partial sums combined in a fixed tree: the order depends only on in_dim,
// never on n, so an n-token pass gives bitwise the results of n one-token passes.
__global__ void matmul_kernel(float *out, const float *x, const float *w, int n, int in_dim, int out_dim) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= out_dim) { return; }
    const float *wr = w + (size_t)r * in_dim;
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * in_dim;
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int c = 0;
        for (; c + 8 <= in_dim; c += 8) {
            for (int u = 0; u < 8; u++) { s[u] += wr[c + u] * xt[c + u]; }
        }
        for (; c < in_dim; c++) { s[c % 8] += wr[c] * xt[c]; }
        out[(size_t)t * out_dim + r] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
}

// one thread per (token, head, pair i): rotate (v[i], v[i + half]) by angle (pos + depth[t]) * f_i.
// HF's rotate_half convention: pairs are the two halves of a head, not adjacent elements.
// In place is safe here: each thread reads and writes only its own two elements.
__global__ void rope_kernel(float *v, int stride, const int *depth, int pos, const float *inv_freq,
                            int n, int n_heads, int head_dim) {
    int half = head_dim / 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * n_heads * half) { return; }
    int t = i / (n_heads * half), h = (i / half) % n_heads, k = i % half;
    float angle = (float)(pos + depth[t]) * inv_freq[k];
    float c = cosf(angle), s = sinf(angle);
    float *vh = v + (size_t)t * stride + (size_t)h * head_dim;
    float a = vh[k], b = vh[k + half];
    vh[k] = a * c - b * s;
    vh[k + half] = b * c + a * s;
}

// one thread per (token, head): softmax(q k^T / sqrt(head_dim)) v over the visible keys, serial
// over keys. Token t sees every cached slot < pos, and slot pos + u of this pass when
// mask[t * n + u]. GQA: head h reads kv head h / (n_heads / n_kv_heads).
__global__ void attention_kernel(float *out, float *att, const float *q, const float *key_cache,
                                 const float *value_cache, const unsigned char *mask, int n, int pos,
                                 int n_heads, int n_kv_heads, int head_dim, int seq_len) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * n_heads) { return; }
    int t = i / n_heads, h = i % n_heads, kv_dim = n_kv_heads * head_dim;
    int kvh = h / (n_heads / n_kv_heads);
    const float *qt = q + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
    float *a = att + (size_t)i * seq_len;
    float scale = 1.0f / sqrtf((float)head_dim), max = -FLT_MAX;
    for (int s = 0; s < pos + n; s++) {
        if (s >= pos && !mask[t * n + (s - pos)]) { continue; }
        const float *k = key_cache + (size_t)s * kv_dim + (size_t)kvh * head_dim;
        float dot = 0.0f;
        for (int d = 0; d < head_dim; d++) { dot += qt[d] * k[d]; }
        a[s] = dot * scale;
        max = a[s] > max ? a[s] : max;
    }
    float sum = 0.0f;
    for (int s = 0; s < pos + n; s++) {
        if (s >= pos && !mask[t * n + (s - pos)]) { continue; }
        a[s] = expf(a[s] - max);
        sum += a[s];
    }
    float *o = out + (size_t)t * n_heads * head_dim + (size_t)h * head_dim;
    for (int d = 0; d < head_dim; d++) {
        float acc = 0.0f;
        for (int s = 0; s < pos + n; s++) {
            if (s >= pos && !mask[t * n + (s - pos)]) { continue; }
            acc += a[s] * value_cache[(size_t)s * kv_dim + (size_t)kvh * head_dim + d];
        }
        o[d] = acc / sum;
    }
}

// one thread per element: x += y (the residual add; each thread owns its element)
__global__ void residual_kernel(float *x, const float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    x[i] = x[i] + y[i];
}

// one thread per element: up = silu(gate) * up   (PyTorch: down(silu(gate(x)) * up(x)))
__global__ void swiglu_kernel(float *up, const float *gate, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) { return; }
    float g = gate[i];
    up[i] = g / (1.0f + expf(-g)) * up[i];
}

// ----------------------------------------------------------------------------
// forward: one pass over n tokens, any sublayers skipped

static void build_run_state(RunState *s, const Config *c, int max_tokens) {
    size_t T = (size_t)max_tokens, dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t wide = q_dim > dim ? q_dim : dim, cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    size_t sizes[] = {T * dim, T * wide, T * dim, T * q_dim, T * hid, T * hid,
                      T * c->n_heads * c->seq_len, T * c->vocab_size, cache, cache};
    float **slots[] = {&s->x, &s->xb, &s->xb2, &s->q, &s->hb, &s->hb2, &s->att, &s->logits,
                       &s->key_cache, &s->value_cache};
    size_t total = 0;
    for (int k = 0; k < 10; k++) { total += sizes[k]; }
    float *base = (float *)device_malloc(mul_size(total, sizeof(float)));
    size_t off = 0;
    for (int k = 0; k < 10; k++) { *slots[k] = base + off; off += sizes[k]; }
    s->max_tokens = max_tokens;
    s->tokens = (int *)device_malloc(2 * T * sizeof(int));
    s->depth = s->tokens + T;
    s->mask = (unsigned char *)device_malloc(T * T);
    s->logits_host = (float *)malloc_check(T * c->vocab_size * sizeof(float));
}

static void free_run_state(RunState *s) {
    device_free(s->x);
    device_free(s->tokens);
    device_free(s->mask);
    free(s->logits_host);
}

void free_model(Model *m) {
    if (m->memory == NULL) { return; }
    free_run_state(&m->state);
    device_free(m->memory);
    m->memory = NULL;
}

// Uploads this pass's tokens, RoPE offsets and mask (a causal chain when tree is NULL).
static void set_pass(Model *m, const int *tokens, int n, const TokenTree *tree) {
    RunState *s = &m->state;
    int *depth = (int *)malloc_check((size_t)n * sizeof(int));
    unsigned char *mask = (unsigned char *)malloc_check((size_t)n * n);
    for (int t = 0; t < n; t++) {
        depth[t] = tree ? tree->depth[t] : t;
        for (int u = 0; u < n; u++) { mask[t * n + u] = tree ? tree->mask[t * n + u] : (u <= t); }
    }
    if (tokens) { copy_to_device(s->tokens, tokens, (size_t)n * sizeof(int)); }
    copy_to_device(s->depth, depth, (size_t)n * sizeof(int));
    copy_to_device(s->mask, mask, (size_t)n * n);
    free(depth);
    free(mask);
}

// Attention sublayer of layer l on the n residual rows in state.x (set_pass done): x += o(attn).
// Writes K and V at cache slots pos..pos+n-1. Slots >= pos are scratch: a later pass
// overwrites them before anything reads them, which is what makes rollback free.
static void attention_sublayer(Model *m, int l, int n, int pos) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    int half = c->head_dim / 2;
    float *k_l = s->key_cache + (size_t)l * c->seq_len * kv_dim;
    float *v_l = s->value_cache + (size_t)l * c->seq_len * kv_dim;
    LAUNCH(rmsnorm_kernel, n, s->xb, s->x, w->rms_att + (size_t)l * dim, n, dim, c->norm_eps);
    LAUNCH(matmul_kernel, q_dim, s->q, s->xb, w->wq + (size_t)l * q_dim * dim, n, dim, q_dim);
    LAUNCH(matmul_kernel, kv_dim, k_l + (size_t)pos * kv_dim, s->xb, w->wk + (size_t)l * kv_dim * dim, n, dim, kv_dim);
    LAUNCH(matmul_kernel, kv_dim, v_l + (size_t)pos * kv_dim, s->xb, w->wv + (size_t)l * kv_dim * dim, n, dim, kv_dim);
    LAUNCH(rope_kernel, n * c->n_heads * half, s->q, q_dim, s->depth, pos, w->rope_inv_freq, n,
           c->n_heads, c->head_dim);
    LAUNCH(rope_kernel, n * c->n_kv_heads * half, k_l + (size_t)pos * kv_dim, kv_dim, s->depth, pos,
           w->rope_inv_freq, n, c->n_kv_heads, c->head_dim);
    LAUNCH(attention_kernel, n * c->n_heads, s->xb, s->att, s->q, k_l, v_l, s->mask, n, pos,
           c->n_heads, c->n_kv_heads, c->head_dim, c->seq_len);
    LAUNCH(matmul_kernel, dim, s->xb2, s->xb, w->wo + (size_t)l * dim * q_dim, n, q_dim, dim);
    LAUNCH(residual_kernel, n * dim, s->x, s->xb2, n * dim);
}

// MLP sublayer of layer l: x += down(silu(gate(norm(x))) * up(norm(x))).
static void mlp_sublayer(Model *m, int l, int n) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hid = c->hidden_dim;
    LAUNCH(rmsnorm_kernel, n, s->xb, s->x, w->rms_ffn + (size_t)l * dim, n, dim, c->norm_eps);
    LAUNCH(matmul_kernel, hid, s->hb, s->xb, w->w_gate + (size_t)l * hid * dim, n, dim, hid);
    LAUNCH(matmul_kernel, hid, s->hb2, s->xb, w->w_up + (size_t)l * hid * dim, n, dim, hid);
    LAUNCH(swiglu_kernel, n * hid, s->hb2, s->hb, n * hid);
    LAUNCH(matmul_kernel, dim, s->xb2, s->hb2, w->w_down + (size_t)l * dim * hid, n, hid, dim);
    LAUNCH(residual_kernel, n * dim, s->x, s->xb2, n * dim);
}

// Copies the residual rows of the captured tokens at sublayer boundary b.
static void capture_boundary(const Model *m, Capture *cap, int b) {
    if (cap == NULL) { return; }
    size_t dim = (size_t)m->config.dim;
    for (int k = 0; k < cap->n_idx; k++) {
        copy_to_host(cap->states + ((size_t)b * cap->n_idx + k) * dim, m->state.x + cap->idx[k] * dim,
                     dim * sizeof(float));
    }
}

void forward(Model *m, const int *tokens, int n, int pos, const SkipSet *skip, const TokenTree *tree,
             Capture *capture) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    if (n < 1 || n > s->max_tokens || pos < 0 || pos + n > c->seq_len) {
        die(__FILE__, __LINE__, "forward: %d tokens at position %d do not fit (max %d per pass, context %d)",
            n, pos, s->max_tokens, c->seq_len);
    }
    set_pass(m, tokens, n, tree);
    LAUNCH(embed_kernel, n * c->dim, s->x, m->weights.token_embedding, s->tokens, n, c->dim);
    capture_boundary(m, capture, 0);
    for (int l = 0; l < c->n_layers; l++) {
        if (!(skip && skip->attn[l])) { attention_sublayer(m, l, n, pos); }
        capture_boundary(m, capture, 2 * l + 1);
        if (!(skip && skip->mlp[l])) { mlp_sublayer(m, l, n); }
        capture_boundary(m, capture, 2 * l + 2);
    }
    LAUNCH(rmsnorm_kernel, n, s->xb, s->x, m->weights.rms_final, n, c->dim, c->norm_eps);
    LAUNCH(matmul_kernel, c->vocab_size, s->logits, s->xb, m->weights.lm_head, n, c->dim, c->vocab_size);
    copy_to_host(s->logits_host, s->logits, (size_t)n * c->vocab_size * sizeof(float));
}

// Runs a prompt through the model under skip (NULL = full) in chunks of state.max_tokens,
// filling the KV cache at 0..n-1. Chunking does not change a bit: an n-token pass equals n
// one-token passes. Leaves the last token's logits at row *last_row of state.logits_host.
static void prefill(Model *m, const int *tokens, int n, const SkipSet *skip, int *last_row) {
    for (int start = 0; start < n; start += m->state.max_tokens) {
        int len = n - start < m->state.max_tokens ? n - start : m->state.max_tokens;
        forward(m, tokens + start, len, start, skip, NULL, NULL);
        *last_row = len - 1;
    }
}

// Parses a skip spec such as "attn:3,5,7 mlp:6" or "attn:1-4;mlp:0,2" (0-based layers; "" or
// "none" or "-" = skip nothing) into s. Returns 0, or -1 with err naming the problem.
static int parse_skip_spec(const char *spec, int n_layers, SkipSet *s, char *err) {
    memset(s, 0, sizeof(*s));
    const char *p = spec;
    if (strcmp(spec, "none") == 0 || strcmp(spec, "-") == 0) { return 0; }
    while (*p) {
        while (*p == ' ' || *p == ';') { p++; }
        if (*p == '\0') { break; }
        unsigned char *flags;
        if (strncmp(p, "attn:", 5) == 0) { flags = s->attn; }
        else if (strncmp(p, "mlp:", 4) == 0) { flags = s->mlp; }
        else { return fail(err, "--skip \"%s\": expected attn:LIST or mlp:LIST at \"%s\"", spec, p); }
        p = strchr(p, ':') + 1;
        do {
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p || !isdigit((unsigned char)*p)) {
                return fail(err, "--skip \"%s\": expected a layer number at \"%s\"", spec, p);
            }
            p = end;
            if (*p == '-') {
                hi = strtol(p + 1, &end, 10);
                if (end == p + 1 || hi < lo) { return fail(err, "--skip \"%s\": bad range", spec); }
                p = end;
            }
            if (hi >= n_layers) {
                return fail(err, "--skip \"%s\": layer %ld is out of range (the model has %d layers, 0..%d)",
                            spec, hi, n_layers, n_layers - 1);
            }
            for (long l = lo; l <= hi; l++) { flags[l] = 1; }
        } while (*p == ',' && *++p);
        if (*p != '\0' && *p != ' ' && *p != ';') {
            return fail(err, "--skip \"%s\": unexpected \"%s\"", spec, p);
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// sampler: temperature, top-p, and a documented RNG

// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators", 2014):
// 64-bit state, output = state * 2685821657736338717 after three shifts. Seeds are mixed
// with splitmix64 so that nearby seeds give unrelated streams.
void rng_seed(Rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->state = (z ^ (z >> 31)) | 1; // never 0
}

static uint32_t rng_u32(Rng *r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return (uint32_t)((r->state * 0x2545F4914F6CDD1Dull) >> 32);
}

float rng_uniform(Rng *r) { return (float)(rng_u32(r) >> 8) / 16777216.0f; }

typedef struct {
    float temperature; // 0 = greedy
    float top_p;       // nucleus mass in (0, 1]; 1 = off
    Rng rng;
} Sampler;

typedef struct {
    float prob;
    int index;
} ProbIndex;

// The highest logit; ties go to the lowest id, as torch.argmax does.
static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (v[i] > v[best]) { best = i; }
    }
    return best;
}

static int compare_prob_desc(const void *a, const void *b) {
    const ProbIndex *x = (const ProbIndex *)a, *y = (const ProbIndex *)b;
    if (x->prob != y->prob) { return x->prob > y->prob ? -1 : 1; }
    return x->index - y->index;
}

// The warped distribution that both plain sampling and speculative sampling use:
// probs = softmax(logits / temperature), then top-p keeps the smallest set of most likely tokens
// whose mass reaches top_p, and renormalizes. scratch holds n ProbIndex.
static void warp_probs(const float *logits, int n, float temperature, float top_p, float *probs,
                       ProbIndex *scratch) {
    float max = logits[argmax(logits, n)], sum = 0.0f;
    for (int i = 0; i < n; i++) {
        probs[i] = expf((logits[i] - max) / temperature);
        sum += probs[i];
    }
    for (int i = 0; i < n; i++) { probs[i] /= sum; }
    if (top_p >= 1.0f) { return; }
    // a token below (1 - top_p) / (n - 1) can never be in the nucleus: sort only the others
    float cutoff = (1.0f - top_p) / (float)(n - 1 > 0 ? n - 1 : 1);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] >= cutoff) { scratch[m].prob = probs[i]; scratch[m].index = i; m++; }
    }
    qsort(scratch, (size_t)m, sizeof(ProbIndex), compare_prob_desc);
    float mass = 0.0f;
    int keep = m;
    for (int k = 0; k < m; k++) {
        mass += scratch[k].prob;
        if (mass >= top_p) { keep = k + 1; break; }
    }
    memset(probs, 0, (size_t)n * sizeof(float));
    for (int k = 0; k < keep; k++) { probs[scratch[k].index] = scratch[k].prob / mass; }
}

// Inverse-CDF draw from probs with one uniform u in [0, 1).
static int sample_probs(const float *probs, int n, float u) {
    float cdf = 0.0f;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) { continue; }
        cdf += probs[i];
        last = i;
        if (u < cdf) { return i; }
    }
    return last; // rounding left u above the total mass: the last possible token
}

// ----------------------------------------------------------------------------
// decoding: plain autoregressive decoding

typedef struct {
    int n_prompt;
    int n_generated;
    double prefill_ms;
    double decode_ms;
} GenStats;

// Called for each generated token, e.g. to stream its text.
typedef void (*TokenCallback)(void *ctx, int token);

static int is_eos(const Config *c, int token) {
    for (int k = 0; k < c->n_eos; k++) {
        if (c->eos_ids[k] == token) { return 1; }
    }
    return 0;
}

// Picks the next token from one row of logits: argmax when greedy, else a draw from the warped p.
static int sample_next(Sampler *sp, const float *logits, int vocab, float *probs, ProbIndex *scratch) {
    if (sp->temperature == 0.0f) { return argmax(logits, vocab); }
    warp_probs(logits, vocab, sp->temperature, sp->top_p, probs, scratch);
    return sample_probs(probs, vocab, rng_uniform(&sp->rng));
}

// Plain decoding with the model under skip (NULL = full model): up to max_new tokens after the
// prompt, stopping after an EOS or at the context limit. Returns the number written to out.
static int generate_plain(Model *m, const int *prompt, int n_prompt, int max_new, const SkipSet *skip,
                          Sampler *sp, int *out, TokenCallback cb, void *ctx, GenStats *st) {
    const Config *c = &m->config;
    float *probs = (float *)malloc_check((size_t)c->vocab_size * sizeof(float));
    ProbIndex *scratch = (ProbIndex *)malloc_check((size_t)c->vocab_size * sizeof(ProbIndex));
    double t0 = time_ms();
    int row = 0, n = 0;
    prefill(m, prompt, n_prompt, skip, &row);
    double t1 = time_ms();
    int pos = n_prompt;
    while (n < max_new) {
        int next = sample_next(sp, m->state.logits_host + (size_t)row * c->vocab_size, c->vocab_size,
                               probs, scratch);
        out[n++] = next;
        if (cb) { cb(ctx, next); }
        if (is_eos(c, next) || pos >= c->seq_len || n >= max_new) { break; }
        forward(m, &next, 1, pos++, skip, NULL, NULL);
        row = 0;
    }
    st->n_prompt = n_prompt;
    st->n_generated = n;
    st->prefill_ms = t1 - t0;
    st->decode_ms = time_ms() - t1;
    free(probs);
    free(scratch);
    return n;
}
