# selfspec: one source, two builds. `make help` lists the targets.
CC ?= cc
CXX ?= c++
NVCC ?= nvcc
# the benchmarks' Python (make bench PYTHON=/path/to/venv/bin/python)
PYTHON ?= python3
# CPU build: selfspec.cu compiled as C11 with OpenMP; kernels run as a host loop over the grid.
# -ffp-contract=off: without it gcc fuses a*b+c into an FMA in some vectorized paths and not in
# their scalar tails, so one element could round differently depending on how many tokens a pass
# holds, and greedy self-speculative decoding would no longer be bit-exact.
CFLAGS ?= -O3 -march=native $(X86_FLAGS)
CFLAGS += -std=gnu11 -ffp-contract=off -fopenmp -Wall -Wextra -Wno-unused-function -I.
# x86-64 with AVX-512: gcc's 512-bit code for the matmul's partial sums ran ~5x slower than 256-bit
# code (measured in test/bench/README.md), so ask for 256-bit vectors.
X86_FLAGS := $(if $(filter x86_64,$(shell uname -m)),-mprefer-vector-width=256,)
LDLIBS = -lm
# GPU build: the same file through nvcc. sm_80 code plus PTX, which newer GPUs JIT-compile.
# -fmad=false: nvcc otherwise fuses a*b+c into one FMA (one rounding instead of two), and the GPU
# would no longer do the CPU build's arithmetic (-ffp-contract=off above), which the tests show
# bitwise on the CPU through the launch shim. A memory-bound matmul loses nothing by it
# (PERFORMANCE_NOTES.md: the warp-per-row GEMV ran as fast with -fmad=false).
CUDA_ARCH ?= sm_80
NVCCFLAGS ?= -O3 -arch=$(CUDA_ARCH) -fmad=false -I. -Xcompiler -Wall,-Wno-unused-function
# the bench tools: a pass's cost by its token count; the oracle, a baseline search in no paper
BENCH = test/bench/verify_cost test/bench/oracle
TESTS = test/test_forward test/test_tokenizer test/test_decode test/test_select
# hardening: the fuzzers' crash inputs and seeds, and bad files and flags given to ./selfspec
TESTS += test/test_fuzz_regressions test/test_bad_inputs
# what a new user meets first: --threads, --help, --json lines, progress, Ctrl-C in a search
TESTS += test/test_cli
# --trace: the reference traces in test/refs/traces/ regenerated and diffed, rounds against summaries
TESTS += test/test_trace
# documented behaviours stated as properties: top-p against a brute-force nucleus, the exit rule,
# CLaSp's DP slot and context end, SWIFT's window, best set, patience, ratio rule and budget
TESTS += test/test_properties
# the pictures drawn from a trace (test/bench/draw_trace.py): run by make test when python3 is
# there, so the C suite never needs Python
HAVE_PYTHON3 := $(shell command -v python3 2>/dev/null)
DRAW_TEST := $(if $(HAVE_PYTHON3),test/test_draw_trace.py,)
# the porter's trace diff (test/trace_diff.py): each field class, and traces from an FMA build
TRACE_DIFF_TEST := $(if $(HAVE_PYTHON3),test/test_trace_diff.py,)
# README.md's examples run again: their deterministic lines and the prose's numbers must match
TESTS += test/test_readme
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
# jsmn.h, the one-header JSON tokenizer: next to selfspec.cu (found through -I.) or on the system
# include path; every build of selfspec.cu starts with this check
HAVE_JSMN := $(shell $(CC) -I. -E -x c /dev/null -include jsmn.h >/dev/null 2>&1 && echo yes)
JSMN_CHECK = $(if $(HAVE_JSMN),@true,@echo "jsmn.h not found: install libjsmn-dev (Debian/Ubuntu), or put the single header from https://github.com/zserge/jsmn (jsmn.h) next to selfspec.cu" && false)
CUDA_TESTS = test/test_forward_cuda test/test_decode_cuda test/test_select_cuda

.PHONY: all cuda cuda-tests test test-build bug-zoo test-draw test-big test-cuda test-asan test-asan-quick asan-build print-tests fuzz demo bench bench-guard bench-gpu device-check help clean

# the CPU binary ./selfspec
all: selfspec

selfspec: selfspec.cu selfspec.h
	$(JSMN_CHECK)
	$(CC) $(CFLAGS) -x c selfspec.cu -o $@ $(LDLIBS)

# the GPU binary ./selfspec-cuda (needs nvcc; compiles and links without a GPU)
cuda: selfspec-cuda

selfspec-cuda: selfspec.cu selfspec.h
ifeq ($(HAVE_NVCC),)
	@echo "make cuda: nvcc not found on PATH; install the CUDA toolkit or set NVCC=/path/to/nvcc" && false
else
	$(JSMN_CHECK)
	$(NVCC) $(NVCCFLAGS) selfspec.cu -o $@
endif

# each test includes selfspec.cu (#define TESTING) and reaches every internal function
test/test_%: test/test_%.c selfspec.cu selfspec.h test/testing.h
	$(JSMN_CHECK)
	$(CC) $(CFLAGS) -x c $< -o $@ $(LDLIBS)

# the whole suite on the CPU build: also compiles every test once as C++, so nothing that
# nvcc rejects creeps in, and builds the bench tools, so a path they include cannot rot unseen;
# ends with one line "N passed, M failed". Each program streams its output and runs on one thread
# unless OMP_NUM_THREADS says otherwise (test/testing.h).
test: selfspec $(TESTS) $(BENCH)
	@for t in $(TESTS); do $(CXX) -x c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Wno-unused-function -I. $$t.c || exit 1; done
	@$(if $(HAVE_PYTHON3),true,echo "make test: python3 not found, test/test_draw_trace.py and test/test_trace_diff.py skipped")
	@sh test/run_tests.sh $(TESTS) $(DRAW_TEST) $(TRACE_DIFF_TEST)

# test/bench/draw_trace.py alone: a known trace drawn as well-formed SVG with its cells and bars,
# its layout (captions clear of what follows, a search's rows readable), and one error line per
# bad trace (python3, standard library only)
test-draw:
	@python3 test/test_draw_trace.py

# the whole suite again with AddressSanitizer and UBSan: the binary and the tests are built in
# build/asan/ and the tests run the sanitized ./selfspec through SELFSPEC_BIN (test/bench/oracle,
# which test_cli and test_readme run, is the normal build). Slow (the kernels'
# every load is checked; the programs run one at a time, on one core most of the time): at
# cc31654 on the idle 2-core machine, the build included, 55 min 42 s wall, 3,331 CPU-s, every
# program green (35,851 passed, 0 failed); test_decode about 25 minutes of it, test_readme about
# 15 (README's oracle example). CI runs test-asan-quick instead. A subset:
# make test-asan TESTS="test/test_x ..."
ASAN_FLAGS = -O2 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
ASAN_CFLAGS = $(ASAN_FLAGS) -std=gnu11 -ffp-contract=off -fopenmp -Wall -Wextra -Wno-unused-function -I.
build/asan/selfspec: selfspec.cu selfspec.h
	@mkdir -p build/asan/test
	$(CC) $(ASAN_CFLAGS) -x c selfspec.cu -o $@ $(LDLIBS)
build/asan/test/test_%: test/test_%.c selfspec.cu selfspec.h test/testing.h
	@mkdir -p build/asan/test
	$(CC) $(ASAN_CFLAGS) -x c $< -o $@ $(LDLIBS)
test/test_fuzz_regressions build/asan/test/test_fuzz_regressions: test/fuzz/fuzz_*.c test/fuzz/fuzz_util.h
test/test_select build/asan/test/test_select test/test_select_cuda: test/bench/oracle.c
ASAN_RUN = SELFSPEC_BIN=build/asan/selfspec ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	    UBSAN_OPTIONS=print_stacktrace=1 sh test/run_tests.sh $(TESTS:test/%=build/asan/test/%)
test-asan: build/asan/selfspec $(TESTS:test/%=build/asan/test/%) test/bench/oracle
	@$(ASAN_RUN)

# every test program once more under AddressSanitizer, UBSan and LeakSanitizer, on the reduced
# workload (SELFSPEC_TEST_QUICK=1, testing.h's quick(): fewer prompts, seeds and tokens, every
# test and path still reached); .ci/run runs it beside make test. Its time is in .ci/run.
test-asan-quick: build/asan/selfspec $(TESTS:test/%=build/asan/test/%) test/bench/oracle
	@SELFSPEC_TEST_QUICK=1 $(ASAN_RUN)

# what make test and the sanitized suites build, and nothing run: .ci/run builds both at once on
# every core (make -j2 test-build asan-build), then runs the suites side by side; print-tests
# lists the test programs (TESTS), so that .ci/run's sanitizer pass runs each of them
test-build: selfspec $(TESTS) $(BENCH)
asan-build: build/asan/selfspec $(TESTS:test/%=build/asan/test/%) test/bench/oracle
print-tests:
	@echo $(TESTS)

# fuzzing with clang's libFuzzer (ASan + UBSan): each target in test/fuzz/ runs FUZZ_SECONDS
# (default 60) or FUZZ_RUNS executions, whichever comes first; see test/fuzz/README.md
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 10000000
FUZZ_TARGETS = safetensors config tokenizer_json encode_decode
FUZZ_CFLAGS = -g -O1 -std=gnu11 -ffp-contract=off -Wall -Wextra -Wno-unused-function -Wno-unknown-pragmas \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.
test/fuzz/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz_util.h test/fuzz/fuzz_main.h selfspec.cu selfspec.h
	$(FUZZ_CC) $(FUZZ_CFLAGS) -x c $< -o $@ -lm
fuzz: $(FUZZ_TARGETS:%=test/fuzz/fuzz_%)
	@for t in $(FUZZ_TARGETS); do sh test/fuzz/run_fuzz.sh $$t $(FUZZ_SECONDS) $(FUZZ_RUNS) || exit 1; done

# the zoo of published speculative-decoding bugs (test/bug_zoo/README.md): each put into a copy
# of the tree as a find/replace patch, which must be caught by the property test it names; prints
# a table (bug, source, caught by, CPU seconds). Needs python3; a few minutes; CI does not run it
bug-zoo:
	@python3 test/bug_zoo/run.py

# the HF reference comparison on SmolLM2-135M (make it first with tiny_models/get_smollm2.sh)
test-big: test/test_forward
	@test -f tiny_models/smollm2-135m/config.json || { echo "make test-big: run tiny_models/get_smollm2.sh first"; false; }
	./test/test_forward smollm2

# every test program that runs the engine, built by nvcc and run on the GPU (needs an NVIDIA
# GPU to run; `make cuda-tests` only builds them)
test/test_%_cuda: test/test_%.c selfspec.cu selfspec.h test/testing.h
	$(JSMN_CHECK)
	$(NVCC) $(NVCCFLAGS) -x cu $< -o $@

# builds the CUDA test programs (nvcc; no GPU needed to build)
cuda-tests: $(CUDA_TESTS)

# runs the CUDA test programs on the GPU (their command-line checks run ./selfspec-cuda)
test-cuda: selfspec-cuda $(CUDA_TESTS)
	@sh test/run_tests.sh $(CUDA_TESTS)

# the benchmark tools; test/bench/bench.py runs them side by side (see test/bench/README.md)
test/bench/%: test/bench/%.c selfspec.cu selfspec.h
	$(CC) $(CFLAGS) -x c $< -o $@ $(LDLIBS)

# the benchmark tables of test/bench/README.md (test/bench/bench.py; SmolLM2 rows need
# tiny_models/get_smollm2.sh), then the peers (test/bench/peers.py: llama2.c's run.c when
# LLAMA2C=path/to/llama2.c, llama.cpp when llama-cpp-python is in PYTHON's venv, the copy
# bandwidth bound) and the speed guard
bench: selfspec $(BENCH)
	$(PYTHON) test/bench/bench.py
	$(PYTHON) test/bench/peers.py $(if $(LLAMA2C),--llama2c $(LLAMA2C),)
	sh test/bench/guard.sh $(BASE)

# the working tree's decoding speed beside commit BASE (default HEAD), side by side
# (test/bench/guard.sh), so a regression is seen before it lands
bench-guard: selfspec
	sh test/bench/guard.sh $(BASE)

# the GPU benchmark in one table (see test/bench/README.md): builds ./selfspec-cuda and
# test/bench/verify_cost_cuda, makes a random TinyLlama-shaped model if none is given, and compares
# with HF transformers on the same GPU when torch is there. Options: make bench-gpu BENCH_GPU_ARGS="..."
test/bench/verify_cost_cuda: test/bench/verify_cost.c selfspec.cu selfspec.h
	$(JSMN_CHECK)
	$(NVCC) $(NVCCFLAGS) -x cu $< -o $@

# the GPU benchmark table of test/bench/README.md (needs nvcc and an NVIDIA GPU)
bench-gpu: selfspec-cuda test/bench/verify_cost_cuda
	$(PYTHON) test/bench/bench_gpu.py $(BENCH_GPU_ARGS)

# what a lent GPU runs, in one go, under 8 minutes on an H200: the CUDA build, make test-cuda,
# bench_gpu.py part by part with time limits, a profile; writes the device section of
# test/bench/README.md (test/bench/device_check.sh; OUT=folder for its log and figures)
device-check:
	sh test/bench/device_check.sh $(OUT)

# self-speculative decoding with the default model (the trained KJV model in tiny_models/),
# checked against plain decoding in the same run
demo: selfspec
	./selfspec -p "And the LORD said unto Moses," -n 64 --skip "attn:2,4,6,8,10 mlp:3,5,7,9" --compare

# this list: each target with the comment of its paragraph, wrapped to 99 columns
help:
	@awk '/^# /{c = c (c ? " " : "") substr($$0, 3)} /^$$/{c = ""} \
	    /^[a-z-]+:/ && c {split($$0, t, ":"); line = sprintf("  make %-10s", t[1]); \
	    n = split(c, w, " "); for (i = 1; i <= n; i++) { \
	        if (length(line) + 1 + length(w[i]) > 99) { print line; line = sprintf("%17s", "") } \
	        line = line " " w[i] } print line; c = ""}' Makefile

# removes what the targets build, and best.json that the README's --save-skip example writes
clean:
	rm -f selfspec selfspec-cuda $(TESTS) test/*_cuda $(FUZZ_TARGETS:%=test/fuzz/fuzz_%) $(BENCH) test/bench/verify_cost_cuda best.json
	rm -rf build
