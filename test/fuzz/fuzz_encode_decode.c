// fuzz_encode_decode: encoding and decoding arbitrary bytes (invalid UTF-8 included) with the
// tiny models' real tokenizers. The first input byte picks the tokenizer (Llama 2 SentencePiece
// BPE with byte fallback, or Llama 3 byte-level BPE) and the options; the rest is the text.
// Checks, beyond the sanitizers: every id is in the vocab, each decoded piece fits and is
// NUL-terminated, and text that is valid UTF-8 and holds no added-token text decodes back to
// itself (both tokenizers keep every byte: byte-level BPE, and byte fallback with the legacy
// SentencePiece normalizer whose decoder strips the one space it prepends), except that
// SentencePiece decodes a "▁" in the text as a space.
#ifndef FUZZ_NO_ENTRY // test/test_fuzz_regressions.c includes every target, without entry points
#define TESTING
#include "../../selfspec.cu"
#endif
#include "fuzz_util.h"

static Tokenizer *tokenizers[2];

static void encode_decode_init(void) {
    static const char *const paths[2] = {"tiny_models/llama2-tiny-random/tokenizer.json",
                                         "tiny_models/llama3-tiny-random/tokenizer.json"};
    char err[SS_ERR_LEN];
    for (int k = 0; k < 2; k++) {
        tokenizers[k] = build_tokenizer(paths[k], err);
        if (tokenizers[k] == NULL) {
            fprintf(stderr, "fuzz_encode_decode: %s (run from the repository root)\n", err);
            exit(1);
        }
    }
}

static int valid_utf8(const char *s, size_t len) {
    int cp;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_decode(s, len, i, &cp);
        if (cp < 0) { return 0; }
        i += n;
    }
    return 1;
}

static int encode_decode_one(const uint8_t *data, size_t size) {
    if (size == 0) { return 0; }
    const Tokenizer *t = tokenizers[data[0] & 1];
    int add_special = (data[0] >> 1) & 1, small = (data[0] >> 2) & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int max_ids = small ? (int)(len / 4) : (int)len + 16; // small: make encode run out of room
    int *ids = (int *)malloc_check(((size_t)max_ids + 1) * sizeof(int));
    char err[SS_ERR_LEN];
    int n = encode(t, text, len, add_special, ids, max_ids, err);
    if (n > max_ids) { abort(); }
    // decode into a buffer that is sometimes too small, one token at a time
    size_t cap = small ? 8 : 4 * len + 64, got = 0;
    char *out = (char *)malloc_check(cap + 1), piece[64];
    DecodeState st;
    decode_begin(&st);
    for (int k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= tokenizer_vocab_size(t)) { abort(); }
        size_t m = decode_token(t, &st, ids[k], piece, small ? 3 : sizeof(piece));
        if (m >= (small ? 3 : sizeof(piece)) || piece[m] != '\0') { abort(); } // fits, NUL-terminated
        if (got + m <= cap) { memcpy(out + got, piece, m), got += m; }
    }
    // round trip on valid text that has no added token in it (nor, for SentencePiece, a "▁",
    // which decodes as a space)
    int has_added = 0;
    for (size_t i = 0; !t->byte_level && i < len && !has_added; i++) {
        has_added = starts_with(text + i, len - i, SPACE_MARK, 3);
    }
    for (int a = 0; a < t->n_added; a++) {
        const TokenText *x = t->added[a];
        for (size_t i = 0; i + (size_t)x->len <= len && !has_added; i++) {
            has_added = memcmp(text + i, x->text, (size_t)x->len) == 0;
        }
    }
    if (!small && n >= 0 && !has_added && valid_utf8(text, len) &&
        (got != len || memcmp(out, text, len) != 0)) {
        fprintf(stderr, "round trip failed: %zu bytes in, %zu out\n", len, got);
        abort();
    }
    // arbitrary ids, in range or not
    for (size_t i = 0; i + 2 <= len; i += 2) {
        int id = (int)((unsigned char)text[i] | (unsigned char)text[i + 1] << 8) - 8;
        decode_token(t, &st, id, piece, 1 + (size_t)(unsigned char)text[i] % sizeof(piece));
    }
    free(out);
    free(ids);
    return 0;
}

#ifndef FUZZ_NO_ENTRY
static const FuzzTarget fuzz_this = {encode_decode_init, encode_decode_one};
#include "fuzz_main.h"
#endif
