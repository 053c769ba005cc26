// testing.h: the few helpers every test file shares. A test file does
//   #define TESTING
//   #include "../selfspec.cu"
//   #include "testing.h"
// so it reaches every internal function, counts checks with check(), and ends main with
// `return test_summary("name");`, which prints "N passed, M failed" and returns non-zero on failure.
#ifndef SELFSPEC_TESTING_H
#define SELFSPEC_TESTING_H

#include <stdarg.h>
#include <stdio.h>

static int tests_passed, tests_failed;

// Counts one check; on failure prints what differed (the message) and keeps going.
static int check(int ok, const char *fmt, ...) {
    if (ok) {
        tests_passed++;
        return 1;
    }
    tests_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 0;
}

static int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tests_passed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}

#endif
