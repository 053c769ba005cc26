// fuzz_safetensors: the input is a model.safetensors file; build_model loads it next to the
// micro config.json (fuzz_util.h), which runs the header parser (length, JSON, dtypes, shapes,
// data_offsets, overlaps, a header or data past the end of the file) and then the checks of
// every tensor against the config (missing, duplicated, wrong shape) and the F32/F16/BF16
// conversion. A model that loads also runs one forward pass.
#ifndef FUZZ_NO_ENTRY // test/test_fuzz_regressions.c includes every target, without entry points
#define TESTING
#include "../../selfspec.cu"
#endif
#include "fuzz_util.h"

static void safetensors_init(void) {
    fuzz_write("config.json", MICRO_CONFIG, sizeof(MICRO_CONFIG) - 1);
}

static int safetensors_one(const uint8_t *data, size_t size) { return fuzz_model_file("model.safetensors", data, size); }

#ifndef FUZZ_NO_ENTRY
static const FuzzTarget fuzz_this = {safetensors_init, safetensors_one};
#include "fuzz_main.h"
#endif
