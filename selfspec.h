// selfspec.h: the public C API of selfspec, a one-file C/CUDA reference implementation of
// self-speculative decoding for LLaMA models. A porter reads this first.
//
// The implementation is selfspec.cu. It builds two ways from the same source:
//   make        the C compiler compiles selfspec.cu as C11 + OpenMP: kernels run as a host loop
//   make cuda   nvcc compiles the same file: kernels run on the GPU
// Every buffer below lives in "device" memory: GPU memory in the CUDA build, plain host memory
// in the CPU build. Shapes are given as (outer, ..., inner), row-major, fp32.
#ifndef SELFSPEC_H
#define SELFSPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// SS_ERR_LEN: every error line's buffer, room for a flag, a long path and the reason (a longer
// line loses the middle of its path, never the reason)
enum { SS_MAX_LAYERS = 256, SS_ERR_LEN = 2048, SS_MAX_EOS = 4 };

// ----------------------------------------------------------------------------
// model: config.json + model.safetensors (Hugging Face LlamaForCausalLM layout)

typedef struct {
    int dim;          // hidden_size
    int hidden_dim;   // intermediate_size (SwiGLU width)
    int n_layers;     // num_hidden_layers
    int n_heads;      // num_attention_heads
    int n_kv_heads;   // num_key_value_heads (GQA when < n_heads)
    int head_dim;     // head_dim, or dim / n_heads when the config omits it
    int vocab_size;   // vocab_size
    int max_pos;      // max_position_embeddings
    int seq_len;      // context actually allocated: min(max_pos, the -c flag)
    float rope_theta; // rope_theta
    float norm_eps;   // rms_norm_eps
    int tied;         // lm_head shares token_embedding (tie_word_embeddings, unless the file has
                      // an lm_head.weight that differs)
    int rope_llama3;  // rope_scaling.rope_type == "llama3" (Llama 3.1/3.2)
    float rope_factor, rope_low_freq, rope_high_freq; // llama3 rope_scaling parameters
    int rope_orig_max;                                // its original_max_position_embeddings
    int bos_id;                                       // bos_token_id, -1 if none
    int eos_ids[SS_MAX_EOS];                          // eos_token_id (an int or a list)
    int n_eos;
} Config;

typedef struct {
    float *token_embedding; // (vocab_size, dim)
    float *rms_att;         // (n_layers, dim)
    float *wq;              // (n_layers, n_heads * head_dim, dim)
    float *wk;              // (n_layers, n_kv_heads * head_dim, dim)
    float *wv;              // (n_layers, n_kv_heads * head_dim, dim)
    float *wo;              // (n_layers, dim, n_heads * head_dim)
    float *rms_ffn;         // (n_layers, dim)
    float *w_gate;          // (n_layers, hidden_dim, dim)
    float *w_up;            // (n_layers, hidden_dim, dim)
    float *w_down;          // (n_layers, dim, hidden_dim)
    float *rms_final;       // (dim)
    float *lm_head;         // (vocab_size, dim); == token_embedding when tied
    float *rope_inv_freq;   // (head_dim / 2) RoPE inverse frequencies, llama3 scaling applied
} Weights;

// Which sublayers a forward pass runs. A skipped sublayer is a residual pass-through: its
// RMSNorm is not computed, and a skipped attention neither reads nor writes the KV cache.
typedef struct {
    unsigned char attn[SS_MAX_LAYERS]; // 1 = skip layer l's attention sublayer
    unsigned char mlp[SS_MAX_LAYERS];  // 1 = skip layer l's MLP sublayer
} SkipSet;

// Where the n tokens of one forward pass sit. NULL means a plain chain: token t has RoPE position
// pos + t and attends the cache [0, pos) plus tokens 0..t of this pass. A tree (SWIFT's
// dynamic verification) or a batch of independent candidates (CLaSp's DP) sets both arrays.
typedef struct {
    const int *depth;          // (n) token t has RoPE position pos + depth[t]
    const unsigned char *mask; // (n, n) mask[t * n + u] = 1 if token t attends token u of this pass
} TokenTree;

// Scratch of one forward pass over up to max_tokens tokens, and the KV cache.
typedef struct {
    int max_tokens;      // largest n for one forward call (longer prompts are prefilled in chunks)
    float *x;            // (max_tokens, dim) the residual stream
    float *xb;           // (max_tokens, max(dim, q_dim)) normed input / attention output
    float *q;            // (max_tokens, q_dim)
    float *hb;           // (max_tokens, hidden_dim) silu(gate) * up
    float *raw;          // (max_tokens, max(q_dim + 2 kv_dim, 2 hidden_dim, dim)) a matmul's dot
                         // products, before what its launch does with them (RoPE, SwiGLU, x +=)
    float *att;          // (max_tokens, n_heads, seq_len) attention scores
    float *logits;       // (max_tokens, vocab_size)
    float *key_cache;    // (n_layers, seq_len, kv_dim)
    float *value_cache;  // (n_layers, seq_len, kv_dim)
    float *part;         // (max_tokens, rows, lanes) the matmul's partial sums when it runs a
                         // thread per (row, lane): the GPU's mapping (16 lanes a 512-input segment)
    int *pos;            // (1) this pass's position: the kernels read it here, so that a pass's
                         // launches are the same at every position; then tokens, depth and mask
    int *tokens;         // (max_tokens) token ids of this pass
    int *depth;          // (max_tokens) RoPE offsets of this pass
    unsigned char *mask; // (max_tokens, max_tokens) attention mask within this pass
    int *pass_host;      // host staging of pos, tokens, depth and mask, uploaded in one copy
    float *logits_host;  // (max_tokens, vocab_size) logits copied back to the host
    float *slot_host;    // (2, n_layers, kv_dim) one cache slot's K and V rows, on their way
                         // (SWIFT's accepted leaf moving to the chain); after logits_host
    uint64_t n_sublayers; // sublayers run, summed over passes (a pass streams each weight once)
    struct PassGraph *graphs; // (16) the passes captured as CUDA graphs, by shape (selfspec.cu)
    int use_graphs;      // passes through the graphs (SELFSPEC_GRAPHS; the CUDA build's default)
} RunState;

typedef struct {
    Config config;
    Weights weights;  // device pointers into one allocation
    float *memory;    // the one device allocation behind weights
    size_t n_floats;  // its size in floats
    RunState state;
    char *dir;        // the checkpoint folder, as given (build_model copies it)
} Model;

// Hidden states to capture during a forward pass (NULL = none): the residual stream of the
// tokens idx[0..n_idx) at every sublayer boundary. Boundary 2l is layer l's input, 2l+1 is
// between its attention and its MLP, 2L is the last layer's output (before the final norm).
typedef struct {
    int n_idx;
    const int *idx;  // (n_idx) token indices within the pass
    float *states;   // (2 * n_layers + 1, n_idx, dim) host memory, filled by forward
} Capture;

// Loads config.json and model.safetensors (or a sharded model.safetensors.index.json) from dir.
// F32, F16 and BF16 tensors are converted to fp32. seq_len_cap > 0 limits the context.
// Returns 0, or -1 with one line in err naming the file/tensor and the problem.
int build_model(Model *m, const char *dir, int seq_len_cap, char *err);
void free_model(Model *m);

// Runs the n tokens at positions pos..pos+n-1 (n <= state.max_tokens) through the model under
// skip (NULL = full model). Writes the KV cache at slots pos..pos+n-1 of every attention that
// runs, and leaves logits (n, vocab_size) in state.logits_host. One n-token call gives bitwise
// the logits of n one-token calls. With state.use_graphs a pass of a shape seen before replays
// its captured CUDA graph (the same kernels: the same bits).
void forward(Model *m, const int *tokens, int n, int pos, const SkipSet *skip,
             const TokenTree *tree, Capture *capture);

// ----------------------------------------------------------------------------
// tokenizer: tokenizer.json, the two BPE recipes of LLaMA checkpoints (SentencePiece-style with
// byte fallback, byte-level); any other is refused by name

typedef struct Tokenizer Tokenizer; // defined in selfspec.cu

// Streaming decoder state: bytes of an incomplete UTF-8 character are held until complete.
typedef struct {
    unsigned char pending[8];
    int n_pending;
    int at_start; // no text emitted yet (SentencePiece decoders strip one leading space)
} DecodeState;

Tokenizer *build_tokenizer(const char *path, char *err);
void free_tokenizer(Tokenizer *t);
int tokenizer_vocab_size(const Tokenizer *t);
// Encodes len bytes of text; adds BOS when the tokenizer's post-processor does and add_special.
// Returns the number of ids written (at most max_ids), or -1 with err set.
int encode(const Tokenizer *t, const char *text, size_t len, int add_special, int *ids,
           int max_ids, char *err);
// Appends the text of one token to out (at most cap bytes, NUL-terminated), holding back an
// incomplete UTF-8 sequence in st. Returns the number of bytes written.
size_t decode_token(const Tokenizer *t, DecodeState *st, int id, char *out, size_t cap);
// The end of the text: a character still incomplete in st becomes U+FFFD, as in HF's decode
// (once for a byte-level decoder, once per byte for byte fallback). Returns the bytes written.
size_t decode_end(const Tokenizer *t, DecodeState *st, char *out, size_t cap);

// ----------------------------------------------------------------------------
// sampling

typedef struct {
    uint64_t state; // xorshift64* (Vigna 2014); never 0
} Rng;

void rng_seed(Rng *r, uint64_t seed);
float rng_uniform(Rng *r); // [0, 1), 24 random bits

#ifdef __cplusplus
}
#endif
#endif // SELFSPEC_H
