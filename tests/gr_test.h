/* gr_test.h — the few macros the C unit tests use. Each test file is one
 * executable: it runs its cases, prints "N passed, N failed" and exits
 * non-zero when anything failed; when nothing failed but a part could not
 * run here (gr_test_skip: a missing dataset or tool), it exits 77, which
 * tests/CMakeLists.txt declares as every test's SKIP_RETURN_CODE. */
#ifndef GR_TEST_H
#define GR_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int gr_test_passed, gr_test_failed;
static char gr_test_skipped[512]; /* why a part did not run; "" = all ran */

#define GR_TEST_SKIP_CODE 77

#define CHECK(cond) do { \
    if (cond) gr_test_passed++; \
    else { gr_test_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_MSG(cond, ...) do { \
    if (cond) gr_test_passed++; \
    else { gr_test_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, rtol, atol) do { \
    double ga_ = (double)(a), gb_ = (double)(b); \
    if (fabs(ga_ - gb_) <= (atol) + (rtol) * fabs(gb_)) gr_test_passed++; \
    else { gr_test_failed++; fprintf(stderr, "%s:%d: CHECK_CLOSE failed: %s = %.9g, %s = %.9g\n", \
                                     __FILE__, __LINE__, #a, ga_, #b, gb_); } \
} while (0)

#define CHECK_STR_CONTAINS(hay, needle) do { \
    const char *gh_ = (hay), *gn_ = (needle); \
    if (gh_ && strstr(gh_, gn_)) gr_test_passed++; \
    else { gr_test_failed++; fprintf(stderr, "%s:%d: expected \"%s\" to contain \"%s\"\n", \
                                     __FILE__, __LINE__, gh_ ? gh_ : "(null)", gn_); } \
} while (0)

/* A part of the test cannot run here (a missing dataset or tool): says
 * "SKIP: <why>" now and makes the test report skipped unless a check fails. */
static inline void gr_test_skip(const char *why) {
    printf("SKIP: %s\n", why);
    if (!gr_test_skipped[0]) snprintf(gr_test_skipped, sizeof gr_test_skipped, "%s", why);
}

static inline int gr_test_report(void) {
    printf("%d passed, %d failed\n", gr_test_passed, gr_test_failed);
    if (gr_test_failed) return 1;
    if (gr_test_skipped[0]) {
        printf("SKIP: %s (the checks above passed)\n", gr_test_skipped);
        return GR_TEST_SKIP_CODE;
    }
    return 0;
}

#endif
