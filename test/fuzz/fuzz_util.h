// fuzz_util.h: what the fuzz targets share. Each target does
//   #define TESTING
//   #include "../../selfspec.cu"
//   #include "fuzz_util.h"
// The loaders read from paths, so a target writes its input to a file in a folder of its own
// process (/dev/shm when it exists: no disk writes) and calls the loader on that path.
#ifndef SELFSPEC_FUZZ_UTIL_H
#define SELFSPEC_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

// A target: what it writes once before the first input, and what it does with each input
// (fuzz_main.h turns one into libFuzzer's entry points).
typedef struct {
    void (*init)(void);
    int (*one)(const uint8_t *data, size_t size);
} FuzzTarget;

static char fuzz_dir_path[128];

static void fuzz_cleanup(void) {
    static const char *const names[] = {"config.json", "model.safetensors", "tokenizer.json"};
    char path[256];
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/%s", fuzz_dir_path, names[k]);
        remove(path);
    }
    rmdir(fuzz_dir_path);
}

// The folder of this process, created on first use and removed at exit.
static const char *fuzz_dir(void) {
    if (fuzz_dir_path[0] != '\0') { return fuzz_dir_path; }
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/selfspec-fuzz-%d", base, (int)getpid());
    if (mkdir(fuzz_dir_path, 0700) != 0) {
        fprintf(stderr, "fuzz: cannot create %s\n", fuzz_dir_path);
        abort();
    }
    atexit(fuzz_cleanup);
    return fuzz_dir_path;
}

// Writes bytes to fuzz_dir()/name and returns the path (a static buffer).
static const char *fuzz_write(const char *name, const void *data, size_t size) {
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
    return path;
}

// Writes one input to fuzz_dir()/name, loads the model folder fuzz_dir() and, if it loads, runs
// a 2-token forward pass (unless a fuzzed config leaves fewer than 2 slots of context): what
// the config and safetensors targets do with each input.
static int fuzz_model_file(const char *name, const uint8_t *data, size_t size) {
    fuzz_write(name, data, size);
    Model m;
    char err[SS_ERR_LEN];
    if (build_model(&m, fuzz_dir(), 0, err) != 0) { return 0; }
    int tokens[2] = {1, 2};
    if (m.config.seq_len >= 2) { forward(&m, tokens, 2, 0, NULL, NULL, NULL); }
    free_model(&m);
    return 0;
}

// The micro model the safetensors and config targets pair their input with: Llama 2 layout,
// GQA (2 query heads share 1 KV head), head_dim 4. test/fuzz/make_corpus.py writes its
// safetensors seeds with these same sizes.
static const char MICRO_CONFIG[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_act\": \"silu\",\n"
    " \"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2,\n"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, \"vocab_size\": 16,\n"
    " \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,\n"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"tie_word_embeddings\": false}\n";

// Writes a valid F32 model.safetensors for MICRO_CONFIG (all weights 0.01 * small integers).
static void write_micro_safetensors(void) {
    enum { DIM = 8, HID = 12, LAYERS = 2, Q = 8, KV = 4, VOCAB = 16 };
    static const char *const layer_names[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj",
                                              "self_attn.v_proj", "self_attn.o_proj", "post_attention_layernorm",
                                              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    const int rows[] = {DIM, Q, KV, KV, DIM, DIM, HID, HID, DIM};
    const int cols[] = {0, DIM, DIM, DIM, Q, 0, DIM, DIM, HID};
    char *header = (char *)malloc_check(8192);
    size_t hn = 0, off = 0;
    hn += (size_t)snprintf(header + hn, 8192 - hn, "{\"__metadata__\": {\"format\": \"pt\"}");
#define MICRO_TENSOR(name, r, c)                                                                          \
    do {                                                                                                \
        size_t bytes_ = (size_t)(r) * ((c) ? (c) : 1) * 4;                                              \
        if ((c)) {                                                                                      \
            hn += (size_t)snprintf(header + hn, 8192 - hn, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [%d, %d], " \
                                   "\"data_offsets\": [%zu, %zu]}", (name), (r), (c), off, off + bytes_); \
        } else {                                                                                        \
            hn += (size_t)snprintf(header + hn, 8192 - hn, ", \"%s\": {\"dtype\": \"F32\", \"shape\": [%d], " \
                                   "\"data_offsets\": [%zu, %zu]}", (name), (r), off, off + bytes_);      \
        }                                                                                               \
        off += bytes_;                                                                                  \
    } while (0)
    MICRO_TENSOR("model.embed_tokens.weight", VOCAB, DIM);
    MICRO_TENSOR("lm_head.weight", VOCAB, DIM);
    MICRO_TENSOR("model.norm.weight", DIM, 0);
    for (int l = 0; l < LAYERS; l++) {
        for (int k = 0; k < 9; k++) {
            char name[96];
            snprintf(name, sizeof(name), "model.layers.%d.%s.weight", l, layer_names[k]);
            MICRO_TENSOR(name, rows[k], cols[k]);
        }
    }
#undef MICRO_TENSOR
    hn += (size_t)snprintf(header + hn, 8192 - hn, "}");
    size_t total = 8 + hn + off;
    unsigned char *file = (unsigned char *)calloc_check(total, 1);
    for (int b = 0; b < 8; b++) { file[b] = (unsigned char)((uint64_t)hn >> (8 * b)); }
    memcpy(file + 8, header, hn);
    for (size_t i = 0; i < off / 4; i++) {
        float v = 0.01f * (float)((int)(i % 7) - 3);
        memcpy(file + 8 + hn + 4 * i, &v, 4);
    }
    fuzz_write("model.safetensors", file, total);
    free(file);
    free(header);
}

#endif
