// fuzz_config: the input is a config.json; build_model reads it next to the micro model's
// model.safetensors (fuzz_util.h), which runs the config reader (sizes, heads, rope_scaling,
// token ids, unsupported options) and the checks of the weights against it. Sizes that do not
// match the micro model must be refused before anything is allocated for them.
#ifndef FUZZ_NO_ENTRY // test/test_fuzz_regressions.c includes every target, without entry points
#define TESTING
#include "../../selfspec.cu"
#endif
#include "fuzz_util.h"

static void config_init(void) {
    write_micro_safetensors();
}

static int config_one(const uint8_t *data, size_t size) { return fuzz_model_file("config.json", data, size); }

#ifndef FUZZ_NO_ENTRY
static const FuzzTarget fuzz_this = {config_init, config_one};
#include "fuzz_main.h"
#endif
