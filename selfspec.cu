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
//   SWIFT    Xia et al., SWIFT: On-the-Fly Self-Speculative Decoding (ICLR 2025; sections and
//            equations as there; App. C.2, the skip-ratio tolerance, is the longer version's)
//   ASD      Metel et al., Draft on the Fly: Adaptive Self-Speculative Decoding using Cosine
//            Similarity
//   CLaSp    CLaSp: In-Context Layer Skip for Self-Speculative Decoding
//   Leviathan et al. 2023 / Chen et al. 2023 for speculative sampling.
//
// Non-goals: batching, quantized weights, speed tricks that hurt readability. Kernels are naive:
// one thread per output element or row, no shared memory, no warp functions, no atomics. The
// same kernels run on the CPU through the launch shim below, so the CPU tests check GPU code.
//
// Reading order: the papers first. A few utilities -> the launch shim and the kernels ->
// forward -> sampler -> layer selection used during decoding (each method's settings, the GP,
// ASD, CLaSp, SWIFT, the selector hooks) -> decoding (plain; self-speculative: the exit rule,
// speculative sampling, draft, verify, generate_spec) -> Self-SD's search before decoding. Then
// the plumbing, which a reader of the papers may skip: reading files, JSON, config.json,
// safetensors -> tokenizer -> statistics -> threads -> CLI.
//
// Build and run (the Makefile's flags matter: -ffp-contract=off and nvcc's -fmad=false keep
// every build's arithmetic the one the bit-exactness argument assumes):
//   make && ./selfspec -p "In the beginning"
//        (by hand: cc -std=gnu11 -O3 -ffp-contract=off -fopenmp -I. -x c selfspec.cu -lm)
//   make cuda && ./selfspec-cuda -p "..."   (by hand: nvcc -O3 -fmad=false -I. selfspec.cu)
//   make test

#ifndef _GNU_SOURCE
#define _GNU_SOURCE // M_PI, realpath and mkstemp under any -std (llama3 RoPE; the output files)
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#ifdef __linux__
#include <unistd.h>
#endif
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

// The idiom for what no user input can cause: a broken invariant (a bug) or an exhausted machine
// (memory, a failing CUDA call) ends the run here, naming the source line. A failure the user can
// act on (a file, flag or environment) is never a die: it returns -1 (or NULL) with one line in
// the caller's SS_ERR_LEN buffer, and the CLI prints that line once.
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

// Milliseconds since *t, which moves to now: consecutive laps time consecutive steps.
static double lap_ms(double *t) {
    double now = time_ms(), elapsed = now - *t;
    *t = now;
    return elapsed;
}

// ----------------------------------------------------------------------------
// kernels: the launch shim, then each operation's kernels (one thread per output element or row,
// serial reductions in a fixed order) and beside them its launcher

// ----- the launch shim: one kernel source, two builds
//
// nvcc: <<<grid, block>>> on the per-thread stream (which a graph can capture); calls checked.
// C compiler: blockIdx/threadIdx are thread-local variables and LAUNCH runs the grid as a host
// loop, OpenMP over blocks. That is exact because no kernel uses shared memory, __syncthreads,
// warp functions or atomics, and no thread reads what another thread of the same launch writes.
// The block size never changes a result (kernels only use the flat index), so each build picks
// its own. A launch is parallel only with 16 blocks, 16,384 units of work (LAUNCH_WORK: multiply-
// adds) and 2 threads or more (test/bench/README.md).
static uint64_t launch_count; // kernels launched, in both builds (verify_cost and tests read it)

#ifdef __CUDACC__
enum { BLOCK_SIZE = 128, GRAPHS = 1 }; // GRAPHS: passes replay as CUDA graphs (forward)

#define cuda_check(call) cuda_check_((call), #call, __FILE__, __LINE__)
static void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) { die(file, line, "CUDA: %s failed: %s", what, cudaGetErrorString(e)); }
}

#define LAUNCH_WORK(kernel, n_threads, work, ...) LAUNCH(kernel, n_threads, __VA_ARGS__)
#define LAUNCH(kernel, n_threads, ...)                                                      \
    do {                                                                                    \
        int n_ = (n_threads), grid_ = (n_ + BLOCK_SIZE - 1) / BLOCK_SIZE;                   \
        if (n_ > 0) {                                                                       \
            kernel<<<grid_, BLOCK_SIZE, 0, cudaStreamPerThread>>>(__VA_ARGS__);             \
            cuda_check(cudaGetLastError());                                                 \
            launch_count++;                                                                 \
        }                                                                                   \
    } while (0)

static void *device_malloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) {
        die(__FILE__, __LINE__, "out of GPU memory allocating %zu bytes: %s", bytes,
            cudaGetErrorString(e));
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
#else
enum { BLOCK_SIZE = 4, MIN_PARALLEL_BLOCKS = 16, MIN_PARALLEL_WORK = 1 << 14, GRAPHS = 0 };
// Kernels are inlined into the loop that runs their grid, device functions into their callers
// (as nvcc does: with gcc's mere hint, dot_row_tokens may stay a call and the matmul's sums leave
// the registers, test/bench/README.md, "Speed that does not depend on the rest of the file").
#define __global__ static inline __attribute__((always_inline))
#define __device__ static inline __attribute__((always_inline))
#define __host__ // with __device__: a function that launchers and kernels both call
#ifdef __cplusplus
#define THREAD_LOCAL thread_local
#else
#define THREAD_LOCAL _Thread_local
#endif
typedef struct { int x; } GridIndex;
static THREAD_LOCAL GridIndex blockIdx, threadIdx;
static GridIndex blockDim = {BLOCK_SIZE};
static int launch_reverse; // 1: blocks and threads in reverse order (tests: no kernel may care)

#define LAUNCH_BLOCK(kernel, b, grid, ...)                                                  \
    do {                                                                                    \
        blockIdx.x = launch_reverse ? (grid) - 1 - (b) : (b);                               \
        for (int t_ = 0; t_ < BLOCK_SIZE; t_++) {                                           \
            threadIdx.x = launch_reverse ? BLOCK_SIZE - 1 - t_ : t_;                        \
            kernel(__VA_ARGS__);                                                            \
        }                                                                                   \
    } while (0)
#define LAUNCH(kernel, n_threads, ...) LAUNCH_WORK(kernel, n_threads, 1, __VA_ARGS__)
#define LAUNCH_WORK(kernel, n_threads, work, ...)                                           \
    do {                                                                                    \
        int grid_ = ((n_threads) + BLOCK_SIZE - 1) / BLOCK_SIZE;                            \
        launch_count += grid_ > 0;                                                          \
        if (launch_in_parallel(grid_, (double)(n_threads) * (work))) {                      \
            _Pragma("omp parallel for schedule(static)")                                    \
            for (int b_ = 0; b_ < grid_; b_++) { LAUNCH_BLOCK(kernel, b_, grid_, __VA_ARGS__); } \
        } else {                                                                            \
            for (int b_ = 0; b_ < grid_; b_++) { LAUNCH_BLOCK(kernel, b_, grid_, __VA_ARGS__); } \
        }                                                                                   \
    } while (0)
static int launch_in_parallel(int grid, double work) {
#ifdef _OPENMP
    return grid >= MIN_PARALLEL_BLOCKS && work >= MIN_PARALLEL_WORK && omp_get_max_threads() > 1;
#else
    return (void)grid, (void)work, 0;
#endif
}

static void *device_malloc(size_t bytes) { return malloc_check(bytes); }
static void device_free(void *p) { free(p); }
static void copy_to_device(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static void copy_to_host(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
#endif

// ----- the kernels and their launchers

// The launchers' mapping: 0, the CPU's, a thread per row or unit of rows; 1, the GPU's, a thread
// per (row, lane) or output element (coalesced). The same bits: the CPU tests set 1 and compare.
#ifdef __CUDACC__
static int gpu_mapping = 1;
#else
static int gpu_mapping = 0;
#endif

// one thread per (token, i): x[t] = token_embedding[tokens[t]]
__global__ void embed_kernel(float *x, const float *token_embedding, const int *tokens, int n,
                             int dim) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * dim) { return; }
    x[i] = token_embedding[(size_t)tokens[i / dim] * dim + i % dim];
}

// The fixed tree that adds 16 partial sums: 16 -> 8 -> 4 -> 2 -> 1 (the matmul, dot, RMSNorm).
enum { LANES = 16 };
__device__ float tree_sum16(const float *p) {
    float s[8];
    for (int u = 0; u < 8; u++) { s[u] = p[u] + p[u + 8]; }
    for (int u = 0; u < 4; u++) { s[u] += s[u + 4]; }
    return (s[0] + s[2]) + (s[1] + s[3]);
}

// Dot products of len weights wr with the n_tok tokens t0.. of x (rows stride apart, n_tok <= 8),
// to out[t0 * out_dim], ... (add: added to it), each as 16 interleaved sums, s[u] += w[c] x[c] for
// c = u mod 16, in the fixed tree: the order depends only on len, so an n-token pass gives n
// one-token passes bitwise. A 16-weight chunk is loaded once for all the tokens ("omp simd": the
// vector, test/bench/README.md).
enum { MAX_SWEEP_TOKENS = 8 };
__device__ void dot_row_tokens(float *out, const float *wr, const float *x, int t0, int n_tok,
                               int len, int stride, int out_dim, int add) {
    float s[MAX_SWEEP_TOKENS][16];
    x += (size_t)t0 * stride, out += (size_t)t0 * out_dim;
    for (int t = 0; t < n_tok; t++) {
        for (int u = 0; u < 16; u++) { s[t][u] = 0.0f; }
    }
    int c = 0;
    for (; c + 16 <= len; c += 16) {
        for (int t = 0; t < n_tok; t++) {
            const float *xt = x + (size_t)t * stride;
#pragma omp simd
            for (int u = 0; u < 16; u++) { s[t][u] += wr[c + u] * xt[c + u]; }
        }
    }
    for (int t = 0; t < n_tok; t++) { // the last, partial chunk, lane by lane up to 16 (a bound
        const float *xt = x + (size_t)t * stride; // the GPU unrolls: s stays in its registers)
        for (int u = 0; u < 16 && c + u < len; u++) { s[t][u] += wr[c + u] * xt[c + u]; }
        float y = tree_sum16(s[t]);
        out[(size_t)t * out_dim] = add ? out[(size_t)t * out_dim] + y : y;
    }
}

// dot(a, b) over n elements: dot_row_tokens' order, one segment of any length (attention, RMSNorm)
__device__ float dot(const float *a, const float *b, int n) {
    float result;
    dot_row_tokens(&result, a, b, 0, 1, n, n, 0, 0);
    return result;
}

// One weight row against the n tokens of a pass, read once for all of them (so verifying k tokens
// costs about one token where memory is the limit); where compute is, the tokens go 8 at a time,
// then 4, 2, 1, each a constant count whose sums stay in registers (test/bench/README.md).
__device__ void dot_rows(float *out, const float *wr, const float *x, int n, int len, int stride,
                         int out_dim, int add) {
    int t = 0;
    for (; t + 8 <= n; t += 8) { dot_row_tokens(out, wr, x, t, 8, len, stride, out_dim, add); }
    for (; t + 4 <= n; t += 4) { dot_row_tokens(out, wr, x, t, 4, len, stride, out_dim, add); }
    for (; t + 2 <= n; t += 2) { dot_row_tokens(out, wr, x, t, 2, len, stride, out_dim, add); }
    for (; t < n; t++) { dot_row_tokens(out, wr, x, t, 1, len, stride, out_dim, add); }
}

// A matmul row is cut into segments of SEGMENT inputs, summed as above and added in order, so that
// a GPU row gets several threads' loads in flight. Decision: SEGMENT = 512, the widest row of the
// committed models (their bits: one segment's); a 1B model's 2048 inputs give 64 GPU threads.
enum { SEGMENT = 512 };
__host__ __device__ int row_lanes(int in_dim) { return LANES * ((in_dim + SEGMENT - 1) / SEGMENT); }

// A row's dot products: its segments added in order in out (add: the first added to it too).
// One call of dot_rows, so the kernels that inline it hold one copy of its sweeps.
__device__ void dot_segments(float *out, const float *wr, const float *x, int n, int in_dim,
                             int out_dim, int add) {
    for (int c0 = 0; c0 < in_dim; c0 += SEGMENT) {
        int len = in_dim - c0 < SEGMENT ? in_dim - c0 : SEGMENT;
        dot_rows(out, wr + c0, x + c0, n, len, in_dim, out_dim, add || c0 > 0);
    }
}

// A row's partial sums from the lanes (row_lanes(in_dim) of them) added as dot_segments adds them
__device__ float combine_lanes(const float *p, int in_dim) {
    float y = tree_sum16(p);
    for (int b = 1; b * SEGMENT < in_dim; b++) { y = y + tree_sum16(p + b * LANES); }
    return y;
}

// A matmul and what rides along in its launch: up to three weight matrices stacked (raw column c
// is row c - (the rows before it) of w[j]), each dot product rounded to a float in raw, then an
// epilogue on each unit of columns: the arithmetic separate launches did (test_forward: bits).
//   MM_STORE  out[0] = x w[0]^T, raw being out[0] (the output head)               unit: a row
//   MM_ADD    out[0] += x w[0]^T: the residual add (o_proj, down)                 unit: a row
//   MM_SWIGLU out[0] = silu(x w[0]^T) * (x w[1]^T) (PyTorch: silu(gate(x)) * up(x))  unit: row i
//   MM_QKV    q, k, v = x w[0..2]^T into out[0] and the layer's KV cache out[1], out[2] from
//             slot *pos, q and k rotated by RoPE; unit: rows (i, i + head_dim / 2) of a head
enum { MM_STORE, MM_ADD, MM_SWIGLU, MM_QKV };
typedef struct {
    int kind, n, in_dim, rows[3], head_dim; // n tokens; w[j] is (rows[j], in_dim), 0 rows: none
    const float *x, *w[3];                  // x (n, in_dim)
    float *out[3], *raw;                    // out[j] (n, rows[j]); raw (n, stacked rows)
    const int *pos, *depth;                 // MM_QKV: the pass's position and RoPE offsets
    const float *inv_freq;                  // MM_QKV: RoPE's inverse frequencies
} MatmulOp;

__host__ __device__ int op_rows(const MatmulOp *o) { return o->rows[0] + o->rows[1] + o->rows[2]; }
__host__ __device__ int op_units(const MatmulOp *o) {
    return o->kind == MM_QKV ? op_rows(o) / 2 : o->rows[0];
}

// Unit u's raw column c0; *c1 its pair's (up's row; MM_QKV: half a head on), c0 for a lone row
__device__ int unit_cols(const MatmulOp *op, int u, int *c1) {
    int half = op->head_dim / 2, c0 = op->kind == MM_QKV ? u / half * op->head_dim + u % half : u;
    *c1 = c0 + (op->kind == MM_QKV ? half : op->kind == MM_SWIGLU ? op->rows[0] : 0);
    return c0;
}

// Raw column c's weight row, its column of out[j] and rows[j], j the matrix holding it (picked by
// selects, not an index: a GPU keeps an indexed kernel argument in memory)
typedef struct { const float *w; float *out; int rows; } OpRow;
__device__ OpRow op_row(const MatmulOp *op, int c) {
    int j1 = c >= op->rows[0], j2 = op->kind == MM_QKV && c >= op->rows[0] + op->rows[1];
    int row = c - (j1 ? op->rows[0] : 0) - (j2 ? op->rows[1] : 0);
    OpRow r = {(j2 ? op->w[2] : j1 ? op->w[1] : op->w[0]) + (size_t)row * op->in_dim,
               (j2 ? op->out[2] : j1 ? op->out[1] : op->out[0]) + row,
               j2 ? op->rows[2] : j1 ? op->rows[1] : op->rows[0]};
    return r;
}

// Where raw column c of token t goes: its column of out[j], from slot *pos in a KV cache
__device__ float *op_out(const MatmulOp *op, int t, int c) {
    OpRow r = op_row(op, c);
    return r.out + ((size_t)t + (op->kind == MM_QKV && c >= op->rows[0] ? *op->pos : 0)) * r.rows;
}

// Unit u's epilogue for token t: reads raw columns c0, c1; writes the unit's outputs (its alone)
__device__ void finish_unit(const MatmulOp *op, int t, int u, int c0, int c1) {
    const float *y = op->raw + (size_t)t * op_rows(op);
    float a = y[c0], b = y[c1], *o = op_out(op, t, c0);
    if (op->kind == MM_ADD) {
        *o = *o + a;
    } else if (op->kind == MM_SWIGLU) {
        *o = a / (1.0f + expf(-a)) * b;
    } else if (op->kind == MM_QKV && c0 >= op->rows[0] + op->rows[1]) { // v: not rotated
        *o = a, *op_out(op, t, c1) = b;
    } else if (op->kind == MM_QKV) { // RoPE, HF's rotate_half: a pair is a head's two halves
        float angle = (float)(*op->pos + op->depth[t]) * op->inv_freq[u % (op->head_dim / 2)];
        float c = cosf(angle), s = sinf(angle);
        *o = a * c - b * s, *op_out(op, t, c1) = b * c + a * s;
    }
}

// The CPU's matmul: one thread per unit, its rows' dot products, then its epilogue (MM_ADD's of one
// segment straight into out[0]). kind: op.kind as a constant (one copy per kind: -0.7M a token).
__global__ void matmul_kernel(MatmulOp op, int kind) {
    op.kind = kind;
    int u = blockIdx.x * blockDim.x + threadIdx.x, in = op.in_dim, rows = op_rows(&op), c1;
    if (u >= op_units(&op)) { return; }
    int c0 = unit_cols(&op, u, &c1), add = kind == MM_ADD && in <= SEGMENT; // (else through raw)
    for (int j = 0, c = c0; j < (kind == MM_SWIGLU || kind == MM_QKV ? 2 : 1); j++, c = c1) {
        dot_segments((add ? op.out[0] : op.raw) + c, op_row(&op, c).w, op.x, op.n, in, rows, add);
    }
    for (int t = 0; t < op.n && kind != MM_STORE && !add; t++) { finish_unit(&op, t, u, c0, c1); }
}

// The GPU's matmul, coalesced: one thread per (stacked row r, lane: partial sum u of segment b)
// into part (n, stacked rows, row_lanes); then one thread per (token, unit) adds a row's lanes as
// dot_segments does, into raw, and runs the epilogue. The CPU's bits (nvcc's -fmad=false).
__global__ void matmul_lanes_kernel(float *part, MatmulOp op) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, lanes = row_lanes(op.in_dim), in = op.in_dim;
    if (i >= op_rows(&op) * lanes) { return; }
    const float *wr = op_row(&op, i / lanes).w; // lane i % lanes: partial sum u of segment b
    int b = i % lanes / LANES, end = (b + 1) * SEGMENT < in ? (b + 1) * SEGMENT : in;
    for (int t0 = 0; t0 < op.n; t0 += MAX_SWEEP_TOKENS) { // 8 tokens' sums in registers at a time
        float y[MAX_SWEEP_TOKENS] = {0};
        for (int c = b * SEGMENT + i % LANES; c < end; c += LANES) {
            for (int t = 0; t < MAX_SWEEP_TOKENS; t++) {
                if (t0 + t < op.n) { y[t] += wr[c] * op.x[(size_t)(t0 + t) * in + c]; }
            }
        }
        for (int t = 0; t < MAX_SWEEP_TOKENS; t++) { // (constant indices: y stays in registers)
            if (t0 + t < op.n) { part[(size_t)(t0 + t) * op_rows(&op) * lanes + i] = y[t]; }
        }
    }
}

__global__ void matmul_combine_kernel(const float *part, MatmulOp op) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, units = op_units(&op), c1;
    if (i >= op.n * units) { return; }
    int t = i / units, u = i % units, c0 = unit_cols(&op, u, &c1);
    size_t row = (size_t)t * op_rows(&op), lanes = row_lanes(op.in_dim);
    op.raw[row + c0] = combine_lanes(part + (row + c0) * lanes, op.in_dim);
    op.raw[row + c1] = combine_lanes(part + (row + c1) * lanes, op.in_dim); // (c0: a one-row unit)
    finish_unit(&op, t, u, c0, c1);
}

// op's matmul and epilogue, in the mapping gpu_mapping names
static void matmul(RunState *s, MatmulOp op) {
    int units = op_units(&op), rows = op_rows(&op);
    double work = (double)op.n * op.in_dim * rows / units; // multiply-adds per thread
    switch (gpu_mapping ? -1 : op.kind) {
    case MM_STORE: LAUNCH_WORK(matmul_kernel, units, work, op, MM_STORE); break;
    case MM_ADD: LAUNCH_WORK(matmul_kernel, units, work, op, MM_ADD); break;
    case MM_SWIGLU: LAUNCH_WORK(matmul_kernel, units, work, op, MM_SWIGLU); break;
    case MM_QKV: LAUNCH_WORK(matmul_kernel, units, work, op, MM_QKV); break;
    default:
        LAUNCH(matmul_lanes_kernel, rows * row_lanes(op.in_dim), s->part, op);
        LAUNCH(matmul_combine_kernel, op.n * units, s->part, op);
    }
}

// out (n, dim) = x / sqrt(mean(x^2) + eps) * w (PyTorch: LlamaRMSNorm), mean(x^2) from dot(x, x).
// A thread writes per_thread elements: the CPU's a row, the GPU's one (adding the squares again).
__global__ void rmsnorm_kernel(float *out, const float *x, const float *w, int n, int dim,
                               float eps, int whole_rows) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, per_thread = whole_rows ? dim : 1;
    if (i >= n * dim / per_thread) { return; }
    int t = i * per_thread / dim, first = i * per_thread % dim;
    const float *xt = x + (size_t)t * dim;
    float scale = 1.0f / sqrtf(dot(xt, xt, dim) / dim + eps), *ot = out + (size_t)t * dim;
    for (int d = first; d < first + per_thread; d++) { ot[d] = w[d] * (xt[d] * scale); }
}

static void rmsnorm(float *out, const float *x, const float *w, int n, int dim, float eps) {
    LAUNCH(rmsnorm_kernel, gpu_mapping ? n * dim : n, out, x, w, n, dim, eps, !gpu_mapping);
}

// Attention: token t sees the cached slots < pos, and slot pos + u when mask[t * n + u]; GQA: head
// h reads kv head h / (n_heads / n_kv_heads). pos is state.pos, read on the device.
__device__ int visible(const unsigned char *mask, int t, int n, int pos, int s) {
    return s < pos || mask[t * n + (s - pos)];
}
__device__ size_t kv_offset(int row, const Config *c) { // row = t * n_heads + h
    return (size_t)(row % c->n_heads / (c->n_heads / c->n_kv_heads)) * c->head_dim;
}

// query row q's score for slot s of k (its kv head's column of the cache): q . k_s scale, scale =
// 1 / sqrt(head_dim) computed once by the caller (sqrtf may set errno: no compiler hoists it)
__device__ float attention_score(const float *q, const float *k, int s, const Config *c,
                                 float scale) {
    return dot(q, k + s * (size_t)c->n_kv_heads * c->head_dim, c->head_dim) * scale;
}

// The GPU's attention, stage 1: one thread per (token, head, slot s < seq_len, the grid spanning
// the context whatever pos is): att[t][h][s] = the score for the slots t sees (no stage reads more)
__global__ void attention_scores_kernel(float *att, const float *q, const float *key_cache,
                                        const unsigned char *mask, const int *pos, int n,
                                        Config c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, row = i / c.seq_len, s = i % c.seq_len;
    if (i >= n * c.n_heads * c.seq_len || s >= *pos + n) { return; }
    if (!visible(mask, row / c.n_heads, n, *pos, s)) { return; }
    const float *k = key_cache + kv_offset(row, &c), *qr = q + (size_t)row * c.head_dim;
    att[(size_t)row * c.seq_len + s] = attention_score(qr, k, s, &c, 1.0f / sqrtf((float)c.head_dim));
}

// o[d] for d < count = the sum over the slots s token t sees, in order, of exp(a[s] - max) v[s][d]
// (v: a column of the cache, kv_dim floats a slot), over the sum of the exponentials
__device__ void softmax_values(float *o, const float *a, const float *v, const unsigned char *mask,
                               int t, int n, int pos, int kv_dim, int count) {
    float max = -FLT_MAX, sum = 0.0f;
    for (int s = 0; s < pos + n; s++) {
        if (visible(mask, t, n, pos, s)) { max = a[s] > max ? a[s] : max; }
    }
    for (int d = 0; d < count; d++) { o[d] = 0.0f; }
    for (int s = 0; s < pos + n; s++) {
        if (!visible(mask, t, n, pos, s)) { continue; }
        float p = expf(a[s] - max);
        sum += p;
        for (int d = 0; d < count; d++) { o[d] += p * v[(size_t)s * kv_dim + d]; }
    }
    for (int d = 0; d < count; d++) { o[d] = o[d] / sum; }
}

// Stage 2: one thread per (token, head, d), taking its row's max and exponentials itself (no
// thread reads what another writes); neighbouring threads read neighbouring words of a value row
__global__ void attention_values_kernel(float *out, const float *att, const float *value_cache,
                                        const unsigned char *mask, const int *pos, int n,
                                        Config c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, row = i / c.head_dim;
    if (i >= n * c.n_heads * c.head_dim) { return; }
    const float *v = value_cache + kv_offset(row, &c) + i % c.head_dim;
    float o; // (in a register: a sum in global memory would be a chain of read-modify-writes)
    softmax_values(&o, att + (size_t)row * c.seq_len, v, mask, row / c.n_heads, n, *pos,
                   c.n_kv_heads * c.head_dim, 1);
    out[i] = o;
}

// The CPU's attention: one thread per (token, head), the two stages above in one thread, in the
// same order (test_forward: the bits); its o[d] sums live in the output row, in cache, walked by
// the key-outer loop (vectorized over d), which on a GPU would be global read-modify-writes.
__global__ void attention_kernel(float *out, float *att, const float *q, const float *key_cache,
                                 const float *value_cache, const unsigned char *mask,
                                 const int *pos, int n, Config c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, hd = c.head_dim;
    if (i >= n * c.n_heads) { return; }
    float *a = att + (size_t)i * c.seq_len;
    const float *qi = q + (size_t)i * hd, *k = key_cache + kv_offset(i, &c);
    float scale = 1.0f / sqrtf((float)hd);
    for (int s = 0, p = *pos, t = i / c.n_heads; s < p + n; s++) {
        if (visible(mask, t, n, p, s)) { a[s] = attention_score(qi, k, s, &c, scale); }
    }
    softmax_values(out + (size_t)i * hd, a, value_cache + kv_offset(i, &c), mask, i / c.n_heads, n,
                   *pos, c.n_kv_heads * hd, hd);
}

// ----------------------------------------------------------------------------
// forward: one pass over n tokens, any sublayers skipped

// CUDA graphs (a GPU pass of kjv-12l is ~150 launches of microseconds each): a pass shape's (n,
// first_row, skip set, mapping) launches, captured when it runs a second time, replayed at any
// position; MAX_GRAPHS kept, the least recently used replaced. The CPU "replays" the shape's pass.
enum { MAX_GRAPHS = 16 };
struct PassGraph {
    int n, first_row, mapping, runs; // the shape; 1: ran once, 2: captured, 3: replayed
    SkipSet skip;                    // the pass's, or none skipped
    uint64_t last_use, launches, sublayers; // LRU stamp; what a replay adds to the counters
#ifdef __CUDACC__
    cudaGraphExec_t exec;
#endif
};

static void drop_graph(struct PassGraph *g) {
#ifdef __CUDACC__
    if (g->runs >= 2) { cuda_check(cudaGraphExecDestroy(g->exec)); }
#endif
    g->runs = 0;
}

// Everything a pass needs, allocated once (forward allocates nothing). No product can overflow:
// read_config bounds sizes by 2^24 and n_layers by 256, so n_layers * seq_len * kv_dim < 2^56.
static void build_run_state(RunState *s, const Config *c, int max_tokens) {
    size_t T = (size_t)max_tokens, dim = (size_t)c->dim, hid = (size_t)c->hidden_dim;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t wide = q_dim > dim ? q_dim : dim, cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    size_t stacked = q_dim + 2 * kv_dim > 2 * hid ? q_dim + 2 * kv_dim : 2 * hid; // raw's rows
    stacked = stacked > dim ? stacked : dim;
    size_t rows = stacked > (size_t)c->vocab_size ? stacked : (size_t)c->vocab_size;
    size_t in = q_dim > hid ? q_dim : hid, lanes = dim * row_lanes((int)in); // part: the most lanes
    lanes = rows * row_lanes(c->dim) > lanes ? rows * row_lanes(c->dim) : lanes; // (GPU mapping)
    size_t sizes[] = {T * dim, T * wide, T * q_dim, T * hid, T * stacked,
                      T * c->n_heads * c->seq_len, T * c->vocab_size, cache, cache,
                      T * lanes};
    float **slots[] = {&s->x,   &s->xb,     &s->q,         &s->hb,          &s->raw,
                       &s->att, &s->logits, &s->key_cache, &s->value_cache, &s->part};
    enum { N_SLOTS = sizeof(sizes) / sizeof(sizes[0]) };
    size_t total = 0;
    for (int k = 0; k < N_SLOTS; k++) { total += sizes[k]; }
    float *base = (float *)device_malloc(mul_size(total, sizeof(float)));
    size_t off = 0;
    for (int k = 0; k < N_SLOTS; k++) { *slots[k] = base + off; off += sizes[k]; }
    s->max_tokens = max_tokens;
    size_t pass_bytes = (1 + 2 * T) * sizeof(int) + T * T; // pos, tokens, depth, mask: one upload
    s->pos = (int *)device_malloc(pass_bytes);
    s->tokens = s->pos + 1, s->depth = s->tokens + T, s->mask = (unsigned char *)(s->depth + T);
    s->pass_host = (int *)calloc_check(pass_bytes, 1);
    s->logits_host = (float *)malloc_check((T * c->vocab_size + 2 * c->n_layers * kv_dim) *
                                           sizeof(float));
    s->slot_host = s->logits_host + T * c->vocab_size;
    s->graphs = (struct PassGraph *)calloc_check(MAX_GRAPHS, sizeof(struct PassGraph));
    const char *graphs = getenv("SELFSPEC_GRAPHS"); // 0 or 1; unset: GRAPHS, the build's default
    s->use_graphs = graphs ? strcmp(graphs, "0") != 0 : GRAPHS != 0;
}

static void free_run_state(RunState *s) {
    for (int k = 0; k < MAX_GRAPHS; k++) { drop_graph(&s->graphs[k]); }
    free(s->graphs);
    device_free(s->x);
    device_free(s->pos);
    free(s->pass_host);
    free(s->logits_host);
}

// The most tokens one forward pass runs: longer prompts are prefilled in chunks of this many, and
// it bounds a draft plus its verification, a SWIFT tree and a CLaSp batch.
enum { MAX_PASS_TOKENS = 64 };

// Uploads this pass's position, tokens (NULL: the last pass's, still staged), RoPE offsets and
// mask (a causal chain when tree is NULL) in one copy, from staging laid out like the device's.
static void set_pass(Model *m, const int *tokens, int n, int pos, const TokenTree *tree) {
    RunState *s = &m->state;
    size_t T = (size_t)s->max_tokens;
    int *depth = s->pass_host + 1 + T;
    unsigned char *mask = (unsigned char *)(depth + T);
    s->pass_host[0] = pos;
    if (tokens) { memcpy(s->pass_host + 1, tokens, (size_t)n * sizeof(int)); }
    for (int t = 0; t < n; t++) {
        depth[t] = tree ? tree->depth[t] : t;
        for (int u = 0; u < n; u++) { mask[t * n + u] = tree ? tree->mask[t * n + u] : (u <= t); }
    }
    copy_to_device(s->pos, s->pass_host, (1 + 2 * T) * sizeof(int) + (size_t)n * n);
}

// Attention sublayer of layer l on the n residual rows in state.x (set_pass done): x += o(attn), K
// and V written at slots pos.. (slots >= pos are scratch, overwritten before read: free rollback)
static void attention_sublayer(Model *m, int l, int n) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    size_t lq = (size_t)l * q_dim * dim, lkv = (size_t)l * kv_dim * dim;
    float *k_l = s->key_cache + (size_t)l * c->seq_len * kv_dim;
    float *v_l = s->value_cache + (size_t)l * c->seq_len * kv_dim;
    rmsnorm(s->xb, s->x, w->rms_att + (size_t)l * dim, n, dim, c->norm_eps);
    MatmulOp qkv = {MM_QKV, n, dim, {q_dim, kv_dim, kv_dim}, c->head_dim, s->xb,
                    {w->wq + lq, w->wk + lkv, w->wv + lkv}, {s->q, k_l, v_l}, s->raw,
                    s->pos, s->depth, w->rope_inv_freq};
    matmul(s, qkv);
    if (gpu_mapping) { // xb = softmax(q k^T / sqrt(head_dim)) v, slots [0, pos + n) of the cache
        LAUNCH(attention_scores_kernel, n * c->n_heads * c->seq_len, s->att, s->q, k_l, s->mask,
               s->pos, n, *c);
        LAUNCH(attention_values_kernel, n * q_dim, s->xb, s->att, v_l, s->mask, s->pos, n, *c);
    } else {
        LAUNCH(attention_kernel, n * c->n_heads, s->xb, s->att, s->q, k_l, v_l, s->mask, s->pos, n,
               *c);
    }
    MatmulOp o = {MM_ADD, n, q_dim, {dim}, 0, s->xb, {w->wo + lq}, {s->x}, s->raw, 0, 0, 0};
    matmul(s, o); // x += o_proj(...)
}

// MLP sublayer of layer l: x += down(silu(gate(norm(x))) * up(norm(x))).
static void mlp_sublayer(Model *m, int l, int n) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hid = c->hidden_dim;
    size_t lh = (size_t)l * hid * dim;
    rmsnorm(s->xb, s->x, w->rms_ffn + (size_t)l * dim, n, dim, c->norm_eps);
    MatmulOp gate_up = {MM_SWIGLU, n, dim, {hid, hid}, 0, s->xb, {w->w_gate + lh, w->w_up + lh},
                        {s->hb}, s->raw, 0, 0, 0};
    matmul(s, gate_up);
    MatmulOp down = {MM_ADD, n, hid, {dim}, 0, s->hb, {w->w_down + lh}, {s->x}, s->raw, 0, 0, 0};
    matmul(s, down);
}

// Copies the residual rows of the captured tokens at sublayer boundary b, one copy per run of
// consecutive indices (verification captures rows 0..k: one copy).
static void capture_boundary(const Model *m, Capture *cap, int b) {
    if (cap == NULL) { return; }
    size_t dim = (size_t)m->config.dim;
    for (int k = 0, run; k < cap->n_idx; k += run) {
        for (run = 1; k + run < cap->n_idx && cap->idx[k + run] == cap->idx[k] + run; run++) {}
        copy_to_host(cap->states + ((size_t)b * cap->n_idx + k) * dim,
                     m->state.x + cap->idx[k] * dim, run * dim * sizeof(float));
    }
}

// Copies the K and V rows of cache slots [slot, slot + n) of every layer to or from buf (2 n_layers
// n kv_dim floats): passes at slots of accepted text (SWIFT's matchness, CLaSp) save and restore.
static void kv_slots(Model *m, int slot, int n, float *buf, int save) {
    const Config *c = &m->config;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim, bytes = (size_t)n * kv_dim * sizeof(float);
    for (int h = 0; h < 2 * c->n_layers; h++) { // layer h / 2's K rows, then its V rows
        size_t off = ((size_t)(h / 2) * c->seq_len + slot) * kv_dim;
        float *cache = (h % 2 ? m->state.value_cache : m->state.key_cache) + off;
        float *b = buf + (size_t)h * n * kv_dim;
        save ? copy_to_host(b, cache, bytes) : copy_to_device(cache, b, bytes);
    }
}

// Layers [first, last) on the n residual rows in state.x (set_pass done), under skip (NULL: none),
// capturing the rows at each sublayer boundary (CLaSp's DP runs one layer on a batch of states).
static void forward_layers(Model *m, int n, const SkipSet *skip, int first, int last,
                           Capture *capture) {
    for (int l = first; l < last; l++) {
        int run_attn = !(skip && skip->attn[l]), run_mlp = !(skip && skip->mlp[l]);
        if (run_attn) { attention_sublayer(m, l, n); }
        capture_boundary(m, capture, 2 * l + 1);
        if (run_mlp) { mlp_sublayer(m, l, n); }
        capture_boundary(m, capture, 2 * l + 2);
        m->state.n_sublayers += (uint64_t)(run_attn + run_mlp);
    }
}

// The launches of a pass (set_pass done): the embedding, the layers under skip, the logits rows
// [first_row, n) (n: none). No position: the kernels read state.pos, so a pass replays anywhere.
static void run_pass(Model *m, int n, const SkipSet *skip, int first_row, Capture *capture) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    LAUNCH(embed_kernel, n * c->dim, s->x, m->weights.token_embedding, s->tokens, n, c->dim);
    capture_boundary(m, capture, 0);
    forward_layers(m, n, skip, 0, c->n_layers, capture);
    if (first_row >= n) { return; }
    size_t f = (size_t)first_row;
    float *x = s->xb + f * c->dim, *logits = s->logits + f * c->vocab_size;
    rmsnorm(x, s->x + f * c->dim, m->weights.rms_final, n - first_row, c->dim, c->norm_eps);
    MatmulOp head = {MM_STORE, n - first_row, c->dim, {c->vocab_size}, 0, x,
                     {m->weights.lm_head}, {logits}, logits, 0, 0, 0};
    matmul(s, head);
}

// The cache entry of this pass shape: found, or the least recently used one, reset to it
static struct PassGraph *pass_graph(RunState *s, int n, int first_row, const SkipSet *skip) {
    static uint64_t clock;
    SkipSet none = {{0}, {0}}, key = skip ? *skip : none; // (a set exact to its last byte)
    struct PassGraph *g = s->graphs, *oldest = g;
    for (int k = 0; k < MAX_GRAPHS; k++, g++) {
        if (g->runs && g->n == n && g->first_row == first_row && g->mapping == gpu_mapping &&
            memcmp(&g->skip, &key, sizeof(key)) == 0) { break; }
        oldest = g->last_use < oldest->last_use ? g : oldest;
    }
    if (g == s->graphs + MAX_GRAPHS) { // not cached: the oldest entry becomes this shape
        drop_graph(g = oldest);
        g->n = n, g->first_row = first_row, g->mapping = gpu_mapping, g->skip = key;
    }
    g->last_use = ++clock;
    return g;
}

// run_pass, through the graph cache unless graphs are off or the pass captures hidden states: a
// shape runs the first time, is captured the second, replayed after (counted as if it ran)
static void replay_pass(Model *m, int n, const SkipSet *skip, int first_row, Capture *capture) {
    RunState *s = &m->state;
    if (!s->use_graphs || capture) { run_pass(m, n, skip, first_row, capture); return; }
    struct PassGraph *g = pass_graph(s, n, first_row, skip);
    g->runs += g->runs < 3;
    if (g->runs == 1) { run_pass(m, n, skip, first_row, NULL); return; }
#ifdef __CUDACC__
    if (g->runs == 2) {
        uint64_t launches = launch_count, sublayers = s->n_sublayers;
        cudaGraph_t graph;
        cuda_check(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
        run_pass(m, n, &g->skip, first_row, NULL);
        cuda_check(cudaStreamEndCapture(cudaStreamPerThread, &graph));
        cuda_check(cudaGraphInstantiate(&g->exec, graph, 0));
        cuda_check(cudaGraphDestroy(graph));
        g->launches = launch_count - launches, g->sublayers = s->n_sublayers - sublayers;
        launch_count = launches, s->n_sublayers = sublayers;
    }
    cuda_check(cudaGraphLaunch(g->exec, cudaStreamPerThread));
    launch_count += g->launches, s->n_sublayers += g->sublayers;
#else
    run_pass(m, g->n, &g->skip, g->first_row, NULL); // the entry's shape, not the caller's
#endif
}

// forward, computing and copying back only the logits rows [first_row, n) (first_row = n: none),
// to the same rows of state.logits_host: a prefill reads only its last row
static void forward_rows(Model *m, const int *tokens, int n, int pos, const SkipSet *skip,
                         const TokenTree *tree, Capture *capture, int first_row) {
    const Config *c = &m->config;
    RunState *s = &m->state;
    if (n < 1 || n > s->max_tokens || pos < 0 || pos + n > c->seq_len) {
        die(__FILE__, __LINE__, "forward: %d tokens at position %d do not fit (max %d per pass, "
            "context %d)", n, pos, s->max_tokens, c->seq_len);
    }
    set_pass(m, tokens, n, pos, tree);
    replay_pass(m, n, skip, first_row, capture);
    if (first_row >= n) { return; }
    size_t f = (size_t)first_row, vocab = (size_t)c->vocab_size;
    copy_to_host(s->logits_host + f * vocab, s->logits + f * vocab,
                 (n - f) * vocab * sizeof(float));
}

void forward(Model *m, const int *tokens, int n, int pos, const SkipSet *skip,
             const TokenTree *tree, Capture *capture) {
    forward_rows(m, tokens, n, pos, skip, tree, capture, 0);
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

typedef struct { float prob; int index; } ProbIndex;

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
    int top = argmax(logits, n);
    float max = logits[top], sum = 0.0f;
    for (int i = 0; i < n; i++) {
        probs[i] = expf((logits[i] - max) / temperature);
        sum += probs[i];
    }
    for (int i = 0; i < n; i++) { probs[i] /= sum; }
    if (top_p >= 1.0f) { return; }
    // a token below (1 - top_p) / (n - 1) can never be in the nucleus: sort only the others. The
    // most likely token always is: when every token is below the cutoff, it alone reaches top_p.
    float cutoff = (1.0f - top_p) / (float)(n - 1 > 0 ? n - 1 : 1);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] >= cutoff || i == top) {
            scratch[m].prob = probs[i];
            scratch[m].index = i;
            m++;
        }
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
// layer selection: which sublayers the draft skips
//
// A skip set z in {0,1}^{2L} (attention and MLP of each layer) is chosen by one of:
//   static  given by --skip / --skip-file
//   selfsd  Self-SD Sec. 3.3: Bayesian optimization offline, before decoding
//   swift   SWIFT Sec. 4: random search + Bayesian optimization on the fly, during decoding
//   asd     ASD Algorithm 1: a cosine-similarity rule on the prompt, once per prompt
//   clasp   CLaSp Algorithm 1: dynamic programming after verifications, whole layers
// (test/bench/oracle.c scores every set of one size, or N random ones: a baseline in no paper.)
// Symbols follow each paper, and they collide: Self-SD's gamma is the exit threshold, alpha the
// target acceptance rate, eps the step of Eq. 3; SWIFT's gamma is the context window, epsilon
// the exit threshold, alpha the measured acceptance rate, r the skip ratio, N_D the most draft
// tokens; ASD's alpha is the cosine threshold; Leviathan's gamma is the draft length. The code
// names each for what it is (threshold, target, window, cos_threshold...) and cites the symbol.
// SWIFT's dynamic verification (its token tree, Sec. 4.2) is part of the method: it sits with
// SWIFT below, and the decoding loop's verify_draft calls it.
// The Gaussian process and the cosine similarity are shared helpers, written once. The methods
// that choose during decoding (ASD, CLaSp, SWIFT) come here, before the decoding loop that calls
// them through the selector hooks; Self-SD's search, which scores a set by decoding with it,
// comes after it.

enum { METHOD_NONE, METHOD_STATIC, METHOD_SELFSD, METHOD_SWIFT, METHOD_ASD, METHOD_CLASP };
static const char *method_name(int method) {
    static const char *names[] = {"none", "static", "selfsd", "swift", "asd", "clasp"};
    return method >= 0 && method <= METHOD_CLASP ? names[method] : "?";
}

// Each method's settings, in one place: method_params_default() fills them with the papers'
// values (or says why not), the CLI's flags change some, the help text prints them. Its draft
// length K and exit rule are method_drafting's (below, with the exit rule).
typedef struct {
    int iters;            // Bayesian-optimization iterations (the paper: 1000 on 8 prompts)
    int n_candidates;     // the UCB maximum is taken over this many random candidates
    double kappa;         // UCB exploration weight, mean + kappa sd
    int dev_tokens;       // tokens decoded per prompt to score a candidate
} SelfSdParams;

// The shape of SWIFT's verification tree (Sec. 4.2): a draft step whose confidence is above
// confidence[i] (the first such i; else i = 3) puts its width[i] - 1 next-best tokens into it.
typedef struct {
    float confidence[3];
    int width[4];
} TreeShape;

typedef struct {
    int window;           // gamma of Eq. 3 (32 in App. B.2): the generated tokens needed before
                          // optimizing (Sec. 4.1.1's context accumulation) and the ones scored
    int max_steps;        // S: optimization steps at most (App. B.2)
    int patience;         // steps without a better set before optimization stops
    int bo_every;         // beta (Eq. 2): every beta-th step is a Bayesian-optimization step
    int n_candidates;     // the UCB maximum is taken over this many random candidates
    double kappa;         // UCB exploration weight
    float target;         // optimization stops once the matchness exceeds this
    float skip_ratio;     // r: fraction of the 2L sublayers skipped (App. B.2); lowered while
                          // acceptance stays below 0.7 (the long version's App. C.2)
    float budget;         // not in the paper: optimization time as a share of decoding time
    TreeShape tree;       // dynamic verification (Sec. 4.2)
    int tree_on;          // 1: verify that tree (greedy only); 0: the draft chain alone
} SwiftParams;

typedef struct {
    double cos_threshold; // alpha (Table 2): skip attention l when C_l >= this
    int every_m;          // m: also skip attention and MLP of every m-th layer
    int keep_last_n;      // n: never skip the last n layers
} AsdParams;

typedef struct {
    int interval;         // LOI: a DP every this many verifications (Sec. 5.3.2)
    float skip_ratio;     // M = round(skip_ratio * L) layers skipped, exactly (Algorithm 1's M)
} ClaspParams;

typedef struct {
    SelfSdParams selfsd;
    SwiftParams swift;
    AsdParams asd;
    ClaspParams clasp;
} MethodParams;

static MethodParams method_params_default(void) {
    MethodParams p;
    memset(&p, 0, sizeof(p));
    // Self-SD: 64 iterations, not 1000: a tiny model's landscape is small. Kappa 2.576 as in
    // dilab-zju/self-speculative-decoding (bayes_opt 1.4.3's UCB). Decision: the UCB maximum is
    // over 2000 random binary candidates, not bayes_opt's 10,000 random points and L-BFGS-B: the
    // input is binary, a continuous optimum would be rounded anyway, and fewer keep it cheap.
    p.selfsd.iters = 64;
    p.selfsd.n_candidates = 2000;
    p.selfsd.kappa = 2.576;
    p.selfsd.dev_tokens = 32;
    // SWIFT App. B.2; kappa 2.5 as in hemingkx/SWIFT. Decision: 1000 random candidates of
    // the right count (hemingkx/SWIFT: bayes_opt's 10,000 random points plus L-BFGS-B, then
    // the top-count coordinates). The budget is ours: on the CPU a step costs several decoding
    // steps (swift_step says why); 1 = the paper's schedule.
    p.swift.window = 32;
    p.swift.max_steps = 1000;
    p.swift.patience = 300;
    p.swift.bo_every = 25;
    p.swift.n_candidates = 1000;
    p.swift.kappa = 2.5;
    p.swift.target = 0.95f;
    p.swift.skip_ratio = 0.45f;
    p.swift.budget = 0.02f;
    // Decision: hemingkx/SWIFT's greedy tree widths, 3/5/8/10 above confidence 0.95/0.8/0.5/0,
    // not Sec. 4.2's 1/3/5/10 (the code's sampling widths); the tree runs only when greedy
    TreeShape tree = {{0.95f, 0.8f, 0.5f}, {3, 5, 8, 10}};
    p.swift.tree = tree;
    p.swift.tree_on = 1;
    // ASD Table 2; it keeps Self-SD's drafting
    p.asd.cos_threshold = 0.985;
    p.asd.every_m = 3;
    p.asd.keep_last_n = 2;
    // CLaSp: the paper finds the speedup rising then falling with the LOI (Fig. 4b); its DP costs
    // about one verification on a GPU (Sec. 5.1), 1.1 on kjv-12l and 1.9-2.3 on SmolLM2-135M on
    // the CPU (test/bench/README.md): one every 4th adds 0.3-0.6 verification a round. Decision: 4.
    p.clasp.interval = 4;
    // Decision: M = L / 2, the "half of the layers" of Sec. 5.1 and the low end of Sec. 4.1's
    // 50-60% (Sec. 5.3.1 finds 44 of 80 best on LLaMA3-70B).
    p.clasp.skip_ratio = 0.5f;
    return p;
}

// The number of sublayers s skips.
static int skip_count(const SkipSet *s, int n_layers) {
    int k = 0;
    for (int l = 0; l < n_layers; l++) { k += s->attn[l] + s->mlp[l]; }
    return k;
}

// Attention and MLP of every odd layer, never the last: SWIFT's starting point (as its code
// does), CLaSp's draft until its first DP, and the bench's 50% draft.
static SkipSet alternate_layers(int n_layers) {
    SkipSet s;
    memset(&s, 0, sizeof(s));
    for (int l = 1; l < n_layers - 1; l += 2) { s.attn[l] = s.mlp[l] = 1; }
    return s;
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

// A skip set as the GP's input vector: attention bits then MLP bits.
static void skip_to_vector(const SkipSet *s, int n_layers, float *v) {
    for (int l = 0; l < n_layers; l++) {
        v[l] = s->attn[l];
        v[n_layers + l] = s->mlp[l];
    }
}

// --- Gaussian process on binary vectors (shared by Self-SD and SWIFT) -------
// Matern 5/2 kernel k(r) = (1 + sqrt5 r/l + 5r^2/(3l^2)) exp(-sqrt5 r/l) on the Euclidean
// distance r (sqrt of the Hamming distance), a noise term on the diagonal, targets normalized
// to zero mean and unit variance, a Cholesky solve. Decision: the length scale is fixed at
// sqrt(dim)/2 rather than fitted by marginal likelihood (bayes_opt, in both papers' code, lets
// sklearn fit it); a fixed scale keeps the code short and deterministic; noise 1e-2 as there.
// Only the last GP_WINDOW observations are used, so a fit stays O(GP_WINDOW^3).

enum { GP_WINDOW = 256, GP_MAX_DIM = 2 * SS_MAX_LAYERS };

typedef struct {
    int dim;         // 2L
    int n;           // observations in the window
    int total;       // observations ever added
    float *x;        // (GP_WINDOW, dim) ring buffer of inputs
    double *y;       // (GP_WINDOW) targets
    double *chol;    // (GP_WINDOW, GP_WINDOW) lower Cholesky factor of K + noise I
    double *weights; // (GP_WINDOW) (K + noise I)^-1 (y - mean) / std
    double y_mean, y_std, lengthscale, noise;
} Gp;

static void gp_init(Gp *gp, int dim) {
    memset(gp, 0, sizeof(*gp));
    gp->dim = dim;
    gp->x = (float *)calloc_check((size_t)GP_WINDOW * dim, sizeof(float));
    gp->y = (double *)calloc_check((size_t)GP_WINDOW * (GP_WINDOW + 2), sizeof(double));
    gp->chol = gp->y + GP_WINDOW;
    gp->weights = gp->chol + (size_t)GP_WINDOW * GP_WINDOW;
    gp->lengthscale = sqrt((double)dim) / 2.0;
    gp->noise = 1e-2;
}

static void gp_free(Gp *gp) { free(gp->x), free(gp->y); } // y's allocation holds chol, weights

static double gp_kernel(const Gp *gp, const float *a, const float *b) {
    double d2 = 0;
    for (int i = 0; i < gp->dim; i++) { d2 += (double)(a[i] - b[i]) * (a[i] - b[i]); }
    double s = sqrt(5.0 * d2) / gp->lengthscale;
    return (1.0 + s + s * s / 3.0) * exp(-s);
}

// Adds one observation and refits: chol = cholesky(K + noise I), weights = solve(y normalized).
static void gp_add(Gp *gp, const float *x, double y) {
    int slot = gp->total % GP_WINDOW, n;
    memcpy(gp->x + (size_t)slot * gp->dim, x, (size_t)gp->dim * sizeof(float));
    gp->y[slot] = y;
    gp->total++;
    gp->n = n = gp->total < GP_WINDOW ? gp->total : GP_WINDOW;
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) { mean += gp->y[i]; }
    mean /= n;
    for (int i = 0; i < n; i++) { var += (gp->y[i] - mean) * (gp->y[i] - mean); }
    gp->y_mean = mean;
    gp->y_std = n > 1 && var > 0 ? sqrt(var / n) : 1.0;
    double *chol = gp->chol;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j <= i; j++) {
            double s = gp_kernel(gp, gp->x + (size_t)i * gp->dim, gp->x + (size_t)j * gp->dim) +
                       (i == j ? gp->noise : 0);
            for (int k = 0; k < j; k++) { s -= chol[i * GP_WINDOW + k] * chol[j * GP_WINDOW + k]; }
            chol[i * GP_WINDOW + j] = i == j ? sqrt(s > 1e-12 ? s : 1e-12)
                                             : s / chol[j * GP_WINDOW + j];
        }
    }
    for (int i = 0; i < n; i++) { // forward then back substitution
        double s = (gp->y[i] - mean) / gp->y_std;
        for (int k = 0; k < i; k++) { s -= chol[i * GP_WINDOW + k] * gp->weights[k]; }
        gp->weights[i] = s / chol[i * GP_WINDOW + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = gp->weights[i];
        for (int k = i + 1; k < n; k++) { s -= chol[k * GP_WINDOW + i] * gp->weights[k]; }
        gp->weights[i] = s / chol[i * GP_WINDOW + i];
    }
}

// Posterior mean and variance at x, in the targets' units.
static void gp_predict(const Gp *gp, const float *x, double *mean, double *var) {
    double ks[GP_WINDOW], v[GP_WINDOW], mu = 0, vv = 0;
    const double *chol = gp->chol;
    for (int i = 0; i < gp->n; i++) {
        ks[i] = gp_kernel(gp, x, gp->x + (size_t)i * gp->dim);
        mu += ks[i] * gp->weights[i];
    }
    for (int i = 0; i < gp->n; i++) { // v = L^-1 k*
        double s = ks[i];
        for (int k = 0; k < i; k++) { s -= chol[i * GP_WINDOW + k] * v[k]; }
        v[i] = s / chol[i * GP_WINDOW + i];
        vv += v[i] * v[i];
    }
    *mean = gp->y_mean + gp->y_std * mu;
    *var = gp->y_std * gp->y_std * (1.0 - vv > 0 ? 1.0 - vv : 0.0);
}

// A random candidate: each sublayer skipped with probability p, or, when count > 0, exactly
// count sublayers skipped among the allowed ones (layers first_layer..last_layer). Self-SD's
// callers (count 0) draw p uniform in [0, 0.6), so candidates range from sparse to about 60%
// skipped; with count > 0 (SWIFT) p is not used.
static void random_skip_set(Rng *r, float p, int count, int first_layer, int last_layer,
                            SkipSet *s) {
    memset(s, 0, sizeof(*s));
    int slots = 2 * (last_layer - first_layer + 1);
    if (count <= 0) {
        for (int l = first_layer; l <= last_layer; l++) {
            s->attn[l] = rng_uniform(r) < p;
            s->mlp[l] = rng_uniform(r) < p;
        }
        return;
    }
    for (int placed = 0; placed < count && placed < slots;) {
        int k = (int)(rng_u32(r) % (uint32_t)slots), l = first_layer + k / 2;
        unsigned char *flag = k % 2 ? &s->mlp[l] : &s->attn[l];
        if (!*flag) { *flag = 1; placed++; }
    }
}

// UCB acquisition (mean + kappa sd) maximized over n_random candidates drawn like
// random_skip_set. The best candidate goes to *best. The papers' codes differ in kappa:
// dilab-zju/self-speculative-decoding uses 2.576, hemingkx/SWIFT 2.5 (both bayes_opt's UCB,
// xi = 0); each method's params hold its own.
static void gp_propose(const Gp *gp, Rng *r, int n_layers, int count, int first, int last,
                       int n_random, double kappa, SkipSet *best) {
    float v[GP_MAX_DIM];
    double best_ucb = -INFINITY;
    for (int k = 0; k < n_random; k++) {
        SkipSet cand;
        random_skip_set(r, 0.6f * rng_uniform(r), count, first, last, &cand);
        skip_to_vector(&cand, n_layers, v);
        double mean, var;
        gp_predict(gp, v, &mean, &var);
        double ucb = mean + kappa * sqrt(var);
        if (ucb > best_ucb) { best_ucb = ucb; *best = cand; }
    }
}

// --- ASD: the cosine rule (ASD Sec. 3.2, Algorithm 1, Table 2) ---------------
// C_l = mean over prompt positions of cos(X_l, Y_l), "the hidden states before and after" attention
// layer l (Sec. 3.2), read on the residual stream: cos(h, h + attn(norm h)).
// Remove attention l when C_l >= alpha and l <= L - n; also remove attention and MLP of every
// m-th layer (l = jm <= L - n); alpha, m, n = 0.985, 3, 2 (AsdParams). The paper numbers layers
// 1..L: layer l here is index l - 1, so "every m-th" is indices m-1, 2m-1, ... and "l <= L - n"
// is index <= L-n-1.
static SkipSet select_asd(const double *cos_attn, int n_layers, const AsdParams *p) {
    SkipSet s;
    memset(&s, 0, sizeof(s));
    for (int l = 1; l <= n_layers - p->keep_last_n; l++) {
        if (cos_attn[l - 1] >= p->cos_threshold) { s.attn[l - 1] = 1; }
        if (l % p->every_m == 0) { s.attn[l - 1] = s.mlp[l - 1] = 1; }
    }
    return s;
}

// Accumulates sum over tokens of cos(attention input, attention output) per layer from a capture.
static void asd_accumulate(const Capture *cap, int n_layers, int dim, double *cos_sum) {
    for (int l = 0; l < n_layers; l++) {
        for (int k = 0; k < cap->n_idx; k++) {
            const float *in = cap->states + ((size_t)(2 * l) * cap->n_idx + k) * dim;
            const float *out = cap->states + ((size_t)(2 * l + 1) * cap->n_idx + k) * dim;
            cos_sum[l] += cosine(in, out, dim);
        }
    }
}

// --- CLaSp: dynamic programming over layers (CLaSp Eq. 2, Algorithm 1) --------
// h_0..h_L are the full model's hidden states of the last accepted token: h_i is capture boundary
// 2i, layer i's input, so h_0 is the embedding and h_L the last layer's output. g(i, j) = the
// best state after i layers with j of them skipped:
//   g(i, 0) = h_i
//   g(i, j) = argmax by cosine to h_i of { g(i-1, j-1) (skip layer i),  f_i(g(i-1, j)) (run it) }
// (f_i = layer i of 1..L, the paper's f_{i-1}: run as layer index i - 1), and backtracking from
// (L, M) gives the skipped layers. Decision: "the hidden states of the last
// accepted token" (Sec. 3.4; Sec. 3.1) are read as the states at that token's own position in the
// verification pass, the freshest full-model states, whose output chose the next token. All g(i-1,
// j) of one layer run through f_i as one batch (the paper's "sequence parallel"): each candidate
// sits at the token's position `slot`, attends the cached prefix plus itself (an identity mask),
// and writes K/V only at slots slot.. which are saved before and restored after (slot holds the
// real token's K/V).

// Runs layer l on n residual rows at position slot (identity mask, RoPE position slot), through
// the forward pass's own forward_layers: each candidate state is one token of the batch.
static void run_layer_batch(Model *m, int l, float *rows, int n, int slot) {
    size_t bytes = (size_t)n * m->config.dim * sizeof(float);
    int depth[MAX_PASS_TOKENS];
    unsigned char mask[MAX_PASS_TOKENS * MAX_PASS_TOKENS];
    for (int t = 0; t < n; t++) {
        depth[t] = 0;
        for (int u = 0; u < n; u++) { mask[t * n + u] = t == u; }
    }
    TokenTree tree = {depth, mask};
    set_pass(m, NULL, n, slot, &tree);
    copy_to_device(m->state.x, rows, bytes);
    forward_layers(m, n, NULL, l, l + 1, NULL);
    copy_to_host(rows, m->state.x, bytes);
}

// h_0..h_L (2L + 1 rows of dim) of the last accepted token, whose row is `row` of a
// verification's capture (2L + 1, k + 1, dim): gathered to the front of the capture, in place.
static const float *clasp_states(float *states, const Config *c, int k, int row) {
    for (int b = 0; b <= 2 * c->n_layers; b++) {
        memmove(states + (size_t)b * c->dim, states + ((size_t)b * (k + 1) + row) * c->dim,
                (size_t)c->dim * sizeof(float));
    }
    return states;
}

// What a DP decided, for --trace: each decision is gain = cos(h_i, skip) - cos(h_i, run) (INFINITY
// where only the skip state exists); margin is the smallest |gain|, at (layer, skips): the
// closest call (margin INFINITY: none); path[l] is the gain of the decision on layer l along the
// backtracked path (NAN: the path made no decision there, j being 0).
typedef struct {
    double margin;
    int layer, skips;
    float path[SS_MAX_LAYERS];
} ClaspDp;

static SkipSet select_clasp(Model *m, const float *h, int slot, int max_skip, ClaspDp *dp) {
    const Config *c = &m->config;
    int L = c->n_layers, dim = c->dim, M = max_skip < L ? max_skip : L;
    // Decision: M is capped by one pass (64 states) and by the context slots left for their K/V
    // (Algorithm 1 has none; zy-ning/Spec-Bench's port clones the cache): near the end, fewer.
    if (M > m->state.max_tokens) { M = m->state.max_tokens; }
    if (slot + M > c->seq_len) { M = c->seq_len - slot; }
    size_t row = (size_t)dim;
    float *g = (float *)malloc_check((size_t)(M + 1) * row * sizeof(float));     // g(i-1, .)
    float *next = (float *)malloc_check((size_t)(M + 1) * row * sizeof(float));  // g(i, .)
    float *batch = (float *)malloc_check((size_t)(M + 1) * row * sizeof(float));
    // gain[i][j] > 0 if g(i, j) came from g(i-1, j-1), layer i skipped: the backtracking pointer
    double *gain = (double *)calloc_check((size_t)(L + 1) * (M + 1), sizeof(double));
    float *saved = (float *)malloc_check((size_t)2 * L * (M + 1) * c->n_kv_heads * c->head_dim *
                                         sizeof(float));
    kv_slots(m, slot, M > 0 ? M : 1, saved, 1);
    memcpy(g, h, row * sizeof(float)); // g(0, 0) = h_0
    ClaspDp d = {INFINITY, -1, -1, {0}};
    for (int i = 1; i <= L; i++) {
        // Only states that can still end at (L, M) matter: after layer i at most L - i more
        // layers can be skipped, so j >= M - (L - i). This band saves about a third of the layers
        // run (M = L / 2) and changes nothing else.
        int lo = M - (L - i) > 1 ? M - (L - i) : 1;
        int top = i < M ? i : M;             // j ranges over lo..min(i, M)
        int run_top = i - 1 < M ? i - 1 : M; // g(i-1, j) exists for j <= min(i-1, M)
        int n_run = run_top - lo + 1;
        if (n_run > 0) {                     // f_i on g(i-1, lo..run_top) in one batch
            memcpy(batch, g + (size_t)lo * row, (size_t)n_run * row * sizeof(float));
            run_layer_batch(m, i - 1, batch, n_run, slot);
        }
        const float *h_i = h + (size_t)(2 * i) * row;
        memcpy(next, h_i, row * sizeof(float));
        for (int j = lo; j <= top; j++) {
            const float *skip_state = g + (size_t)(j - 1) * row;
            const float *run_state = j <= run_top ? batch + (size_t)(j - lo) * row : NULL;
            double g_ij = INFINITY; // no run state: j = i, every layer so far skipped
            if (run_state) {
                // Decision: a tie runs the layer, as zy-ning/Spec-Bench does; Algorithm 1 skips it
                g_ij = cosine(h_i, skip_state, dim) - cosine(h_i, run_state, dim);
                if (fabs(g_ij) < d.margin) { d.margin = fabs(g_ij); d.layer = i - 1; d.skips = j; }
            }
            memcpy(next + (size_t)j * row, g_ij > 0 ? skip_state : run_state, row * sizeof(float));
            gain[i * (M + 1) + j] = g_ij;
        }
        float *tmp = g; g = next; next = tmp;
    }
    kv_slots(m, slot, M > 0 ? M : 1, saved, 0);
    SkipSet s;
    memset(&s, 0, sizeof(s));
    for (int i = L, j = M; i > 0; i--) { // backtrack from (L, M)
        d.path[i - 1] = j > 0 ? (float)gain[i * (M + 1) + j] : NAN;
        if (j > 0 && gain[i * (M + 1) + j] > 0) { s.attn[i - 1] = s.mlp[i - 1] = 1; j--; }
    }
    free(g); free(next); free(batch); free(gain); free(saved);
    if (dp) { *dp = d; }
    return s;
}

// --- SWIFT: on-the-fly optimization (SWIFT Sec. 4.1, App. B.2) ---------------
// Matchness (Eq. 3-4): the draft, teacher-forced over the last gamma generated tokens in one
// pass, predicts each of them; the score is the fraction it gets right. The pass runs at the
// slots those tokens already occupy, so those slots are saved before and restored after: the
// real cache is left exactly as it was. Decision: the most recent gamma tokens (a sliding
// window); Eq. 3 says only "the previously generated tokens within the context window", and
// hemingkx/SWIFT scores the first gamma + 1 of the instance.
static double swift_matchness(Model *m, const int *seq, int pos, int window, const SkipSet *s) {
    const Config *c = &m->config;
    int start = pos - window - 1; // inputs seq[start .. pos-2] predict seq[start+1 .. pos-1]
    if (start < 0 || window > m->state.max_tokens) { return 0.0; }
    float *saved = (float *)malloc_check((size_t)2 * c->n_layers * window * c->n_kv_heads *
                                         c->head_dim * sizeof(float));
    kv_slots(m, start, window, saved, 1);
    forward(m, seq + start, window, start, s, NULL, NULL);
    kv_slots(m, start, window, saved, 0);
    int match = 0;
    for (int t = 0; t < window; t++) {
        match += argmax(m->state.logits_host + (size_t)t * c->vocab_size, c->vocab_size) ==
                 seq[start + t + 1];
    }
    free(saved);
    return (double)match / window;
}

// SWIFT's state, which persists across the prompts of a run.
typedef struct {
    SwiftParams p;
    float ratio;                    // r now: p.skip_ratio, lowered by swift_after_verify
    int steps, since_best, done;    // optimization steps, steps since the best improved, stopped
    int changes;                    // steps whose candidate replaced the kept set
    int first_at;                   // generated tokens at this prompt's first step (-1: none yet)
    double best_score;              // the best set's matchness (-1: not scored yet)
    SkipSet best;
    Gp gp;
    Rng rng;
    int rounds, drafted, accepted;  // verifications, and drafts verified since the last ratio check
    double run_ms;                  // decoding time seen, the steps included
    double opt_ms, last_ms;         // time in steps; the start of the last round
    double step_ms;                 // the last step's time: what the next one will likely cost
    double (*clock)(void);          // time_ms: the budget's clock (a test may count work instead)
    // the last step, for --trace: its proposal (0 the starting set, 1 random, 2 the GP's), the
    // candidate, its matchness and the kept set's on the same window (-1: none kept yet)
    int phase;
    SkipSet cand;
    double cand_score, kept_score;
    float cand_ratio;               // the r the step ran under (App. C.2 may lower r after it)
} Swift;

static void swift_init(Swift *w, const SwiftParams *p, int n_layers, uint64_t seed) {
    memset(w, 0, sizeof(*w));
    w->p = *p;
    w->ratio = p->skip_ratio;
    w->best_score = -1.0;
    w->best = alternate_layers(n_layers); // the starting point
    w->first_at = -1;
    w->clock = time_ms;
    gp_init(&w->gp, 2 * n_layers);
    rng_seed(&w->rng, seed);
}

// count sublayers spread evenly over layers 1..L-2, attention and MLP alternating: App. C.2's
// restart set after lowering r (the first start is alternate_layers, as in hemingkx/SWIFT).
static SkipSet uniform_skip_set(int n_layers, int count) {
    SkipSet s;
    memset(&s, 0, sizeof(s));
    int inner = n_layers - 2, n = count < 2 * inner ? count : 2 * inner; // at most all of them
    for (int i = 0; i < n; i++) { // the i-th at layer 1 + i (L - 2) / n: two share one at most
        int l = 1 + (int)((long)i * inner / n);
        if (i % 2 == 0) { s.attn[l] = 1; } else { s.mlp[l] = 1; }
    }
    return s;
}

// One optimization step before a decoding step (Sec. 4.1.2): propose a candidate with exactly
// round(r * 2L) skipped sublayers, never in the first or last layer (Eq. 2: the GP's proposal
// at step o = steps + 1 when o % beta == 0, else random), score it, keep it if it beats the best.
// Decision: a GP step waits until the GP holds two points (after App. C.2's restart empties it,
// one point would rank candidates by their distance to it alone). Decision: the count is
// round(r * 2L) over the whole model, so r means the same as the reported skip ratio;
// hemingkx/SWIFT uses int(r * 2(L - 2)).
// Decision on persistence: like hemingkx/SWIFT, the state lives for the whole run (the prompts
// of -f); once optimization stops it never restarts on a distribution shift (that would need a
// detector the paper does not define): the best set carries over to later prompts.
// Decision on cost (CPU): the paper runs a step before every decoding step, at 0.8% of the time
// (Fig. 6) over 1000 instances. On the CPU a step's draft passes over gamma tokens are
// compute-bound while a decoding step streams the weights once, so each pass costs several
// decoding steps: a step runs only if the steps so far plus this one (priced at the last step's)
// stay within `p.budget` of the decoding time so far (--swift-budget, default 0.02; 1: the
// paper's schedule). The first step always runs. Fig. 8a's S and beta trade the same way.
// Context accumulation (Sec. 4.1.1): no step until gamma = `p.window` LLM-generated tokens of this
// prompt sit in the cache (seq[n_prompt .. pos-1]; seq[pos] is not run yet): Eq. 3 scores
// generated tokens only; until then the draft is the best set so far (at first, the start set).
static void swift_step(Swift *w, Model *m, const int *seq, int n_prompt, int pos) {
    double t0 = w->clock();
    if (w->last_ms > 0) { w->run_ms += t0 - w->last_ms; } // the previous round, its step included
    w->last_ms = t0;
    int within_budget = w->p.budget >= 1.0f || w->opt_ms + w->step_ms <= w->p.budget * w->run_ms;
    if (w->done || pos - n_prompt < w->p.window || !within_budget) { return; }
    int L = m->config.n_layers, count = (int)lroundf(w->ratio * 2 * L);
    SkipSet cand;
    if (w->best_score < 0) {
        // Decision: the first step scores the starting set, so that a candidate must beat it to
        // be kept; hemingkx/SWIFT never scores it
        cand = w->best;
        w->phase = 0;
    } else if ((w->steps + 1) % w->p.bo_every == 0 && w->gp.n > 1) {
        gp_propose(&w->gp, &w->rng, L, count, 1, L - 2, w->p.n_candidates, w->p.kappa, &cand);
        w->phase = 2;
    } else {
        random_skip_set(&w->rng, 0, count, 1, L - 2, &cand);
        w->phase = 1;
    }
    if (w->first_at < 0) { w->first_at = pos - n_prompt; }
    double score = swift_matchness(m, seq, pos, w->p.window, &cand);
    // Decision: Sec. 4.1.2 keeps the highest-scoring set, and a score is only comparable with one
    // taken on the same tokens. The window slides (and the prompt changes), so the kept set is
    // re-scored on this window before the comparison, one more draft pass per step;
    // hemingkx/SWIFT instead scores every set on one fixed window per instance.
    if (w->best_score >= 0) { w->best_score = swift_matchness(m, seq, pos, w->p.window, &w->best); }
    w->cand = cand;
    w->cand_ratio = w->ratio;
    w->cand_score = score;
    w->kept_score = w->best_score;
    float v[GP_MAX_DIM];
    skip_to_vector(&cand, L, v);
    gp_add(&w->gp, v, score);
    w->steps++;
    if (score > w->best_score) {
        w->changes += w->best_score >= 0; // scoring the starting point changes nothing
        w->best_score = score;
        w->best = cand;
        w->since_best = 0;
    } else {
        w->since_best++;
    }
    w->done = w->steps >= w->p.max_steps || w->since_best >= w->p.patience ||
              w->best_score > w->p.target;
    w->step_ms = w->clock() - t0;
    w->opt_ms += w->step_ms;
}

// SWIFT App. C.2 (the long version): r is lowered when the acceptance rate stays below 0.7
// (0.5 -> 0.4 for Llama-3-70B). Decision, as the paper gives no schedule: every 50
// verifications while optimizing, if the drafts verified meanwhile were accepted below 0.7, r
// drops by 0.05 (down to 0.05), the draft becomes the uniform set at the new count, and the
// search restarts there, its GP cleared (the old points had another count). Counting
// verifications rather than optimization steps keeps the rule working when the budget leaves
// few steps. Returns 1 when it lowered r.
static int swift_after_verify(Swift *w, int n_layers, int drafted, int accepted) {
    if (w->done) { return 0; }
    w->rounds++;
    w->drafted += drafted;
    w->accepted += accepted;
    if (w->rounds % 50 != 0 || w->drafted == 0) { return 0; }
    int lower = (double)w->accepted / w->drafted < 0.7 && w->ratio > 0.075f;
    if (lower) {
        w->ratio -= 0.05f;
        w->best = uniform_skip_set(n_layers, (int)lroundf(w->ratio * 2 * n_layers));
        w->best_score = -1.0;
        w->gp.n = w->gp.total = 0;
    }
    w->drafted = w->accepted = 0;
    return lower;
}

// SWIFT's dynamic verification (Sec. 4.2), greedy only: the draft chain d1..dk plus, at each depth
// j, the draft's next-best tokens as leaves (k_j - 1 of them, k_j by the confidence of step j:
// TreeShape). Linearized as [x, d1..dk, leaves...]: the chain first, so accepted chain
// tokens already sit at consecutive cache slots; each leaf at depth j attends x, d1..d_{j-1} and
// itself, with RoPE position pos + j. Returns the tree size n; tokens/depth/mask are filled.
enum { MAX_ALTS = 16 }; // next-best tokens kept per draft step, at most
typedef struct {
    int n;
    int tokens[MAX_PASS_TOKENS];
    int depth[MAX_PASS_TOKENS];
    unsigned char mask[MAX_PASS_TOKENS * MAX_PASS_TOKENS];
} SwiftTree;

static void build_tree(SwiftTree *tr, const int *draft, int k, const int *alts, const int *n_alts) {
    int n = 0;
    for (int j = 0; j <= k; j++) { tr->tokens[n] = draft[j]; tr->depth[n] = j; n++; }
    for (int j = 1; j <= k; j++) {
        for (int a = 0; a < n_alts[j]; a++) {
            tr->tokens[n] = alts[j * MAX_ALTS + a];
            tr->depth[n] = j;
            n++;
        }
    }
    tr->n = n;
    memset(tr->mask, 0, sizeof(tr->mask));
    for (int t = 0; t < n; t++) {
        int d = tr->depth[t];
        // the chain ancestors x, d1..d_{d-1}, and the token itself
        for (int u = 0; u < d; u++) { tr->mask[t * n + u] = 1; }
        tr->mask[t * n + t] = 1;
    }
}

// The draft's top alternatives to its top-1 token at one step: k - 1 next-best ids, k the tree
// width of the first confidence level the step's confidence is above; at most max_alts.
static int top_alternatives(const float *logits, int vocab, float confidence,
                            const TreeShape *shape, int max_alts, int *alts) {
    int level = 0;
    // Decision: compared in float; hemingkx/SWIFT compares a double with 0.8, so there a
    // confidence of exactly 0.8f (0.80000001) is above 0.8 and gets width 5, here 8
    while (level < 3 && confidence <= shape->confidence[level]) { level++; }
    int k = shape->width[level];
    int n = 0, top = argmax(logits, vocab);
    // selection by repeated scans: k <= 10; a vocabulary smaller than k has vocab - 1 to give
    for (int a = 0; a < k - 1 && a < MAX_ALTS && a < max_alts && a < vocab - 1; a++) {
        int best = -1;
        for (int i = 0; i < vocab; i++) {
            int used = i == top;
            for (int q = 0; q < n && !used; q++) { used = alts[q] == i; }
            if (!used && (best < 0 || logits[i] > logits[best])) { best = i; }
        }
        alts[n++] = best;
    }
    return n;
}

// Greedy verification of a tree pass: walk the chain while the full model's argmax equals it;
// at the first mismatch, a leaf holding the argmax is accepted too (its K/V row is copied to
// the next chain slot, one row per layer), and the bonus comes from that leaf's row.
// Returns the number of accepted draft tokens (in kept[]); *next is the full model's token;
// rows[t] is the logits row that emitted token t (a leaf's row when a leaf was accepted).
static int verify_tree(Model *m, const SwiftTree *tr, int k, int pos, int *kept, int *next,
                       int *rows) {
    int vocab = m->config.vocab_size, j = 0;
    for (;;) {
        int target = argmax(m->state.logits_host + (size_t)j * vocab, vocab);
        rows[j] = j;
        if (j < k && target == tr->tokens[j + 1]) { // the chain goes on
            kept[j++] = target;
            continue;
        }
        int leaf = -1;
        for (int t = k + 1; t < tr->n && leaf < 0 && j < k; t++) {
            if (tr->depth[t] == j + 1 && tr->tokens[t] == target) { leaf = t; }
        }
        if (leaf < 0) { *next = target; return j; }
        kept[j] = target; // the leaf: move its K/V to slot pos + j + 1
        kv_slots(m, pos + leaf, 1, m->state.slot_host, 1);
        kv_slots(m, pos + j + 1, 1, m->state.slot_host, 0);
        rows[j + 1] = leaf;
        *next = argmax(m->state.logits_host + (size_t)leaf * vocab, vocab);
        return j + 1;
    }
}

// --- the round: what the decoding loop does, as the papers count it ------------
// The draft length has one name per concept: K (max_draft), the most draft tokens a round may
// propose, set per run; MAX_DRAFT, K's compile-time cap, so that a draft and its verification fit
// one pass; and a round's limit, K clipped by the context and the tokens still wanted.
enum { MAX_DRAFT = MAX_PASS_TOKENS - 1 };
// Why drafting stopped: a confidence below gamma (the exit rule), K tokens drafted, no more room
// (the context, the tokens still wanted, SWIFT's tree filling one pass, an empty skip set), or an
// EOS among the kept draft tokens (the round is cut there: generate_spec).
enum { END_EXIT, END_K, END_ROOM, END_EOS };

// One round of Self-SD Algorithm 2. generate_spec fills it, the selector's hooks add their
// decisions, record_round adds it to the statistics, and the observer sees it: --trace writes it
// as its "round" record, one key per field named first below (README "The trace").
typedef struct {
    int round;             // round: the prompt's rounds before this one (from 0)
    int pos;               // pos: Alg. 2's i, the cache slot of x (the last token, not yet verified)
    SkipSet skip;          // skip: the set the draft ran under (after SWIFT's step, if one ran)
    int drafted;           // drafted: k, the draft tokens proposed (cut at a kept EOS: END_EOS)
    float conf[MAX_DRAFT]; // conf: each draft token's max softmax(logits), T = 1 (Alg. 3)
    int end;               // end: why drafting stopped (END_*)
    int accepted;          // accepted: the draft tokens kept (cut at a kept EOS)
    int emitted;           // emitted: tokens output, accepted + 1, fewer when the output ended
    int verify_rows;       // verify: rows the verification pass ran, k + 1 or SWIFT's tree size
    int leaf;              // leaf: SWIFT's tree verification kept a next-best token (a leaf)
    int ids[MAX_DRAFT];    // ids: d1..dk, the first `accepted` kept (a kept leaf in its place)
    int rejected;          // rejected: the first draft token not kept (-1: none, or cut at an EOS)
    int token;             // token: the full model's own, the correction or the bonus (or the EOS)
    float gamma_before;    // gamma_before: the exit threshold the draft ran under
    float gamma_after;     // gamma_after: the threshold after Eq. 2-4 (the same when fixed)
    int stepped;           // event.swift: SWIFT's optimization step ran before the round
    int dp;                // event.clasp: CLaSp's DP ran after the verification
    int restarted;         // event.restart: SWIFT App. C.2 lowered r after the verification
    SkipSet next;          // the set the next round drafts with, unless SWIFT's step changes it
    double select_ms, draft_ms, verify_ms; // time choosing layers, drafting, verifying
} Round;

// --- the selector: what the decoding loop calls -------------------------------
// A method meets the decoding loop at the three moments the papers name: after the prefill
// (ASD), before a round (SWIFT's optimization step) and after a verification (CLaSp's DP,
// SWIFT's ratio rule). Each may change the draft's skip set. What a method wants captured for
// the next moment is a request in the selector's fields, which the loop reads. A NULL selector
// is the static set (or plain Self-SD drafting).

typedef struct {
    int method;
    AsdParams asd;
    ClaspParams clasp;
    Swift swift;          // METHOD_SWIFT, persists across prompts
    int clasp_skip;       // M = round(skip_ratio * L)
    int rounds;           // verifications in this prompt
    // the requests the loop reads:
    double *prompt_cos;   // (n_layers) ASD: prefill sums each prompt token's cosines C_l here;
                          // NULL: not asked
    int prompt_tokens;    // the prompt tokens summed in prompt_cos
    double asd_cos[SS_MAX_LAYERS]; // ASD: this prompt's C_l, which select_asd read
    int capture_verify;   // CLaSp: capture this round's verification states for a DP
    int tree;             // SWIFT: verify a tree of swift.p.tree's shape (Sec. 4.2); 0: the chain
    ClaspDp clasp_dp;     // CLaSp: what the last DP decided (select_clasp), for --trace
} Selector;

static void selector_init(Selector *sel, int method, const MethodParams *p, int n_layers,
                          uint64_t seed) {
    memset(sel, 0, sizeof(*sel));
    sel->method = method;
    sel->asd = p->asd;
    sel->clasp = p->clasp;
    if (method == METHOD_SWIFT) { swift_init(&sel->swift, &p->swift, n_layers, seed); }
    if (method == METHOD_ASD) {
        sel->prompt_cos = (double *)calloc_check((size_t)n_layers, sizeof(double));
    }
    sel->clasp_skip = (int)lround(p->clasp.skip_ratio * n_layers);
    // SWIFT's confidence-aware inference (Sec. 4.2) applies in both phases: footnote 1 of
    // Sec. 4.2 says it is also used while optimizing, with the best set so far, and
    // hemingkx/SWIFT verifies a tree on every step.
    sel->tree = method == METHOD_SWIFT && p->swift.tree_on;
}

static void selector_free(Selector *sel) {
    if (sel->method == METHOD_SWIFT) { gp_free(&sel->swift.gp); }
    free(sel->prompt_cos);
}

// After the prefill: the first draft of this prompt.
static void selector_after_prefill(Selector *sel, Model *m, SkipSet *skip) {
    if (sel == NULL) { return; }
    int L = m->config.n_layers;
    sel->rounds = 0;
    if (sel->method == METHOD_ASD) {
        // C_l is this prompt's mean (ASD Sec. 3.2: "for the current generation task"): average the
        // sums, then zero them so the next prompt of a -f run starts from nothing.
        int tokens = sel->prompt_tokens > 0 ? sel->prompt_tokens : 1;
        for (int l = 0; l < L; l++) { sel->asd_cos[l] = sel->prompt_cos[l] / tokens; }
        *skip = select_asd(sel->asd_cos, L, &sel->asd);
        memset(sel->prompt_cos, 0, (size_t)L * sizeof(double));
        sel->prompt_tokens = 0;
    } else if (sel->method == METHOD_SWIFT) {
        *skip = sel->swift.best;
        sel->swift.last_ms = 0; // the time before this prompt's first round is not decoding
        sel->swift.first_at = -1;
    } else if (sel->method == METHOD_CLASP) {
        // Decision: no DP on the prefill (its states are not captured): the first `interval`
        // rounds draft with alternate_layers
        *skip = alternate_layers(L);
    }
}

// Before round r (at r->pos): SWIFT's optimization step while it is optimizing (r->stepped),
// and CLaSp's request for this round's states (a DP every `interval` verifications).
static void selector_before_round(Selector *sel, Model *m, const int *seq, int n_prompt,
                                  Round *r, SkipSet *skip) {
    if (sel == NULL) { return; }
    sel->capture_verify =
        sel->method == METHOD_CLASP && (sel->rounds + 1) % sel->clasp.interval == 0;
    if (sel->method != METHOD_SWIFT || sel->swift.done) { return; }
    int before = sel->swift.steps;
    swift_step(&sel->swift, m, seq, n_prompt, r->pos);
    *skip = sel->swift.best;
    r->stepped = sel->swift.steps > before;
}

// After round r's verification: SWIFT's skip-ratio rule (r->restarted), and CLaSp's DP (r->dp) on
// the hidden states of the last accepted token, at `row` of the verification's capture `states`
// (NULL: none this round), which sits at cache slot r->pos + r->accepted.
static void selector_after_verify(Selector *sel, Model *m, float *states, int row, Round *r,
                                  SkipSet *skip) {
    if (sel == NULL) { return; }
    sel->rounds++;
    if (sel->method == METHOD_SWIFT) {
        r->restarted = swift_after_verify(&sel->swift, m->config.n_layers, r->drafted, r->accepted);
        if (r->restarted) { *skip = sel->swift.best; }
    }
    if (states == NULL) { return; }
    *skip = select_clasp(m, clasp_states(states, &m->config, r->drafted, row),
                         r->pos + r->accepted, sel->clasp_skip, &sel->clasp_dp);
    r->dp = 1;
}

// ----------------------------------------------------------------------------
// decoding: plain autoregressive decoding

typedef struct {
    int n_prompt, n_generated;
    double prefill_ms, decode_ms;
} GenStats;

// Called for each generated token with the full model's logits row (vocab) it came from, e.g.
// to stream its text.
typedef void (*TokenCallback)(void *ctx, int token, const float *logits);

// Where the generated tokens go.
typedef struct {
    int *tokens;      // (max_new) the generated ids, n so far
    int n, max_new;
    TokenCallback cb; // NULL, or called with each token (the CLI streams its text)
    void *ctx;
} Output;

static Output output(int *tokens, int max_new, TokenCallback cb, void *ctx) {
    Output out = {tokens, 0, max_new, cb, ctx};
    return out;
}

static int is_eos(const Config *c, int token) {
    int k = 0;
    while (k < c->n_eos && c->eos_ids[k] != token) { k++; }
    return k < c->n_eos;
}

// Keeps one generated token, which came from the logits row `logits`. Returns 1 when generation
// is over: after an EOS, or at max_new tokens. A row that is not finite, or all one value (weights
// whose products overflow float32: a matmul, or RMSNorm's sum of squares, whose scale is then 0
// and every later state 0) would give argmax's token 0 without a word: the run stops.
static int emit(const Config *c, Output *out, int token, const float *logits) {
    int finite = 1, equal = c->vocab_size > 1;
    for (int i = 0; i < c->vocab_size; i++) {
        finite &= isfinite(logits[i]) != 0;
        equal &= logits[i] == logits[0];
    }
    if (!finite || equal) {
        die(__FILE__, __LINE__, "the logits of generated token %d are %s: the model's weights "
            "overflow float32 arithmetic", out->n + 1, finite ? "all equal" : "not finite");
    }
    out->tokens[out->n++] = token;
    if (out->cb) { out->cb(out->ctx, token, logits); }
    return is_eos(c, token) || out->n >= out->max_new;
}

// Picks the next token from one row of logits: argmax when greedy, else a draw from the warped p.
static int sample_next(Sampler *sp, const float *logits, int vocab, float *probs,
                       ProbIndex *scratch) {
    if (sp->temperature == 0.0f) { return argmax(logits, vocab); }
    warp_probs(logits, vocab, sp->temperature, sp->top_p, probs, scratch);
    return sample_probs(probs, vocab, rng_uniform(&sp->rng));
}

// Runs a prompt through the model under skip (NULL = full) in chunks of state.max_tokens,
// filling the KV cache at 0..n-1. Chunking does not change a bit: an n-token pass equals n
// one-token passes. Leaves the last token's logits at row *last_row of state.logits_host (the
// only row computed and copied back). A selector that asks for the prompt's cosines (ASD) gets
// them summed over every prompt token, a chunk of hidden states at a time.
static void prefill(Model *m, const int *tokens, int n, const SkipSet *skip, Selector *sel,
                    int *last_row) {
    const Config *c = &m->config;
    int T = m->state.max_tokens, idx[MAX_PASS_TOKENS];
    for (int t = 0; t < T; t++) { idx[t] = t; }
    float *states = NULL; // (2L + 1, T, dim)
    if (sel && sel->prompt_cos) { // ASD asks for the prompt's cosines
        states = (float *)malloc_check((size_t)(2 * c->n_layers + 1) * T * c->dim * sizeof(float));
    }
    for (int start = 0; start < n; start += T) {
        int len = n - start < T ? n - start : T;
        Capture cap = {len, idx, states};
        forward_rows(m, tokens + start, len, start, skip, NULL, states ? &cap : NULL,
                     start + len < n ? len : len - 1);
        if (states) {
            asd_accumulate(&cap, c->n_layers, c->dim, sel->prompt_cos);
            sel->prompt_tokens += len;
        }
        *last_row = len - 1;
    }
    free(states);
}

// Plain decoding with the model under skip (NULL = full model): up to out->max_new tokens after
// the prompt, stopping after an EOS or at the context limit. Returns the number generated.
static int generate_plain(Model *m, const int *prompt, int n_prompt, const SkipSet *skip,
                          Sampler *sp, Output *out, GenStats *st) {
    const Config *c = &m->config;
    float *probs = (float *)malloc_check((size_t)c->vocab_size * sizeof(float));
    ProbIndex *scratch = (ProbIndex *)malloc_check((size_t)c->vocab_size * sizeof(ProbIndex));
    double t0 = time_ms();
    int row = 0, pos = n_prompt;
    prefill(m, prompt, n_prompt, skip, NULL, &row);
    double t1 = time_ms();
    while (out->n < out->max_new) {
        const float *logits = m->state.logits_host + (size_t)row * c->vocab_size;
        int next = sample_next(sp, logits, c->vocab_size, probs, scratch);
        if (emit(c, out, next, logits) || pos >= c->seq_len) { break; }
        forward(m, &next, 1, pos++, skip, NULL, NULL);
        row = 0;
    }
    st->n_prompt = n_prompt;
    st->n_generated = out->n;
    st->prefill_ms = t1 - t0;
    st->decode_ms = time_ms() - t1;
    free(probs);
    free(scratch);
    return out->n;
}

// ----------------------------------------------------------------------------
// decoding: self-speculative decoding (Self-SD Algorithms 2-4)
//
// One round: the token x chosen last round sits at cache slot pos (not yet run by the full
// model). The draft (the model under a skip set) proposes d1..dk one token at a time; the full
// model then runs [x, d1..dk] in one pass at slots pos..pos+k, whose row j predicts the token
// after position pos+j. The longest valid prefix d1..dj is accepted, plus one token from the
// full model (the correction at the first rejection, or the bonus after all k). pos advances
// by j+1 and that token becomes the next x.
//
// KV-cache invariant: slots < pos hold the full model's K/V for the accepted text; slots >= pos
// are scratch, written by drafts and verifications, and never read before a pass rewrites them.
// Rolling back a rejected draft is therefore just not advancing pos, with one exception: a
// SWIFT tree leaf that is kept has its K/V row copied to its chain slot (verify_tree).

enum { EXIT_ADAPTIVE, EXIT_FIXED, EXIT_NONE };

typedef struct {
    GenStats gen;      // prompt/generated counts, prefill and total decode time
    int rounds;        // verification passes
    int drafted;       // draft tokens proposed
    int accepted;      // draft tokens accepted
    long skipped;      // over the draft tokens, the sublayers each one's set skipped
    double draft_ms;   // time in draft forwards
    double verify_ms;  // time in verification forwards
    double select_ms;  // time choosing layers (layer-selection methods), search_ms included
    double search_ms;  // of which an offline search before decoding (selfsd)
    int selections;    // layer-selection calls during decoding (SWIFT steps, CLaSp DPs)
    float threshold_first, threshold_last; // the draft-exit threshold (gamma) before and after
    double threshold_sum;                  // over rounds, after each update, for the mean
} SpecStats;

// One round into the statistics.
static void record_round(SpecStats *st, const Round *r, int n_layers) {
    st->rounds++;
    st->drafted += r->drafted;
    st->accepted += r->accepted;
    st->skipped += (long)r->drafted * skip_count(&r->skip, n_layers);
    st->selections += r->stepped + r->dp;
    st->select_ms += r->select_ms;
    st->draft_ms += r->draft_ms;
    st->verify_ms += r->verify_ms;
    st->threshold_sum += r->gamma_after;
}

// The draft-exit rule (Self-SD Sec. 3.4): drafting stops after a token whose top-1 draft
// probability is below the threshold gamma. EXIT_ADAPTIVE moves gamma toward the target
// acceptance rate alpha. SWIFT's epsilon and CLaSp's threshold are the same rule, fixed.
typedef struct {
    int mode;        // EXIT_ADAPTIVE, EXIT_FIXED (the threshold stays), EXIT_NONE (always K tokens)
    float threshold; // gamma; gamma_0 = 0.6 (Self-SD Table 7)
    float target;    // alpha: the target acceptance rate; Table 7 tunes it per task (0.70-0.90),
                     // 0.90 is its LLaMA-2-13B CNN/DM value
    float step;      // epsilon: the step of Eq. 3, 0.01
    float beta1;     // smoothing of AR, 0.5
    float beta2;     // smoothing of gamma, 0.9
    float ar;        // the running acceptance rate AR
    int rounds;      // updates so far, over every prompt of the run (beta1 = 0 for the first)
} DraftExit;

static DraftExit draft_exit_default(void) {
    DraftExit d = {EXIT_ADAPTIVE, 0.6f, 0.9f, 0.01f, 0.5f, 0.9f, 0.0f, 0};
    return d;
}

// The draft length K and exit rule each method drafts with, the papers' (static and none:
// Self-SD's). Self-SD Table 7: K = 12, the adaptive rule. ASD keeps Self-SD's drafting. SWIFT
// App. B.2: N_D = 25, and Sec. 4.2's fixed epsilon, for which the paper gives no value: 0.8 is
// hemingkx/SWIFT's stop_threshold. CLaSp: the fixed 0.7 of Sec. 5.3.3 (Fig. 4c); it gives no
// draft length (its drafts end at the threshold), so K = 12 as Self-SD's.
static void method_drafting(int method, int *max_draft, DraftExit *rule) {
    *max_draft = method == METHOD_SWIFT ? 25 : 12;
    *rule = draft_exit_default();
    if (method == METHOD_SWIFT || method == METHOD_CLASP) {
        rule->mode = EXIT_FIXED;
        rule->threshold = method == METHOD_SWIFT ? 0.8f : 0.7f;
    }
}

// Self-SD Eq. 2-4, after each verification with accepted of drafted tokens:
//   AR <- beta1 AR + (1 - beta1) AR_e                   (Eq. 2; beta1 = 0 in the first round)
//   gamma~ = gamma + eps if AR <= alpha, else gamma - eps (Eq. 3)
//   gamma <- beta2 gamma + (1 - beta2) gamma~            (Eq. 4)
// Decision: Eq. 3's tie AR == alpha raises gamma, as the paper writes (its code uses <:
// dilab-zju/self-speculative-decoding). Where the paper is silent, like that code, gamma stays
// put when the draft hit its limit (K, or the context or tokens left) with AR above target
// (lowering it further could not lengthen drafts, only let it drift). Decision: a round that
// drafted nothing (a limit of 0, or an empty set) updates nothing: its AR_e = 0 / 0 is undefined.
// Like the code's notebooks, gamma carries over to the next prompt of a run; unlike the code,
// AR does too (it restarts AR at 0 in every call, which pushes gamma up at every prompt's start).
static void draft_exit_update(DraftExit *d, int accepted, int drafted, int hit_max) {
    if (d->mode != EXIT_ADAPTIVE || drafted == 0) { return; }
    float ar_e = (float)accepted / (float)drafted;
    float b1 = d->rounds == 0 ? 0.0f : d->beta1;
    d->ar = b1 * d->ar + (1.0f - b1) * ar_e;
    float moved = d->ar <= d->target ? d->threshold + d->step : d->threshold - d->step;
    if (hit_max && d->ar > d->target) { moved = d->threshold; }
    d->threshold = d->beta2 * d->threshold + (1.0f - d->beta2) * moved;
    // Decision: gamma is clamped to [0, 1], the range of the probability it is compared with.
    // Eq. 3 moves it by eps every round with no bound, so acceptance that stays under alpha
    // pushes it past 1 (every draft stops at one token, as at 1), and a later good stretch
    // would spend a round per 0.001 only to come back to 1.
    d->threshold = fminf(fmaxf(d->threshold, 0.0f), 1.0f);
    d->rounds++;
}

// The draft's confidence in its top token: max softmax(logits), whatever the temperature
// (Self-SD Algorithm 3 compares max p(x | z*, ...) with gamma).
static float top1_prob(const float *logits, int n) {
    float max = logits[argmax(logits, n)], sum = 0.0f;
    for (int i = 0; i < n; i++) { sum += expf(logits[i] - max); }
    return 1.0f / sum;
}

// Speculative sampling, one decision (Leviathan et al. 2023, Chen et al. 2023; Self-SD Alg. 4):
// the draft token d was drawn from q. Keep it with probability min(1, p(d) / q(d)), using a
// fresh uniform; otherwise draw the replacement from norm(max(0, p - q)). Either way the token
// that comes out is distributed exactly as p. Returns 1 if d is kept, else 0 and *replacement.
static int speculative_accept(const float *p, const float *q, int n, int d, Rng *rng,
                              float *residual, int *replacement) {
    if (rng_uniform(rng) * q[d] < p[d]) { return 1; } // u < p/q without dividing by q
    float mass = 0.0f;
    for (int i = 0; i < n; i++) {
        residual[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
        mass += residual[i];
    }
    // mass == 0 means p == q, where rejection has probability 0; guard rounding anyway
    const float *from = mass > 0.0f ? residual : p;
    float u = rng_uniform(rng) * (mass > 0.0f ? mass : 1.0f);
    *replacement = sample_probs(from, n, u);
    return 0;
}

// One skip set a search scored (Self-SD's iterations; test/bench/oracle.c's sets), as the
// observer sees it.
typedef struct {
    int method;            // METHOD_SELFSD (test/bench/oracle.c: -1)
    int i, of;             // the set's index (Self-SD: 0 is the empty set, i the iteration) of `of`
    SkipSet skip, best;    // the set scored (done: the set chosen), and the best set so far
    double objective, best_objective; // their scores, lower is better
    int done;              // 1: the search is over, i the sets scored; 2: Self-SD's re-check,
                           // objective the winner's median and best_objective the empty set's
    int gp;                // Self-SD: the GP's UCB proposed the set (0: random warm-up, or empty)
} Candidate;

// Who watches the decoding loop and the searches (a NULL member: nobody): the CLI's --trace
// writer and progress lines (reports, below), and the tests.
typedef struct {
    void *ctx;
    void (*prefill)(void *ctx, const int *ids, int n, const Selector *sel, const SkipSet *skip);
    void (*round)(void *ctx, const Round *r, const Selector *sel);
    void (*candidate)(void *ctx, const Candidate *c);
} Observer;

typedef struct {
    SkipSet skip;    // the draft model: which sublayers it skips
    int max_draft;   // K, at most MAX_DRAFT (Self-SD Table 7: 12)
    DraftExit exit;
    const Observer *observer; // NULL: nobody watches
} SpecParams;

// What one generate_spec call works in, allocated once.
typedef struct {
    int n_prompt, max_draft;                 // the prompt's length; K, at most one pass
    const TreeShape *shape;                  // SWIFT's tree (Sec. 4.2); NULL: a chain
    int draft[MAX_DRAFT + 1];                // x, d1..dk
    int kept[MAX_DRAFT + 1];                 // the draft tokens the verification kept
    int rows[MAX_DRAFT + 2];                 // the logits row each emitted token came from
    int n_alts[MAX_DRAFT + 1];               // SWIFT's tree: next-best tokens of draft step j
    int alts[(MAX_DRAFT + 1) * MAX_ALTS];    // (MAX_DRAFT + 1, MAX_ALTS) those tokens
    int capture_idx[MAX_DRAFT + 1];          // 0..k: the verification rows CLaSp captures
    SwiftTree tree;                          // SWIFT's tree pass
    float *p, *residual;                     // (vocab) the target's warped p, and max(0, p - q)
    float *q_rows;                           // (K + 1, vocab) the draft's warped distributions q
    float *states;                           // (2L + 1, K + 1, dim) hidden states of a verification
    ProbIndex *sort;                         // (vocab) top-p's sort
    int *seq;                                // (n_prompt + max_new + 1) the prompt, then the output
} SpecScratch;

static SpecScratch *build_spec_scratch(const Config *c, int max_draft, int seq_len) {
    SpecScratch *s = (SpecScratch *)malloc_check(sizeof(SpecScratch));
    size_t vocab = (size_t)c->vocab_size,
           states = (size_t)(2 * c->n_layers + 1) * (max_draft + 1) * c->dim;
    s->p = (float *)malloc_check((2 * vocab + (size_t)(max_draft + 1) * vocab + states) *
                                 sizeof(float));
    s->residual = s->p + vocab;
    s->q_rows = s->residual + vocab;
    s->states = s->q_rows + (size_t)(max_draft + 1) * vocab;
    s->sort = (ProbIndex *)malloc_check(vocab * sizeof(ProbIndex));
    s->seq = (int *)malloc_check((size_t)seq_len * sizeof(int));
    for (int t = 0; t <= MAX_DRAFT; t++) { s->capture_idx[t] = t; }
    s->n_prompt = 0;
    s->max_draft = max_draft;
    s->shape = NULL;
    return s;
}

static void free_spec_scratch(SpecScratch *s) {
    free(s->p);
    free(s->sort);
    free(s->seq);
    free(s);
}

// How many tokens this round may draft: K, but no further than the context or the tokens still
// wanted. A draft that skips nothing is the full model: each draft token would cost a full pass
// that verification then repeats. Decision: an empty skip set drafts nothing, and the round is
// a plain decoding step (so Self-SD's search measures plain decoding for it).
static int draft_limit(const Model *m, const SpecParams *sp, int max_draft, int pos,
                       const Output *out) {
    int limit = max_draft;
    if (limit > m->config.seq_len - 1 - pos) { limit = m->config.seq_len - 1 - pos; }
    if (limit > out->max_new - out->n - 1) { limit = out->max_new - out->n - 1; }
    return skip_count(&sp->skip, m->config.n_layers) == 0 ? 0 : limit;
}

// Drafting (Self-SD Algorithm 3): up to limit tokens after x = s->draft[0] at slots r->pos, ...
// under the skip set, stopping after a token whose confidence is below the exit threshold. The
// tokens go to s->draft[1..], their confidences to r->conf, why drafting stopped to r->end, and,
// when sampling, each warped draft distribution q to s->q_rows. With a tree (SWIFT), also each
// step's next-best tokens. Returns how many were drafted.
// Decision: a tree is bounded as it is built, by the tokens one pass can hold (and the context
// left): each depth adds its chain token and its alternatives, and at the depth where the room
// runs out, that depth's alternatives are narrowed to what fits and no deeper depth is drafted.
// Depths go before widths because verification reaches a shallow node at least as often as a
// deeper one (SWIFT Sec. 4.2 gives no bound: its GPU passes take the whole tree).
static int draft_tokens(Model *m, const SpecParams *sp, Sampler *smp, int limit, SpecScratch *s,
                        Round *r) {
    int vocab = m->config.vocab_size, k = 0, leaves = 0, pos = r->pos;
    int room = m->config.seq_len - pos < m->state.max_tokens ? m->config.seq_len - pos
                                                             : m->state.max_tokens;
    r->end = limit == s->max_draft ? END_K : END_ROOM;
    while (k < limit) {
        forward(m, &s->draft[k], 1, pos + k, &sp->skip, NULL, NULL);
        const float *logits = m->state.logits_host;
        s->draft[k + 1] = sample_next(smp, logits, vocab, s->q_rows + (size_t)k * vocab, s->sort);
        // Decision: the top probability, as the papers write it (Self-SD Alg. 3, SWIFT Sec. 4.2),
        // also when sampling; dilab-zju/self-speculative-decoding and hemingkx/SWIFT then take
        // the sampled token's
        float confidence = top1_prob(logits, vocab);
        r->conf[k++] = confidence;
        if (s->shape) {
            s->n_alts[k] = top_alternatives(logits, vocab, confidence, s->shape,
                                            room - 1 - k - leaves, s->alts + k * MAX_ALTS);
            leaves += s->n_alts[k];
            if (1 + k + leaves == room) { r->end = END_ROOM; break; } // [x, d, leaves] fills a pass
        }
        if (sp->exit.mode != EXIT_NONE && k < limit && confidence < sp->exit.threshold) {
            r->end = END_EXIT;
            break;
        }
    }
    return k;
}

// Verification of a chain pass whose row j holds the full model's logits after [x, d1..dj]:
//   greedy:   keep d_{j+1} while it equals argmax(row j); next = argmax of the first row that
//             disagrees, or of row k when all k are kept (the bonus token);
//   sampling: keep d_{j+1} with probability min(1, p_j(d) / q_j(d)) (speculative_accept, a fresh
//             uniform each time); on the first rejection next is the residual draw; when all k
//             are kept, next is drawn from the warped p_k.
// Returns the number of draft tokens kept (in s->kept); s->rows[t] is the row that emitted
// token t.
static int verify_chain(Model *m, Sampler *smp, int k, SpecScratch *s, int *next) {
    int vocab = m->config.vocab_size, j;
    *next = -1;
    for (j = 0; j <= k; j++) { // row k only supplies the bonus token
        const float *lj = m->state.logits_host + (size_t)j * vocab;
        const float *q = s->q_rows + (size_t)j * vocab;
        int d = s->draft[j + 1];
        s->rows[j] = j;
        if (smp->temperature == 0.0f) {
            int target = argmax(lj, vocab);
            if (j == k || target != d) { *next = target; break; }
        } else {
            warp_probs(lj, vocab, smp->temperature, smp->top_p, s->p, s->sort);
            if (j == k) { *next = sample_probs(s->p, vocab, rng_uniform(&smp->rng)); break; }
            if (!speculative_accept(s->p, q, vocab, d, &smp->rng, s->residual, next)) { break; }
        }
        s->kept[j] = d;
    }
    return j;
}

// Verification (Self-SD Algorithm 2, greedy; Algorithm 4, sampling): the full model runs
// [x, d1..dk] in one pass at slots pos..pos+k (with SWIFT's tree, its leaves after them) and
// keeps the longest valid prefix. Captures every row's hidden states when asked (CLaSp). Returns
// the number of draft tokens kept; *next is the full model's own token.
static int verify_draft(Model *m, Sampler *smp, int k, int pos, const TreeShape *shape,
                        int capture, SpecScratch *s, int *next) {
    Capture cap = {k + 1, s->capture_idx, s->states};
    if (shape == NULL) {
        forward(m, s->draft, k + 1, pos, NULL, NULL, capture ? &cap : NULL);
        return verify_chain(m, smp, k, s, next);
    }
    build_tree(&s->tree, s->draft, k, s->alts, s->n_alts);
    TokenTree tt = {s->tree.depth, s->tree.mask};
    forward(m, s->tree.tokens, s->tree.n, pos, NULL, &tt, capture ? &cap : NULL);
    return verify_tree(m, &s->tree, k, pos, s->kept, next, s->rows);
}

// Emits a round's kept draft tokens, then the full model's token next, each with the logits row
// it came from. Returns how many it emitted: fewer than accepted + 1 when the output ends first.
static int emit_round(Model *m, Output *out, SpecScratch *s, int pos, int accepted, int next,
                      int *done) {
    int vocab = m->config.vocab_size, emitted = 0;
    for (int j = 0; j <= accepted && !*done; j++, emitted++) {
        int token = j < accepted ? s->kept[j] : next;
        s->seq[pos + 1 + j] = token;
        *done = emit(&m->config, out, token, m->state.logits_host + (size_t)s->rows[j] * vocab);
    }
    return emitted;
}

// One round (Self-SD Algorithm 2, lines 4-13, then Eq. 2-4) at r->pos, with x in s->draft[0]:
// the selector's step, the draft, its verification, the emitted tokens, the selector's update and
// the exit rule. Fills r and leaves the next x in s->draft[0]. Returns 1 when the output is over.
static int spec_round(Model *m, SpecParams *sp, Selector *sel, Sampler *smp, Output *out,
                      SpecScratch *s, Round *r) {
    int done = 0, next;
    double t = time_ms();
    r->stepped = r->dp = r->restarted = 0;
    // the method may change the draft (SWIFT: an optimization step)
    selector_before_round(sel, m, s->seq, s->n_prompt, r, &sp->skip);
    r->skip = sp->skip;
    r->select_ms = lap_ms(&t);
    // draft k tokens with the skip set, then verify them with the full model in one pass
    int limit = draft_limit(m, sp, s->max_draft, r->pos, out);
    r->gamma_before = sp->exit.threshold;
    int k = draft_tokens(m, sp, smp, limit, s, r);
    r->draft_ms = lap_ms(&t);
    int capture = sel && sel->capture_verify;
    int accepted = verify_draft(m, smp, k, r->pos, s->shape, capture, s, &next);
    r->verify_rows = s->shape ? s->tree.n : k + 1;
    r->verify_ms = lap_ms(&t);
    r->emitted = emit_round(m, out, s, r->pos, accepted, next, &done);
    lap_ms(&t); // emit's callback writes the text: "other", not selection
    // a leaf's row lies after the chain's k + 1 rows; the leaf is the last kept token
    r->leaf = s->shape && s->rows[accepted] > k && r->emitted >= accepted;
    // Decision: an EOS among the kept drafts ends the output there. The round counts as if
    // drafting had stopped before the EOS and the EOS were the round's own token, so every
    // round emits accepted + 1 tokens and alpha, M (SWIFT Eq. 6), AR_e (Self-SD Eq. 2) and
    // SWIFT's ratio rule count only what was emitted.
    if (r->emitted <= accepted) { k = accepted = r->emitted - 1; r->end = END_EOS; }
    r->drafted = k;
    r->accepted = accepted;
    for (int i = 0; i < k; i++) { r->ids[i] = i < accepted ? s->kept[i] : s->draft[i + 1]; }
    int miss = accepted + !r->leaf; // d_miss, the chain token not kept: the next one, or a leaf's
    r->rejected = r->end != END_EOS && miss <= k ? s->draft[miss] : -1;
    r->token = s->seq[r->pos + r->emitted];
    // the method may change the draft (CLaSp: a DP on the states of the last accepted token,
    // but not after the prompt's last round, whose set would never draft; SWIFT: its ratio)
    selector_after_verify(sel, m, capture && !done ? s->states : NULL, s->rows[accepted], r,
                          &sp->skip);
    r->next = sp->skip;
    r->select_ms += lap_ms(&t);
    // the exit threshold follows the acceptance rate (Self-SD Eq. 2-4)
    draft_exit_update(&sp->exit, accepted, k, k == limit);
    r->gamma_after = sp->exit.threshold;
    s->draft[0] = next;
    return done;
}

// Self-speculative decoding (Self-SD Algorithm 2; Leviathan et al. Algorithm 1): the same
// contract as generate_plain, and the same output (greedy) or distribution (sampling). The
// draft is sp->skip, which a selector (NULL = none: the static set) may change between rounds;
// the exit threshold in sp->exit carries over to the caller's next prompt.
// Beside Algorithm 2: its i is r.pos, and its x_i, the last token, not yet run by the full model,
// is x (so the first token comes from the prefill's logits); lines 4-7 are draft_tokens, lines
// 8-12 verify_draft (verify_chain), line 13 the bonus (row k); then Eq. 2-4 (draft_exit_update).
// Beside Leviathan's Algorithm 1: q is s->q_rows, p is s->p, the rejection test is
// speculative_accept.
static int generate_spec(Model *m, const int *prompt, int n_prompt, SpecParams *sp, Selector *sel,
                         Sampler *smp, Output *out, SpecStats *st) {
    const Config *c = &m->config;
    const Observer *obs = sp->observer;
    int row = 0, max_draft = sp->max_draft < m->state.max_tokens - 1 ? sp->max_draft
                                                                     : m->state.max_tokens - 1;
    SpecScratch *s = build_spec_scratch(c, max_draft, n_prompt + out->max_new + 1);
    memcpy(s->seq, prompt, (size_t)n_prompt * sizeof(int));
    s->n_prompt = n_prompt;
    // Decision: tree verification is greedy only (SWIFT's Table 1 claims trees under sampling too).
    // Sampling keeps the chain: several candidates per position stay exact only with a recursive
    // rule (each rejected sibling's mass removed from both p and the without-replacement q before
    // the next is tried), and hemingkx/SWIFT's and SafeAILab/EAGLE's versions had bugs; the chain
    // rule here is proven exact by the tests.
    s->shape = smp->temperature == 0.0f && sel && sel->tree ? &sel->swift.p.tree : NULL;
    memset(st, 0, sizeof(*st));
    st->threshold_first = sp->exit.threshold;
    double t0 = time_ms(), t = t0;
    prefill(m, prompt, n_prompt, NULL, sel, &row); // the first token is plain decoding's
    st->gen.prefill_ms = lap_ms(&t);
    selector_after_prefill(sel, m, &sp->skip);
    st->select_ms += lap_ms(&t);
    if (obs && obs->prefill) { obs->prefill(obs->ctx, prompt, n_prompt, sel, &sp->skip); }
    const float *logits = m->state.logits_host + (size_t)row * c->vocab_size;
    Round r;
    memset(&r, 0, sizeof(r));
    r.pos = n_prompt;
    s->seq[r.pos] = s->draft[0] = sample_next(smp, logits, c->vocab_size, s->p, s->sort);
    int done = emit(c, out, s->draft[0], logits);
    for (; !done && r.pos < c->seq_len; r.pos += r.accepted + 1, r.round++) {
        done = spec_round(m, sp, sel, smp, out, s, &r);
        record_round(st, &r, c->n_layers);
        if (obs && obs->round) { obs->round(obs->ctx, &r, sel); }
    }
    st->threshold_last = sp->exit.threshold;
    st->gen.n_prompt = n_prompt;
    st->gen.n_generated = out->n;
    st->gen.decode_ms = time_ms() - t0 - st->gen.prefill_ms;
    free_spec_scratch(s);
    return out->n;
}

// SWIFT Eq. 6: E(Spd.) = M alpha / ((M - 1) c + alpha), alpha the acceptance rate, the cost
// coefficient c = 1 - r, r the fraction of sublayers skipped: a draft step costs c of a full step,
// a verify pass one. It is M / (n_d c + 1) with n_d = (M - 1) / alpha drafts per round
// (Leviathan's gamma); at alpha = 0 that is 0/0, and drafts all rejected still cost n_d c each,
// so there the measured drafts per round stand in for n_d: 1 / (n_d c + 1), below 1.
static double expected_speedup(double mean_accepted, double acceptance, double skip_ratio,
                               double drafts_per_round) {
    double c = 1.0 - skip_ratio;
    if (acceptance <= 0.0) { return 1.0 / (drafts_per_round * c + 1.0); }
    return mean_accepted * acceptance / ((mean_accepted - 1.0) * c + acceptance);
}

// ----------------------------------------------------------------------------
// layer selection before decoding: Self-SD's Bayesian optimization
//
// It scores a skip set by decoding with it (generate_spec above), so it comes after the loop
// (test/bench/oracle.c's baseline search shares its objective).

// --- the objective: time per verified token ----------------------------------

typedef struct {
    const int *const *prompts; // dev prompts (token ids)
    const int *lengths;
    int n_prompts;
    int n_new;                 // tokens decoded per prompt
    int max_draft;             // K of those decodings
    int use_cost_model;        // 1: sublayers run per token (deterministic); 0: ms per token
    DraftExit exit;            // the run's draft exit (mode, gamma_0, alpha), from its start
    Sampler sampler;           // the run's temperature, top-p and seed
    const Observer *observer;  // sees each set scored, and the one chosen; NULL: nobody
    // NULL, or a score that replaces decoding (the tests' synthetic landscapes)
    double (*score)(void *ctx, const SkipSet *s);
    void *score_ctx;
} Objective;

static void observe(const Objective *obj, const Candidate *c) {
    if (obj->observer && obj->observer->candidate) { obj->observer->candidate(obj->observer->ctx, c); }
}

// Set by the CLI's SIGINT handler: the searches stop at the next candidate and return the best
// set so far.
static volatile sig_atomic_t search_interrupted;

// Self-SD's objective (Sec. 3.3): decode the dev prompts with skip set s and the decoder the run
// uses (its K, draft exit and sampling), and measure the cost per generated token (lower is
// better), so the set found is tuned for the decoder that will use it; --objective
// time measures the paper's average inference time per verified token. The cost model counts
// sublayers run: a pass costs its active sublayers whatever its token count, because each
// weight is streamed once per pass (SWIFT Eq. 6's cost coefficient c = 1 - r assumes the same).
// Every candidate is scored from gamma_0 and the same seed on every dev prompt, so a score does
// not depend on the order the candidates are tried in.
static double measure_objective(Model *m, const Objective *obj, const SkipSet *s) {
    if (obj->score) { return obj->score(obj->score_ctx, s); }
    int *out = (int *)malloc_check((size_t)obj->n_new * sizeof(int));
    uint64_t sub0 = m->state.n_sublayers;
    double t0 = time_ms(), tokens = 0;
    // Ctrl-C stops the search within one decoding, not after the whole dev set
    for (int k = 0; k < obj->n_prompts && !search_interrupted; k++) {
        SpecParams sp = {*s, obj->max_draft, obj->exit, NULL};
        Sampler smp = obj->sampler;
        Output o = output(out, obj->n_new, NULL, NULL);
        SpecStats st;
        tokens += generate_spec(m, obj->prompts[k], obj->lengths[k], &sp, NULL, &smp, &o, &st);
    }
    free(out);
    double cost = obj->use_cost_model ? (double)(m->state.n_sublayers - sub0) : time_ms() - t0;
    return cost / (tokens > 0 ? tokens : 1);
}

// --- Self-SD: Bayesian optimization offline (Self-SD Sec. 3.3) ----------------
// Maximize -objective over z in {0,1}^{2L}: the first iters/5 candidates are random, then each
// is the UCB maximizer over n_candidates random ones. Decisions: the random warm-up (the
// paper's code starts with init_points=0 and two hand-picked probes: with 64 iterations a GP
// fitted on one point would propose blindly); the paper searched 1000 iterations on 8 prompts,
// a tiny model's landscape is small, so the default is 64 (--iters), on the prompt itself or
// --dev-prompts. Any layer may be skipped, as in the paper; no skip count is imposed.
// Wall-clock noise: on a busy machine one measurement can be several times too high or too low,
// and a single lucky one would win the search. So the empty set's cost is the median of 3
// measurements, a candidate that looks better than the best so far is measured twice more and keeps
// the median, and at the end the winner and the empty set are measured 5 times each, alternately:
// the winner stays only if its median is lower.

static int compare_double_asc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), compare_double_asc);
    return v[n / 2];
}

// The median of n measurements (n <= 5), the first of which is already in first (NAN: none).
static double measure_median(Model *m, const Objective *obj, const SkipSet *s, int n,
                             double first) {
    double c[5];
    int k = 0;
    for (; k < n && (k == 0 || !search_interrupted); k++) {
        c[k] = k == 0 && !isnan(first) ? first : measure_objective(m, obj, s);
    }
    return median(c, k);
}

// The medians of 5 measurements each of a and b, taken alternately so that a change in the
// machine's load between them biases neither.
static void measure_pair(Model *m, const Objective *obj, const SkipSet *a, const SkipSet *b,
                         double *median_a, double *median_b) {
    double ca[5], cb[5];
    for (int k = 0; k < 5; k++) {
        ca[k] = measure_objective(m, obj, a);
        cb[k] = measure_objective(m, obj, b);
    }
    *median_a = median(ca, 5);
    *median_b = median(cb, 5);
}

static SkipSet select_selfsd(Model *m, const Objective *obj, const SelfSdParams *p, uint64_t seed) {
    int L = m->config.n_layers, iters = p->iters, repeats = obj->use_cost_model ? 1 : 3;
    Gp gp;
    gp_init(&gp, 2 * L);
    Rng r;
    rng_seed(&r, seed);
    SkipSet best, cand, empty;
    memset(&empty, 0, sizeof(empty));
    best = empty;
    double best_cost = measure_median(m, obj, &best, repeats, NAN); // plain speed as a baseline
    float v[GP_MAX_DIM];
    skip_to_vector(&best, L, v);
    gp_add(&gp, v, -best_cost);
    Candidate c = {METHOD_SELFSD, 0, iters, best, best, best_cost, best_cost, 0, 0};
    observe(obj, &c);
    int it;
    for (it = 1; it <= iters && !search_interrupted; it++) {
        if (it <= iters / 5) {
            random_skip_set(&r, 0.6f * rng_uniform(&r), 0, 0, L - 1, &cand);
        } else {
            gp_propose(&gp, &r, L, 0, 0, L - 1, p->n_candidates, p->kappa, &cand);
        }
        double cost = measure_objective(m, obj, &cand);
        if (cost < best_cost && repeats > 1) {
            cost = measure_median(m, obj, &cand, repeats, cost);
        }
        if (search_interrupted) { break; } // a cost over part of the dev set is not a score
        skip_to_vector(&cand, L, v);
        gp_add(&gp, v, -cost);
        if (cost < best_cost) { best_cost = cost; best = cand; }
        c.i = it, c.skip = cand, c.objective = cost, c.best = best, c.best_objective = best_cost;
        c.gp = it > iters / 5;
        observe(obj, &c);
    }
    // the re-check against plain decoding
    if (repeats > 1 && skip_count(&best, L) > 0 && !search_interrupted) {
        double cost_best, cost_empty;
        measure_pair(m, obj, &best, &empty, &cost_best, &cost_empty);
        c.done = 2, c.objective = cost_best, c.best_objective = cost_empty;
        observe(obj, &c);
        if (cost_best >= cost_empty) { best = empty; }
        best_cost = cost_best >= cost_empty ? cost_empty : cost_best;
    }
    c.done = 1, c.i = it, c.skip = c.best = best, c.objective = c.best_objective = best_cost;
    observe(obj, &c);
    gp_free(&gp);
    return best;
}

// ----------------------------------------------------------------------------
// plumbing below: reading Hugging Face files (JSON, config.json, safetensors), the tokenizer,
// reports, threads and the CLI. A reader of the papers may stop here.

// ----------------------------------------------------------------------------
// utilities of the plumbing: error lines for the user, paths, checked growth, reading a file

// The one idiom for a failure the user can act on: fail formats one line naming the file or flag
// and the problem into err (SS_ERR_LEN bytes) and returns -1, so a loader writes
// `return fail(err, "%s: ...", path)`; callers pass it up, adding their context first (flag_fail,
// json_fail, "-f FILE line 3: ..."), and main prints it once as "selfspec: error: ...". A longer
// line (a long path comes first) loses its middle, not its end, where the reason is
// ("/very/lo...older/config.json: not valid JSON").
static int fail(char *err, const char *fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(err, SS_ERR_LEN, fmt, ap);
    char *full = n >= SS_ERR_LEN ? (char *)malloc((size_t)n + 1) : NULL;
    if (full != NULL) {
        vsnprintf(full, (size_t)n + 1, fmt, again);
        size_t head = SS_ERR_LEN / 4, from = (size_t)n - (SS_ERR_LEN - head - 4); // "...", NUL
        while (head > 0 && (full[head] & 0xC0) == 0x80) { head--; } // not in a UTF-8 character
        while ((full[from] & 0xC0) == 0x80) { from++; }
        snprintf(err, SS_ERR_LEN, "%.*s...%s", (int)head, full, full + from);
        free(full);
    }
    va_end(again);
    va_end(ap);
    return -1;
}

// dir/name in a new allocation (the caller frees it): a path may be as long as PATH_MAX.
static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = (char *)malloc_check(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

// a + b for sizes, or SIZE_MAX when it overflows; with mul_size, SIZE_MAX then fails the
// allocation (or a bound check) with a message instead of wrapping to a small size
static size_t add_size(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }

static void *realloc_check_(void *p, size_t size, const char *file, int line) {
    void *q = realloc(p, size > 0 ? size : 1);
    if (q == NULL) {
        die(file, line, "out of host memory allocating %zu bytes; try a smaller model or -c", size);
    }
    return q;
}
#define realloc_check(p, size) realloc_check_((p), (size), __FILE__, __LINE__)

enum { PIPE_MAX = 1 << 30 }; // what a pipe may hold: `-f <(yes)` stops here, not out of memory

// The whole file at path, NUL-terminated after its *len bytes, or NULL with err set: a regular
// file, or with pipe_ok a pipe too (a prompts file: -f /dev/stdin, -f <(...)), read to its end.
// The open does not wait (O_NONBLOCK: a FIFO with no writer would block it forever); the reads
// do. The size is a first guess: a /proc file says 0 bytes, and a growing file is read whole.
static char *read_input(const char *path, int pipe_ok, size_t *len, char *err) {
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    char *buf = NULL;
    if (fd < 0) {
        fail(err, "%s: cannot open: %s", path, strerror(errno));
    } else if (fstat(fd, &sb) != 0 || !(S_ISREG(sb.st_mode) || (pipe_ok && S_ISFIFO(sb.st_mode)))) {
        fail(err, pipe_ok ? "%s: not a regular file or a pipe" : "%s: not a regular file", path);
    } else {
        int is_pipe = S_ISFIFO(sb.st_mode);
        size_t cap = is_pipe ? 4096 : (size_t)sb.st_size + 1, n = 0;
        ssize_t got;
        fcntl(fd, F_SETFL, 0);
        buf = (char *)malloc_check(cap + 1);
        while ((got = read(fd, buf + n, cap - n)) > 0 && !(is_pipe && n + (size_t)got > PIPE_MAX)) {
            n += (size_t)got;
            if (n == cap) { buf = (char *)realloc_check(buf, (cap *= 2) + 1); }
        }
        if (got < 0) { fail(err, "%s: cannot read: %s", path, strerror(errno)); }
        if (got > 0) { fail(err, "%s: more than %d bytes from a pipe", path, PIPE_MAX); }
        if (got != 0) { free(buf), buf = NULL; } else { buf[n] = '\0', *len = n; }
    }
    if (fd >= 0) { close(fd); }
    return buf;
}

static char *read_file(const char *path, size_t *len, char *err) {
    return read_input(path, 0, len, err);
}

// ----------------------------------------------------------------------------
// JSON: jsmn tokens over a buffer, and the few look-ups the loaders need

// A JSON text parsed by json_parse. Its path starts every message of json_fail, which keeps the
// first error in the caller's buffer err: every JSON file selfspec reads is read through it.
typedef struct {
    const char *js;   // the text (not owned)
    jsmntok_t *tok;   // (n_tok) tokens in document order
    int n_tok;
    const char *path; // the file the text is, or what it is ("--json line")
    char *err;        // (SS_ERR_LEN) the caller's error buffer
    int failed;       // err holds the first error
} Json;

enum { JSON_MAX_DEPTH = 64 };

// "path: message" into j->err, unless it holds an error already; returns -1.
static int json_fail(Json *j, const char *fmt, ...) {
    char msg[SS_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!j->failed) { fail(j->err, "%s: %s", j->path, msg); }
    j->failed = 1;
    return -1;
}

static void json_free(Json *j) {
    free(j->tok);
    j->tok = NULL;
}

// Index of the token after the whole value at i (iterative: children counts, no recursion).
static int json_skip(const Json *j, int i) {
    for (int pending = 1; pending > 0 && i < j->n_tok; i++) { pending += j->tok[i].size - 1; }
    return i;
}

// Parses the JSON object js (len bytes) with strict jsmn, which also takes some text that is not
// JSON ([1 2], [1,,2], `tru`): it is read leniently, and never out of bounds, since jsmn's child
// counts match its tokens. Refused: a member that is not a key with one value (`{"a":, "b"}`:
// json_get reads key, value, key, value, and ran past the tokens); nesting past JSON_MAX_DEPTH
// (jsmn closes a bracket by walking up from the last token: a million '[' took hours); a
// truncated text, and text after it (a second value, or a NUL byte, where jsmn stops).
static int json_parse(Json *j, const char *js, size_t len, const char *what, char *err) {
    memset(j, 0, sizeof(*j));
    j->js = js, j->path = what, j->err = err;
    if (len >= (size_t)INT_MAX) { return json_fail(j, "JSON too large (%zu bytes)", len); }
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < len && depth <= JSON_MAX_DEPTH; i++) { // brackets outside strings
        char c = js[i];
        if (in_string) { i += c == '\\', in_string = c != '"'; continue; }
        in_string = c == '"';
        depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    }
    if (depth > JSON_MAX_DEPTH) {
        return json_fail(j, "JSON nested deeper than %d levels", JSON_MAX_DEPTH);
    }
    jsmn_parser p;
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, len, NULL, 0);
    if (n > 0) {
        j->tok = (jsmntok_t *)malloc_check(mul_size((size_t)n, sizeof(jsmntok_t)));
        jsmn_init(&p);
        n = j->n_tok = jsmn_parse(&p, js, len, j->tok, (unsigned int)n);
    }
    size_t end = n > 0 ? (size_t)j->tok[0].end : len;
    while (end < len && memchr(" \t\r\n", js[end], 4) != NULL) { end++; }
    const char *bad = n == JSMN_ERROR_PART          ? "not valid JSON (it ends early)"
                      : n <= 0                        ? "not valid JSON"
                      : j->tok[0].type != JSMN_OBJECT ? "not a JSON object"
                      : end != len                    ? "not valid JSON (text after its end)"
                                                      : NULL;
    for (int i = 1; bad == NULL && i < n; i++) { // (each lies inside the object: it has a parent)
        if (j->tok[j->tok[i].parent].type == JSMN_OBJECT && j->tok[i].size != 1) {
            bad = "not valid JSON (a key without a value)";
        }
    }
    if (bad == NULL) { return 0; }
    json_free(j);
    return json_fail(j, "%s", bad);
}

// UTF-8: a lead byte that says how many 6-bit continuation bytes (10xxxxxx) follow it.
static void put_utf8(unsigned int cp, char *out, size_t *n) {
    static const unsigned char lead[] = {0x00, 0xC0, 0xE0, 0xF0};
    int more = cp < 0x80 ? 0 : cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
    out[(*n)++] = (char)(lead[more] | (cp >> (6 * more)));
    for (int k = more - 1; k >= 0; k--) { out[(*n)++] = (char)(0x80 | ((cp >> (6 * k)) & 0x3F)); }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') { return c - '0'; }
    if (c >= 'a' && c <= 'f') { return c - 'a' + 10; }
    if (c >= 'A' && c <= 'F') { return c - 'A' + 10; }
    return -1;
}

// The number four hex digits spell (jsmn checked them).
static long hex4(const char *s) {
    return hex_value(s[0]) << 12 | hex_value(s[1]) << 8 | hex_value(s[2]) << 4 | hex_value(s[3]);
}

// Unescapes the JSON string at token i into a new NUL-terminated UTF-8 buffer (*len bytes,
// which may hold a NUL from \u0000). jsmn checked each escape: \" \\ \/ \b \f \n \r \t, or \u
// and four hex digits. NULL if i is not a string or holds half of a UTF-16 surrogate pair.
static char *json_string(const Json *j, int i, size_t *len) {
    if (i < 0 || j->tok[i].type != JSMN_STRING) { return NULL; }
    const char *s = j->js + j->tok[i].start, *esc = "\"\\/bfnrt", *raw = "\"\\/\b\f\n\r\t";
    size_t n = (size_t)(j->tok[i].end - j->tok[i].start), o = 0;
    char *out = (char *)malloc_check(n + 1); // unescaping never grows the text
    for (size_t k = 0; k < n; k++) {
        if (s[k] != '\\') { out[o++] = s[k]; continue; }
        if (s[++k] != 'u') { out[o++] = raw[strchr(esc, s[k]) - esc]; continue; }
        long cp = hex4(s + k + 1);
        long lo = k + 10 < n && s[k + 5] == '\\' && s[k + 6] == 'u' ? hex4(s + k + 7) : 0;
        k += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && lo >= 0xDC00 && lo < 0xE000) { // a surrogate pair
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), k += 6;
        } else if (cp >= 0xD800 && cp < 0xE000) {
            free(out);
            return NULL;
        }
        put_utf8((unsigned int)cp, out, &o);
    }
    out[o] = '\0';
    *len = o;
    return out;
}

// Whether the string at token i is s, compared as text: "hidden_\u0073ize" is hidden_size.
static int json_eq(const Json *j, int i, const char *s) {
    size_t n = strlen(s), len;
    char *text = json_string(j, i, &len);
    int eq = text != NULL && len == n && memcmp(text, s, n) == 0;
    free(text);
    return eq;
}

// Value token of key in the object at obj, or -1. A key given twice is read from its last
// copy, as Python's json reads it, and so transformers.
static int json_get(const Json *j, int obj, const char *key) {
    if (obj < 0 || j->tok[obj].type != JSMN_OBJECT) { return -1; }
    int found = -1, i = obj + 1;
    for (int k = 0; k < j->tok[obj].size; k++, i = json_skip(j, i + 1)) {
        if (json_eq(j, i, key)) { found = i + 1; }
    }
    return found;
}

// Whether token i is the literal word (true, false or null), all of it (jsmn also takes `nil`).
static int json_is_word(const Json *j, int i, const char *word) {
    int n = (int)strlen(word);
    return i >= 0 && j->tok[i].type == JSMN_PRIMITIVE && j->tok[i].end - j->tok[i].start == n &&
           memcmp(j->js + j->tok[i].start, word, (size_t)n) == 0;
}

// An absent key (-1) or a literal null.
static int json_is_null(const Json *j, int i) { return i < 0 || json_is_word(j, i, "null"); }

// Number at token i into *out; 0 if it is a finite number, -1 otherwise. (strtod reads in place:
// strict jsmn ends a primitive at a space, ',', ']' or '}', where no number goes on.)
static int json_number(const Json *j, int i, double *out) {
    char *end;
    if (i < 0 || j->tok[i].type != JSMN_PRIMITIVE) { return -1; }
    *out = strtod(j->js + j->tok[i].start, &end);
    return end == j->js + j->tok[i].end && isfinite(*out) ? 0 : -1;
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

static int json_key_is(const Json *j, int obj, const char *key, const char *s) {
    return json_eq(j, json_get(j, obj, key), s);
}

// The boolean at key of obj; absent or null (or an error): dflt.
static int json_key_bool(Json *j, int obj, const char *key, int dflt) {
    int i = json_get(j, obj, key), yes = json_is_word(j, i, "true");
    if (yes || json_is_word(j, i, "false")) { return yes; }
    if (!json_is_null(j, i)) { json_fail(j, "%s must be true or false", key); }
    return dflt;
}

// First element of the array at key of obj (its length in *n), or -1 with an error.
static int json_key_array(Json *j, int obj, const char *key, int *n) {
    int i = json_get(j, obj, key), is_array = i >= 0 && j->tok[i].type == JSMN_ARRAY;
    *n = is_array ? j->tok[i].size : 0;
    return is_array ? i + 1 : json_fail(j, "%s must be an array", key);
}

// The one rule for a float at token i: absent (-1) keeps *out; else a number (not null, as
// transformers' config classes say) that as a float is normal and in (lo, hi] ((float)1e300 is
// inf, 1e-300 is 0, 1e-40 subnormal: each refused).
static int json_float(Json *j, int i, const char *key, float lo, float hi, float *out) {
    double v;
    if (i < 0) { return 0; }
    if (json_number(j, i, &v) != 0 || !isnormal((float)v) || (float)v <= lo || (float)v > hi) {
        return json_fail(j, "\"%s\" must be a normal float in (%g, %g]", key, lo, hi);
    }
    *out = (float)v;
    return 0;
}

// ----------------------------------------------------------------------------
// config: config.json of a Hugging Face LlamaForCausalLM, read as transformers 5.24 reads it

// A config integer's largest value: the kernels index a pass's rows with int.
enum { CONFIG_MAX = 1 << 24 };

// The int at key, in [1, hi]; absent or null: an error if required, else *out is kept.
static int config_int(Json *j, const char *key, int required, int hi, int *out) {
    int i = json_get(j, 0, key);
    long long v;
    if (json_is_null(j, i)) { return required ? json_fail(j, "missing \"%s\"", key) : 0; }
    if (json_int(j, i, 1, hi, &v) != 0) {
        return json_fail(j, "\"%s\" must be an integer in [1, %d]", key, hi);
    }
    *out = (int)v;
    return 0;
}

// The model is the one AutoModelForCausalLM builds, chosen by model_type alone (architectures
// is not read: "mistral" with Llama's architectures builds Mistral and its sliding window).
// A bias or non-SiLU activation would change the math; refuse rather than compute garbage.
static int config_check_unsupported(Json *j) {
    if (!json_eq(j, json_get(j, 0, "model_type"), "llama")) {
        return json_fail(j, "model_type is not \"llama\"; only LLaMA models are supported");
    }
    int act = json_get(j, 0, "hidden_act"); // transformers' ACT2FN: "swish" is SiLU too
    if (act >= 0 && !json_eq(j, act, "silu") && !json_eq(j, act, "swish")) {
        return json_fail(j, "hidden_act must be \"silu\" (or \"swish\", the same function)");
    }
    const char *bools[] = {"attention_bias", "mlp_bias", "tie_word_embeddings"};
    for (int k = 0; k < 3; k++) { // (null: refused by transformers' strict config class too)
        if (json_is_word(j, json_get(j, 0, bools[k]), "null")) {
            return json_fail(j, "%s must be true or false", bools[k]);
        }
        if (k < 2 && json_key_bool(j, 0, bools[k], 0)) {
            return json_fail(j, "%s=true is not supported", bools[k]);
        }
    }
    return j->failed ? -1 : 0;
}

// RoPE as transformers 5.24 reads it (RotaryEmbeddingConfigMixin.convert_rope_params_to_dict):
// the settings are rope_scaling's when it is a non-empty object, else rope_parameters' (where
// transformers 5 writes them all); rope_theta is theirs, else the top level's, else 10000;
// rope_type theirs, else their "type", else "default". Supported: "default" and "llama3" (Llama
// 3.1/3.2's scaling, whose original_max_position_embeddings defaults to max_position_embeddings).
static int config_rope(Config *c, Json *j) {
    int rs = json_get(j, 0, "rope_scaling"), rp = json_get(j, 0, "rope_parameters");
    if ((!json_is_null(j, rs) && j->tok[rs].type != JSMN_OBJECT) ||
        (!json_is_null(j, rp) && j->tok[rp].type != JSMN_OBJECT)) {
        return json_fail(j, "rope_scaling and rope_parameters must be objects (or null)");
    }
    int rope = rs >= 0 && j->tok[rs].size > 0 ? rs : rp;
    int theta = json_get(j, rope, "rope_theta"), type = json_get(j, rope, "rope_type");
    if (theta < 0) { theta = json_get(j, 0, "rope_theta"); }
    if (type < 0) { type = json_get(j, rope, "type"); }
    if (json_float(j, theta, "rope_theta", 1, FLT_MAX, &c->rope_theta)) { return -1; }
    if (type < 0 || json_eq(j, type, "default")) { return 0; }
    if (!json_eq(j, type, "llama3")) {
        int n = j->tok[type].end - j->tok[type].start;
        return json_fail(j, "rope_type \"%.*s\" is not supported (only \"default\" and \"llama3\")",
                         n < 64 ? n : 64, j->js + j->tok[type].start);
    }
    c->rope_llama3 = 1;
    const char *keys[3] = {"factor", "low_freq_factor", "high_freq_factor"};
    float *dst[3] = {&c->rope_factor, &c->rope_low_freq, &c->rope_high_freq};
    for (int k = 0; k < 3; k++) {
        int v = json_get(j, rope, keys[k]);
        if (v < 0) { return json_fail(j, "rope_type llama3 needs \"%s\"", keys[k]); }
        if (json_float(j, v, keys[k], 0, FLT_MAX, dst[k])) { return -1; }
    }
    long long orig = c->max_pos;
    int o = json_get(j, rope, "original_max_position_embeddings");
    if ((o >= 0 && json_int(j, o, 1, CONFIG_MAX, &orig)) || c->rope_high_freq <= c->rope_low_freq) {
        return json_fail(j, "rope_type llama3 needs low_freq_factor < high_freq_factor and an "
                         "integer original_max_position_embeddings");
    }
    c->rope_orig_max = (int)orig;
    return 0;
}

static int config_token_ids(Config *c, Json *j) {
    long long v = -1; // no bos_token_id: -1
    int bos = json_get(j, 0, "bos_token_id"), eos = json_get(j, 0, "eos_token_id");
    if (!json_is_null(j, bos) && json_int(j, bos, 0, c->vocab_size - 1, &v)) {
        return json_fail(j, "bos_token_id is not a token id below vocab_size");
    }
    c->bos_id = (int)v;
    if (json_is_null(j, eos)) { return 0; }
    int is_list = j->tok[eos].type == JSMN_ARRAY, n = is_list ? j->tok[eos].size : 1;
    if (n > SS_MAX_EOS) { // dropping some would quietly generate past them
        return json_fail(j, "eos_token_id lists %d ids; at most %d are supported", n, SS_MAX_EOS);
    }
    for (int k = 0, e = is_list ? eos + 1 : eos; k < n; k++, e = json_skip(j, e)) {
        if (json_int(j, e, 0, c->vocab_size - 1, &v)) {
            return json_fail(j, "eos_token_id is not a token id below vocab_size");
        }
        c->eos_ids[c->n_eos++] = (int)v;
    }
    return 0;
}

// The settings of a parsed config.json into c, every one checked.
static int config_from_json(Config *c, Json *j) {
    if (config_check_unsupported(j) || config_int(j, "hidden_size", 1, CONFIG_MAX, &c->dim) ||
        config_int(j, "intermediate_size", 1, CONFIG_MAX, &c->hidden_dim) ||
        config_int(j, "num_hidden_layers", 1, SS_MAX_LAYERS, &c->n_layers) ||
        config_int(j, "num_attention_heads", 1, CONFIG_MAX, &c->n_heads) ||
        config_int(j, "vocab_size", 1, CONFIG_MAX, &c->vocab_size) ||
        config_int(j, "max_position_embeddings", 1, CONFIG_MAX, &c->max_pos)) {
        return -1;
    }
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    if (config_int(j, "num_key_value_heads", 0, CONFIG_MAX, &c->n_kv_heads) ||
        config_int(j, "head_dim", 0, CONFIG_MAX, &c->head_dim) ||
        json_float(j, json_get(j, 0, "rms_norm_eps"), "rms_norm_eps", 0, 1, &c->norm_eps) ||
        config_rope(c, j) || config_token_ids(c, j)) {
        return -1;
    }
    c->tied = json_key_bool(j, 0, "tie_word_embeddings", 0);
    if (j->failed) { return -1; }
    if (c->dim % c->n_heads != 0 || c->n_heads % c->n_kv_heads != 0) { // (LlamaConfig: the first)
        return json_fail(j, "hidden_size %d must be a multiple of num_attention_heads %d, and it "
                         "of num_key_value_heads %d", c->dim, c->n_heads, c->n_kv_heads);
    }
    if (c->head_dim % 2 != 0 || (size_t)c->n_heads * c->head_dim > CONFIG_MAX) {
        return json_fail(j, "head_dim %d must be even (RoPE rotates pairs), and "
                         "num_attention_heads x head_dim at most %d", c->head_dim, CONFIG_MAX);
    }
    return 0;
}

static int read_config(Config *c, const char *dir, char *err) {
    char *path = join_path(dir, "config.json");
    memset(c, 0, sizeof(*c));
    c->rope_theta = 10000.0f; // LlamaConfig defaults
    c->norm_eps = 1e-6f;
    size_t len;
    char *text = read_file(path, &len, err);
    Json j = {NULL, NULL, 0, path, err, 0};
    int rc = text == NULL || json_parse(&j, text, len, path, err) || config_from_json(c, &j);
    json_free(&j);
    free(text);
    free(path);
    // Decision: generation_config.json's eos_token_id (an id or a list), when the file has one,
    // replaces config.json's, as transformers' generate() does (its GenerationConfig is read
    // from that file when it exists): Llama-3-Instruct's config.json names <|end_of_text|>
    // alone, and its <|eot_id|> is only there. Without it, config.json's ids stay.
    path = join_path(dir, "generation_config.json");
    if (rc == 0 && access(path, F_OK) == 0) {
        Config g = *c;
        g.n_eos = 0;
        text = read_file(path, &len, err);
        rc = text == NULL || json_parse(&j, text, len, path, err) || config_token_ids(&g, &j);
        if (g.n_eos > 0) { memcpy(c->eos_ids, g.eos_ids, sizeof(c->eos_ids)), c->n_eos = g.n_eos; }
        json_free(&j);
        free(text);
    }
    free(path);
    return rc ? -1 : 0;
}

// ----------------------------------------------------------------------------
// weights: model.safetensors (or sharded), F32/F16/BF16 converted to fp32 at load

enum { DTYPE_F32, DTYPE_F16, DTYPE_BF16 };

typedef struct {
    char *name;         // owned
    int dtype, n_dim;
    size_t shape[4];
    const char *data;   // (size bytes) its bytes, in its shard's
    size_t size;
    const char *path;   // its shard's file
    int used;           // set by find_tensor (one left over: the config is another model's)
} TensorInfo;

typedef struct {
    char *path, *bytes; // owned; bytes: the whole file (size bytes)
    size_t size, data_start; // data_start: 8 + header length
} Shard;

typedef struct {
    Shard *shards;
    TensorInfo *tensors;
    int n_shards, n_tensors;
    char *index; // model.safetensors.index.json's path when sharded, else NULL (owned)
} TensorFiles;

// The n integers of the JSON array at arr (n <= 4), each in [0, 2^62], into out; 0, else -1.
static int json_sizes(const Json *j, int arr, int n, size_t *out) {
    if (arr < 0 || j->tok[arr].type != JSMN_ARRAY || j->tok[arr].size != n || n > 4) { return -1; }
    for (int d = 0, e = arr + 1; d < n; d++, e = json_skip(j, e)) {
        long long v;
        if (json_int(j, e, 0, LLONG_MAX / 2, &v)) { return -1; }
        out[d] = (size_t)v;
    }
    return 0;
}

// Parses one tensor entry of a safetensors header and checks its dtype, shape and byte range.
// Two tensors' ranges may overlap (the safetensors library refuses such a file): each lies
// inside the file's data, so each is read in bounds, as its offsets say.
static int parse_tensor_entry(Json *j, int key, const Shard *sh, TensorInfo *t) {
    static const char *const dtypes[] = {"F32", "F16", "BF16"}; // DTYPE_* order
    size_t name_len, off[2], numel = 1;
    t->name = json_string(j, key, &name_len);
    if (t->name == NULL || strlen(t->name) != name_len) { // "a\u0000b" would be read as "a"
        return json_fail(j, "bad tensor name in header (a bad escape or a NUL byte)");
    }
    int v = key + 1, dt = json_get(j, v, "dtype"), shp = json_get(j, v, "shape");
    int n_dim = shp >= 0 ? j->tok[shp].size : 0;
    if (dt < 0 || json_sizes(j, shp, n_dim, t->shape) ||
        json_sizes(j, json_get(j, v, "data_offsets"), 2, off) || off[0] > off[1]) {
        return json_fail(j, "tensor %s: needs a dtype, a shape of at most 4 sizes and "
                         "data_offsets [begin, end]", t->name);
    }
    for (t->dtype = DTYPE_BF16; t->dtype >= 0 && !json_eq(j, dt, dtypes[t->dtype]); t->dtype--) {}
    if (t->dtype < 0) {
        return json_fail(j, "tensor %s: unsupported dtype %.*s (F32, F16, BF16 only)", t->name,
                         j->tok[dt].end - j->tok[dt].start, j->js + j->tok[dt].start);
    }
    t->n_dim = n_dim, t->size = off[1] - off[0], t->path = sh->path;
    for (int d = 0; d < n_dim; d++) { numel = mul_size(numel, t->shape[d]); }
    if (off[1] > sh->size - sh->data_start) {
        return json_fail(j, "tensor %s: data_offsets run past the end of the file", t->name);
    }
    if (mul_size(numel, t->dtype == DTYPE_F32 ? 4 : 2) != t->size) {
        return json_fail(j, "tensor %s: data_offsets span %zu bytes but the shape needs %zu",
                         t->name, t->size, mul_size(numel, t->dtype ? 2 : 4));
    }
    t->data = sh->bytes + sh->data_start + off[0];
    return 0;
}

// Reads one .safetensors file (its shard keeps path) and appends its tensors to tf: an 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, the data.
static int load_shard(TensorFiles *tf, char *path, char *err) {
    Shard *sh = &tf->shards[tf->n_shards++];
    sh->path = path;
    sh->bytes = read_file(path, &sh->size, err);
    if (sh->bytes == NULL) { return -1; }
    if (sh->size < 8) { return fail(err, "%s: truncated: %zu bytes, no header", path, sh->size); }
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) { n = (n << 8) | (unsigned char)sh->bytes[k]; }
    if (n == 0 || n > sh->size - 8) {
        return fail(err, "%s: header length %llu is zero or runs past the end of the file (%zu "
                    "bytes)", path, (unsigned long long)n, sh->size);
    }
    sh->data_start = 8 + (size_t)n;
    Json j;
    if (json_parse(&j, sh->bytes + 8, (size_t)n, path, err)) { return -1; }
    int rc = 0, n_entries = j.tok[0].size;
    size_t table = (size_t)tf->n_tensors + (size_t)n_entries + 1;
    tf->tensors = (TensorInfo *)realloc_check(tf->tensors, mul_size(table, sizeof(TensorInfo)));
    for (int k = 0, key = 1; rc == 0 && k < n_entries; k++, key = json_skip(&j, key + 1)) {
        if (json_eq(&j, key, "__metadata__")) { continue; }
        TensorInfo *t = &tf->tensors[tf->n_tensors++];
        memset(t, 0, sizeof(*t));
        rc = parse_tensor_entry(&j, key, sh, t);
    }
    json_free(&j);
    return rc;
}

static void free_tensor_files(TensorFiles *tf) {
    for (int k = 0; k < tf->n_shards; k++) { free(tf->shards[k].bytes), free(tf->shards[k].path); }
    free(tf->index);
    for (int k = 0; k < tf->n_tensors; k++) { free(tf->tensors[k].name); }
    free(tf->shards);
    free(tf->tensors);
    memset(tf, 0, sizeof(*tf));
}

// The tensor named name, or NULL: a name given twice is its last entry (as the safetensors
// library reads one header), and every entry of that name counts as used.
static TensorInfo *find_tensor(TensorFiles *tf, const char *name) {
    TensorInfo *t = NULL;
    for (int k = 0; k < tf->n_tensors; k++) {
        if (strcmp(tf->tensors[k].name, name) == 0) { t = &tf->tensors[k], t->used = 1; }
    }
    return t;
}

// Opens model.safetensors, or every shard named by model.safetensors.index.json (each once).
static int open_tensor_files(TensorFiles *tf, const char *dir, char *err) {
    memset(tf, 0, sizeof(*tf));
    char *path = join_path(dir, "model.safetensors");
    struct stat sb; // (lstat: a dangling symlink is this file too, which read_file cannot open)
    if (lstat(path, &sb) == 0) {
        tf->shards = (Shard *)calloc_check(1, sizeof(Shard));
        return load_shard(tf, path, err);
    }
    free(path);
    path = tf->index = join_path(dir, "model.safetensors.index.json");
    size_t len;
    char *text = read_file(path, &len, err);
    if (text == NULL) {
        return fail(err, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    Json j;
    int rc = json_parse(&j, text, len, path, err), map = rc ? -1 : json_get(&j, 0, "weight_map");
    int n = map >= 0 && j.tok[map].type == JSMN_OBJECT ? j.tok[map].size : 0;
    if (rc == 0 && n == 0) { rc = fail(err, "%s: no weight_map object, or an empty one", path); }
    tf->shards = (Shard *)calloc_check((size_t)n, sizeof(Shard));
    for (int k = 0, key = map + 1; rc == 0 && k < n; k++, key = json_skip(&j, key + 1)) {
        size_t flen;
        char *file = json_string(&j, key + 1, &flen);
        if (file == NULL || flen == 0 || strlen(file) != flen || strchr(file, '/') != NULL) {
            rc = fail(err, "%s: weight_map entry %d is not a plain file name", path, k);
        } else {
            int seen = 0;
            char *shard = join_path(dir, file);
            for (int s = 0; s < tf->n_shards; s++) { seen |= !strcmp(tf->shards[s].path, shard); }
            if (seen) { free(shard); } else { rc = load_shard(tf, shard, err); }
        }
        free(file);
    }
    json_free(&j);
    free(text);
    return rc;
}

// IEEE half to float: sign, 5 exponent bits (bias 15) and 10 of mantissa; exponent 0 is zero or
// a subnormal (man x 2^-24), 31 infinity or NaN. (ldexpf is exact here.)
static float half_to_float(uint16_t h) {
    int exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    float f = exp == 0    ? ldexpf((float)man, -24)
              : exp == 31 ? (man ? NAN : INFINITY)
                          : ldexpf((float)(man | 0x400), exp - 25);
    return h & 0x8000 ? -f : f;
}

// "[a, b]": a shape of n <= 4 dims into text (128 bytes).
static void shape_text(char *text, const size_t *shape, int n) {
    int at = sprintf(text, "[");
    for (int d = 0; d < n; d++) { at += sprintf(text + at, d ? ", %zu" : "%zu", shape[d]); }
    strcpy(text + at, "]");
}

// Finds tensor name, checks its shape, converts it to fp32 into dst. Little-endian host assumed.
static int load_tensor(TensorFiles *tf, const char *name, size_t rows, size_t cols, float *dst,
                       char *err) {
    const TensorInfo *t = find_tensor(tf, name);
    if (t == NULL) { // sharded: the index names no shard that has it
        return fail(err, "%s: missing tensor %s", tf->index ? tf->index : tf->shards[0].path, name);
    }
    int want_dims = cols == 0 ? 1 : 2;
    size_t want_shape[2] = {rows, cols};
    if (t->n_dim != want_dims || memcmp(t->shape, want_shape, want_dims * sizeof(size_t)) != 0) {
        char have[128], want[128];
        shape_text(have, t->shape, t->n_dim);
        shape_text(want, want_shape, want_dims);
        return fail(err, "%s: tensor %s has shape %s but config.json implies %s", t->path, name,
                    have, want);
    }
    size_t n = cols == 0 ? rows : rows * cols;
    if (dst == NULL) { return 0; } // build_model's check of every name and shape
    const unsigned char *src = (const unsigned char *)t->data;
    for (size_t i = 0; i < n; i++) {
        uint16_t h; // an F16 or BF16 weight
        memcpy(&h, src + 2 * i, 2);
        uint32_t bf16 = (uint32_t)h << 16; // bf16 is the top half of an fp32
        if (t->dtype == DTYPE_F32) { memcpy(&dst[i], src + 4 * i, 4); }
        if (t->dtype == DTYPE_F16) { dst[i] = half_to_float(h); }
        if (t->dtype == DTYPE_BF16) { memcpy(&dst[i], &bf16, 4); }
        if (!isfinite(dst[i])) { // one would make every logit NaN: argmax then says token 0
            return fail(err, "%s: tensor %s: weight %zu is %s", t->path, name, i,
                        isnan(dst[i]) ? "NaN" : "infinite");
        }
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

// The weights in one buffer, in Weights' order: each slot carved out of base (NULL: counted
// only) and, with tf, each tensor found by its HF name, its shape checked and (with base)
// converted into its slot. *n: the floats used, SIZE_MAX if the config's sizes overflow
// (build_model refuses it).
static int layout_weights(Weights *w, float *base, const Config *c, TensorFiles *tf, size_t *n,
                          char *err) {
    size_t dim = (size_t)c->dim, hid = (size_t)c->hidden_dim, vocab = (size_t)c->vocab_size;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    float **slots[] = {&w->token_embedding, &w->rms_att, &w->wq, &w->wk, &w->wv, &w->wo,
                       &w->rms_ffn, &w->w_gate, &w->w_up, &w->w_down, &w->rms_final,
                       &w->lm_head, &w->rope_inv_freq};
    // each slot's tensor (NULL: none in the file; a layer's is model.layers.L.NAME.weight), its
    // rows and columns (0: a vector)
    const char *names[] = {"model.embed_tokens.weight", "input_layernorm", "self_attn.q_proj",
                           "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                           "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                           "mlp.down_proj", "model.norm.weight",
                           c->tied ? NULL : "lm_head.weight", NULL};
    size_t rows[] = {vocab, dim, q_dim, kv_dim, kv_dim, dim, dim, hid, hid, dim, dim,
                     c->tied ? 0 : vocab, (size_t)c->head_dim / 2};
    size_t cols[] = {dim, 0, dim, dim, dim, q_dim, 0, dim, dim, hid, 0, dim, 0};
    *n = 0;
    for (int k = 0; k < 13; k++) {
        int in_layers = k >= 1 && k <= 9; // rms_att to w_down: one tensor per layer
        size_t floats = mul_size(rows[k], cols[k] == 0 ? 1 : cols[k]);
        *slots[k] = base ? base + *n : NULL;
        for (int l = 0; tf != NULL && names[k] != NULL && l < (in_layers ? c->n_layers : 1); l++) {
            char name[128];
            snprintf(name, sizeof(name), "model.layers.%d.%s.weight", l, names[k]);
            float *dst = base ? *slots[k] + l * floats : NULL; // NULL: only check the shape
            if (load_tensor(tf, in_layers ? name : names[k], rows[k], cols[k], dst, err)) {
                return -1;
            }
        }
        *n = add_size(*n, mul_size(in_layers ? (size_t)c->n_layers : 1, floats));
    }
    if (c->tied) { w->lm_head = w->token_embedding; }
    return 0;
}

// A tensor left over means config.json describes another model (num_hidden_layers 3 on a 6-layer
// checkpoint ran and printed garbage). Transformers ignores the rotary_emb.inv_freq buffers old
// checkpoints saved, as here, and lm_head.weight when tied (read_weights looked it up, so it
// counts as used).
static int check_all_used(const TensorFiles *tf, const Config *c, char *err) {
    for (int k = 0; k < tf->n_tensors; k++) {
        const TensorInfo *t = &tf->tensors[k];
        const char *inv = strstr(t->name, "rotary_emb.inv_freq");
        if (!t->used && !(inv && strcmp(inv, "rotary_emb.inv_freq") == 0)) {
            return fail(err, "%s: tensor %s is not used by the model config.json describes "
                        "(%d layers); the config does not match the checkpoint",
                        t->path, t->name, c->n_layers);
        }
    }
    return 0;
}

// All the weights of the model in dir as fp32, in layout_weights' order (*n floats), in host
// memory the caller frees; NULL with err set. Unties c if the file's lm_head is not the embedding.
static float *read_weights(Config *c, const char *dir, size_t *n, char *err) {
    TensorFiles tf;
    int rc = open_tensor_files(&tf, dir, err);
    const TensorInfo *head = rc == 0 ? find_tensor(&tf, "lm_head.weight") : NULL;
    const TensorInfo *embed = rc == 0 ? find_tensor(&tf, "model.embed_tokens.weight") : NULL;
    if (rc == 0 && !c->tied && head == NULL) {
        // transformers would start lm_head from random weights (with a warning), not tie it
        rc = fail(err, "%s: missing tensor lm_head.weight, and %s/config.json has "
                  "tie_word_embeddings false (the default when absent)", tf.shards[0].path, dir);
    }
    // Decision: tied in config.json, but the file's lm_head differs from the embedding (its dtype
    // or its bytes): use the file's head, as transformers 5 does (it warns and does not tie).
    if (rc == 0 && c->tied && head != NULL && embed != NULL && (head->dtype != embed->dtype ||
        head->size != embed->size || memcmp(head->data, embed->data, head->size) != 0)) {
        c->tied = 0;
        fprintf(stderr, "selfspec: warning: %s: lm_head.weight differs from "
                "model.embed_tokens.weight though %s/config.json has tie_word_embeddings true; "
                "using lm_head.weight, as transformers does\n", head->path, dir);
    }
    // each tensor checked (name, shape, bytes in its file) before the config's sizes are allocated
    Weights host;
    rc = rc || layout_weights(&host, NULL, c, &tf, n, err) || check_all_used(&tf, c, err);
    float *memory = NULL;
    if (rc == 0) {
        memory = (float *)malloc_check(mul_size(*n, sizeof(float)));
        rc = layout_weights(&host, memory, c, &tf, n, err);
    }
    if (rc == 0) { rope_frequencies(c, host.rope_inv_freq); }
    free_tensor_files(&tf);
    if (rc != 0) { free(memory); }
    return rc == 0 ? memory : NULL;
}

int build_model(Model *m, const char *dir, int seq_len_cap, char *err) {
    memset(m, 0, sizeof(*m));
    Config *c = &m->config;
    if (read_config(c, dir, err)) { return -1; }
    c->seq_len = seq_len_cap > 0 && seq_len_cap < c->max_pos ? seq_len_cap : c->max_pos;
    size_t n;
    float *host_memory = read_weights(c, dir, &n, err);
    if (host_memory == NULL) { return -1; }
#ifdef __CUDACC__
    // The first CUDA call: without a GPU (or with a driver too old for this build) every later
    // call fails with a misleading message, such as "out of GPU memory"; say it plainly.
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        free(host_memory);
        return fail(err, "no usable GPU found (%s); the CPU build (`make`, ./selfspec) runs "
                    "without one", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    }
    m->memory = (float *)device_malloc(n * sizeof(float));
    copy_to_device(m->memory, host_memory, n * sizeof(float));
    free(host_memory);
#else
    m->memory = host_memory;
#endif
    m->n_floats = n;
    layout_weights(&m->weights, m->memory, c, NULL, &n, err);
    build_run_state(&m->state, c, c->seq_len < MAX_PASS_TOKENS ? c->seq_len : MAX_PASS_TOKENS);
    m->dir = strcpy((char *)malloc_check(strlen(dir) + 1), dir); // last: a failure leaks nothing
    return 0;
}

void free_model(Model *m) {
    free(m->dir);
    m->dir = NULL;
    if (m->memory == NULL) { return; }
    free_run_state(&m->state);
    device_free(m->memory);
    m->memory = NULL;
}

// ----------------------------------------------------------------------------
// tokenizer: tokenizer.json, the two BPE recipes of LLaMA checkpoints
//
// A tokenizer.json loads when it is one of the two recipes LLaMA checkpoints use, recognized as a
// whole; any other is refused, naming the component and its type.
//   1. SentencePiece-style BPE with byte fallback (Llama 1 and 2, TinyLlama): a space is "▁", put
//      in by the normalizer Sequence[Prepend("▁"), Replace(" ", "▁")] or by the pre-tokenizer
//      Metaspace("▁", prepend_scheme first or always, split false), both as transformers writes
//      them; the decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)].
//   2. Byte-level BPE (Llama 3, SmolLM2): [Digits,] the Llama 3 or GPT-2 split pattern (scanners
//      written by hand), each byte of a word a printable character (ByteLevel); that decoder.
// Encoding follows Hugging Face `tokenizers`: (1) added tokens (<s>, <|begin_of_text|>, ...) are
// cut out of the raw text, leftmost-longest; (2) each piece between them is normalized, and the
// normalized added tokens (as transformers' add_tokens makes them) are cut out of it; (3) the
// pre-tokenizer splits the rest into words, and BPE merges each, the adjacent pair of lowest rank
// first, leftmost on ties; (4) the post-processor's template adds BOS (and EOS).
// Decisions where HF has no answer, or where streaming forces one:
//   - Invalid UTF-8 input (Python cannot hand it to HF): each invalid byte is a character of its
//     own, a symbol for the patterns, and goes through byte fallback or the byte-level map.
//   - A character with no token, no byte fallback and no unk_token is dropped, as HF does (SmolLM2
//     has no token for the bytes 0x04 or 0xF1, which no valid text below U+40000 uses).
//   - Special added tokens decode to nothing (HF's skip_special_tokens=True).
//   - Invalid UTF-8 output becomes U+FFFD, an incomplete character at the end too (decode_end):
//     byte-level, once per maximal invalid subsequence as HF does (from_utf8_lossy); <0xXX> runs,
//     once per invalid byte (HF replaces the whole run, which a stream cannot know in advance).

// The class of the character at s[i] (i < len; *n: its length), as the pre-tokenizer patterns
// see it: \p{L}, \p{N}, \s or other. Defined at the end of this section, with its Unicode tables.
enum { CH_OTHER, CH_LETTER, CH_NUMBER, CH_SPACE };
static int class_at(const char *s, size_t len, size_t i, size_t *n);

// Bytes in the UTF-8 sequence that lead byte b starts, or 0 if b cannot start one.
static int utf8_need(unsigned char b) {
    return b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
}

// Whether b can follow the n bytes p[0..n) of an unfinished character (Unicode Table 3-7: no
// overlong forms, no surrogates, nothing past U+10FFFF).
static int utf8_continues(const unsigned char *p, int n, unsigned char b) {
    if ((b & 0xC0) != 0x80) { return 0; }
    if (n > 1) { return 1; }
    return p[0] == 0xE0 ? b >= 0xA0 : p[0] == 0xED ? b < 0xA0 : p[0] == 0xF0 ? b >= 0x90
           : p[0] == 0xF4 ? b < 0x90 : 1;
}

// Decodes the character at s[i] (i < len) into *cp and returns its length in bytes. A byte that
// does not start a valid, complete sequence is a character of its own, with *cp = -1.
static size_t utf8_decode(const char *s, size_t len, size_t i, int *cp) {
    const unsigned char *u = (const unsigned char *)s + i;
    size_t n = (size_t)utf8_need(u[0]);
    *cp = -1;
    if (n == 0 || n > len - i) { return 1; }
    uint32_t c = n == 1 ? u[0] : (uint32_t)(u[0] & (0x7F >> n));
    for (size_t k = 1; k < n; k++) {
        if (!utf8_continues(u, (int)k, u[k])) { return 1; }
        c = (c << 6) | (u[k] & 0x3F);
    }
    *cp = (int)c;
    return n;
}

// End of the run of class-c characters from i; *last (if given) is where its last one starts.
static size_t skip_class(const char *s, size_t len, size_t i, int c, size_t *last) {
    for (size_t n; i < len && class_at(s, len, i, &n) == c; i += n) {
        if (last != NULL) { *last = i; }
    }
    return i;
}

static int starts_with(const char *s, size_t len, const char *p, size_t n) {
    return len >= n && memcmp(s, p, n) == 0;
}

// ----- pre-tokenizer patterns: each returns the end of the word that starts at s[i] (i < len)

// Length of 's 't 're 've 'm 'll 'd at s[i], or 0. With fold (Llama 3's case-insensitive group)
// letters match in either case, and Oniguruma's case folding maps U+017F (long s) to s too.
static size_t contraction(const char *s, size_t len, size_t i, int fold) {
    static const char *const ends[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    int cp;
    for (int e = 0; e < 7 && s[i] == '\''; e++) {
        const char *p = ends[e];
        size_t k = i + 1, n;
        for (; *p != '\0' && k < len; p++, k += n) {
            n = utf8_decode(s, len, k, &cp);
            cp = fold && cp >= 'A' && cp <= 'Z' ? cp + 32 : fold && cp == 0x17F ? 's' : cp;
            if (cp != *p) { break; }
        }
        if (*p == '\0') { return k - i; }
    }
    return 0;
}

// Whitespace at s[i]. \s*[\r\n]+ (Llama 3 only) ends after the run's last line break; else
// \s+(?!\S) leaves the last space of the run to the word after it, unless the run is one
// character (then \s+ takes it) or ends the text.
static size_t piece_space(const char *s, size_t len, size_t i, int line_breaks) {
    size_t last = i, end = skip_class(s, len, i, CH_SPACE, &last);
    for (size_t k = end; line_breaks && k > i; k--) {
        if (s[k - 1] == '\r' || s[k - 1] == '\n') { return k; }
    }
    return (end == len || last == i) ? end : last;
}

// Split with the Llama 3 pattern (behavior Isolated); its alternatives are tried in order. (The
// patterns are C strings as tokenizer.json spells them: load_byte_level accepts these two only.)
static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static size_t piece_llama3(const char *s, size_t len, size_t i) {
    size_t n0, n1 = 0, k = contraction(s, len, i, 1);
    if (k > 0) { return i + k; }
    int c0 = class_at(s, len, i, &n0), c1 = i + n0 < len ? class_at(s, len, i + n0, &n1) : -1;
    if (c0 == CH_LETTER || (c0 != CH_NUMBER && s[i] != '\r' && s[i] != '\n' && c1 == CH_LETTER)) {
        return skip_class(s, len, i + n0, CH_LETTER, NULL);
    }
    if (c0 == CH_NUMBER) {
        k = i + n0;
        for (int r = 1; r < 3 && k < len && class_at(s, len, k, &n1) == CH_NUMBER; r++) { k += n1; }
        return k;
    }
    if (c0 == CH_OTHER || (s[i] == ' ' && c1 == CH_OTHER)) {
        k = skip_class(s, len, i + n0, CH_OTHER, NULL);
        while (k < len && (s[k] == '\r' || s[k] == '\n')) { k++; }
        return k;
    }
    return piece_space(s, len, i, 1);
}

// ByteLevel's use_regex pattern (GPT-2)
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static size_t piece_gpt2(const char *s, size_t len, size_t i) {
    size_t n, k = contraction(s, len, i, 0);
    if (k > 0) { return i + k; }
    int c = class_at(s, len, i, &n);
    if (c != CH_SPACE) { return skip_class(s, len, i, c, NULL); }
    if (s[i] == ' ' && i + 1 < len && (c = class_at(s, len, i + 1, &n)) != CH_SPACE) {
        return skip_class(s, len, i + 1, c, NULL);
    }
    return piece_space(s, len, i, 0);
}

// Digits: each \p{N} character alone (individual_digits), or runs of them; and runs of the rest
static size_t piece_digits(const char *s, size_t len, size_t i, int individual) {
    size_t n;
    int digit = class_at(s, len, i, &n) == CH_NUMBER;
    if (digit && individual) { return i + n; }
    while (i < len && (class_at(s, len, i, &n) == CH_NUMBER) == digit) { i += n; }
    return i;
}

// ----- the tokenizer

enum { PATTERN_LLAMA3 = 1, PATTERN_GPT2, MAX_TEMPLATE = 8, MAX_VOCAB = 1 << 24 };
static const char SPACE_MARK[] = "▁"; // U+2581, SentencePiece's space (3 bytes)

typedef struct {
    const char *text;         // in Tokenizer.strings; NULL: no token has this id
    int len;
    unsigned char special;    // an added token with special=true: decodes to nothing
    unsigned char normalized; // an added token matched in normalized text (HF's two passes)
} TokenText;

typedef struct { int left, right, rank, id; } Merge; // a hash slot; left < 0 when empty

struct Tokenizer {
    int vocab_size;          // largest id + 1 over the vocab and the added tokens
    TokenText *tok;          // (vocab_size) the text of each id
    char *strings;           // all token texts back to back
    size_t strings_len;
    int *vocab_slots;        // (vocab_cap) open-addressing hash of the BPE vocab: id, or -1
    size_t vocab_cap;
    Merge *merges;           // (merge_cap) open-addressing hash of the merges by id pair
    size_t merge_cap;
    const TokenText **added; // (n_added) the added tokens, in find_added's order
    int n_added;
    int unk_id, fuse_unk, byte_fallback, ignore_merges; // BPE model options; unk_id -1 if none
    int byte_ids[256];       // ids of <0x00>..<0xFF> for byte fallback, -1 where missing
    int byte_level;          // recipe 2, its split's PATTERN_*; 0: recipe 1 (SentencePiece-style),
    int normalizer;          // spelled with the normalizer, else with Metaspace, whose
    int prepend_first;       // prepend_scheme is "first" (else "always")
    int digits;              // recipe 2's Digits before the split: 1 individual, 2 runs, 0 none
    unsigned byte_char[256]; // GPT-2's bytes_to_unicode: byte -> code point
    short char_byte[324];    // its inverse, -1 for code points that stand for no byte
    int prefix[MAX_TEMPLATE], n_prefix, suffix[MAX_TEMPLATE], n_suffix; // the template around $A
};

// An open-addressing table for n entries: *cap slots (a power of two, at most half full) of elem
// bytes, every byte 0xFF, so each slot starts empty (-1).
static void *table_alloc(size_t n, size_t elem, size_t *cap) {
    for (*cap = 16; *cap < 2 * n; *cap *= 2) {}
    return memset(malloc_check(mul_size(*cap, elem)), 0xFF, *cap * elem);
}

// The slot of token text s, or the empty slot where it belongs (FNV-1a hash, linear probing)
static size_t vocab_slot(const Tokenizer *t, const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h = (h ^ (unsigned char)s[i]) * 1099511628211ull; }
    size_t mask = t->vocab_cap - 1, k = (size_t)h & mask;
    for (; t->vocab_slots[k] >= 0; k = (k + 1) & mask) {
        const TokenText *x = &t->tok[t->vocab_slots[k]];
        if ((size_t)x->len == n && memcmp(x->text, s, n) == 0) { break; }
    }
    return k;
}

static int vocab_find(const Tokenizer *t, const char *s, size_t n) {
    return t->vocab_slots[vocab_slot(t, s, n)];
}

static size_t merge_slot(const Tokenizer *t, int left, int right) {
    uint64_t h = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) * 0x9E3779B97F4A7C15ull;
    size_t mask = t->merge_cap - 1, k = (size_t)(h >> 20) & mask;
    while (t->merges[k].left >= 0 && (t->merges[k].left != left || t->merges[k].right != right)) {
        k = (k + 1) & mask;
    }
    return k;
}

static int merge_rank(const Tokenizer *t, int left, int right) {
    const Merge *m = &t->merges[merge_slot(t, left, right)];
    return m->left >= 0 ? m->rank : INT_MAX;
}

int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }

// SentencePiece's spelling of s (n bytes), in a new buffer: "▁" for every space, and one in front
// when front (recipe 1's normalizer, and Metaspace).
static char *with_space_marks(const char *s, size_t n, int front, size_t *out_len) {
    char *out = (char *)malloc_check(mul_size(add_size(n, 1), 3)), *o = out;
    if (front) { memcpy(o, SPACE_MARK, 3); o += 3; }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(o, SPACE_MARK, 3); o += 3; } else { *o++ = s[i]; }
    }
    *out_len = (size_t)(o - out);
    return out;
}

// ----- encoding

typedef struct {
    const Tokenizer *t;
    int *ids; // (max) the output
    int n, max, failed;
    char *err;
} Encoder;

// Appends id to the output; the first id that does not fit fails the encoding.
static void push_id(Encoder *e, int id) {
    if (!e->failed && e->n == e->max) {
        e->failed = fail(e->err, "encode: the text needs more than %d tokens", e->max);
    }
    if (!e->failed) { e->ids[e->n++] = id; }
}

// bpe_word's min-heap of candidate merges, each rank << 32 | pos: the merge of the symbol at pos
// with the one after it. The smallest key is the lowest rank, leftmost on ties.
static void pair_push(uint64_t *heap, size_t *n, int rank, int pos) {
    if (rank == INT_MAX) { return; } // the pair has no merge rule
    uint64_t p = (uint64_t)rank << 32 | (uint32_t)pos;
    size_t i = (*n)++;
    for (; i > 0 && p < heap[(i - 1) / 2]; i = (i - 1) / 2) { heap[i] = heap[(i - 1) / 2]; }
    heap[i] = p;
}

static uint64_t pair_pop(uint64_t *heap, size_t *n) {
    uint64_t top = heap[0], last = heap[--*n];
    size_t i = 0;
    for (size_t c; (c = 2 * i + 1) < *n; i = c) {
        if (c + 1 < *n && heap[c + 1] < heap[c]) { c++; }
        if (heap[c] >= last) { break; }
        heap[i] = heap[c];
    }
    heap[i] = last;
    return top;
}

// BPE on one word, as HF's BPE::merge_word: a symbol per character (its token, else its <0xXX>
// byte tokens, else unk, fused across a run when fuse_unk), then merges until no adjacent pair
// has a rule. As HF's Word::merge_all: the symbols form a linked list, the candidate pairs wait
// in a min-heap by (rank, position), and a popped pair whose symbols have changed since it was
// pushed is dropped, so an n-symbol word takes O(n log n), not O(n^2).
static void bpe_word(Encoder *e, const char *w, size_t len) {
    const Tokenizer *t = e->t;
    int whole = t->ignore_merges ? vocab_find(t, w, len) : -1;
    if (whole >= 0) { push_id(e, whole); return; }
    int *sym = (int *)calloc_check(len, 3 * sizeof(int)); // at most one symbol per byte
    int *next = sym + len, *prev = next + len, unk = 0, cp;   // the list; -1 at its ends
    size_t n = 0;
    for (size_t i = 0, cl; i < len; i += cl) {
        cl = utf8_decode(w, len, i, &cp);
        int id = vocab_find(t, w + i, cl), bytes = t->byte_fallback;
        for (size_t b = 0; b < cl; b++) { bytes &= t->byte_ids[(unsigned char)w[i + b]] >= 0; }
        if (id >= 0) {
            if (unk) { sym[n++] = t->unk_id; }
            sym[n++] = id;
            unk = 0;
        } else if (bytes) { // HF leaves a pending unk pending here, so it lands after these bytes
            for (size_t b = 0; b < cl; b++) { sym[n++] = t->byte_ids[(unsigned char)w[i + b]]; }
        } else if (t->unk_id >= 0) {
            if (unk && !t->fuse_unk) { sym[n++] = t->unk_id; }
            unk = 1;
        }
    }
    if (unk) { sym[n++] = t->unk_id; }
    uint64_t *heap = (uint64_t *)malloc_check(mul_size(3 * sizeof(*heap), n)); // n + 2 per merge
    size_t n_heap = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = i + 1 < n ? (int)i + 1 : -1;
        prev[i] = (int)i - 1;
        pair_push(heap, &n_heap, i + 1 < n ? merge_rank(t, sym[i], sym[i + 1]) : INT_MAX, (int)i);
    }
    while (n_heap > 0) {
        uint64_t p = pair_pop(heap, &n_heap);
        int i = (int)(uint32_t)p, j = next[i], rank = (int)(p >> 32);
        if (sym[i] < 0 || j < 0 || merge_rank(t, sym[i], sym[j]) != rank) { continue; } // stale
        sym[i] = t->merges[merge_slot(t, sym[i], sym[j])].id;
        sym[j] = -1;
        int left = prev[i], right = next[i] = next[j];
        if (right >= 0) { prev[right] = i; }
        if (left >= 0) { pair_push(heap, &n_heap, merge_rank(t, sym[left], sym[i]), left); }
        if (right >= 0) { pair_push(heap, &n_heap, merge_rank(t, sym[i], sym[right]), i); }
    }
    for (int i = n > 0 ? 0 : -1; i >= 0; i = next[i]) { push_id(e, sym[i]); }
    free(heap);
    free(sym);
}

// A piece of normalized text between added tokens, split into words by the pre-tokenizer, then
// BPE on each word. Recipe 1 with the normalizer has no pre-tokenizer: the piece is one word.
// Metaspace (split false) writes the "▁"s, one in front unless the piece starts with one (or a
// space) or prepend_scheme is "first" and the piece does not begin the text (at_start). Recipe 2
// splits by Digits, then by the pattern, and writes each byte of a word as GPT-2's character.
static void encode_piece(Encoder *e, const char *s, size_t len, int at_start) {
    const Tokenizer *t = e->t;
    size_t n = 0;
    if (!t->byte_level) {
        int front = (at_start || !t->prepend_first) && s[0] != ' ' &&
                    !starts_with(s, len, SPACE_MARK, 3);
        char *w = t->normalizer ? NULL : with_space_marks(s, len, front, &n);
        bpe_word(e, w != NULL ? w : s, w != NULL ? n : len);
        free(w);
        return;
    }
    char *w = (char *)malloc_check(mul_size(len, 2)); // a character of 1 or 2 bytes per byte
    for (size_t i = 0, end; i < len && !e->failed; i = end) { // Digits' pieces, or the whole
        end = t->digits ? piece_digits(s, len, i, t->digits == 1) : len;
        for (size_t k = i, word; k < end && !e->failed; k = word, n = 0) {
            word = t->byte_level == PATTERN_LLAMA3 ? piece_llama3(s, end, k) : piece_gpt2(s, end, k);
            for (size_t b = k; b < word; b++) { put_utf8(t->byte_char[s[b] & 0xFF], w, &n); }
            bpe_word(e, w, n);
        }
    }
    free(w);
}

// Byte k of added token x's sort key: its pass (0 raw, 1 normalized), then its text; -1 past
// the end. load_added sorts t->added by this key, so the tokens of a pass that start with a given
// text are one run of it.
static int added_key(const TokenText *x, size_t k) {
    return k == 0 ? x->normalized : k <= (size_t)x->len ? (unsigned char)x->text[k - 1] : -1;
}

// The first a in [lo, hi) whose key byte k is >= byte (the run [lo, hi) shares key bytes 0..k-1).
static int added_bound(const Tokenizer *t, int lo, int hi, size_t k, int byte) {
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (added_key(t->added[mid], k) < byte) { lo = mid + 1; } else { hi = mid; }
    }
    return lo;
}

// Leftmost-longest added token of one pass (normalized or not) in s[from..len), and where it is:
// HF matches them all at once with an Aho-Corasick automaton in LeftmostLongest mode. At each i
// the run of tokens matching s[i..] is narrowed one byte at a time by binary search, so a line
// costs its length x the match depth x log(n_added), whatever the tokens have in common.
static int find_added(const Tokenizer *t, const char *s, size_t len, size_t from, int normalized,
                      size_t *at) {
    for (size_t i = from; i < len; i++) {
        int lo = 0, hi = t->n_added, best = -1;
        for (size_t k = 0; lo < hi; k++) { // [lo, hi): the tokens whose key starts with k bytes
            if (k >= 2 && added_key(t->added[lo], k) < 0) { best = lo; } // s[i..i+k-1)
            if (k > 0 && i + k - 1 >= len) { break; }
            int want = k == 0 ? normalized : (unsigned char)s[i + k - 1];
            lo = added_bound(t, lo, hi, k, want);
            hi = added_bound(t, lo, hi, k, want + 1);
        }
        if (best >= 0) { *at = i; return (int)(t->added[best] - t->tok); }
    }
    return -1;
}

// HF's AddedVocabulary::extract_and_normalize, steps (1) and (2) above: pass 0 cuts the added
// tokens out of the raw text, and pass 1 cuts the normalized ones out of each piece between them,
// normalized (recipe 1's normalizer), and pre-tokenizes the rest. at_start: s begins the text.
static void split_added(Encoder *e, const char *s, size_t len, int pass, int at_start) {
    size_t from = 0, at, n = 0;
    for (int id = 0; id >= 0 && !e->failed; from = at) {
        id = find_added(e->t, s, len, from, pass, &at);
        at = id >= 0 ? at : len;
        int first = at_start && from == 0; // the piece begins the text
        if (at > from && pass == 1) { encode_piece(e, s + from, at - from, first); }
        if (at > from && pass == 0) {
            char *w = e->t->normalizer ? with_space_marks(s + from, at - from, 1, &n) : NULL;
            split_added(e, w != NULL ? w : s + from, w != NULL ? n : at - from, 1, first);
            free(w);
        }
        if (id >= 0) { push_id(e, id); at += (size_t)e->t->tok[id].len; }
    }
}

int encode(const Tokenizer *t, const char *text, size_t len, int add_special, int *ids, int max_ids,
           char *err) {
    Encoder e = {t, ids, 0, max_ids < 0 ? 0 : max_ids, 0, err};
    for (int k = 0; add_special && k < t->n_prefix; k++) { push_id(&e, t->prefix[k]); }
    split_added(&e, text, text == NULL ? 0 : len, 0, 1);
    for (int k = 0; add_special && k < t->n_suffix; k++) { push_id(&e, t->suffix[k]); }
    return e.failed ? -1 : e.n;
}

// ----- decoding, one token at a time

typedef struct { char *buf; size_t cap, n; } TextOut; // the caller's buffer, kept NUL-terminated

// sp: recipe 1's decoder, whose Strip(" ", 1, 0) after Fuse takes the text's first space
static void text_emit(TextOut *o, DecodeState *st, int sp, const char *s, size_t n) {
    if (sp && st->at_start && s[0] == ' ') { s++, n--; }
    st->at_start = 0;
    if (o->n + n < o->cap) { // a character that does not fit is dropped whole
        memcpy(o->buf + o->n, s, n);
        o->n += n;
        o->buf[o->n] = '\0';
    }
}

static const char fffd[] = "\xEF\xBF\xBD"; // U+FFFD

// Adds one byte of output text; a character goes out once its UTF-8 sequence is complete. The
// bytes held of one that cannot be completed (end: the text ends) become U+FFFD: once (recipe 2,
// from_utf8_lossy) or once per byte (recipe 1, ByteFallback).
static void text_byte(TextOut *o, DecodeState *st, int b, int sp) {
    if (st->n_pending > 0 && (b < 0 || !utf8_continues(st->pending, st->n_pending, b & 0xFF))) {
        for (int bad = sp ? st->n_pending : 1; bad > 0; bad--) { text_emit(o, st, sp, fffd, 3); }
        st->n_pending = 0;
    }
    if (b < 0) { return; }
    if (st->n_pending == 0 && utf8_need(b & 0xFF) == 0) { text_emit(o, st, sp, fffd, 3); return; }
    st->pending[st->n_pending++] = (unsigned char)b;
    if (st->n_pending == utf8_need(st->pending[0])) {
        text_emit(o, st, sp, (const char *)st->pending, (size_t)st->n_pending);
        st->n_pending = 0;
    }
}

static void decode_begin(DecodeState *st) {
    memset(st, 0, sizeof(*st));
    st->at_start = 1;
}

size_t decode_token(const Tokenizer *t, DecodeState *st, int id, char *out, size_t cap) {
    TextOut o = {out, cap, 0};
    if (cap > 0) { out[0] = '\0'; }
    if (id < 0 || id >= t->vocab_size || t->tok[id].text == NULL || t->tok[id].special) {
        return 0;
    }
    const char *s = t->tok[id].text;
    size_t len = (size_t)t->tok[id].len, i, cl = 1;
    int cp, mapped = 1;
    if (t->byte_level) { // each character stands for a byte, unless one cannot
        for (i = 0; i < len; i += cl) { // (an added token): then the token is its own text
            cl = utf8_decode(s, len, i, &cp);
            mapped = mapped && cp >= 0 && cp < 324 && t->char_byte[cp] >= 0;
        }
        for (i = 0; i < len; i += cl) {
            cl = mapped ? utf8_decode(s, len, i, &cp) : 1;
            text_byte(&o, st, mapped ? t->char_byte[cp] : (unsigned char)s[i], 0);
        }
        return o.n;
    }
    if (len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hex_value(s[3]) >= 0 &&
        hex_value(s[4]) >= 0) { // ByteFallback
        text_byte(&o, st, hex_value(s[3]) * 16 + hex_value(s[4]), 1);
        return o.n;
    }
    for (i = 0; i < len; i += cl) { // Replace("▁", " ")
        int mark = starts_with(s + i, len - i, SPACE_MARK, 3);
        cl = mark ? 3 : 1;
        text_byte(&o, st, mark ? ' ' : (unsigned char)s[i], 1);
    }
    return o.n;
}

// The end of the text: a character still incomplete becomes U+FFFD, as in HF's decode.
size_t decode_end(const Tokenizer *t, DecodeState *st, char *out, size_t cap) {
    TextOut o = {out, cap, 0};
    if (cap > 0) { out[0] = '\0'; }
    text_byte(&o, st, -1, !t->byte_level);
    return o.n;
}

// ----- loading tokenizer.json

static int type_is(Json *j, int obj, const char *type) { return json_key_is(j, obj, "type", type); }

// The steps of a component: the ones a Sequence lists under key, else the component itself (none
// when it is null). The first max go into step[]; returns how many there are.
static int steps_of(Json *j, int obj, const char *key, int *step, int max) {
    if (json_is_null(j, obj)) { return 0; }
    if (key == NULL || !type_is(j, obj, "Sequence")) { step[0] = obj; return 1; }
    int n, i = json_key_array(j, obj, key, &n);
    for (int k = 0; k < n && k < max; k++, i = json_skip(j, i)) { step[k] = i; }
    return n;
}

// The refusal of what neither recipe holds: the component (listing its steps under key), their
// types ("null": none), and what selfspec reads there.
static int unsupported(Json *j, const char *what, const char *key, int obj, const char *reads) {
    char have[160] = "";
    int s[6], n = steps_of(j, obj, key, s, 6), seq = n > 0 && type_is(j, obj, "Sequence");
    for (int k = 0; k < n && k < 6; k++) {
        size_t len, o = strlen(have);
        char *type = json_string(j, json_get(j, s[k], "type"), &len);
        snprintf(have + o, sizeof(have) - o, "%s%.20s", k ? ", " : "", type ? type : "untyped");
        free(type);
    }
    return json_fail(j, "unsupported %s %s%s%s (selfspec reads %s)", what, seq ? "Sequence[" : "",
                     n > 0 ? have : "null", seq ? "]" : "", reads);
}

// Whether step i is Replace(from, to) with a String pattern
static int is_replace(Json *j, int i, const char *from, const char *to) {
    return type_is(j, i, "Replace") && json_key_is(j, json_get(j, i, "pattern"), "String", from) &&
           json_key_is(j, i, "content", to);
}

// Recipe 1: its decoder, then either spelling of its "▁"s.
// Decision: only what transformers writes for LLaMA with add_prefix_space (its default); a
// tokenizer without the front "▁" (no Prepend, prepend_scheme never, no Strip) and Metaspace with
// split true (ALBERT's, T5's) are refused, not approximated.
static int load_sentencepiece(Tokenizer *t, Json *j, int norm, int pre, int dec) {
    int s[4];
    long long one, zero;
    if (steps_of(j, dec, "decoders", s, 4) != 4 || !is_replace(j, s[0], SPACE_MARK, " ") ||
        !type_is(j, s[1], "ByteFallback") || !type_is(j, s[2], "Fuse") ||
        !type_is(j, s[3], "Strip") || !json_key_is(j, s[3], "content", " ") ||
        json_int(j, json_get(j, s[3], "start"), 1, 1, &one) != 0 ||
        json_int(j, json_get(j, s[3], "stop"), 0, 0, &zero) != 0) {
        return unsupported(j, "decoder", "decoders", dec, "Sequence[Replace(\"▁\", \" \"), "
                           "ByteFallback, Fuse, Strip(\" \", 1, 0)], or ByteLevel");
    }
    if (json_is_null(j, pre)) {
        t->normalizer = steps_of(j, norm, "normalizers", s, 2) == 2 &&
                        type_is(j, s[0], "Prepend") &&
                        json_key_is(j, s[0], "prepend", SPACE_MARK) &&
                        is_replace(j, s[1], " ", SPACE_MARK);
        return t->normalizer ? 0 : unsupported(j, "normalizer", "normalizers", norm,
                                               "Sequence[Prepend(\"▁\"), Replace(\" \", \"▁\")], "
                                               "or Metaspace and none");
    }
    t->prepend_first = json_key_is(j, pre, "prepend_scheme", "first");
    if (!type_is(j, pre, "Metaspace") || !json_key_is(j, pre, "replacement", SPACE_MARK) ||
        !(t->prepend_first || json_key_is(j, pre, "prepend_scheme", "always")) ||
        json_key_bool(j, pre, "split", 1)) {
        return unsupported(j, "pre_tokenizer", "pretokenizers", pre, "Metaspace(\"▁\", "
                           "prepend_scheme first or always, split false), or none");
    }
    return json_is_null(j, norm) ? 0 : unsupported(j, "normalizer", "normalizers", norm, "none");
}

// Recipe 2: [Digits,] Split(the Llama 3 or GPT-2 regex, Isolated), ByteLevel(use_regex false); or
// [Digits,] ByteLevel(use_regex true), whose own regex is GPT-2's; add_prefix_space false, no
// normalizer. Then GPT-2's bytes_to_unicode: printable bytes stand for themselves, the 68 others
// for U+0100...
static int load_byte_level(Tokenizer *t, Json *j, int norm, int pre) {
    int s[3], n = steps_of(j, pre, "pretokenizers", s, 3), k = 0, regex = -1;
    if (n > 1 && type_is(j, s[0], "Digits")) {
        t->digits = json_key_bool(j, s[k++], "individual_digits", 0) ? 1 : 2;
    }
    if (n - k == 2 && type_is(j, s[k], "Split") && json_key_is(j, s[k], "behavior", "Isolated") &&
        !json_key_bool(j, s[k], "invert", 0)) {
        int p = json_get(j, s[k++], "pattern");
        t->byte_level = json_key_is(j, p, "Regex", LLAMA3_PATTERN) ? PATTERN_LLAMA3
                        : json_key_is(j, p, "Regex", GPT2_PATTERN) ? PATTERN_GPT2 : 0;
    }
    if (n - k == 1 && type_is(j, s[k], "ByteLevel") &&
        !json_key_bool(j, s[k], "add_prefix_space", 1)) {
        regex = json_key_bool(j, s[k], "use_regex", 1);
    }
    if (regex < 0 || regex == (t->byte_level != 0)) {
        return unsupported(j, "pre_tokenizer", "pretokenizers", pre, "[Digits,] Split(the Llama 3 "
                           "or GPT-2 regex) and ByteLevel, or [Digits,] ByteLevel with its regex");
    }
    if (!json_is_null(j, norm)) {
        return unsupported(j, "normalizer", "normalizers", norm, "none");
    }
    t->byte_level = regex ? PATTERN_GPT2 : t->byte_level;
    memset(t->char_byte, 0xFF, sizeof(t->char_byte)); // -1: stands for no byte
    for (int b = 0, next = 256; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        t->byte_char[b] = (unsigned)(printable ? b : next++);
        t->char_byte[t->byte_char[b]] = (short)b;
    }
    return 0;
}

// The post-processor: TemplateProcessing (the special tokens before and after $A in its single
// template), ByteLevel (it only adjusts offsets), the two in a Sequence (Llama 3), or none.
static int load_post(Tokenizer *t, Json *j, int post) {
    int s[2], n = steps_of(j, post, "processors", s, 2), tp = -1, bad = n > 2;
    for (int k = 0; k < n && k < 2; k++) {
        if (type_is(j, s[k], "TemplateProcessing") && tp < 0) { tp = s[k]; }
        else if (!type_is(j, s[k], "ByteLevel")) { bad = 1; }
    }
    if (bad) {
        return unsupported(j, "post_processor", "processors", post, "TemplateProcessing, "
                           "ByteLevel, the two in a Sequence, or none");
    }
    if (tp < 0) { return 0; }
    int m, i = json_key_array(j, tp, "single", &m), n_a = 0; // 1 after the one $A, 2 if not one
    for (int k = 0; k < m && i >= 0 && n_a < 2; k++, i = json_skip(j, i)) {
        int seq = json_get(j, i, "Sequence"), n_ids = 0;
        size_t len;
        if (seq >= 0) { n_a += n_a == 0 && json_key_is(j, seq, "id", "A") ? 1 : 2; continue; }
        char *name = json_string(j, json_get(j, json_get(j, i, "SpecialToken"), "id"), &len);
        int entry = name != NULL ? json_get(j, json_get(j, tp, "special_tokens"), name) : -1;
        if (name != NULL && entry < 0) { // (json_fail keeps this message, not json_key_array's)
            json_fail(j, "post_processor: special_tokens has no \"%.64s\"", name);
        }
        int e = name != NULL ? json_key_array(j, entry, "ids", &n_ids) : -1;
        free(name);
        if (e < 0) { return json_fail(j, "post_processor: a template token without ids"); }
        int *count = n_a ? &t->n_suffix : &t->n_prefix, *ids = n_a ? t->suffix : t->prefix;
        for (int q = 0; q < n_ids; q++, e = json_skip(j, e)) {
            long long id;
            if (json_int(j, e, 0, t->vocab_size - 1, &id) != 0 || *count == MAX_TEMPLATE) {
                return json_fail(j, "post_processor: bad special token id");
            }
            ids[(*count)++] = (int)id;
        }
    }
    return i < 0 || n_a != 1 ? json_fail(j, "post_processor: the single template must hold $A once")
                             : 0;
}

// Largest id in the vocab and the added tokens, each checked to be in [0, MAX_VOCAB).
static int max_id(Json *j, int vocab, int added) {
    long long id, top = -1;
    for (int k = 0, i = vocab + 1; k < j->tok[vocab].size; k++, i = json_skip(j, i + 1)) {
        if (json_int(j, i + 1, 0, MAX_VOCAB - 1, &id) != 0) {
            return json_fail(j, "model.vocab entry %d: id not in [0, %d)", k, MAX_VOCAB);
        }
        top = id > top ? id : top;
    }
    for (int k = 0, i = added + 1; added >= 0 && k < j->tok[added].size; k++, i = json_skip(j, i)) {
        if (json_int(j, json_get(j, i, "id"), 0, MAX_VOCAB - 1, &id) != 0) {
            return json_fail(j, "added_tokens[%d]: id not in [0, %d)", k, MAX_VOCAB);
        }
        top = id > top ? id : top;
    }
    return (int)top;
}

// Gives id its text (each id gets one).
static int set_text(Tokenizer *t, Json *j, int id, const char *s, size_t n) {
    if (t->tok[id].text != NULL) {
        return json_fail(j, "two tokens have id %d", id);
    }
    t->tok[id].text = (const char *)memcpy(t->strings + t->strings_len, s, n);
    t->tok[id].len = (int)n;
    t->strings_len += n;
    return 0;
}

// The vocab: a token given twice keeps its last id, as Python's json and HF's map read it.
static int load_vocab(Tokenizer *t, Json *j, int vocab) {
    t->vocab_slots = (int *)table_alloc((size_t)j->tok[vocab].size, sizeof(int), &t->vocab_cap);
    for (int k = 0, i = vocab + 1; k < j->tok[vocab].size; k++, i = json_skip(j, i + 1)) {
        long long id = 0;
        size_t len = 0, slot = 0;
        json_int(j, i + 1, 0, MAX_VOCAB - 1, &id); // checked by max_id
        char *s = json_string(j, i, &len);
        if (s != NULL && t->vocab_slots[slot = vocab_slot(t, s, len)] >= 0) {
            t->tok[t->vocab_slots[slot]].text = NULL; // the earlier id loses it
        }
        int ok = s != NULL && set_text(t, j, (int)id, s, len) == 0;
        free(s);
        if (!ok) { return json_fail(j, "model.vocab entry %d: a bad token, or its id taken", k); }
        t->vocab_slots[slot] = (int)id;
    }
    return 0;
}

// Merge k, "a b" or ["a", "b"], joins the tokens a and b into the token ab with rank k (lower
// ranks merge first); ab holds the two back to back, a its first cut bytes. A pair listed twice
// keeps its last rank, as in HF's HashMap.
static int load_merges(Tokenizer *t, Json *j, int merges) {
    int n, i = json_key_array(j, merges, "merges", &n);
    t->merges = (Merge *)table_alloc((size_t)n, sizeof(Merge), &t->merge_cap);
    for (int k = 0; k < n; k++, i = json_skip(j, i)) {
        size_t len = 0, cut = 0, nb = 0;
        char *ab = NULL, *space, *a = NULL, *b = NULL;
        int ok = 0, left = -1, right = -1, joined = -1;
        if (j->tok[i].type == JSMN_STRING && (ab = json_string(j, i, &len)) != NULL &&
            (space = (char *)memchr(ab, ' ', len)) != NULL) {
            cut = (size_t)(space - ab);
            memmove(space, space + 1, len - cut - 1); // "a b" becomes ab
            ok = memchr(ab, ' ', --len) == NULL;      // (exactly one space)
        } else if (j->tok[i].type == JSMN_ARRAY && j->tok[i].size == 2 &&
                   (a = json_string(j, i + 1, &cut)) != NULL &&
                   (b = json_string(j, json_skip(j, i + 1), &nb)) != NULL) {
            ab = (char *)malloc_check(add_size(cut, nb) + 1);
            memcpy(ab, a, cut);
            memcpy(ab + cut, b, nb);
            len = cut + nb, ok = 1;
        }
        if (ok) {
            left = vocab_find(t, ab, cut), right = vocab_find(t, ab + cut, len - cut);
            joined = vocab_find(t, ab, len);
        }
        free(ab);
        free(a);
        free(b);
        if (left < 0 || right < 0 || joined < 0) {
            return json_fail(j, "model.merges[%d]: not two vocab tokens that join into one", k);
        }
        Merge *m = &t->merges[merge_slot(t, left, right)];
        m->left = left, m->right = right, m->rank = k, m->id = joined;
    }
    return j->failed ? -1 : 0;
}

// Added tokens by their keys (added_key: pass, then text, a prefix first), then by id.
static int compare_added(const void *a, const void *b) {
    const TokenText *x = *(const TokenText *const *)a, *y = *(const TokenText *const *)b;
    size_t k = 0;
    while (added_key(x, k) >= 0 && added_key(x, k) == added_key(y, k)) { k++; }
    int c = added_key(x, k) - added_key(y, k);
    return c != 0 ? c : (x > y) - (x < y);
}

// Added tokens, matched in the raw text or (normalized) in normalized text; one whose id is in
// the vocab must have the vocab's text. lstrip, rstrip and single_word are refused.
// Decision: under recipe 1's normalizer a normalized token (transformers' add_tokens on a Llama 2
// tokenizer) is its normalized content, as HF matches and decodes it (its id_to_token): "<x>" is
// "▁<x>", cut out of "a <x>" ("▁a▁<x>") but not of "a<x>", and decodes as " <x>".
static int load_added(Tokenizer *t, Json *j, int arr) {
    static const char *const flags[3] = {"lstrip", "rstrip", "single_word"};
    t->added = (const TokenText **)calloc_check(arr < 0 ? 0 : (size_t)j->tok[arr].size,
                                                sizeof(*t->added));
    for (int k = 0, i = arr + 1; arr >= 0 && k < j->tok[arr].size; k++, i = json_skip(j, i)) {
        long long id = 0;
        size_t len = 0;
        json_int(j, json_get(j, i, "id"), 0, MAX_VOCAB - 1, &id); // checked by max_id
        char *s = json_string(j, json_get(j, i, "content"), &len), *w = s;
        TokenText *x = &t->tok[id];
        int special = json_key_bool(j, i, "special", 0), no_text = s == NULL || len == 0, why = -1;
        int normalized = json_key_bool(j, i, "normalized", !special);
        for (int q = 0; q < 3; q++) { why = json_key_bool(j, i, flags[q], 0) ? q : why; }
        int grown = !no_text && normalized && t->normalizer; // matched as its normalized content
        if (grown) { w = with_space_marks(s, len, 1, &len); }
        int ok = !no_text && why < 0 &&
                 (x->text == NULL ? set_text(t, j, (int)id, w, len) == 0
                                  : (size_t)x->len == len && memcmp(x->text, w, len) == 0);
        if (grown) { free(w); }
        free(s);
        if (!ok) { // (each cause named: lstrip, rstrip and single_word change how HF matches)
            return json_fail(j, "added_tokens[%d]: %s%s", k, why >= 0 ? flags[why] : "",
                             why >= 0  ? "=true is not supported"
                             : no_text ? "no \"content\" text"
                             : grown   ? "\"content\", normalized, is not the vocab's text for its id"
                                       : "\"content\" is not the vocab's text for its id");
        }
        x->special |= (unsigned char)special;
        x->normalized = (unsigned char)normalized;
        t->added[t->n_added++] = x;
    }
    qsort(t->added, (size_t)t->n_added, sizeof(*t->added), compare_added); // for find_added
    return 0;
}

// The BPE model (without dropout, subword prefix or suffix: each changes what encode returns;
// truncation and padding, which transformers turns off for one text, are not read), the recipe,
// the post-processor, the vocab, merges and added tokens.
static int load_tokenizer(Tokenizer *t, Json *j, size_t file_len) {
    static const char *const options[3] = {"dropout", "continuing_subword_prefix",
                                           "end_of_word_suffix"};
    int model = json_get(j, 0, "model"), vocab = json_get(j, model, "vocab"), s[1];
    int added = json_get(j, 0, "added_tokens"), dec = json_get(j, 0, "decoder");
    added = json_is_null(j, added) ? -1 : added;
    if (!type_is(j, model, "BPE")) { return unsupported(j, "model", NULL, model, "BPE"); }
    if (vocab < 0 || j->tok[vocab].type != JSMN_OBJECT ||
        (added >= 0 && j->tok[added].type != JSMN_ARRAY)) {
        return json_fail(j, "model.vocab must be an object and added_tokens an array");
    }
    for (int k = 0; k < 3; k++) { // each null, or HF's default ("", 0)
        int v = json_get(j, model, options[k]);
        double p = 0;
        if (!json_is_null(j, v) && !json_eq(j, v, "") && (json_number(j, v, &p) != 0 || p != 0)) {
            return json_fail(j, "unsupported model.%s", options[k]);
        }
    }
    int norm = json_get(j, 0, "normalizer"), pre = json_get(j, 0, "pre_tokenizer");
    int byte_level = steps_of(j, dec, "decoders", s, 1) == 1 && type_is(j, s[0], "ByteLevel");
    if (byte_level ? load_byte_level(t, j, norm, pre) : load_sentencepiece(t, j, norm, pre, dec)) {
        return -1;
    }
    t->vocab_size = max_id(j, vocab, added) + 1;
    if (j->failed || load_post(t, j, json_get(j, 0, "post_processor")) != 0) { return -1; }
    t->tok = (TokenText *)calloc_check((size_t)t->vocab_size, sizeof(TokenText));
    // each token text is its own string of the file, unescaped, so never longer; a normalized
    // added token's "▁"s (its front, its spaces) make it at most 3 times its string and quotes
    t->strings = (char *)malloc_check(t->normalizer ? mul_size(file_len, 3) : file_len);
    if (load_vocab(t, j, vocab) != 0 || load_merges(t, j, model) != 0) { return -1; }
    t->byte_fallback = json_key_bool(j, model, "byte_fallback", 0);
    t->fuse_unk = json_key_bool(j, model, "fuse_unk", 0);
    t->ignore_merges = json_key_bool(j, model, "ignore_merges", 0);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        t->byte_ids[b] = vocab_find(t, name, 6);
    }
    size_t n;
    char *unk = json_string(j, json_get(j, model, "unk_token"), &n);
    t->unk_id = unk != NULL ? vocab_find(t, unk, n) : -1;
    if (unk != NULL && t->unk_id < 0) { json_fail(j, "model.unk_token is not in the vocab"); }
    free(unk);
    return j->failed || load_added(t, j, added) != 0 ? -1 : 0;
}

Tokenizer *build_tokenizer(const char *path, char *err) {
    size_t len;
    Json j;
    char *js = read_file(path, &len, err);
    if (js == NULL || json_parse(&j, js, len, path, err) != 0) { free(js); return NULL; }
    Tokenizer *t = (Tokenizer *)calloc_check(1, sizeof(Tokenizer));
    if (load_tokenizer(t, &j, len) != 0) { free_tokenizer(t), t = NULL; } // (j holds the error)
    json_free(&j);
    free(js);
    return t;
}

void free_tokenizer(Tokenizer *t) {
    if (t == NULL) { return; }
    free(t->added);
    free(t->tok);
    free(t->strings);
    free(t->vocab_slots);
    free(t->merges);
    free(t);
}

// ----- Unicode classes

// Unicode classes of the pre-tokenizer patterns: \p{L}, \p{N} and \s (White_Space). HF's Digits
// uses Rust's char::is_numeric, which knows Unicode 17: 13 digits newer than this table differ.
// Generated by test/gen_unicode_tables.py (Unicode 16.0.0, unicodedata2): each range
// as two numbers, its first code point less the last of the range before (-1 before the first),
// and its width less one.
// \p{L}: 677 ranges
static const uint32_t unicode_letters[] = {
    66,25, 7,25, 48,0, 11,0, 5,0, 6,22, 2,30, 2,457, 5,11, 15,4, 8,0, 2,0, 130,4, 2,1, 3,3, 2,0,
    7,0, 2,2, 2,0, 2,19, 2,82, 2,138, 9,165, 2,37, 3,0, 7,40, 72,26, 5,3, 46,42, 36,1, 2,98, 2,0,
    16,1, 8,1, 11,2, 3,0, 17,0, 2,29, 30,88, 12,0, 25,32, 10,1, 5,0, 6,21, 5,0, 10,0, 4,0, 24,24,
    8,10, 6,23, 2,5, 18,41, 59,53, 4,0, 19,0, 8,9, 16,15, 5,7, 3,1, 3,21, 2,6, 2,0, 4,3, 4,0, 17,0,
    14,1, 2,2, 15,1, 11,0, 9,5, 5,1, 3,21, 2,6, 2,1, 2,1, 2,1, 32,3, 2,0, 20,2, 17,8, 2,2, 2,21,
    2,6, 2,1, 2,4, 4,0, 19,0, 16,1, 24,0, 12,7, 3,1, 3,21, 2,6, 2,1, 2,4, 4,0, 31,1, 2,2, 16,0,
    18,0, 2,5, 4,2, 2,3, 4,1, 2,0, 2,1, 4,1, 4,2, 4,11, 23,0, 53,7, 2,2, 2,22, 2,15, 4,0, 27,2, 3,0,
    3,1, 31,0, 5,7, 2,2, 2,22, 2,9, 2,4, 4,0, 32,1, 2,1, 16,1, 18,8, 2,2, 2,40, 3,0, 17,0, 6,2, 9,2,
    25,5, 6,17, 4,23, 2,8, 2,0, 3,6, 59,47, 2,1, 13,6, 59,1, 2,0, 2,4, 2,23, 2,0, 2,9, 2,1, 10,0,
    3,4, 2,0, 22,3, 33,0, 64,7, 2,35, 28,4, 116,42, 21,0, 17,5, 5,3, 4,0, 4,1, 8,2, 5,12, 13,0,
    18,37, 2,0, 6,0, 3,42, 2,332, 2,3, 3,6, 2,0, 2,3, 3,40, 2,3, 3,32, 2,3, 3,6, 2,0, 2,3, 3,14,
    2,56, 2,3, 3,66, 38,15, 17,85, 3,5, 4,619, 3,16, 2,25, 6,74, 7,7, 8,17, 14,18, 15,17, 15,12,
    2,2, 16,51, 36,0, 5,0, 68,88, 8,4, 3,33, 2,0, 6,69, 11,30, 50,29, 3,4, 12,43, 5,25, 55,22,
    10,52, 83,0, 94,46, 18,7, 55,29, 14,1, 11,43, 27,35, 42,2, 11,35, 3,10, 6,42, 3,2, 42,3, 2,5,
    2,1, 4,0, 6,191, 65,277, 3,5, 3,37, 3,5, 3,7, 2,0, 2,0, 2,0, 2,30, 3,52, 2,6, 2,0, 4,2, 2,6,
    4,3, 3,5, 5,12, 6,2, 2,6, 117,0, 14,0, 17,12, 102,0, 5,0, 3,9, 2,0, 4,4, 7,0, 2,0, 2,0, 2,3,
    2,10, 3,3, 6,4, 5,0, 53,1, 2684,228, 7,3, 4,1, 13,37, 2,0, 6,0, 3,55, 8,0, 17,22, 10,6, 2,6,
    2,6, 2,6, 2,6, 2,6, 2,6, 2,6, 81,0, 470,1, 43,4, 6,1, 5,85, 7,2, 2,89, 2,3, 6,42, 2,93, 18,31,
    49,15, 513,6591, 65,22156, 68,45, 3,268, 4,15, 11,1, 21,46, 17,30, 3,69, 50,8, 3,102, 3,66, 3,1,
    2,0, 2,7, 22,15, 2,2, 2,3, 2,22, 30,51, 15,49, 63,5, 4,0, 2,1, 12,27, 11,22, 26,28, 8,46, 29,0,
    17,4, 2,9, 11,4, 2,40, 24,2, 2,7, 21,22, 4,0, 4,49, 2,0, 4,1, 3,4, 3,0, 2,0, 25,2, 3,10, 8,2,
    13,5, 3,5, 3,5, 10,6, 2,6, 2,42, 2,13, 7,114, 30,11171, 13,22, 5,48, 8453,365, 3,105, 39,6,
    13,4, 6,0, 2,9, 2,12, 2,4, 2,0, 2,1, 2,1, 2,107, 34,362, 19,63, 3,53, 41,11, 117,4, 2,134,
    37,25, 7,25, 12,88, 4,5, 3,5, 3,5, 3,2, 36,11, 2,25, 2,18, 2,1, 2,14, 3,13, 35,122, 390,28,
    4,48, 48,31, 14,19, 2,7, 7,37, 11,29, 3,35, 5,7, 49,157, 19,35, 5,35, 5,39, 9,51, 13,10, 2,14,
    2,6, 2,1, 2,10, 2,14, 2,6, 2,1, 4,51, 13,310, 10,21, 11,7, 25,5, 2,41, 2,8, 70,5, 3,0, 2,43,
    2,1, 4,0, 3,22, 11,22, 10,30, 66,18, 2,1, 11,21, 11,25, 71,55, 7,1, 65,0, 16,3, 2,2, 2,28,
    43,28, 4,28, 36,7, 2,27, 28,53, 11,21, 11,18, 14,17, 111,72, 56,50, 14,50, 14,35, 39,27, 10,22,
    251,41, 7,1, 17,2, 60,28, 11,0, 9,21, 43,17, 47,20, 28,22, 13,52, 58,1, 3,0, 14,44, 33,24,
    27,35, 30,0, 3,0, 9,34, 4,0, 13,47, 15,3, 22,0, 2,0, 36,17, 2,24, 20,1, 64,6, 2,0, 2,3, 2,14,
    2,9, 8,46, 39,7, 3,1, 3,21, 2,6, 2,1, 2,4, 4,0, 19,0, 13,4, 31,9, 2,0, 3,0, 2,37, 2,0, 26,0,
    2,0, 45,52, 19,3, 21,2, 31,47, 21,1, 2,0, 185,46, 42,3, 37,47, 21,0, 60,42, 14,0, 72,26, 38,6,
    186,43, 117,63, 32,7, 3,0, 3,7, 2,1, 2,23, 16,0, 2,0, 95,7, 3,38, 17,0, 2,0, 29,0, 11,39, 8,0,
    22,0, 12,45, 20,0, 19,72, 200,32, 32,8, 2,36, 18,0, 50,29, 113,6, 2,1, 2,37, 22,0, 26,5, 2,1,
    2,31, 15,0, 328,18, 16,0, 2,12, 2,33, 125,0, 80,921, 231,195, 2637,96, 16,1071, 18,5, 26,3994,
    6,582, 6842,29, 1763,568, 8,30, 18,78, 18,29, 19,47, 17,3, 32,20, 6,18, 433,44, 212,63, 129,74,
    6,0, 67,12, 65,1, 2,0, 29,6135, 9,1237, 42,9, 8936,3, 2,6, 2,1, 2,290, 16,0, 30,2, 3,0, 15,3,
    9,395, 2309,106, 6,12, 4,8, 8,9, 5991,84, 2,70, 2,1, 3,0, 3,1, 3,3, 2,11, 2,0, 2,6, 2,64, 2,3,
    3,7, 2,6, 2,27, 2,3, 2,4, 2,0, 4,6, 2,339, 3,24, 2,24, 2,30, 2,24, 2,30, 2,24, 2,30, 2,24, 2,30,
    2,24, 2,7, 1845,30, 7,5, 262,61, 147,44, 11,6, 17,0, 322,29, 19,43, 485,27, 229,29, 3,0, 496,6,
    2,3, 2,1, 2,14, 2,196, 60,67, 8,0, 1205,3, 2,26, 2,1, 2,0, 3,0, 2,9, 2,3, 2,0, 2,0, 7,0, 5,0,
    2,0, 2,0, 2,2, 2,1, 2,0, 3,0, 2,0, 2,0, 2,0, 2,0, 2,1, 2,0, 3,3, 2,6, 2,3, 2,3, 2,0, 2,9, 2,16,
    6,2, 2,4, 2,16, 4421,42719, 33,4153, 7,221, 3,5761, 15,7472, 16,621, 2467,541, 1507,4938,
    6,4191,
};
// \p{N}: 144 ranges
static const uint32_t unicode_numbers[] = {
    49,9, 121,1, 6,0, 3,2, 1442,9, 135,9, 199,9, 413,9, 119,9, 5,5, 109,9, 119,9, 119,9, 3,5,
    111,12, 116,9, 9,6, 104,9, 105,6, 8,18, 110,9, 97,9, 119,9, 71,19, 269,9, 71,9, 720,19, 882,2,
    240,9, 7,9, 23,9, 301,9, 129,10, 166,9, 7,9, 183,9, 87,9, 135,9, 7,9, 1047,0, 4,5, 7,9, 199,50,
    3,4, 727,59, 79,21, 631,29, 1386,0, 778,0, 26,8, 15,2, 344,3, 139,9, 31,7, 2,14, 33,9, 40,14,
    29537,9, 189,9, 321,5, 155,9, 39,9, 199,9, 23,9, 87,9, 407,9, 21271,9, 494,44, 13,56, 18,1,
    342,26, 37,3, 30,0, 9,0, 135,4, 203,9, 943,7, 26,6, 40,8, 76,4, 23,5, 161,1, 3,15, 3,45, 65,8,
    53,1, 31,2, 76,4, 105,7, 25,7, 42,6, 331,5, 49,9, 7,9, 279,30, 159,9, 43,3, 113,6, 135,29,
    129,9, 61,9, 145,9, 8,19, 252,9, 343,9, 119,9, 375,9, 103,9, 7,19, 77,11, 421,18, 94,9, 663,9,
    87,28, 228,9, 71,9, 423,9, 103,20, 1068,110, 15554,9, 2343,9, 87,9, 135,9, 2,6, 527,9, 263,22,
    24154,9, 1479,19, 13,19, 109,24, 1110,49, 2369,9, 423,9, 503,9, 248,9, 717,8, 129,9, 792,58,
    2,2, 2,3, 77,44, 2,14, 963,12, 2788,9,
};
// \s (White_Space): 10 ranges
static const uint32_t unicode_spaces[] = {
    10,4, 19,0, 101,0, 27,0, 5600,0, 2432,10, 30,1, 6,0, 48,0, 4001,0,
};

// Whether cp lies in one of the n ranges of r, walked from the lowest: a text's common
// characters (ASCII, Latin) are decided in the first few.
static int in_ranges(const uint32_t *r, size_t n, int cp) {
    uint32_t last = UINT32_MAX; // -1: the first range's gap counts from there
    for (size_t k = 0; k < n; k++) {
        uint32_t first = last + r[2 * k]; // (unsigned: UINT32_MAX + gap wraps to gap - 1)
        last = first + r[2 * k + 1];
        if ((uint32_t)cp < first) { return 0; }
        if ((uint32_t)cp <= last) { return 1; }
    }
    return 0;
}

// An invalid UTF-8 byte (cp -1) is past every range as a uint32_t: a symbol, CH_OTHER
static int class_at(const char *s, size_t len, size_t i, size_t *n) {
    int cp;
    *n = utf8_decode(s, len, i, &cp);
    if (in_ranges(unicode_letters, sizeof(unicode_letters) / 8, cp)) { return CH_LETTER; }
    if (in_ranges(unicode_numbers, sizeof(unicode_numbers) / 8, cp)) { return CH_NUMBER; }
    return in_ranges(unicode_spaces, sizeof(unicode_spaces) / 8, cp) ? CH_SPACE : CH_OTHER;
}

// ----------------------------------------------------------------------------
// statistics and reporting

// The skip set as the papers draw it: one row per sublayer kind, X = skipped.
static void layer_map(const SkipSet *s, int n_layers, char *attn, char *mlp) {
    for (int l = 0; l < n_layers; l++) {
        attn[l] = s->attn[l] ? 'X' : '.';
        mlp[l] = s->mlp[l] ? 'X' : '.';
    }
    attn[n_layers] = mlp[n_layers] = '\0';
}

static double tokens_per_s(int n, double ms) { return ms > 0 ? n / (ms / 1e3) : 0; }

// The numbers a report prints for one prompt's run, derived from its statistics once.
typedef struct {
    double skip_ratio;       // fraction of the 2L sublayers the last set skips
    double draft_cost;       // Eq. 6's c = 1 - r, r the mean over the draft tokens' sets
    double acceptance;       // alpha: accepted / drafted
    double mean_accepted;    // M: tokens emitted per verification (accepted + 1)
    double expected_speedup; // SWIFT Eq. 6 (plain decoding drafts nothing: 1)
    double gamma_mean;       // the exit threshold after each round, averaged (none: the first)
} RunSummary;

static RunSummary summarize_run(const SpecStats *st, const SkipSet *skip, int n_layers) {
    RunSummary r;
    r.skip_ratio = (double)skip_count(skip, n_layers) / (2.0 * n_layers);
    r.acceptance = st->drafted > 0 ? (double)st->accepted / st->drafted : 0;
    r.mean_accepted = st->rounds > 0 ? (double)(st->accepted + st->rounds) / st->rounds : 1;
    // Eq. 6's r is the one the drafts were drafted with (SWIFT and CLaSp change sets): a mean over
    // the draft tokens, as the drafting cost sums them; the last set's when nothing was drafted
    double drafted_r = st->drafted > 0 ? (double)st->skipped / st->drafted / (2.0 * n_layers)
                                       : r.skip_ratio;
    r.draft_cost = 1.0 - drafted_r;
    r.gamma_mean = st->rounds ? st->threshold_sum / st->rounds : st->threshold_first;
    double drafts_per_round = st->rounds > 0 ? (double)st->drafted / st->rounds : 0;
    r.expected_speedup = expected_speedup(r.mean_accepted, r.acceptance, drafted_r,
                                          drafts_per_round);
    return r;
}

// ASD: which sublayers each of its two rules chose (select_asd), with this prompt's C_l.
static void asd_note(const Selector *sel, int L, char *buf, size_t cap) {
    const AsdParams *a = &sel->asd;
    int last = L - a->keep_last_n, best = 0, n = 0;
    if (last <= 0) { // --asd-n N >= L
        snprintf(buf, cap, "n = %d keeps every layer: neither rule skips a sublayer", a->keep_last_n);
        return;
    }
    size_t k = (size_t)snprintf(buf, cap, "the cosine rule (C_l >= %g, layers 0-%d) skips",
                                a->cos_threshold, last - 1);
    for (int l = 0; l < last && k < cap; l++) {
        if (sel->asd_cos[l] > sel->asd_cos[best]) { best = l; }
        if (sel->asd_cos[l] >= a->cos_threshold) {
            k += (size_t)snprintf(buf + k, cap - k, "%s attn %d (C_l %.4f)", n++ ? "," : "", l,
                                  sel->asd_cos[l]);
        }
    }
    if (n == 0 && k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, " no attention sublayer (the highest C_l, %.4f, "
                              "is layer %d's)", sel->asd_cos[best], best);
    }
    if (k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "; the every-m-th rule (m = %d) skips %s",
                              a->every_m, a->every_m > last ? "no layer" : "attn and mlp of layers");
    }
    for (int l = a->every_m - 1; l < last && k < cap; l += a->every_m) {
        k += (size_t)snprintf(buf + k, cap - k, "%s %d", l >= a->every_m ? "," : "", l);
    }
}

// What the method did, one sentence for the summary and --json's "note" (NULL: nothing to say):
// a search that kept the empty set (cost_model: its objective), ASD's rules, SWIFT's steps.
static const char *method_note(int method, int cost_model, const SkipSet *skip, int L,
                               const SpecStats *st, int n, const Selector *sel, char *buf,
                               size_t cap) {
    const Swift *w = &sel->swift;
    if (method == METHOD_SELFSD && !skip_count(skip, L)) {
        snprintf(buf, cap, "no skip set it scored cost less per token than plain decoding on the "
                 "%s objective, so it drafts nothing (try --objective %s)",
                 cost_model ? "cost" : "time", cost_model ? "time" : "cost");
    } else if (method == METHOD_ASD) {
        asd_note(sel, L, buf, cap);
    } else if (method == METHOD_SWIFT && w->first_at < 0) {
        snprintf(buf, cap, "no optimization step in this prompt (%d in all): a step scores a set "
                 "on the last %d generated tokens (context accumulation, Sec. 4.1.1), and this "
                 "prompt made %d%s",
                 w->steps, w->p.window, n, w->done ? "; the search has ended" : "");
    } else if (method == METHOD_SWIFT) {
        snprintf(buf, cap, "%d optimization step%s in this prompt, the first at generated token "
                 "%d (a step waits for the %d-token window); %d in all, %d of which changed the "
                 "set; %s", st->selections, st->selections == 1 ? "" : "s", w->first_at,
                 w->p.window, w->steps, w->changes,
                 w->done ? "the search has ended (App. B.2's stopping rules)"
                 : w->p.budget < 1 ? "--swift-budget holds the steps to that share of the time "
                                     "(1: a step every round, as in the paper)"
                                   : "the search goes on");
    } else {
        return NULL;
    }
    return buf;
}

// --compare: what a draft pass (one token) and a verify pass cost in plain decoding steps of this
// run, and the speedup they predict, (accepted + 1) / (drafted * draft + verify) per round. Eq. 6
// prices a verify pass as one step, true where k tokens cost what one does (a GPU), not on a CPU.
// The break-even: the M (tokens a round) at which that prediction is 1, a round's cost.
typedef struct { double draft, verify, predicted, break_even; } PassCosts;
static PassCosts pass_costs(const SpecStats *st, double plain_tps) {
    PassCosts c = {0, 0, 0, 0};
    if (plain_tps <= 0 || st->rounds == 0) { return c; }
    double step_ms = 1e3 / plain_tps;
    c.draft = st->drafted > 0 ? st->draft_ms / st->drafted / step_ms : 0;
    c.verify = st->verify_ms / st->rounds / step_ms;
    c.break_even = ((double)st->drafted * c.draft + st->rounds * c.verify) / st->rounds;
    c.predicted = (double)(st->accepted + st->rounds) / st->rounds / c.break_even;
    return c;
}

// lead (such as `, "note": `), then s as a JSON string literal, or null when s is NULL.
// JSON text is UTF-8; a byte that is not (a folder name is bytes) is written as U+FFFD.
static void json_field(FILE *f, const char *lead, const char *s) {
    fprintf(f, s ? "%s\"" : "%snull", lead);
    if (s == NULL) { return; }
    size_t len = strlen(s), n;
    for (size_t i = 0; i < len; i += n) {
        int cp;
        n = utf8_decode(s, len, i, &cp);
        if (cp < 0) { fputs("\\ufffd", f); }
        else if (cp == '"' || cp == '\\') { fprintf(f, "\\%c", cp); }
        else if (cp == '\n') { fputs("\\n", f); }
        else if (cp < 0x20) { fprintf(f, "\\u%04x", cp); }
        else { fwrite(s + i, 1, n, f); }
    }
    fputc('"', f);
}

// --trace FILE: JSON Lines, one object per event with a "type" (README: the trace): the CLI's
// header and summaries, and the engine's Observer (trace_prefill, trace_round, watch_candidate),
// which also counts the drafts and prints Self-SD's progress. Floats as %.9g (a float32
// round-trips), null if not finite; only keys ending _ms or _per_s, or starting measured_, time.
typedef struct {
    int lengths[MAX_DRAFT + 1]; // rounds that drafted i tokens
    int reached[MAX_DRAFT];     // rounds whose draft reached position i + 1
    int kept[MAX_DRAFT];        // of those, the rounds that kept it
    int ends[4];                // rounds by why drafting stopped (END_*)
    int longest;                // the most tokens a round drafted
    long attn_skipped, mlp_skipped; // over the draft tokens, the sublayers each one's set skipped
    double conf_sum;            // over the draft tokens, their confidence (Round.conf)
    int confident;              // the draft tokens whose confidence was at least gamma_before
    int dps;                    // CLaSp's DPs
    SkipSet last_dp;            // the last DP's set
    double overlap_sum;         // the Jaccard overlap of each DP's set with the one before
} DraftStats;

typedef struct {
    FILE *f;                 // --trace: in memory until the run ends (commit_outputs); NULL: none
    int prompt;              // the prompt being decoded (0-based)
    int n_layers, exit_none; // the model's layers; --exit none (no threshold: gamma null)
    int verbose, cost_model; // Self-SD's progress lines; the search's objective (its unit)
    double t0;               // when the search scored its first set
    DraftStats ds;           // this prompt's drafts (reset by each prefill)
    void (*show)(void *ctx, const Round *r, const Selector *sel); // the CLI's view of each round,
    void *show_ctx;                                                // in words and colours, or NULL
} Trace;

static void trace_float(FILE *f, const char *lead, double x) {
    if (isfinite(x)) { fprintf(f, "%s%.9g", lead, x); } else { fprintf(f, "%snull", lead); }
}

// lead, then the skipped layers as arrays, {"attn": [1, 3], "mlp": []}: the one spelling of a
// skip set in every output, which --skip-file reads back.
static void write_skip(FILE *f, const char *lead, const SkipSet *s, int L) {
    fprintf(f, "%s{", lead);
    for (int k = 0; k < 2; k++) {
        const unsigned char *flags = k ? s->mlp : s->attn;
        fprintf(f, "%s\"%s\": [", k ? ", " : "", k ? "mlp" : "attn");
        for (int l = 0, n = 0; l < L; l++) {
            if (flags[l]) { fprintf(f, n++ ? ", %d" : "%d", l); }
        }
        fputc(']', f);
    }
    fputc('}', f);
}

// |a and b| / |a or b| over the skipped sublayers (1 for two empty sets)
static double jaccard(const SkipSet *a, const SkipSet *b, int L) {
    int both = 0, either = 0;
    for (int l = 0; l < L; l++) {
        both += (a->attn[l] && b->attn[l]) + (a->mlp[l] && b->mlp[l]);
        either += (a->attn[l] || b->attn[l]) + (a->mlp[l] || b->mlp[l]);
    }
    return either ? (double)both / either : 1.0;
}

static double log_choose(int n, int k) { return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0); }

// The mean Jaccard overlap of two random sets of m whole layers of L: their intersection i is
// hypergeometric, P(i) = C(m, i) C(L - m, m - i) / C(L, m), the overlap i / (2m - i).
static double random_overlap(int m, int L) {
    if (m <= 0 || m > L) { return 1.0; }
    double mean = 0;
    for (int i = 2 * m - L > 0 ? 2 * m - L : 0; i <= m; i++) {
        double p = exp(log_choose(m, i) + log_choose(L - m, m - i) - log_choose(L, m));
        mean += p * i / (2.0 * m - i);
    }
    return mean;
}

// The prompt's ids and, for ASD, its C_l and the set its rules chose; starts the prompt's
// statistics. Plain decoding's prefill comes from the CLI (sel and skip NULL).
static void trace_prefill(void *ctx, const int *ids, int n, const Selector *sel,
                          const SkipSet *skip) {
    Trace *t = (Trace *)ctx;
    memset(&t->ds, 0, sizeof(t->ds));
    if (t->f == NULL) { return; }
    fprintf(t->f, "{\"type\": \"prefill\", \"prompt\": %d, \"tokens\": %d, \"ids\": [",
            t->prompt, n);
    for (int i = 0; i < n; i++) { fprintf(t->f, i ? ", %d" : "%d", ids[i]); }
    fputc(']', t->f);
    if (sel && sel->method == METHOD_ASD) {
        for (int l = 0; l < t->n_layers; l++) {
            trace_float(t->f, l ? ", " : ", \"asd_cos\": [", sel->asd_cos[l]);
        }
        write_skip(t->f, "], \"asd_skip\": ", skip, t->n_layers);
    }
    fprintf(t->f, "}\n");
}

static void count_round(DraftStats *d, const Round *r, int L) {
    d->lengths[r->drafted]++;
    d->longest = r->drafted > d->longest ? r->drafted : d->longest;
    for (int l = 0; l < L; l++) { d->attn_skipped += (long)r->drafted * r->skip.attn[l]; }
    for (int l = 0; l < L; l++) { d->mlp_skipped += (long)r->drafted * r->skip.mlp[l]; }
    for (int j = 0; j < r->drafted; j++) {
        d->reached[j]++;
        d->kept[j] += j < r->accepted;
        d->conf_sum += r->conf[j];
        d->confident += r->conf[j] >= r->gamma_before;
    }
    d->ends[r->end]++;
    if (r->dp) {
        d->overlap_sum += d->dps++ ? jaccard(&d->last_dp, &r->next, L) : 0;
        d->last_dp = r->next;
    }
}

// The share of the weights a draft pass reads (over the draft tokens; none: the last set's), each
// sublayer by its parameters (attention: norm, q, k, v, o; MLP: norm, gate, up, down), with the
// final norm and head every pass reads (not the embedding): Eq. 6's c = 1 - r weighs them as one.
static double draft_weight_share(const DraftStats *d, int drafted, const SkipSet *last,
                                 const Config *c) {
    double q = (double)c->n_heads * c->head_dim, kv = (double)c->n_kv_heads * c->head_dim;
    double attn = c->dim * (1 + 2 * q + 2 * kv), mlp = c->dim * (1 + 3.0 * c->hidden_dim);
    double a = 0, f = 0; // the attention and MLP sublayers a draft token's set skips
    for (int l = 0; l < c->n_layers; l++) { a += last->attn[l], f += last->mlp[l]; }
    if (drafted > 0) { a = (double)d->attn_skipped / drafted, f = (double)d->mlp_skipped / drafted; }
    return 1 - (a * attn + f * mlp) / (c->dim * (1.0 + c->vocab_size) + c->n_layers * (attn + mlp));
}

// A round's event: SWIFT's step before it; CLaSp's DP, or SWIFT's App. C.2 restart, after it.
static void trace_event(FILE *f, const Round *r, const Selector *sel, int L) {
    const Swift *w = &sel->swift;
    int n = r->stepped; // the events written so far, SWIFT's step first
    if (r->stepped) { // swift_step
        static const char *phase[] = {"start", "random", "gp"};
        fprintf(f, "{\"swift\": {\"phase\": \"%s\"", phase[w->phase]);
        write_skip(f, ", \"candidate\": ", &w->cand, L);
        trace_float(f, ", \"matchness\": ", w->cand_score);
        trace_float(f, ", \"kept_matchness\": ", w->kept_score >= 0 ? w->kept_score : NAN);
        trace_float(f, ", \"ratio\": ", w->cand_ratio);
        fprintf(f, ", \"replaced\": %s}", w->kept_score >= 0 && w->cand_score > w->kept_score
                                              ? "true" : "false");
    }
    if (r->dp) { // select_clasp
        const ClaspDp *d = &sel->clasp_dp;
        fprintf(f, "%s\"clasp\": {\"ran\": true", n++ ? ", " : "{");
        write_skip(f, ", \"skip\": ", &r->next, L);
        trace_float(f, ", \"margin\": ", d->margin);
        fprintf(f, d->layer < 0 ? ", \"closest\": null" : ", \"closest\": {\"layer\": %d, "
                "\"skips\": %d}", d->layer, d->skips);
        for (int l = 0; l < L; l++) { trace_float(f, l ? ", " : ", \"path\": [", d->path[l]); }
        fprintf(f, "]}");
    }
    if (r->restarted) { // swift_after_verify
        fprintf(f, "%s\"restart\": {", n++ ? ", " : "{");
        trace_float(f, "\"ratio\": ", w->ratio);
        write_skip(f, ", \"skip\": ", &r->next, L);
        fputc('}', f);
    }
    fputs(n ? "}" : "null", f);
}

// A token's text alone, as a JSON string (a byte that completes no character: U+FFFD; a special
// token: its name), for the round view.
static void quote_token(FILE *f, const Tokenizer *tok, int id) {
    char text[256];
    DecodeState st;
    decode_begin(&st);
    st.at_start = 0; // inside the text: its leading space kept
    size_t n = decode_token(tok, &st, id, text, sizeof(text));
    decode_end(tok, &st, text + n, sizeof(text) - n);
    int named = !text[0] && id < tok->vocab_size && tok->tok[id].special;
    json_field(f, "", named ? tok->tok[id].text : text);
}

// --show-rounds: a line per round after the text (on_token): the draft, its confidences, why it
// stopped, how many tokens the full model kept (a kept SWIFT leaf named), its own token for the
// first it did not keep, or the bonus after a whole draft (or EOS). README: the first screen.
static void view_round(FILE *f, const Round *r, const Selector *sel, const Tokenizer *tok) {
    static const char *ends[] = {"exit", "K", "room", "EOS"}, *phase[] = {"start", "random", "gp"};
    fprintf(f, "round %d at %d: ", r->round, r->pos);
    if (r->stepped) { // SWIFT's step before the round (Sec. 4.1.2; gp: Eq. 2), and the kept set
        const Swift *w = &sel->swift;
        fprintf(f, w->kept_score < 0 ? "SWIFT step (%s) matchness %.2f | "
                : "SWIFT step (%s) matchness %.2f, the kept set's %.2f | ", phase[w->phase],
                w->cand_score, w->kept_score);
    }
    fputs(r->drafted ? "draft " : "no draft", f);
    for (int j = 0; j < r->drafted; j++) { // (a kept leaf's slot: the chain token it beat)
        quote_token(f, tok, r->leaf && j == r->accepted - 1 ? r->rejected : r->ids[j]);
        fprintf(f, " %.2f%s", r->conf[j], j + 1 < r->drafted ? ", " : "");
    }
    fprintf(f, r->end == END_EXIT ? " (%s, gamma %.3f)" : " (%s)", ends[r->end], r->gamma_before);
    if (r->drafted) { fprintf(f, " | kept %d of %d", r->accepted, r->drafted); }
    if (r->leaf) { // SWIFT's tree kept one of the draft's next-best tokens, last
        fputs(", the last a next-best leaf ", f);
        quote_token(f, tok, r->ids[r->accepted - 1]);
    }
    fputs(r->end == END_EOS ? " | ends at " : " | full model ", f);
    quote_token(f, tok, r->token);
    int instead = r->end != END_EOS && r->rejected >= 0 && !r->leaf;
    if (instead) { fputs(" for ", f), quote_token(f, tok, r->rejected); }
    fputs(r->end == END_EOS || instead ? "" : " (the bonus)", f);
    int changed = memcmp(&r->next, &r->skip, sizeof(SkipSet)) != 0;
    if (r->dp) { fprintf(f, " | DP: %s set", changed ? "a new" : "the same"); }
    if (r->restarted) { fprintf(f, " | App. C.2 restart: r %.2f", sel->swift.ratio); }
    fputc('\n', f);
}

static void trace_round(void *ctx, const Round *r, const Selector *sel) {
    Trace *t = (Trace *)ctx;
    FILE *f = t->f;
    int L = t->n_layers;
    count_round(&t->ds, r, L);
    if (t->show) { t->show(t->show_ctx, r, sel); }
    if (f == NULL) { return; }
    static const char *ends[] = {"exit", "K", "room", "eos"};
    fprintf(f, "{\"type\": \"round\", \"prompt\": %d, \"round\": %d, \"pos\": %d", t->prompt,
            r->round, r->pos);
    write_skip(f, ", \"skip\": ", &r->skip, L);
    fprintf(f, ", \"drafted\": %d, \"conf\": [", r->drafted);
    for (int j = 0; j < r->drafted; j++) { trace_float(f, j ? ", " : "", r->conf[j]); }
    fprintf(f, "], \"end\": \"%s\", \"accepted\": %d, \"emitted\": %d", ends[r->end],
            r->accepted, r->emitted);
    trace_float(f, ", \"gamma_before\": ", t->exit_none ? NAN : r->gamma_before);
    trace_float(f, ", \"gamma_after\": ", t->exit_none ? NAN : r->gamma_after);
    fprintf(f, ", \"verify\": %d, \"leaf\": %s, \"ids\": [", r->verify_rows,
            r->leaf ? "true" : "false");
    for (int j = 0; j < r->drafted; j++) { fprintf(f, j ? ", %d" : "%d", r->ids[j]); }
    fprintf(f, r->rejected < 0 ? "], \"rejected\": null" : "], \"rejected\": %d", r->rejected);
    fprintf(f, ", \"token\": %d, \"event\": ", r->token);
    trace_event(f, r, sel, L);
    fprintf(f, "}\n");
}

// A search's set: a "search" record (done: "search_done", the set chosen), and the progress
// line on stderr (unless --json) of Self-SD, the only search the CLI runs.
static void watch_candidate(void *ctx, const Candidate *c) {
    Trace *t = (Trace *)ctx;
    const char *unit = t->cost_model ? "sublayers/token" : "ms/token";
    int L = t->n_layers, skips = skip_count(&c->best, L);
    if (t->f && c->done != 2) { // the re-check only decides between the winner and plain
        const char *phase = c->i == 0 ? "empty" : c->gp ? "gp" : "random"; // how it was proposed
        fprintf(t->f, c->done ? "{\"type\": \"search_done\", \"method\": \"selfsd\", "
                "\"scored\": %d, \"interrupted\": %s" : "{\"type\": \"search\", \"method\": "
                "\"selfsd\", \"i\": %d, \"phase\": \"%s\"", c->i,
                c->done ? (search_interrupted ? "true" : "false") : phase);
        write_skip(t->f, ", \"skip\": ", &c->skip, L);
        trace_float(t->f, ", \"objective\": ", c->objective);
        fprintf(t->f, "}\n");
    }
    if (c->i == 0 && !c->done) { t->t0 = time_ms(); }
    if (!t->verbose) { return; }
    if (c->done == 2) {
        fprintf(stderr, "selfsd re-check, median of 5: best %.4f, empty set %.4f %s%s\n",
                c->objective, c->best_objective, unit,
                c->objective < c->best_objective ? "" : ": keeping the empty set");
    } else if (c->done && search_interrupted) {
        fprintf(stderr, "selfsd: interrupted after %d of %d iterations: best so far skips %d of "
                "%d, cost %.4f %s\n", c->i - 1, c->of, skips, 2 * L, c->objective, unit);
    } else if (!c->done && c->i == 0) {
        fprintf(stderr, "selfsd iter   0: cost %.4f %s (the empty set: plain decoding)\n",
                c->objective, unit);
    } else if (!c->done) {
        fprintf(stderr, "selfsd iter %3d of %d: cost %.4f %s, best %.4f skipping %d of %d, ~%.0f s "
                "left\n", c->i, c->of, c->objective, unit, c->best_objective, skips, 2 * L,
                (time_ms() - t->t0) / c->i * (c->of - c->i) / 1e3);
    }
}

// ----------------------------------------------------------------------------
// threads: how many the CPU build runs on, and the device the reports name

// The device the reports name; in the CPU build its threads and why that many (load_run):
// threads_flag, --threads (0: not given), else OMP_NUM_THREADS (libgomp read it before main), else
// one per core. Fewer on a busy machine (README, Threads: a thread spins for a descheduled sibling).
static const char *device_name(int threads_flag) {
    static char name[300];
    (void)threads_flag; // (the GPU build names no threads)
#if defined(__CUDACC__)
    cudaDeviceProp prop;
    cuda_check(cudaGetDeviceProperties(&prop, 0));
    snprintf(name, sizeof(name), "GPU: %s", prop.name);
#elif defined(_OPENMP)
    int n = omp_get_max_threads();
    snprintf(name, sizeof(name), "CPU: %d OpenMP thread%s (%s)", n, n == 1 ? "" : "s", threads_flag
             ? "--threads" : getenv("OMP_NUM_THREADS") ? "OMP_NUM_THREADS" : "one per core");
#else
    snprintf(name, sizeof(name), "CPU: 1 thread");
#endif
    return name;
}

// ----------------------------------------------------------------------------
// CLI

// Parses a skip spec such as "attn:3,5,7 mlp:6" or "attn:1-4;mlp:0,2" (0-based layers; "" or
// "none" or "-" = skip nothing) into s. Returns 0, or -1 with err naming the problem.
static int parse_skip_spec(const char *spec, int n_layers, SkipSet *s, char *err) {
    memset(s, 0, sizeof(*s));
    if (strcmp(spec, "none") == 0 || strcmp(spec, "-") == 0) { return 0; }
    for (const char *p = spec + strspn(spec, " ;"); *p; p += strspn(p, " ;")) {
        unsigned char *flags = strncmp(p, "attn:", 5) == 0 ? s->attn
                               : strncmp(p, "mlp:", 4) == 0 ? s->mlp : NULL;
        if (flags == NULL) {
            return fail(err, "\"%s\": expected attn:LIST or mlp:LIST at \"%s\"", spec, p);
        }
        p = strchr(p, ':') + 1;
        do {
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p || !isdigit((unsigned char)*p)) {
                return fail(err, "\"%s\": expected a layer number at \"%s\"", spec, p);
            }
            const char *top = p; // the highest layer as written (strtol gives LONG_MAX past it)
            p = end;
            if (*p == '-') {
                top = p + 1;
                hi = strtol(p + 1, &end, 10);
                if (end == p + 1 || hi < lo) { return fail(err, "\"%s\": bad range", spec); }
                p = end;
            }
            if (hi >= n_layers) {
                return fail(err, "\"%s\": layer %.*s is out of range (the model has %d "
                            "layers, 0..%d)", spec, (int)(p - top), top, n_layers, n_layers - 1);
            }
            for (long l = lo; l <= hi; l++) { flags[l] = 1; }
        } while (*p == ',' && *++p);
        if (*p != '\0' && *p != ' ' && *p != ';') {
            return fail(err, "\"%s\": unexpected \"%s\"", spec, p);
        }
    }
    return 0;
}

// ----- output files: --save-skip and --trace (README "Scope and limits", item 4)
// A regular file is written to a temporary file beside the file its path names (through a
// symlink, the file the link names), renamed over it when the run succeeds: the old file or the
// whole new one. Anything else (/dev/null, a FIFO, /dev/stdout) is written in place. A failed run
// leaves no temporary file: free_outputs removes them, exit after die(), on_stop after a signal.
typedef struct {
    const char *flag, *path; // the flag and the path as given
    char *target, *tmp;      // the file replaced and its temporary file; NULL: written in place
    FILE *f;                 // the output, open from before the run
} OutputFile;
enum { MAX_OUTPUTS = 2 };
static char *volatile temporaries[MAX_OUTPUTS]; // each output's temporary file until renamed

static void remove_temporaries(void) {
    for (int k = 0; k < MAX_OUTPUTS; k++) {
        if (temporaries[k]) { unlink(temporaries[k]); }
    }
}

// Ctrl-C or SIGTERM: the temporary files go, then the signal ends the process as it would have.
static void on_stop(int sig) {
    remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

// A name the model's loaders read in its folder: config, generation config, tokenizer, index,
// and any .safetensors (model.safetensors, or a shard the index names).
static int model_file_name(const char *name) {
    size_t n = strlen(name);
    return (n >= 12 && strcmp(name + n - 12, ".safetensors") == 0) ||
           strcmp(name, "config.json") == 0 || strcmp(name, "tokenizer.json") == 0 ||
           strcmp(name, "generation_config.json") == 0 ||
           strcmp(name, "model.safetensors.index.json") == 0;
}

static int same_file(const char *path, const struct stat *st) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && sb.st_dev == st->st_dev && sb.st_ino == st->st_ino;
}

// Whether the existing file st is one of the run's inputs: one of inputs[n] (NULL: not given)
// or a file the model's loaders read in model_dir, known by its inode however it is reached.
static int is_input(const struct stat *st, const char *const *inputs, int n,
                    const char *model_dir) {
    int found = 0;
    for (int k = 0; k < n; k++) { found |= same_file(inputs[k], st); }
    DIR *dir = opendir(model_dir);
    for (struct dirent *e; dir && !found && (e = readdir(dir)) != NULL;) {
        char *path = join_path(model_dir, e->d_name);
        found = model_file_name(e->d_name) && same_file(path, st);
        free(path);
    }
    if (dir) { closedir(dir); }
    return found;
}

// Opens the output flag names at path before the run, into slot k of the temporaries, refusing
// one of the run's inputs (is_input). Returns 0, or -1 with err set.
static int open_output(OutputFile *o, int k, const char *flag, const char *path,
                       const char *const *inputs, int n_inputs, const char *model_dir, char *err) {
    struct stat st;
    o->flag = flag, o->path = path;
    int exists = stat(path, &st) == 0, in_place = exists && !S_ISREG(st.st_mode);
    if ((!exists && errno != ENOENT) || in_place) { // (a name too long; a device, a folder)
        o->f = in_place ? fopen(path, "w") : NULL;
        return o->f ? 0 : fail(err, "%s %s: cannot write: %s", flag, path, strerror(errno));
    }
    if (!exists && lstat(path, &st) == 0) { // writing through it would replace the link
        return fail(err, "%s %s: a symbolic link to nothing (give its target)", flag, path);
    }
    if (exists && is_input(&st, inputs, n_inputs, model_dir)) {
        return fail(err, "%s %s: is one of the run's input files; writing it would replace it",
                    flag, path);
    }
    o->target = exists ? realpath(path, NULL) : NULL; // (links resolved)
    if (o->target == NULL) { o->target = strcpy((char *)malloc_check(strlen(path) + 1), path); }
    const char *slash = strrchr(o->target, '/');
    int dir = slash ? (int)(slash - o->target) + 1 : 0;
    o->tmp = temporaries[k] = (char *)malloc_check((size_t)dir + 17);
    snprintf(o->tmp, (size_t)dir + 17, "%.*s.selfspec-XXXXXX", dir, o->target);
    int fd = mkstemp(o->tmp);
    mode_t mask = umask(0); // the mode a new file gets from a shell's >
    umask(mask);
    if (fd < 0) { temporaries[k] = NULL, free(o->tmp), o->tmp = NULL; }
    if (fd < 0 || fchmod(fd, 0666 & ~mask) != 0 || (o->f = fdopen(fd, "w")) == NULL) {
        return fail(err, "%s %s: cannot create a file beside %s: %s", flag, path, o->target,
                    strerror(errno));
    }
    return 0;
}

// After a run that succeeded: each output closed, a write error reported, then each temporary
// file renamed over its target (not atomic across two outputs). 0, or -1 with err set.
static int commit_outputs(OutputFile *outs, int n, char *err) {
    for (int k = 0; k < n; k++) {
        int failed = ferror(outs[k].f) != 0;
        failed |= fclose(outs[k].f) != 0;
        outs[k].f = NULL;
        if (failed) {
            return fail(err, "%s %s: cannot write: %s", outs[k].flag, outs[k].path,
                        strerror(errno));
        }
    }
    for (int k = 0; k < n; k++) {
        if (outs[k].tmp && rename(outs[k].tmp, outs[k].target) != 0) {
            return fail(err, "%s %s: cannot replace it: %s", outs[k].flag, outs[k].path,
                        strerror(errno));
        }
        temporaries[k] = NULL;
        free(outs[k].tmp), outs[k].tmp = NULL;
        fprintf(stderr, "wrote %s\n", outs[k].path);
    }
    return 0;
}

// Closes what a run left open, and removes the temporary files a failed one left.
static void free_outputs(OutputFile *outs, int n) {
    for (int k = 0; k < n; k++) {
        if (outs[k].f) { fclose(outs[k].f); }
        if (outs[k].tmp) { unlink(outs[k].tmp); }
        temporaries[k] = NULL;
        free(outs[k].tmp);
        free(outs[k].target);
    }
}

#ifndef TESTING

typedef struct {
    const char *model_dir, *prompt, *prompt_file, *skip_spec, *skip_file, *dev_prompts, *save_skip;
    int method, n_new, seed, ctx, max_draft, json, compare, cost_model, threads, show_rounds;
    float temperature, top_p;
    DraftExit exit;       // the draft-exit rule: the method's, or --exit and --alpha
    MethodParams params;  // each method's settings: the papers' defaults, changed by the flags
    const char *trace;    // --trace FILE
    unsigned long given;  // bit k: FLAGS[k] was on the command line
} Options;

// How a flag's value is read: text as given, a path (which may not start with -), a number
// checked against the flag's range, or a word of its own (--method, --objective, --exit, on/off).
typedef enum {
    ARG_SWITCH, ARG_TEXT, ARG_PATH, ARG_INT, ARG_FLOAT, ARG_DOUBLE, ARG_ONOFF,
    ARG_METHOD, ARG_OBJECTIVE, ARG_EXIT
} ArgKind;

// One flag, written once: name, argument, help (a %g shows its default), where its value goes in
// Options, its range (lo excluded when lo_open), and the methods that read it (a mask of 1 <<
// METHOD_x; 0: all), which name the error when another method is given (check_flags).
typedef struct {
    const char *name, *arg;
    ArgKind kind;
    size_t offset;
    double lo, hi;
    int lo_open;
    unsigned methods;
    const char *help;
} Flag;

enum { DRAFTING = (1 << (METHOD_CLASP + 1)) - 2 }; // the methods that draft: all but none

// --help lists them in this order.
static const Flag FLAGS[] = {
    {"-m", "DIR", ARG_PATH, offsetof(Options, model_dir), 0, 0, 0, 0,
     "Hugging Face LLaMA folder (config.json, model.safetensors,\n"
     "tokenizer.json); default: tiny_models/kjv-12l, the trained KJV model"},
    {"-p", "TEXT", ARG_TEXT, offsetof(Options, prompt), 0, 0, 0, 0,
     "prompt (default \"In the beginning God created\")"},
    {"-f", "FILE", ARG_PATH, offsetof(Options, prompt_file), 0, 0, 0, 0,
     "prompts, one per line, \\n for a newline (SWIFT's state carries\nacross them); a pipe too: -f /dev/stdin, -f <(cmd)"},
    {"-n", "N", ARG_INT, offsetof(Options, n_new), 1, 1 << 20, 0, 0,
     "tokens to generate per prompt (default %g)"},
    {"-t", "TEMP", ARG_FLOAT, offsetof(Options, temperature), 0, 100, 0, 0,
     "temperature, 0 = greedy (default %g)"},
    {"--top-p", "P", ARG_FLOAT, offsetof(Options, top_p), 0, 1, 1, 0,
     "nucleus sampling mass in (0, 1] (default %g = off)"},
    {"-s", "SEED", ARG_INT, offsetof(Options, seed), 0, INT_MAX, 0, 0,
     "RNG seed for sampling and searches (default %g)"},
    {"-c", "CTX", ARG_INT, offsetof(Options, ctx), 2, 1 << 24, 0, 0,
     "context length to allocate, at most max_position_embeddings\n(default: that, at most 4096)"},
    {"--method", "M", ARG_METHOD, offsetof(Options, method), 0, 0, 0, 0,
     "none (plain decoding), static (--skip), selfsd, swift, asd, clasp;\n"
     "default: static when --skip/--skip-file is given, else none"},
    {"--skip", "SPEC", ARG_TEXT, offsetof(Options, skip_spec), 0, 0, 0, 1 << METHOD_STATIC,
     "draft skip set, e.g. \"attn:3,5,7 mlp:6\" or \"attn:1-4;mlp:0,2\"\n(0-based)"},
    {"--skip-file", "F", ARG_PATH, offsetof(Options, skip_file), 0, 0, 0, 1 << METHOD_STATIC,
     "draft skip set as JSON: {\"attn\": [3, 5], \"mlp\": [6]}"},
    {"-K", "N", ARG_INT, offsetof(Options, max_draft), 1, MAX_DRAFT, 0, DRAFTING,
     "max draft tokens per round (default %g; swift %g; at most %g)"},
    {"--exit", "E", ARG_EXIT, offsetof(Options, exit), 0, 0, 0, DRAFTING,
     "draft exit: adaptive (default), fixed:GAMMA, or none (swift: fixed:%g,\nclasp: fixed:%g)"},
    {"--alpha", "A", ARG_FLOAT, offsetof(Options, exit.target), 0, 1, 1, 0,
     "target acceptance rate of the adaptive exit (default %g)"},
    {"--iters", "N", ARG_INT, offsetof(Options, params.selfsd.iters), 1, 100000, 0,
     1 << METHOD_SELFSD, "selfsd: Bayesian-optimization iterations (default %g)"},
    {"--dev-prompts", "F", ARG_PATH, offsetof(Options, dev_prompts), 0, 0, 0, 1 << METHOD_SELFSD,
     "selfsd: search on these prompts instead of the prompt itself"},
    {"--objective", "O", ARG_OBJECTIVE, offsetof(Options, cost_model), 0, 0, 0, 1 << METHOD_SELFSD,
     "selfsd: time (wall clock, default) or cost (sublayers run per\n"
     "token, deterministic)"},
    {"--save-skip", "F", ARG_PATH, offsetof(Options, save_skip), 0, 0, 0, 1 << METHOD_SELFSD,
     "selfsd: write the chosen skip set as JSON for --skip-file"},
    {"--loi", "N", ARG_INT, offsetof(Options, params.clasp.interval), 1, 1 << 20, 0,
     1 << METHOD_CLASP, "clasp: run the DP every N verifications (default %g)"},
    {"--skip-ratio", "R", ARG_FLOAT, offsetof(Options, params.swift.skip_ratio), 0, 1, 1,
     1 << METHOD_SWIFT, "swift: fraction of sublayers skipped, lowered while acceptance < 0.7\n"
     "(default %g)"},
    {"--swift-budget", "B", ARG_FLOAT, offsetof(Options, params.swift.budget), 0, 1, 1,
     1 << METHOD_SWIFT, "swift: optimize only while its steps take at most this share of\n"
     "the time (default %g; 1 = a step before every decoding step, as in\nthe paper)"},
    {"--swift-tree", "X", ARG_ONOFF, offsetof(Options, params.swift.tree_on), 0, 0, 0,
     1 << METHOD_SWIFT, "swift: on (default) verifies a tree of the draft's top alternatives\n"
     "(greedy only), off the draft chain alone"},
    {"--asd-alpha", "A", ARG_DOUBLE, offsetof(Options, params.asd.cos_threshold), -1, 1, 0,
     1 << METHOD_ASD, "asd: skip attention l when its prompt cosine C_l >= A (default %g)"},
    {"--asd-m", "N", ARG_INT, offsetof(Options, params.asd.every_m), 1, SS_MAX_LAYERS, 0,
     1 << METHOD_ASD, "asd: also skip attention and MLP of every N-th layer (default %g)"},
    {"--asd-n", "N", ARG_INT, offsetof(Options, params.asd.keep_last_n), 0, SS_MAX_LAYERS, 0,
     1 << METHOD_ASD, "asd: never skip in the last N layers (default %g)"},
    {"--clasp-ratio", "R", ARG_FLOAT, offsetof(Options, params.clasp.skip_ratio), 0, 1, 1,
     1 << METHOD_CLASP, "clasp: each DP skips M = round(R L) of the L layers (default %g)"},
    {"--threads", "N", ARG_INT, offsetof(Options, threads), 1, 1024, 0, 0,
     "CPU threads (default: OMP_NUM_THREADS, else one per core); on a busy\n"
     "machine give fewer (README, Threads)"},
    {"--compare", NULL, ARG_SWITCH, offsetof(Options, compare), 0, 0, 0, 0,
     "also run plain decoding in this process: speeds, ratio, identity\n"
     "(needs a method other than none)"},
    {"--show-rounds", NULL, ARG_SWITCH, offsetof(Options, show_rounds), 0, 0, 0, DRAFTING,
     "after each prompt's text, one line per round on stderr: the\n"
     "draft's tokens, what the full model kept, and its own token"},
    {"--trace", "FILE", ARG_PATH, offsetof(Options, trace), 0, 0, 0, 0,
     "write each round and each decision as JSON Lines (README: the trace)"},
    {"--json", NULL, ARG_SWITCH, offsetof(Options, json), 0, 0, 0, 0,
     "print one JSON object per prompt instead of text, one per line\n"
     "(JSON Lines with -f); its \"text\" is the continuation alone,\nwithout the prompt"},
};
enum { N_FLAGS = sizeof(FLAGS) / sizeof(FLAGS[0]) };

static int is(const char *a, const char *flag) { return strcmp(a, flag) == 0; }

static const Flag *find_flag(const char *name) {
    for (int k = 0; k < N_FLAGS; k++) {
        if (is(name, FLAGS[k].name)) { return &FLAGS[k]; }
    }
    return NULL;
}

// Whether the flag called name was on the command line.
static int given(const Options *o, const char *name) {
    return o->given >> (find_flag(name) - FLAGS) & 1;
}

// The defaults before any flag: the papers' settings (MethodParams) and the exit rule's.
static Options options_default(void) {
    Options o;
    memset(&o, 0, sizeof(o));
    o.model_dir = "tiny_models/kjv-12l"; // (relative to the working folder)
    o.prompt = "In the beginning God created";
    o.n_new = 64;
    o.top_p = 1.0f;
    o.seed = 42;
    o.method = -1;
    o.params = method_params_default();
    method_drafting(METHOD_SELFSD, &o.max_draft, &o.exit);
    return o;
}

static void usage(FILE *f) {
    Options d = options_default();
    int swift_k, clasp_k;
    DraftExit swift, clasp;
    method_drafting(METHOD_SWIFT, &swift_k, &swift);
    method_drafting(METHOD_CLASP, &clasp_k, &clasp);
    fprintf(f, "usage: selfspec [options]\n");
    for (int k = 0; k < N_FLAGS; k++) {
        const Flag *fl = &FLAGS[k];
        char head[32], help[512]; // head: the widest, "--swift-budget B", fits 16 columns
        snprintf(head, sizeof(head), "%s%s%s", fl->name, fl->arg ? " " : "",
                 fl->arg ? fl->arg : "");
        // a help's %g: its default, read from the default Options as its type; -K's also show
        // SWIFT's K and the cap (hi), --exit's the methods whose own exit rule is a fixed threshold
        const char *p = (const char *)&d + fl->offset;
        double v = fl->kind == ARG_FLOAT ? *(const float *)p : fl->kind == ARG_DOUBLE
                   ? *(const double *)p : fl->kind == ARG_INT ? *(const int *)p : 0;
        int exit_rule = fl->kind == ARG_EXIT;
        snprintf(help, sizeof(help), fl->help, exit_rule ? swift.threshold : v,
                 exit_rule ? clasp.threshold : swift_k, fl->hi);
        fprintf(f, "  %-16s ", head);
        for (const char *c = help; *c; c++) { // continuation lines under the first
            if (*c == '\n') { fprintf(f, "\n%19s", ""); }
            else { fputc(*c, f); }
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-16s this help, on stdout\n", "-h, --help");
    fprintf(f, "Ctrl-C during a selfsd search stops it and goes on with the best set so far.\n");
}

// One error line naming the flag (and its value) and the reason (fmt) into err; returns -1.
static int flag_fail(char *err, const char *flag, const char *value, const char *fmt, ...) {
    char why[SS_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    int glued = value && flag[strlen(flag) - 1] == ':'; // "--exit fixed:" and its value
    return fail(err, "%s%s%s: %s (see selfspec --help)", flag, value && !glued ? " " : "",
                value ? value : "", why);
}

// Parsed and range-checked as the type it becomes (kind), stored at out: 1e-300 is 0 as a float,
// outside (0, 1]; an int past a long's range (strtol's LONG_MAX) is out of the flag's.
static int parse_number(const char *flag, const char *v, ArgKind kind, double lo, double hi,
                        int lo_open, void *out, char *err) {
    char *end;
    double x = kind == ARG_INT ? (double)strtol(v, &end, 10)
               : kind == ARG_FLOAT ? strtof(v, &end) : strtod(v, &end);
    if (end == v || *end != '\0' || isnan(x)) {
        return flag_fail(err, flag, v, kind == ARG_INT ? "not an integer" : "not a number");
    }
    if (x < lo || x > hi || (lo_open && x == lo)) {
        return flag_fail(err, flag, v, kind == ARG_INT ? "must be in %c%.0f, %.0f]"
                         : "must be in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
    }
    if (kind == ARG_INT) { *(int *)out = (int)x; }
    if (kind == ARG_FLOAT) { *(float *)out = (float)x; }
    if (kind == ARG_DOUBLE) { *(double *)out = x; }
    return 0;
}

// Stores one flag's value v where the table says, as the kind it is.
static int parse_value(const Flag *fl, const char *v, Options *o, char *err) {
    char *p = (char *)o + fl->offset;
    switch (fl->kind) {
    case ARG_PATH: case ARG_TEXT:
        *(const char **)p = v;
        return fl->kind == ARG_TEXT || *v ? 0 : flag_fail(err, fl->name, NULL, "the path is empty");
    case ARG_INT: case ARG_FLOAT: case ARG_DOUBLE:
        return parse_number(fl->name, v, fl->kind, fl->lo, fl->hi, fl->lo_open, p, err);
    case ARG_ONOFF:
        *(int *)p = is(v, "on");
        return is(v, "on") || is(v, "off") ? 0 : flag_fail(err, fl->name, v, "expected on or off");
    case ARG_EXIT:
        o->exit.mode = is(v, "none") ? EXIT_NONE : is(v, "adaptive") ? EXIT_ADAPTIVE : EXIT_FIXED;
        if (o->exit.mode != EXIT_FIXED) { return 0; }
        if (strncmp(v, "fixed:", 6) != 0) {
            return flag_fail(err, fl->name, v, "expected adaptive, fixed:GAMMA or none");
        }
        return parse_number("--exit fixed:", v + 6, ARG_FLOAT, 0, 1, 0, &o->exit.threshold, err);
    case ARG_OBJECTIVE:
        o->cost_model = is(v, "cost");
        return is(v, "time") || o->cost_model ? 0 : flag_fail(err, fl->name, v, "expected time or cost");
    case ARG_METHOD:
        for (int k = 0; k <= METHOD_CLASP; k++) { if (is(v, method_name(k))) { o->method = k; } }
        return o->method >= 0 ? 0 : flag_fail(err, fl->name, v, "unknown method (none, static, "
                                              "selfsd, swift, asd, clasp)");
    default:
        *(int *)p = 1;
        return 0; // a switch
    }
}

static int parse_args(int argc, char **argv, Options *o, char *err) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const Flag *fl = find_flag(a);
        if (is(a, "-h") || is(a, "--help")) {
            usage(stdout);
            exit(EXIT_SUCCESS);
        }
        if (a[0] != '-') {
            return flag_fail(err, a, NULL, "unexpected argument (flags start with -)");
        }
        if (fl == NULL) { return flag_fail(err, a, NULL, "unknown flag"); }
        int takes_value = fl->kind != ARG_SWITCH; // (a switch may be given twice)
        // a value left out: the next argument is a flag, or a path flag's value starts with '-'
        if (takes_value && (v == NULL || find_flag(v) || is(v, "-h") || is(v, "--help") ||
                            (v[0] == '-' && fl->kind == ARG_PATH))) {
            return flag_fail(err, a, NULL, fl->kind == ARG_PATH ? "missing value (a path that "
                             "starts with - is written ./-name)" : "missing value");
        }
        if (takes_value && o->given >> (fl - FLAGS) & 1) {
            return flag_fail(err, a, NULL, "given twice (which one should win?)");
        }
        o->given |= 1UL << (fl - FLAGS);
        if (parse_value(fl, v, o, err)) { return -1; }
        i += takes_value;
    }
    return 0;
}

// Flags that contradict each other, or that the chosen method never reads, are errors.
static int check_flags(const Options *o, char *err) {
    int method = o->method, drafts = method != METHOD_NONE;
    if (given(o, "-p") && o->prompt_file) {
        return flag_fail(err, "-p", NULL, "give -p or -f, not both");
    }
    if (method == METHOD_STATIC && !o->skip_spec && !o->skip_file) {
        return flag_fail(err, "--method", "static", "needs --skip or --skip-file");
    }
    if (o->compare && !drafts) {
        return flag_fail(err, "--compare", NULL, "compares a speculative method with plain "
                         "decoding: give --method M (not none) or --skip");
    }
    if (o->skip_spec && o->skip_file) {
        return flag_fail(err, "--skip-file", NULL, "give --skip or --skip-file, not both");
    }
    for (int k = 0; k < N_FLAGS; k++) { // a flag the chosen method never reads
        const Flag *fl = &FLAGS[k];
        if (o->given >> k & 1 && fl->methods && !(fl->methods & 1u << method)) {
            int reader = 0;
            while (fl->methods >> reader > 1) { reader++; }
            return flag_fail(err, fl->name, NULL, fl->methods == DRAFTING ? "--method none drafts "
                             "nothing" : "only --method %s reads it", method_name(reader));
        }
    }
    if (given(o, "--alpha") && (!drafts || o->exit.mode != EXIT_ADAPTIVE)) {
        return flag_fail(err, "--alpha", NULL, "only the adaptive draft exit has a target");
    }
    if (given(o, "--top-p") && o->temperature == 0) {
        return flag_fail(err, "--top-p", NULL, "greedy decoding (-t 0) does not sample; give -t "
                         "too");
    }
    return 0;
}

static int parse_options(int argc, char **argv, Options *o, char *err) {
    *o = options_default();
    if (parse_args(argc, argv, o, err)) { return -1; }
    if (o->method < 0) { o->method = (o->skip_spec || o->skip_file) ? METHOD_STATIC : METHOD_NONE; }
    // the method's K and exit rule (method_drafting), unless -K or --exit chose them; --alpha
    // stays where it was written (check_flags refuses it with a fixed exit)
    int max_draft;
    DraftExit rule;
    method_drafting(o->method, &max_draft, &rule);
    if (!given(o, "-K")) { o->max_draft = max_draft; }
    if (!given(o, "--exit")) {
        o->exit.mode = rule.mode;
        o->exit.threshold = rule.threshold;
    }
    return check_flags(o, err);
}

// Reads {"attn": [..], "mlp": [..]} into s. Returns 0, or -1 with err set.
static int read_skip_file(const char *path, int n_layers, SkipSet *s, char *err) {
    size_t len;
    char *text = read_file(path, &len, err);
    Json j = {NULL, NULL, 0, path, err, 0};
    j.failed = text == NULL || json_parse(&j, text, len, path, err) != 0;
    memset(s, 0, sizeof(*s));
    for (int k = 0, key = 1; !j.failed && k < j.tok[0].size; k++, key = json_skip(&j, key + 1)) {
        if (!json_eq(&j, key, "attn") && !json_eq(&j, key, "mlp")) { // a typo would skip nothing
            int n = j.tok[key].end - j.tok[key].start;
            json_fail(&j, "unknown key \"%.*s\" (only \"attn\" and \"mlp\")", n < 64 ? n : 64,
                      j.js + j.tok[key].start);
        }
    }
    for (int k = 0; k < 2 && !j.failed; k++) { // (a key given twice: its last list)
        const char *key = k ? "mlp" : "attn";
        int arr = json_get(&j, 0, key), n = arr >= 0 ? j.tok[arr].size : 0;
        if (arr >= 0 && j.tok[arr].type != JSMN_ARRAY) {
            json_fail(&j, "\"%s\" must be an array of layer numbers", key);
        }
        for (int e = arr + 1, i = 0; !j.failed && i < n; i++, e = json_skip(&j, e)) {
            long long l;
            if (json_int(&j, e, 0, n_layers - 1, &l)) {
                json_fail(&j, "\"%s\" holds something that is not a layer in [0, %d]", key,
                          n_layers - 1);
            } else { (k ? s->mlp : s->attn)[l] = 1; }
        }
    }
    json_free(&j);
    free(text);
    return j.failed ? -1 : 0;
}

// Prompts and their token ids: -p's text or -f's lines, or the search's (--dev-prompts).
typedef struct {
    char *buf;   // the text they are read from (a copy of -p's), each prompt ended in place
    char **text; // (n) each prompt's text, in buf
    int *line;   // (n) the line of the prompts file it is on (1-based)
    int **ids;   // (n) its token ids, len[k] of them
    int *len;    // (n)
    int n;
} Prompts;

// Streams generated text to stdout (text mode) and keeps it for the JSON output.
typedef struct {
    const Tokenizer *tok;
    DecodeState ds;
    char *text;
    size_t len, cap;
    int echo, colour, show_rounds; // to stdout; on a terminal, kept draft tokens green; --show-rounds
    size_t shown, last;      // colour: the text written so far; where the last token's begins
    FILE *view;              // --show-rounds: the rounds in words until the end, into view_text
    char *view_text;         // (open_memstream: view_len)
    size_t view_len;
    const Output *out;
} TextSink;

static void on_token(void *ctx, int token, const float *logits) {
    TextSink *ts = (TextSink *)ctx;
    (void)logits;
    const Tokenizer *t = ts->tok;
    // a token decodes to at most 3 bytes per byte of its text (U+FFFD for one that is not
    // UTF-8), plus the bytes held back from the token before
    size_t most = 3 * (token >= 0 && token < t->vocab_size ? (size_t)t->tok[token].len : 0) + 16;
    if (ts->len + most > ts->cap) {
        ts->cap = 2 * (ts->len + most);
        ts->text = (char *)realloc_check(ts->text, ts->cap);
    }
    size_t n = token == -1 ? decode_end(t, &ts->ds, ts->text + ts->len, ts->cap - ts->len)
                           : decode_token(t, &ts->ds, token, ts->text + ts->len, ts->cap - ts->len);
    // in colour, the rounds write the text (show_round), but the prefill's token and the end
    int now = ts->echo && (!ts->colour || token == -1 || ts->out->n == 1);
    if (now) { fwrite(ts->text + ts->len, 1, n, stdout); fflush(stdout); }
    ts->last = ts->len;
    ts->len += n;
    ts->shown = now ? ts->len : ts->shown;
    if (token == -1 && ts->view) { fclose(ts->view), fprintf(stderr, "\n%s", ts->view_text); }
    if (token == -1) { free(ts->view_text); } // (the rounds, after the text)
}

// After each round (Trace.show): its line for --show-rounds, and the colours: the round's tokens
// before its last are the kept draft tokens, green; its last, the full model's own, plain.
static void show_round(void *ctx, const Round *r, const Selector *sel) {
    TextSink *ts = (TextSink *)ctx;
    if (ts->show_rounds && !ts->view && !(ts->view = open_memstream(&ts->view_text, &ts->view_len))) {
        die(__FILE__, __LINE__, "out of host memory for --show-rounds");
    }
    if (ts->view) { view_round(ts->view, r, sel, ts->tok); }
    if (!ts->colour) { return; } // (emitted = accepted + 1)
    printf("\033[32m%.*s\033[0m%.*s", (int)(ts->last - ts->shown), ts->text + ts->shown,
           (int)(ts->len - ts->last), ts->text + ts->last);
    fflush(stdout);
    ts->shown = ts->len;
}

// The non-empty lines of file (flag: -f or --dev-prompts; a file or a pipe; \n a newline), or
// text alone when file is NULL, each encoded and checked against the context with the n_extra
// tokens to come after it (extra names them). 0, or -1 with err set; free_prompts frees p.
static int load_prompts(Prompts *p, const Tokenizer *tok, const Config *c, const char *flag,
                        const char *file, const char *text, int n_extra, const char *extra,
                        char *err) {
    char why[SS_ERR_LEN], where[SS_ERR_LEN];
    size_t len = file ? 0 : strlen(text);
    p->buf = file ? read_input(file, 1, &len, why) : strcpy((char *)malloc_check(len + 1), text);
    if (p->buf == NULL) { return fail(err, "%s %s", flag, why); }
    p->text = (char **)calloc_check(len / 2 + 2, sizeof(char *) + sizeof(int)); // (line after)
    p->line = (int *)(p->text + len / 2 + 2);
    if (file == NULL) { p->text[p->n++] = p->buf; }
    // a UTF-8 byte order mark (Notepad writes one) is not part of the first prompt
    size_t bom = file && len >= 3 && memcmp(p->buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    int line = 1;
    for (char *q = p->buf + bom, *end; file && q < p->buf + len; q = end + 1, line++) {
        end = (char *)memchr(q, '\n', (size_t)(p->buf + len - q));
        if (end == NULL) { end = p->buf + len; }
        size_t k = (size_t)(end - q);
        if (k > 0 && q[k - 1] == '\r') { k--; }
        if (memchr(q, '\0', k) != NULL) { // strtok-style splitting would drop the rest
            return fail(err, "%s %s line %d: a NUL byte (a prompts file is text, one prompt per "
                        "line)", flag, file, line);
        }
        if (k == 0) { continue; }
        char *o = q; // (unescaped in place: the text only shrinks)
        for (size_t i = 0; i < k; i++) {
            int newline = q[i] == '\\' && i + 1 < k && q[i + 1] == 'n';
            *o++ = newline ? '\n' : q[i];
            i += newline;
        }
        *o = '\0';
        p->line[p->n] = line;
        p->text[p->n++] = q;
    }
    if (p->n == 0) { return fail(err, "%s %s: no prompts (one per line)", flag, file); }
    p->ids = (int **)calloc_check((size_t)p->n, sizeof(int *) + sizeof(int)); // (len after)
    p->len = (int *)(p->ids + p->n);
    for (int k = 0; k < p->n; k++) {
        snprintf(where, sizeof(where), file ? "%s %s line %d" : "%s", flag, file, p->line[k]);
        int *ids = p->ids[k] = (int *)malloc_check((size_t)c->seq_len * sizeof(int));
        int n = encode(tok, p->text[k], strlen(p->text[k]), 1, ids, c->seq_len, err);
        if (n < 0 || n >= c->seq_len) {
            return fail(err, "%s: the prompt does not fit the context of %d tokens "
                        "(max_position_embeddings or -c)", where, c->seq_len);
        }
        if (n == 0) {
            return fail(err, "%s: the prompt encodes to no tokens (and the tokenizer adds no "
                        "BOS)", where);
        }
        if ((long)n + n_extra - 1 > c->seq_len) {
            return fail(err, "%s: %d prompt tokens + %s exceed the context of %d (-c or "
                        "max_position_embeddings)", where, n, extra, c->seq_len);
        }
        p->len[k] = n; // and ids to that length: a long -f file of short prompts
        p->ids[k] = (int *)realloc_check(ids, (size_t)n * sizeof(int));
    }
    return 0;
}

static void free_prompts(Prompts *p) {
    for (int k = 0; p->ids && k < p->n; k++) { free(p->ids[k]); }
    free(p->buf);
    free(p->text); // (and line)
    free(p->ids);  // (and len)
}

// The first Ctrl-C during a search stops it (the search returns its best set so far, which is
// reported, saved with --save-skip and used); the handler then steps aside, so a second one quits.
static void on_interrupt(int sig) {
    search_interrupted = 1;
    signal(sig, on_stop);
}

// Everything one run of the CLI holds; zeroed first, so free_run frees whatever was built.
typedef struct {
    Model m;
    Tokenizer *tok;
    SkipSet skip;            // the set decoding uses (Self-SD's search: the one it chose)
    Prompts prompts, dev;    // -p's text or -f's lines; the search's (selfsd)
    int *out, *plain_out;    // (n_new) the tokens generated, and --compare's plain ones after them
    Selector sel;
    Trace trace;             // watches decoding and the searches; --trace's stream (f NULL: none)
    Observer watch;          // the engine's hooks into trace
    OutputFile outs[MAX_OUTPUTS]; // the output files given, n_outs of them (--save-skip first)
    int n_outs;
} CliRun;

// Self-SD's search, before the first prompt decodes, on r->dev into r->skip, with SIGINT caught:
// the first Ctrl-C stops it with the best set so far. Returns its time.
static double search_skip_set(CliRun *r, const Options *o) {
    int n_layers = r->m.config.n_layers;
    Objective obj = {(const int *const *)r->dev.ids, r->dev.len, r->dev.n,
                     o->params.selfsd.dev_tokens, o->max_draft, o->cost_model, o->exit,
                     {o->temperature, o->top_p, {0}}, &r->watch, NULL, NULL};
    rng_seed(&obj.sampler.rng, (uint64_t)o->seed);
    double t0 = time_ms();
    void (*was)(int) = signal(SIGINT, on_interrupt);
    r->skip = select_selfsd(&r->m, &obj, &o->params.selfsd, (uint64_t)o->seed);
    signal(SIGINT, search_interrupted ? on_stop : was); // (after a Ctrl-C, a second one quits)
    if (search_interrupted) {
        fprintf(stderr, "selfspec: search stopped by Ctrl-C: %s the best set so far, skipping %d "
                "of %d sublayers (Ctrl-C again quits)\n",
                o->save_skip ? "saving and decoding with" : "decoding with",
                skip_count(&r->skip, n_layers), 2 * n_layers);
    }
    double ms = time_ms() - t0;
    if (o->save_skip) { // (the set decoding uses: Self-SD's decoding never changes it)
        write_skip(r->outs[0].f, "", &r->skip, n_layers);
        fputc('\n', r->outs[0].f);
    }
    // Self-SD Sec. 3.3 searches on a separate development set; say which this search used
    fprintf(stderr, o->dev_prompts ? "selfsd: searched on %d prompts of --dev-prompts %s\n"
            : "selfsd: searched on the first prompt itself, not on a separate development set as "
              "Self-SD does (give one with --dev-prompts F)\n", r->dev.n, o->dev_prompts);
    return ms;
}

// What one prompt's run produced, for the report, beside the CliRun's out, skip, sel and trace.ds.
typedef struct {
    const char *text;     // the continuation's text
    int n, n_prompt;      // its tokens, and the prompt's
    const SpecStats *st;
    double plain_tps;     // --compare: plain decoding's tokens/s
    int identical;        // --compare: the same tokens
} PromptResult;

// --trace's header: the settings the run decodes with (README: the trace). Each is finite (a
// flag's range, or a paper's default), so %.9g needs no trace_float.
static void trace_header(FILE *f, const Options *o, const CliRun *r) {
    int L = r->m.config.n_layers, method = o->method;
    const DraftExit *e = &o->exit;
    const MethodParams *p = &o->params;
    static const char *modes[] = {"adaptive", "fixed", "none"};
    json_field(f, "{\"type\": \"header\", \"model\": ", r->m.dir);
    fprintf(f, ", \"method\": \"%s\", \"n_layers\": %d, \"K\": %d, \"n_new\": %d, "
            "\"seq_len\": %d, \"prompts\": %d, \"exit\": {\"mode\": \"%s\"",
            method == METHOD_NONE ? "plain" : method_name(method), L, o->max_draft, o->n_new,
            r->m.config.seq_len, r->prompts.n, modes[e->mode]);
    if (e->mode != EXIT_NONE) { fprintf(f, ", \"gamma\": %.9g", e->threshold); }
    fprintf(f, e->mode == EXIT_ADAPTIVE ? ", \"alpha\": %.9g, \"step\": %.9g, \"beta1\": %.9g, "
            "\"beta2\": %.9g" : "", e->target, e->step, e->beta1, e->beta2);
    fprintf(f, "}, \"sampler\": {\"temperature\": %.9g, \"top_p\": %.9g, \"seed\": %d}",
            o->temperature, o->top_p, o->seed);
    // the set the first round drafts with, unless the method chooses one before it
    SkipSet start = method == METHOD_SWIFT ? r->sel.swift.best
                    : method == METHOD_CLASP ? alternate_layers(L) : r->skip;
    write_skip(f, ", \"skip\": ", &start, L);
    fprintf(f, ", \"params\": {");
    if (method == METHOD_SELFSD) {
        fprintf(f, "\"objective\": \"%s\", \"search_on\": \"%s\", \"dev_tokens\": %d, "
                "\"iters\": %d, \"n_candidates\": %d, \"kappa\": %.9g",
                o->cost_model ? "cost" : "time", o->dev_prompts ? "dev-prompts" : "prompt",
                p->selfsd.dev_tokens, p->selfsd.iters, p->selfsd.n_candidates, p->selfsd.kappa);
    } else if (method == METHOD_SWIFT) {
        const SwiftParams *w = &p->swift;
        const TreeShape *t = &w->tree;
        fprintf(f, "\"window\": %d, \"max_steps\": %d, \"patience\": %d, \"bo_every\": %d, "
                "\"n_candidates\": %d, \"kappa\": %.9g, \"target\": %.9g, \"skip_ratio\": %.9g, "
                "\"budget\": %.9g, \"tree_confidence\": [%.9g, %.9g, %.9g], \"tree_width\": [%d, "
                "%d, %d, %d], \"tree\": %s", w->window, w->max_steps, w->patience, w->bo_every,
                w->n_candidates, w->kappa, w->target, w->skip_ratio, w->budget, t->confidence[0],
                t->confidence[1], t->confidence[2], t->width[0], t->width[1], t->width[2],
                t->width[3], w->tree_on ? "true" : "false");
    } else if (method == METHOD_ASD) {
        fprintf(f, "\"cos_threshold\": %.9g, \"every_m\": %d, \"keep_last_n\": %d",
                p->asd.cos_threshold, p->asd.every_m, p->asd.keep_last_n);
    } else if (method == METHOD_CLASP) {
        fprintf(f, "\"interval\": %d, \"M\": %d, \"skip_ratio\": %.9g", p->clasp.interval,
                r->sel.clasp_skip, p->clasp.skip_ratio);
    }
    fprintf(f, "}}\n");
}

// --json's draft statistics, each key in README "The trace": rounds by draft length, acceptance
// by draft position, why drafts ended, the mean confidence, CLaSp's overlap of consecutive DPs.
static void print_draft_stats(FILE *f, const DraftStats *d, int rounds, int drafted) {
    int n = rounds > 0 ? d->longest + 1 : 0;
    fprintf(f, ", \"draft_lengths\": [");
    for (int i = 0; i < n; i++) { fprintf(f, i ? ", %d" : "%d", d->lengths[i]); }
    fprintf(f, "], \"accept_by_position\": [");
    for (int i = 0; i < n - 1; i++) {
        fprintf(f, i ? ", %.4f" : "%.4f", (double)d->kept[i] / d->reached[i]);
    }
    fprintf(f, "], \"draft_ends\": {\"exit\": %d, \"K\": %d, \"room\": %d, \"eos\": %d}",
            d->ends[END_EXIT], d->ends[END_K], d->ends[END_ROOM], d->ends[END_EOS]);
    // a mean over no draft token, or over fewer than two DPs, is null, not 0
    fprintf(f, drafted > 0 ? ", \"conf_mean\": %.4f" : ", \"conf_mean\": null",
            drafted > 0 ? d->conf_sum / drafted : 0);
    fprintf(f, d->dps > 1 ? ", \"dp_overlap\": %.4f" : ", \"dp_overlap\": null",
            d->dps > 1 ? d->overlap_sum / (d->dps - 1) : 0);
}

// --json: one object per prompt, on one line (JSON Lines with -f), or --trace's summary of prompt
// (>= 0). Its keys are documented in README; "gamma_*" is the draft-exit threshold.
static void print_json_report(FILE *f, int prompt, const Options *o, const CliRun *run,
                              const PromptResult *r) {
    const SpecStats *st = r->st;
    int L = run->m.config.n_layers;
    char note[1024];
    RunSummary sum = summarize_run(st, &run->skip, L);
    double tps = tokens_per_s(r->n, st->gen.decode_ms);
    fprintf(f, prompt < 0 ? "{" : "{\"type\": \"summary\", \"prompt\": %d, ", prompt);
    json_field(f, "\"model\": ", run->m.dir);
    json_field(f, ", \"device\": ", device_name(o->threads));
    json_field(f, ", \"text\": ", r->text ? r->text : "");
    fprintf(f, ", \"tokens\": [");
    for (int t = 0; t < r->n; t++) { fprintf(f, t ? ", %d" : "%d", run->out[t]); }
    fprintf(f, "], \"n_prompt\": %d, \"n_tokens\": %d, \"tokens_per_s\": %.3f, "
            "\"prefill_ms\": %.3f, \"decode_ms\": %.3f", r->n_prompt, r->n, tps,
            st->gen.prefill_ms, st->gen.decode_ms);
    fprintf(f, ", \"method\": \"%s\"", method_name(o->method));
    write_skip(f, ", \"skip\": ", &run->skip, L);
    fprintf(f, ", \"skip_ratio\": %.4f, \"rounds\": %d, \"drafted\": %d, \"accepted\": %d, "
               "\"accept_rate\": %.4f, \"mean_accepted\": %.4f", sum.skip_ratio, st->rounds,
               st->drafted, st->accepted, sum.acceptance, sum.mean_accepted);
    // no threshold: plain decoding, or --exit none (always K tokens)
    fprintf(f, o->exit.mode == EXIT_NONE || o->method == METHOD_NONE
            ? ", \"gamma_first\": null, \"gamma_last\": null, \"gamma_mean\": null"
            : ", \"gamma_first\": %.4f, \"gamma_last\": %.4f, \"gamma_mean\": %.4f",
            st->threshold_first, st->threshold_last, sum.gamma_mean);
    fprintf(f, o->method == METHOD_SELFSD ? ", \"search_on\": \"%s\"" : "",
            o->dev_prompts ? "dev-prompts" : "prompt");
    fprintf(f, ", \"draft_ms\": %.3f, \"verify_ms\": %.3f, \"select_ms\": %.3f, \"search_ms\": %.3f"
               ", \"selections\": %d, \"expected_speedup\": %.4f, \"draft_weight_share\": %.4f",
               st->draft_ms, st->verify_ms, st->select_ms, st->search_ms, st->selections,
               sum.expected_speedup, draft_weight_share(&run->trace.ds, st->drafted, &run->skip,
                                                        &run->m.config));
    print_draft_stats(f, &run->trace.ds, st->rounds, st->drafted);
    json_field(f, ", \"note\": ", method_note(o->method, o->cost_model, &run->skip, L, st, r->n,
                                               &run->sel, note, sizeof(note)));
    if (o->compare) {
        PassCosts pc = pass_costs(st, r->plain_tps);
        fprintf(f, ", \"plain_tokens_per_s\": %.3f, \"measured_speedup\": %.4f, \"identical\": %s",
                r->plain_tps, r->plain_tps > 0 ? tps / r->plain_tps : 0,
                o->temperature == 0.0f ? (r->identical ? "true" : "false") : "null");
        fprintf(f, ", \"measured_draft_pass_steps\": %.4f, \"measured_verify_pass_steps\": %.4f, "
                "\"measured_predicted_speedup\": %.4f, \"measured_break_even\": %.4f", pc.draft,
                pc.verify, pc.predicted, pc.break_even);
    }
    fprintf(f, "}\n");
}

// The draft statistics in the text report: rounds by draft length, acceptance by draft position,
// why drafts ended, and CLaSp's overlap of consecutive DP sets against random sets of M layers.
static void print_draft_lines(const DraftStats *d, int rounds, int drafted, int exit_none, int M,
                              int L) {
    if (rounds == 0) { return; }
    fprintf(stderr, "rounds drafting 0, 1, 2, ... tokens:");
    for (int i = 0; i <= d->longest; i++) { fprintf(stderr, " %d", d->lengths[i]); }
    for (int i = 0; i < d->longest; i++) {
        fprintf(stderr, "%s %.2f", i ? "" : " | kept at position 1, 2, ...:",
                (double)d->kept[i] / d->reached[i]);
    }
    fprintf(stderr, "\ndrafts ended by the exit rule %d, K %d, room %d, EOS %d", d->ends[END_EXIT],
            d->ends[END_K], d->ends[END_ROOM], d->ends[END_EOS]);
    if (drafted > 0) { // (--exit none has no gamma)
        fprintf(stderr, exit_none ? " (mean confidence %.2f)" : " (mean confidence %.2f, %.0f%% of "
                "draft tokens at or above gamma)", d->conf_sum / drafted, 100.0 * d->confident / drafted);
    }
    fputc('\n', stderr);
    if (d->dps > 1) {
        fprintf(stderr, "consecutive DP sets overlap %.2f (mean Jaccard of %d pairs; two random sets "
                "of %d layers: %.2f)\n", d->overlap_sum / (d->dps - 1), d->dps - 1, M,
                random_overlap(M, L));
    }
}

// The text report on stderr (stdout holds the generated text).
static void print_text_report(const Options *o, const CliRun *run, const PromptResult *r) {
    const SpecStats *st = r->st;
    int L = run->m.config.n_layers;
    RunSummary sum = summarize_run(st, &run->skip, L);
    double tps = tokens_per_s(r->n, st->gen.decode_ms);
    double own_select_ms = st->select_ms - st->search_ms; // selection during decoding
    const char *name = method_name(o->method);
    char attn_map[SS_MAX_LAYERS + 1], mlp_map[SS_MAX_LAYERS + 1], note[1024];
    layer_map(&run->skip, L, attn_map, mlp_map);
    if (o->method != METHOD_NONE && isatty(STDOUT_FILENO)) { // the colours' legend (show_round)
        fprintf(stderr, "\ncolours: \033[32mgreen\033[0m, the draft tokens the full model kept; "
                "plain, the full model's own tokens");
    }
    fprintf(stderr, "\n%s | %s | %d prompt + %d new tokens | prefill %.1f ms | %.2f tokens/s\n",
            run->m.dir, device_name(o->threads), r->n_prompt, r->n, st->gen.prefill_ms, tps);
    if (o->method != METHOD_NONE) {
        fprintf(stderr, "method %s, K %d, skipping %d of %d sublayers (%.0f%%), selection took "
                "%.1f ms:\n  attn %s\n  mlp  %s\n", name, o->max_draft, skip_count(&run->skip, L),
                2 * L, 100 * sum.skip_ratio, st->select_ms, attn_map, mlp_map);
        fprintf(stderr, "rounds %d, drafted %d, accepted %d, acceptance %.3f, mean accepted "
                "length M %.2f\n", st->rounds, st->drafted, st->accepted, sum.acceptance,
                sum.mean_accepted);
        print_draft_lines(&run->trace.ds, st->rounds, st->drafted, o->exit.mode == EXIT_NONE,
                          run->sel.clasp_skip, L);
        fprintf(stderr, o->exit.mode == EXIT_NONE ? "no exit threshold (--exit none) | "
                : "gamma first %.3f last %.3f mean %.3f | ", st->threshold_first,
                st->threshold_last, sum.gamma_mean); // (--exit none: always K tokens)
        fprintf(stderr, "draft %.1f ms, verify %.1f ms, select %.1f ms, other %.1f ms\n",
                st->draft_ms, st->verify_ms, st->select_ms,
                st->gen.decode_ms - st->draft_ms - st->verify_ms - own_select_ms);
        fprintf(stderr, "expected speedup (SWIFT Eq. 6) %.2fx\n", sum.expected_speedup);
        if (st->selections > 0 && st->rounds > 0) {
            double per_call = own_select_ms / st->selections;
            // the passes' predicted speedup is tokens / (draft + verify time) in plain steps;
            // selection adds its time to the denominator and takes this share of that speedup
            fprintf(stderr, "%s: %d selection call%s, %.2f ms each = %.2f verification passes; "
                    "%.1f%% of decode time, taking %.0f%% of the speedup the draft and verify "
                    "passes predict\n", name, st->selections, st->selections == 1 ? "" : "s",
                    per_call, per_call / (st->verify_ms / st->rounds),
                    100 * own_select_ms / st->gen.decode_ms,
                    100 * own_select_ms / (st->draft_ms + st->verify_ms + own_select_ms));
        }
        const char *said = method_note(o->method, o->cost_model, &run->skip, L, st, r->n, &run->sel,
                                       note, sizeof(note));
        if (said) { fprintf(stderr, "%s: %s\n", name, said); }
    }
    if (o->compare) {
        PassCosts pc = pass_costs(st, r->plain_tps);
        fprintf(stderr, "plain decoding %.2f tokens/s: speedup %.2fx (expected %.2fx)%s\n",
                r->plain_tps, r->plain_tps > 0 ? tps / r->plain_tps : 0, sum.expected_speedup,
                o->temperature > 0 ? "" : r->identical ? ", output identical" : ", OUTPUT DIFFERS");
        if (st->rounds > 0) { // the passes alone, and with the selection time (SWIFT, CLaSp)
            double n_d = (double)st->drafted / st->rounds, passes_ms = st->draft_ms + st->verify_ms;
            double sel = (passes_ms + own_select_ms) / passes_ms;
            fprintf(stderr, "in plain decoding steps: a draft pass %.2f, a verify pass %.2f (Eq. 6 "
                    "takes %.2f and 1; the draft reads %.2f of the weights): these alone predict %.2fx",
                    pc.draft, pc.verify, sum.draft_cost, draft_weight_share(&run->trace.ds,
                    st->drafted, &run->skip, &run->m.config), pc.predicted);
            fprintf(stderr, st->selections ? ", %.2fx with the selection time" : "", pc.predicted / sel);
            fprintf(stderr, "\nbreak-even at these costs: M %.2f (%.2f drafts a round x %.2f + %.2f",
                    pc.break_even, n_d, pc.draft, pc.verify);
            fprintf(stderr, st->selections ? "; %.2f with the selection time" : "", pc.break_even * sel);
            fprintf(stderr, "), this run's M %.2f; its drafts kept whole would give %.2f\n",
                    sum.mean_accepted, n_d + 1);
        }
    }
}

// Decodes prompt pi into r->out, its text streamed unless --json and into *text (freed by the
// caller); the exit threshold and skip set carry over. plain: --compare's, into r->plain_out.
static int decode_prompt(CliRun *r, Options *o, int pi, int plain, SpecStats *st, char **text) {
    const int *prompt = r->prompts.ids[pi];
    int n_prompt = r->prompts.len[pi], n;
    TextSink sink;
    memset(&sink, 0, sizeof(sink));
    sink.tok = r->tok;
    sink.echo = !o->json;
    sink.colour = !plain && !o->json && o->method != METHOD_NONE && isatty(STDOUT_FILENO);
    sink.show_rounds = !plain && o->show_rounds;
    r->trace.show = sink.colour || sink.show_rounds ? show_round : NULL, r->trace.show_ctx = &sink;
    // The continuation follows the prompt's text and keeps its leading space; after a prompt of
    // special tokens only (-p "": BOS) it starts the text, whose leading space the decoder strips,
    // as Hugging Face's decode and llama2.c's run.c do.
    decode_begin(&sink.ds);
    for (int t = 0; t < n_prompt; t++) { sink.ds.at_start &= r->tok->tok[prompt[t]].special; }
    Sampler smp = {o->temperature, o->top_p, {0}};
    rng_seed(&smp.rng, (uint64_t)o->seed);
    Output tokens = plain ? output(r->plain_out, o->n_new, NULL, NULL)
                          : output(r->out, o->n_new, on_token, &sink);
    sink.out = &tokens;
    memset(st, 0, sizeof(*st));
    if (plain || o->method == METHOD_NONE) {
        n = generate_plain(&r->m, prompt, n_prompt, NULL, &smp, &tokens, &st->gen);
        if (!plain) { trace_prefill(&r->trace, prompt, n_prompt, NULL, NULL); }
    } else {
        // (the selector's hooks do nothing for static and selfsd: they chose before)
        SpecParams sp = {r->skip, o->max_draft, o->exit, &r->watch};
        n = generate_spec(&r->m, prompt, n_prompt, &sp, &r->sel, &smp, &tokens, st);
        o->exit = sp.exit; // the adaptive threshold carries over to the next prompt
        r->skip = sp.skip; // the layer map reported is the last one used
    }
    if (!plain) { on_token(&sink, -1, NULL); }
    if (text) { *text = sink.text; }
    return n;
}

// --save-skip's and --trace's files, opened before the model loads (and the run's minutes),
// refusing one of the run's inputs (README "Scope and limits", item 4). 0, or -1 with err set.
static int open_outputs(CliRun *r, const Options *o, char *err) {
    const char *const inputs[] = {o->prompt_file, o->skip_file, o->dev_prompts};
    const char *paths[] = {o->save_skip, o->trace}, *flags[] = {"--save-skip", "--trace"};
    for (int k = 0; k < 2; k++) {
        if (paths[k] == NULL) { continue; }
        OutputFile *f = &r->outs[r->n_outs]; // (free_outputs frees what a failed open made)
        if (open_output(f, r->n_outs++, flags[k], paths[k], inputs, 3, o->model_dir, err)) {
            return -1;
        }
        if (k == 1) { r->trace.f = f->f; }
    }
    return 0;
}

// Loads the model, tokenizer, skip set and prompts the options name: 0, or -1 with err set.
static int load_run(CliRun *r, Options *o, char *err) {
    char why[SS_ERR_LEN], extra[64];
    if (open_outputs(r, o, err)) { return -1; }
    if (build_model(&r->m, o->model_dir, o->ctx > 0 ? o->ctx : 4096, err)) { return -1; }
    const Config *c = &r->m.config;
#ifdef _OPENMP
    if (o->threads > 0) { omp_set_num_threads(o->threads); } // (device_name says why so many)
#endif
    // positions past it were never trained (and RoPE scaling assumes them)
    if (o->ctx > c->max_pos) {
        return fail(err, "-c %d: above max_position_embeddings %d of %s/config.json", o->ctx,
                    c->max_pos, o->model_dir);
    }
    char *path = join_path(o->model_dir, "tokenizer.json");
    r->tok = build_tokenizer(path, err);
    int bad = r->tok == NULL || (tokenizer_vocab_size(r->tok) > c->vocab_size &&
                                 fail(err, "%s: %d tokens, but config.json has vocab_size %d",
                                      path, tokenizer_vocab_size(r->tok), c->vocab_size));
    free(path);
    if (bad) { return -1; }
    if (o->skip_spec && parse_skip_spec(o->skip_spec, c->n_layers, &r->skip, why)) {
        return fail(err, "--skip %s", why);
    }
    if (o->skip_file && read_skip_file(o->skip_file, c->n_layers, &r->skip, why)) {
        return fail(err, "--skip-file %s", why);
    }
    // Every prompt is encoded and checked before the first one generates (a bad line 7 fails now,
    // not after six prompts' output), and so are the search's: --dev-prompts', else the first.
    snprintf(extra, sizeof(extra), "-n %d new tokens", o->n_new);
    const char *flag = o->prompt_file ? "-f" : "-p";
    if (load_prompts(&r->prompts, r->tok, c, flag, o->prompt_file, o->prompt, o->n_new, extra,
                     err)) {
        return -1;
    }
    if (o->method == METHOD_SELFSD) {
        int n_dev = o->params.selfsd.dev_tokens;
        snprintf(extra, sizeof(extra), "the %d tokens the search scores", n_dev);
        flag = o->dev_prompts ? "--dev-prompts" : "the prompt the search runs on";
        if (load_prompts(&r->dev, r->tok, c, flag, o->dev_prompts, r->prompts.text[0], n_dev,
                         extra, err)) {
            return -1;
        }
    }
    selector_init(&r->sel, o->method, &o->params, c->n_layers, (uint64_t)o->seed);
    r->out = (int *)malloc_check(2 * (size_t)o->n_new * sizeof(int));
    r->plain_out = r->out + o->n_new;
    r->trace.n_layers = c->n_layers;
    r->trace.exit_none = o->exit.mode == EXIT_NONE;
    r->trace.verbose = !o->json;
    r->trace.cost_model = o->cost_model;
    Observer watch = {&r->trace, trace_prefill, trace_round, watch_candidate};
    r->watch = watch;
    if (r->trace.f) { trace_header(r->trace.f, o, r); }
    return 0;
}

// One prompt: Self-SD's search before the first (r->dev is empty otherwise), decoding, the
// report, and --compare's plain run. Returns 1 when greedy output differs from plain decoding.
static int run_prompt(CliRun *r, Options *o, int pi) {
    double search_ms = pi == 0 && r->dev.n > 0 ? search_skip_set(r, o) : 0;
    SpecStats st, plain;
    char *text = NULL;
    r->trace.prompt = pi;
    if (!o->json) { printf("%s", r->prompts.text[pi]); fflush(stdout); }
    int n = decode_prompt(r, o, pi, 0, &st, &text);
    if (!o->json) { printf("\n"); }
    st.select_ms += search_ms;
    st.search_ms = search_ms;
    PromptResult res = {text, n, r->prompts.len[pi], &st, 0, 1};
    if (o->compare) {
        int n_plain = decode_prompt(r, o, pi, 1, &plain, NULL);
        res.plain_tps = tokens_per_s(n_plain, plain.gen.decode_ms);
        res.identical = n == n_plain && memcmp(r->out, r->plain_out, (size_t)n * sizeof(int)) == 0;
    }
    if (o->json) { print_json_report(stdout, -1, o, r, &res); }
    else { print_text_report(o, r, &res); }
    if (r->trace.f) { print_json_report(r->trace.f, pi, o, r, &res); } // --json's, as a summary
    free(text);
    return o->compare && o->temperature == 0.0f && !res.identical;
}

static int print_error(const char *err) {
    fprintf(stderr, "selfspec: error: %s\n", err);
    return 1;
}

static void free_run(CliRun *r) {
    free_outputs(r->outs, r->n_outs);
    free_prompts(&r->prompts);
    free_prompts(&r->dev);
    selector_free(&r->sel);
    free(r->out); // (and plain_out)
    free_tokenizer(r->tok);
    free_model(&r->m);
}

int main(int argc, char **argv) {
    // a stopped run leaves no temporary file (README, Scope and limits), nor one that dies; a
    // signal ignored when the run began (in a script's background job) stays ignored
    if (signal(SIGINT, on_stop) == SIG_IGN) { signal(SIGINT, SIG_IGN); }
    if (signal(SIGTERM, on_stop) == SIG_IGN) { signal(SIGTERM, SIG_IGN); }
    atexit(remove_temporaries);
    Options o;
    CliRun r;
    memset(&r, 0, sizeof(r));
    char err[SS_ERR_LEN];
    if (parse_options(argc, argv, &o, err)) { return print_error(err); }
    int failed = 0;
    if (load_run(&r, &o, err)) {
        failed = print_error(err);
    } else {
        for (int pi = 0; pi < r.prompts.n; pi++) {
            if (run_prompt(&r, &o, pi)) { // the other prompts still run
                failed = print_error("--compare: greedy self-speculative output differs from "
                                     "plain decoding");
            }
        }
        // then stdout checked, and the outputs renamed over their files only when every step
        // before succeeded (a failed run leaves the old files as they were)
        if (fflush(stdout) != 0 || ferror(stdout)) { // a full disk, /dev/full: the output is lost
            failed = print_error("writing to stdout failed");
        }
        if (!failed && commit_outputs(r.outs, r.n_outs, err)) { failed = print_error(err); }
    }
    free_run(&r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#endif // TESTING
