// test_fuzz_regressions: every input the fuzzers ever crashed on (test/fuzz/regressions/TARGET/,
// minimized) and every seed (test/fuzz/corpus/TARGET/), run once through the fuzz targets'
// own code. Under `make test-asan` the sanitizers watch each run; a crash fails the suite.
#define TESTING
#include "../selfspec.cu"
#include "testing.h"
#define FUZZ_NO_ENTRY
#include "fuzz/fuzz_safetensors.c"
#include "fuzz/fuzz_config.c"
#include "fuzz/fuzz_tokenizer_json.c"
#include "fuzz/fuzz_encode_decode.c"

#include <dirent.h>

typedef int (*FuzzOne)(const uint8_t *data, size_t size);

// Runs every file of folder through one; returns how many ran.
static int run_folder(const char *folder, FuzzOne one) {
    DIR *d = opendir(folder);
    if (d == NULL) { return 0; }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') { continue; }
        char path[1024], err[SS_ERR_LEN];
        size_t len;
        snprintf(path, sizeof(path), "%s/%s", folder, e->d_name);
        char *data = read_file(path, &len, err);
        if (!check(data != NULL, "%s", err)) { continue; }
        one((const uint8_t *)data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    static const char *const names[] = {"safetensors", "config", "tokenizer_json", "encode_decode"};
    void (*inits[])(void) = {safetensors_init, config_init, tokenizer_json_init, encode_decode_init};
    FuzzOne ones[] = {safetensors_one, config_one, tokenizer_json_one, encode_decode_one};
    for (int k = 0; k < 4; k++) {
        char folder[256];
        inits[k]();
        snprintf(folder, sizeof(folder), "test/fuzz/regressions/%s", names[k]);
        int crashers = run_folder(folder, ones[k]);
        snprintf(folder, sizeof(folder), "test/fuzz/corpus/%s", names[k]);
        int seeds = run_folder(folder, ones[k]);
        check(seeds > 0, "%s: no seeds in %s (run from the repository root)", names[k], folder);
        printf("%s: %d crash inputs and %d seeds ran\n", names[k], crashers, seeds);
    }
    for (int k = 0; k < 2; k++) { free_tokenizer(tokenizers[k]); }
    return test_summary("test_fuzz_regressions");
}
