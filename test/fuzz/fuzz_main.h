// fuzz_main.h: libFuzzer's two entry points, the same for every target. A target's file ends with
//   #ifndef FUZZ_NO_ENTRY
//   static const FuzzTarget fuzz_this = {NAME_init, NAME_one};
//   #include "fuzz_main.h"
//   #endif
// test/test_fuzz_regressions.c includes every target with FUZZ_NO_ENTRY defined, so that one
// program holds no entry points and calls each target's functions itself.
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_this.init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_this.one(data, size); }
