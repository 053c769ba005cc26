# selfspec: one source, two builds. `make help` lists the targets.
CC ?= cc
CXX ?= c++
NVCC ?= nvcc
# CPU build: selfspec.cu compiled as C11 with OpenMP; kernels run as a host loop over the grid.
# -ffp-contract=off: without it gcc fuses a*b+c into an FMA in some vectorized paths and not in
# their scalar tails, so one element could round differently depending on how many tokens a pass
# holds, and greedy self-speculative decoding would no longer be bit-exact.
CFLAGS ?= -O3 -march=native
CFLAGS += -std=gnu11 -ffp-contract=off -fopenmp -Wall -Wextra -Wno-unused-function -I.
LDLIBS = -lm
# GPU build: the same file through nvcc. sm_80 code plus PTX, which newer GPUs JIT-compile.
CUDA_ARCH ?= sm_80
NVCCFLAGS ?= -O3 -arch=$(CUDA_ARCH) -I. -Xcompiler -Wall,-Wno-unused-function
TESTS = test/test_forward test/test_tokenizer test/test_decode
HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)

.PHONY: all cuda test test-cuda demo bench help clean

# the CPU binary ./selfspec
all: selfspec

selfspec: selfspec.cu selfspec.h
	$(CC) $(CFLAGS) -x c selfspec.cu -o $@ $(LDLIBS)

# the GPU binary ./selfspec-cuda (needs nvcc; compiles and links without a GPU)
cuda: selfspec-cuda

selfspec-cuda: selfspec.cu selfspec.h
ifeq ($(HAVE_NVCC),)
	@echo "make cuda: nvcc not found on PATH; install the CUDA toolkit or set NVCC=/path/to/nvcc" && false
else
	$(NVCC) $(NVCCFLAGS) selfspec.cu -o $@
endif

# each test includes selfspec.cu (#define TESTING) and reaches every internal function
test/test_%: test/test_%.c selfspec.cu selfspec.h test/testing.h
	$(CC) $(CFLAGS) -x c $< -o $@ $(LDLIBS)

# the whole suite on the CPU build: also compiles every test once as C++, so nothing that
# nvcc rejects creeps in; ends with one line "N passed, M failed"
test: selfspec $(TESTS)
	@for t in $(TESTS); do $(CXX) -x c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Wno-unused-function -I. $$t.c || exit 1; done
	@sh test/run_tests.sh $(TESTS)

# the same reference tests on the GPU build (run on a machine with an NVIDIA GPU)
test-cuda:
	$(NVCC) $(NVCCFLAGS) -x cu test/test_forward.c -o test/test_forward_cuda
	$(NVCC) $(NVCCFLAGS) -x cu test/test_decode.c -o test/test_decode_cuda
	@sh test/run_tests.sh test/test_forward_cuda test/test_decode_cuda

# a continuation from the default model (the trained KJV model in tiny_models/)
demo: selfspec
	./selfspec -p "In the beginning God created" -n 48

help:
	@sed -n 's/^# //p' Makefile | head -40

clean:
	rm -f selfspec selfspec-cuda $(TESTS) test/*_cuda
