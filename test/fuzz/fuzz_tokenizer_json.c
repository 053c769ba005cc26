// fuzz_tokenizer_json: the input is a tokenizer.json; build_tokenizer loads it (JSON, vocab,
// merges, added tokens, normalizer, pre-tokenizer, post-processor, decoder). A tokenizer that
// loads then encodes a fixed text with every kind of character and decodes each id it gave,
// which reaches whatever the loader left inconsistent.
#ifndef FUZZ_NO_ENTRY // test/test_fuzz_regressions.c includes every target, without entry points
#define TESTING
#include "../../selfspec.cu"
#endif
#include "fuzz_util.h"

static const char SAMPLE[] = "Hello, world! It's 2024:  1234567 \xC3\xA9t\xC3\xA9 \xE2\x96\x81x\r\n\t"
                             "<s></s><|begin_of_text|> \xF0\x9F\x98\x80 \xFF\xC0 \xE2\x82 end";

static void tokenizer_json_init(void) {}

static int tokenizer_json_one(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("tokenizer.json", data, size);
    char err[SS_ERR_LEN];
    Tokenizer *t = build_tokenizer(path, err);
    if (t == NULL) { return 0; }
    int ids[512];
    int n = encode(t, SAMPLE, sizeof(SAMPLE) - 1, 1, ids, 512, err);
    DecodeState st;
    decode_begin(&st);
    char out[64];
    for (int k = 0; k < n; k++) { decode_token(t, &st, ids[k], out, sizeof(out)); }
    for (int id = -1; id <= tokenizer_vocab_size(t) && id < 300; id++) { decode_token(t, &st, id, out, sizeof(out)); }
    free_tokenizer(t);
    return 0;
}

#ifndef FUZZ_NO_ENTRY
static const FuzzTarget fuzz_this = {tokenizer_json_init, tokenizer_json_one};
#include "fuzz_main.h"
#endif
