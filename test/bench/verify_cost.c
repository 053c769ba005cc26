// verify_cost.c: what one forward pass over k tokens costs relative to k = 1.
// Self-speculative decoding pays only if verifying k draft tokens costs far less than k
// one-token passes: the matmul kernel reads each weight row once and reuses it for all k
// tokens, so a memory-bound pass should cost about the same for small k.
//   usage: test/bench/verify_cost MODEL_DIR [repeats]
// Prints, for k = 1, 2, 4, 8, 16, the median time of a k-token pass at position 64 and its
// ratio to k = 1, plus a one-token pass under a 50% skip set (the draft's cost coefficient).
#define TESTING
#include "../../selfspec.cu"
#include "../testing.h"

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_pass_ms(Model *m, const int *tokens, int k, const SkipSet *skip, int repeats) {
    double t[64];
    for (int r = 0; r < repeats && r < 64; r++) {
        double t0 = time_ms();
        forward(m, tokens, k, 64, skip, NULL, NULL);
        t[r] = time_ms() - t0;
    }
    qsort(t, (size_t)repeats, sizeof(double), compare_double);
    return t[repeats / 2];
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
    if (argc < 2) { fprintf(stderr, "usage: %s MODEL_DIR [repeats]\n", argv[0]); return 1; }
    int repeats = argc > 2 ? atoi(argv[2]) : 15;
    if (repeats < 1 || repeats > 64) { repeats = 15; }
    Model m;
    char err[SS_ERR_LEN];
    if (build_model(&m, argv[1], 1024, err)) { fprintf(stderr, "%s\n", err); return 1; }
    int tokens[80];
    for (int t = 0; t < 80; t++) { tokens[t] = (7 * t + 3) % m.config.vocab_size; }
    int row;
    prefill(&m, tokens, 64, NULL, NULL, &row);
    SkipSet half = alternate_layers(m.config.n_layers);
    median_pass_ms(&m, tokens + 64, 1, NULL, 3); // warm up
    double t1 = median_pass_ms(&m, tokens + 64, 1, NULL, repeats);
    printf("%s | %s | %d layers, dim %d, vocab %d, %.0f MB fp32 weights\n", argv[1], device_name(0),
           m.config.n_layers, m.config.dim, m.config.vocab_size, m.n_floats * 4.0 / 1e6);
    printf("%6s %12s %10s\n", "k", "ms/pass", "vs k=1");
    int ks[5] = {1, 2, 4, 8, 16};
    for (int i = 0; i < 5; i++) {
        double t = median_pass_ms(&m, tokens + 64, ks[i], NULL, repeats);
        printf("%6d %12.2f %9.2fx\n", ks[i], t, t / t1);
    }
    double td = median_pass_ms(&m, tokens + 64, 1, &half, repeats);
    printf("draft pass skipping %d of %d sublayers: %.2f ms = %.2f of a full pass (c in SWIFT Eq. 6)\n",
           skip_count(&half, m.config.n_layers), 2 * m.config.n_layers, td, td / t1);
    printf("copy bandwidth (device to device, read + write): %.1f GB/s\n", copy_gbs(repeats));
    free_model(&m);
    return 0;
}
