// verify_cost.c: what one forward pass over k tokens costs relative to k = 1.
// Self-speculative decoding pays only if verifying k draft tokens costs far less than k
// one-token passes: the matmul kernel reads each weight row once and reuses it for all k
// tokens, so a memory-bound pass should cost about the same for small k.
//   usage: test/bench/verify_cost MODEL_DIR [rounds]
// For k = 1, 2, 4, 8, 16, at position 64: each round times a one-token pass and a k-token pass
// back to back (which goes first alternates), and the figure is the median over the rounds of
// the ratio within each round, with its spread (the middle half of the rounds). Load that comes
// and goes slows both passes of a round alike, so it moves the spread, not the median, as the
// least of separate timings would (that biases a ratio low: its t_1 and t_k are each the luckiest
// of their own). The draft's cost coefficient (c in SWIFT Eq. 6) is measured the same way: a
// one-token pass skipping half the sublayers against a full one. Then the kernel launches of a
// pass in both mappings, and the device's copy bandwidth. VERIFY_COST_STAGES=N adds the time of
// each stage of a layer alone (N calls a batch; CUDA events in the CUDA build): a profile
// without a profiler.
#define TESTING
#include "../../selfspec.cu"
#include "../testing.h"

enum { MAX_ROUNDS = 201 };

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pass_ms(Model *m, const int *tokens, int k, const SkipSet *skip) {
    device_sync();
    double t0 = time_ms();
    forward(m, tokens, k, 64, skip, NULL, NULL);
    device_sync();
    return time_ms() - t0;
}

// One statistic of interleaved passes: rounds of (base pass, other pass), in alternating order;
// returns the median ratio other / base, with its 25th and 75th percentiles and the median of
// the other pass's time in ms
typedef struct {
    double ratio, lo, hi, ms;
} Ratio;

static Ratio interleaved(Model *m, const int *tokens, int k, const SkipSet *skip, int rounds) {
    double ratio[MAX_ROUNDS], ms[MAX_ROUNDS];
    for (int w = 0; w < 3; w++) { pass_ms(m, tokens, k, skip); } // warm (a GPU's graph captured)
    for (int r = 0; r < rounds; r++) {
        double base, other;
        if (r % 2 == 0) {
            base = pass_ms(m, tokens, 1, NULL), other = pass_ms(m, tokens, k, skip);
        } else {
            other = pass_ms(m, tokens, k, skip), base = pass_ms(m, tokens, 1, NULL);
        }
        ratio[r] = other / base, ms[r] = other;
    }
    qsort(ratio, (size_t)rounds, sizeof(double), compare_double);
    qsort(ms, (size_t)rounds, sizeof(double), compare_double);
    Ratio q = {ratio[rounds / 2], ratio[rounds / 4], ratio[(3 * rounds) / 4], ms[rounds / 2]};
    return q;
}

// Kernel launches of one pass (the shim's launch_count), in the build's mapping and the other's
// (the CPU build runs the GPU's kernels through the shim, so the counts do not need a GPU): a
// full pass and the draft's over 1 and 8 tokens, and per layer (a full pass less one that skips
// every sublayer, over the layers). Graphs are off while counting: a graph's replay counts as
// the launches it replays.
static void print_launches(Model *m, const int *tokens, const SkipSet *draft) {
    SkipSet all;
    memset(&all, 1, sizeof(all));
    int graphs = m->state.use_graphs;
    m->state.use_graphs = 0;
    for (int mapping = 0; mapping < 2; mapping++) {
        uint64_t count[5];
        const SkipSet *skips[5] = {NULL, NULL, draft, draft, &all};
        int ks[5] = {1, 8, 1, 8, 1};
        for (int i = 0; i < 5; i++) {
            uint64_t before = launch_count;
            forward(m, tokens, ks[i], 64, skips[i], NULL, NULL);
            count[i] = launch_count - before;
        }
        printf("launches per pass, %s mapping: full k=1 %llu, k=8 %llu; draft k=1 %llu, k=8 %llu; "
               "%.1f per layer\n", gpu_mapping ? "GPU" : "CPU", (unsigned long long)count[0],
               (unsigned long long)count[1], (unsigned long long)count[2],
               (unsigned long long)count[3], (double)(count[0] - count[4]) / m->config.n_layers);
        gpu_mapping = !gpu_mapping;
    }
    m->state.use_graphs = graphs;
}

// Milliseconds per call of stage(m, n), the median of 5 batches of `calls` calls: CUDA events on
// the stream the kernels run on, or the wall clock in the CPU build
typedef void (*Stage)(Model *m, int n);
static double stage_ms(Model *m, Stage stage, int n, int calls) {
    double t[5];
    for (int b = 0; b < 5; b++) {
#ifdef __CUDACC__
        cudaEvent_t e0, e1;
        cuda_check(cudaEventCreate(&e0));
        cuda_check(cudaEventCreate(&e1));
        cuda_check(cudaEventRecord(e0, cudaStreamPerThread));
        for (int c = 0; c < calls; c++) { stage(m, n); }
        cuda_check(cudaEventRecord(e1, cudaStreamPerThread));
        cuda_check(cudaEventSynchronize(e1));
        float ms;
        cuda_check(cudaEventElapsedTime(&ms, e0, e1));
        t[b] = ms / calls;
        cuda_check(cudaEventDestroy(e0));
        cuda_check(cudaEventDestroy(e1));
#else
        double t0 = time_ms();
        for (int c = 0; c < calls; c++) { stage(m, n); }
        t[b] = (time_ms() - t0) / calls;
#endif
    }
    qsort(t, 5, sizeof(double), compare_double);
    return t[2];
}

// The stages of layer 0 (what attention_sublayer and mlp_sublayer launch, one launcher each) and
// of the output head, each on its own: where a pass's time goes
static MatmulOp layer_op(Model *m, int which, int n) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hid = c->hidden_dim, q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    MatmulOp qkv = {MM_QKV, n, dim, {q, kv, kv}, c->head_dim, s->xb, {w->wq, w->wk, w->wv},
                    {s->q, s->key_cache, s->value_cache}, s->raw, s->pos, s->depth, w->rope_inv_freq};
    MatmulOp o = {MM_ADD, n, q, {dim}, 0, s->xb, {w->wo}, {s->x}, s->raw, 0, 0, 0};
    MatmulOp gate_up = {MM_SWIGLU, n, dim, {hid, hid}, 0, s->xb, {w->w_gate, w->w_up}, {s->hb}, s->raw, 0, 0, 0};
    MatmulOp down = {MM_ADD, n, hid, {dim}, 0, s->hb, {w->w_down}, {s->x}, s->raw, 0, 0, 0};
    MatmulOp head = {MM_STORE, n, dim, {c->vocab_size}, 0, s->xb, {w->lm_head}, {s->logits}, s->logits, 0, 0, 0};
    MatmulOp ops[5] = {qkv, o, gate_up, down, head};
    return ops[which];
}
static void stage_norm(Model *m, int n) {
    rmsnorm(m->state.xb, m->state.x, m->weights.rms_att, n, m->config.dim, m->config.norm_eps);
}
static void stage_qkv(Model *m, int n) { matmul(&m->state, layer_op(m, 0, n)); }
static void stage_attention(Model *m, int n) { // attention_sublayer's launches, layer 0
    RunState *s = &m->state;
    const Config *c = &m->config;
    if (gpu_mapping) {
        LAUNCH(attention_scores_kernel, n * c->n_heads * c->seq_len, s->att, s->q, s->key_cache, s->mask,
               s->pos, n, *c);
        LAUNCH(attention_values_kernel, n * c->n_heads * c->head_dim, s->xb, s->att, s->value_cache, s->mask,
               s->pos, n, *c);
    } else {
        LAUNCH(attention_kernel, n * c->n_heads, s->xb, s->att, s->q, s->key_cache, s->value_cache, s->mask,
               s->pos, n, *c);
    }
}
static void stage_o(Model *m, int n) { matmul(&m->state, layer_op(m, 1, n)); }
static void stage_gate_up(Model *m, int n) { matmul(&m->state, layer_op(m, 2, n)); }
static void stage_down(Model *m, int n) { matmul(&m->state, layer_op(m, 3, n)); }
static void stage_head(Model *m, int n) { matmul(&m->state, layer_op(m, 4, n)); }

static void print_stages(Model *m, const int *tokens, int calls) {
    const Config *c = &m->config;
    size_t dim = c->dim, hid = c->hidden_dim, q = (size_t)c->n_heads * c->head_dim;
    size_t kv = (size_t)c->n_kv_heads * c->head_dim;
    struct { const char *name; Stage f; size_t weights; int per_layer; } st[] = {
        {"rmsnorm (x2 a layer)", stage_norm, 0, 2}, {"q, k, v + RoPE", stage_qkv, (q + 2 * kv) * dim, 1},
        {"attention", stage_attention, 0, 1}, {"o_proj + residual", stage_o, dim * q, 1},
        {"gate, up + SwiGLU", stage_gate_up, 2 * hid * dim, 1}, {"down + residual", stage_down, dim * hid, 1},
        {"output head", stage_head, (size_t)c->vocab_size * dim, 0}};
    printf("stages at position 64, %s mapping, ms per launch of the stage (median of 5 x %d), "
           "weights read as GB/s:\n", gpu_mapping ? "GPU" : "CPU", calls);
    for (int k = 1; k <= 8; k += 7) {
        set_pass(m, tokens, k, 64, NULL);
        double pass = 0;
        for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
            double ms = stage_ms(m, st[i].f, k, calls);
            pass += ms * (st[i].per_layer ? st[i].per_layer * c->n_layers : 1);
            printf("  k=%d %-22s %9.4f ms", k, st[i].name, ms);
            if (st[i].weights) { printf(" %8.1f GB/s", st[i].weights * 4.0 / (ms * 1e-3) / 1e9); }
            printf("\n");
        }
        printf("  k=%d sum over a pass (%d layers, the head): %.3f ms\n", k, c->n_layers, pass);
    }
}

// The bandwidth of one device-to-device copy of 1 GB (256 MB in the CPU build, one thread),
// counting its reads and writes: what a weight-streaming pass is measured against.
static double copy_gbs(int repeats) {
#ifdef __CUDACC__
    size_t bytes = (size_t)1 << 30;
#else
    size_t bytes = (size_t)1 << 28;
#endif
    char *a = (char *)device_malloc(2 * bytes), *b = a + bytes;
    device_memset(a, 1, 2 * bytes);
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        device_sync();
        double t0 = time_ms();
        copy_on_device(b, a, bytes);
        device_sync();
        double t = time_ms() - t0;
        if (r > 0 && t < best) { best = t; } // the first copy warms up
        char last;
        copy_to_host(&last, b + bytes - 1, 1); // read the copy, so no compiler drops it
        if (last != 1) { die(__FILE__, __LINE__, "copy_gbs: the copy did not arrive"); }
    }
    device_free(a);
    return 2.0 * bytes / (best * 1e-3) / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s MODEL_DIR [rounds]\n", argv[0]); return 1; }
    int rounds = argc > 2 ? atoi(argv[2]) : 15;
    if (rounds < 1 || rounds > MAX_ROUNDS) { rounds = 15; }
    Model m;
    char err[SS_ERR_LEN];
    if (build_model(&m, argv[1], 1024, err)) { fprintf(stderr, "%s\n", err); return 1; }
    int tokens[80];
    for (int t = 0; t < 80; t++) { tokens[t] = (7 * t + 3) % m.config.vocab_size; }
    int row;
    prefill(&m, tokens, 64, NULL, NULL, &row);
    SkipSet half = alternate_layers(m.config.n_layers);
    for (int w = 0; w < 3; w++) { pass_ms(&m, tokens + 64, 1, NULL); } // warm up
    printf("%s | %s | %d layers, dim %d, vocab %d, %.0f MB fp32 weights%s\n", argv[1],
           device_name(0), m.config.n_layers, m.config.dim, m.config.vocab_size,
           m.n_floats * 4.0 / 1e6, m.state.use_graphs ? " | CUDA graphs" : "");
    printf("%6s %12s %10s %14s   (median of %d interleaved rounds)\n", "k", "ms/pass", "vs k=1",
           "p25-p75", rounds);
    int ks[5] = {1, 2, 4, 8, 16};
    for (int i = 0; i < 5; i++) {
        Ratio q = interleaved(&m, tokens + 64, ks[i], NULL, rounds);
        printf("%6d %12.3f %9.2fx %8.2f-%.2f\n", ks[i], q.ms, q.ratio, q.lo, q.hi);
    }
    Ratio d = interleaved(&m, tokens + 64, 1, &half, rounds);
    printf("draft pass skipping %d of %d sublayers: %.3f ms = %.2f of a full pass (p25-p75 "
           "%.2f-%.2f; c in SWIFT Eq. 6)\n", skip_count(&half, m.config.n_layers),
           2 * m.config.n_layers, d.ms, d.ratio, d.lo, d.hi);
    print_launches(&m, tokens + 64, &half);
    if (getenv("VERIFY_COST_STAGES")) { print_stages(&m, tokens + 64, atoi(getenv("VERIFY_COST_STAGES"))); }
    printf("copy bandwidth (device to device, read + write): %.1f GB/s\n", copy_gbs(rounds));
    free_model(&m);
    return 0;
}
