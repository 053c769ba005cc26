// draft_instructions: how many instructions a one-token draft pass executes against a full one,
// counted by valgrind rather than timed (a count does not depend on the machine's load). It runs
// N one-token forward passes of tiny_models/kjv-12l after an 8-token prefill, with no sublayer
// skipped ("full"), under the demo's set ("skip": attn 2,4,6,8,10, mlp 3,5,7,9), or under it with
// the draft's per-token work after each pass ("draft": top1_prob's softmax, which the exit rule
// reads, and the argmax). A pass's count is (count at N = 40 - count at N = 0) / 40. From the
// repository root (valgrind knows no AVX-512, hence x86-64-v3), one command a line:
//   cc -O3 -march=x86-64-v3 -std=gnu11 -ffp-contract=off -fopenmp -I. -x c
//      test/bench/draft_instructions.c -o /tmp/draft_instructions -lm
//   for w in full skip draft; do for n in 0 40; do N=$n OMP_NUM_THREADS=1 valgrind
//      --tool=callgrind --callgrind-out-file=/tmp/cg.$w.$n /tmp/draft_instructions $w 2>&1
//      | grep Collected; done; done
// When this file was added (gcc 12.2, valgrind 3.19): full 5.620 M instructions a pass, skip
// 3.761 M (0.669 of full; the set's weight share is 0.673), draft 3.866 M (0.688).
#define TESTING
#include "../../selfspec.cu"

int main(int argc, char **argv) {
    Model m;
    char err[SS_ERR_LEN];
    memset(&m, 0, sizeof(m));
    if (build_model(&m, "tiny_models/kjv-12l", 512, err)) {
        fprintf(stderr, "draft_instructions: %s (run from the repository root)\n", err);
        return 1;
    }
    const char *what = argc > 1 ? argv[1] : "full";
    SkipSet skip;
    memset(&skip, 0, sizeof(skip));
    for (int l = 2; l <= 10; l += 2) { skip.attn[l] = strcmp(what, "full") != 0; }
    for (int l = 3; l <= 9; l += 2) { skip.mlp[l] = strcmp(what, "full") != 0; }
    int prompt[8] = {1, 361, 323, 407, 456, 383, 1357, 300}, row, token = 428;
    int n = getenv("N") ? atoi(getenv("N")) : 40;
    prefill(&m, prompt, 8, NULL, NULL, &row);
    for (int pos = 8; pos < 8 + n; pos++) {
        forward(&m, &token, 1, pos, &skip, NULL, NULL);
        if (strcmp(what, "draft") == 0) { // what draft_tokens does with each draft pass's logits
            volatile float confidence = top1_prob(m.state.logits_host, m.config.vocab_size);
            volatile int next = argmax(m.state.logits_host, m.config.vocab_size);
            (void)confidence, (void)next;
        }
    }
    free_model(&m);
    return 0;
}
