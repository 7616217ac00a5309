/* test_spec_limits.c — the job-spec reader at its limits (issue 23, items 5, 8, 9):
 *   maps of many keys: a duplicate among 199,999 keys is found at its line, naming the first
 *     (a linear scan per key made this minutes), every key is found again (the hash index,
 *     across its growth at 16 keys and in copies), unknown keys of a huge spec are reported;
 *     anchors likewise: an alias takes the newest anchor of its name, 90,000 of each stop at
 *     the node cap at once (a scan per alias took 15 s);
 *   path lengths: log.dir and checkpoint.dir at most 1000 bytes (GR_DIR_MAX), file paths
 *     (data.train.path, model.init_from) at most 1023, an over-long value an error at its
 *     file:line:col naming the key and the limit;
 *   counts past their range: --set integers past int64, parallel.bucket_mb past 1 TiB. */
#include "../config/cfg_internal.h"
#include "../config/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gr_test.h"

#define SPEC(f) GR_TEST_DIR "/specs/" f

/* "k0: 0\nk1: 1\n..." for keys [0, n), then extra (may be ""); malloc'ed. */
static char *keys_text(int n, const char *extra) {
    size_t cap = (size_t)n * 24 + strlen(extra) + 1, len = 0;
    char *t = malloc(cap);
    for (int i = 0; i < n; i++) len += (size_t)snprintf(t + len, cap - len, "k%d: %d\n", i, i);
    snprintf(t + len, cap - len, "%s", extra);
    return t;
}

/* Every key k0..k(n-1) of map found at its index; an absent one not. */
static bool all_found(const gr_cfg *map, int n) {
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%d", i);
        if (gr_cfg_find(map, key) != i || gr_cfg_get(map, key) != map->items[i]) return false;
    }
    snprintf(key, sizeof key, "k%d", n);
    return gr_cfg_find(map, key) == -1 && gr_cfg_find(map, "") == -1;
}

static void test_big_map(void) {
    gr_error e = {0};
    gr_cfg *root = NULL;
    /* 199,998 keys and k5 again: the error at line 199,999, naming line 6 */
    char *t = keys_text(199998, "k5: 2\n");
    CHECK(gr_cfg_parse_text(t, "big.yaml", 1, 1, &root, &e) == GR_ERR_USAGE && root == NULL);
    CHECK_STR_CONTAINS(e.msg, "big.yaml:199999:1: k5: duplicate key (first given at line 6)");
    free(t);
    /* 199,999 distinct keys: parsed, each found */
    t = keys_text(199999, "");
    CHECK(gr_cfg_parse_text(t, "big.yaml", 1, 1, &root, &e) == GR_OK && root && root->n == 199999);
    CHECK(root && all_found(root, 199999));
    gr_cfg *copy = gr_cfg_clone(root);
    CHECK(copy && all_found(copy, 199999));
    gr_cfg_free(copy);
    gr_cfg_free(root);
    free(t);
}

/* Around the size where a map starts its index (16 keys): a duplicate of
 * each earlier key is found at its line, and appends keep the index. */
static void test_index_threshold(void) {
    for (int n = 1; n <= 40; n++) {
        for (int d = 0; d < n; d += n > 20 ? 7 : 1) {
            char extra[48], want[96];
            snprintf(extra, sizeof extra, "k%d: dup\n", d);
            char *t = keys_text(n, extra);
            gr_error e = {0};
            gr_cfg *root = NULL;
            gr_status st = gr_cfg_parse_text(t, "t.yaml", 1, 1, &root, &e);
            snprintf(want, sizeof want, "t.yaml:%d:1: k%d: duplicate key (first given at line %d)", n + 1, d, d + 1);
            CHECK_MSG(st == GR_ERR_USAGE && strstr(e.msg, want), "n %d, duplicate k%d: %s", n, d, e.msg);
            free(t);
        }
    }
    gr_cfg *map = gr_cfg_new(GR_CFG_MAP, "t", 1, 1);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "k%d", i);
        gr_cfg_map_append(map, gr_xstrdup(key), i + 1, 1, gr_cfg_new(GR_CFG_SCALAR, "t", i + 1, 4));
        if (i == 14 || i == 15 || i == 16 || i == 63 || i == 64 || i == 999) CHECK_MSG(all_found(map, i + 1), "%d keys", i + 1);
    }
    gr_cfg_free(map);
}

/* Anchors: indexed like keys, an alias takes the newest anchor of its name
 * (below and above the index's 16 names); 90,000 anchors and aliases stop at
 * the node cap, at the alias that passes it. */
static void test_anchors(void) {
    for (int n = 4; n <= 40; n += 36) {
        size_t cap = (size_t)n * 48 + 64, len = 0;
        char *t = malloc(cap);
        for (int i = 0; i < n; i++) len += (size_t)snprintf(t + len, cap - len, "k%d: &a%d %d\n", i, i, i);
        len += (size_t)snprintf(t + len, cap - len, "again: &a3 103\n");
        for (int i = 0; i < n; i++) len += (size_t)snprintf(t + len, cap - len, "x%d: *a%d\n", i, i);
        gr_error e = {0};
        gr_cfg *root = NULL;
        CHECK_MSG(gr_cfg_parse_text(t, "a.yaml", 1, 1, &root, &e) == GR_OK, "%d anchors: %s", n, e.msg);
        const gr_cfg *x3 = gr_cfg_get(root, "x3"), *x2 = gr_cfg_get(root, "x2");
        char last[16];
        snprintf(last, sizeof last, "x%d", n - 1);
        const gr_cfg *xl = gr_cfg_get(root, last);
        CHECK(x3 && !strcmp(x3->scalar, "103") && x2 && !strcmp(x2->scalar, "2"));
        CHECK(xl && atoi(xl->scalar) == (n - 1 == 3 ? 103 : n - 1));
        gr_cfg_free(root);
        free(t);
    }
    size_t cap = 90000 * 40, len = 0;
    char *t = malloc(cap);
    for (int i = 0; i < 90000; i++) len += (size_t)snprintf(t + len, cap - len, "a%d: &x%d 1\n", i, i);
    for (int i = 0; i < 90000; i++) len += (size_t)snprintf(t + len, cap - len, "b%d: *x%d\n", i, i);
    gr_error e = {0};
    gr_cfg *root = NULL;
    CHECK(gr_cfg_parse_text(t, "a.yaml", 1, 1, &root, &e) == GR_ERR_USAGE && !root);
    CHECK_STR_CONTAINS(e.msg, "a.yaml:145000:9: b54999: alias '*x54999' expands to more than 200000 YAML nodes");
    free(t);
}

/* A spec of many unknown keys: the first one is the error, at once. */
static void test_big_spec(void) {
    char path[] = "/tmp/gr_test_spec_limits_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    char *t = keys_text(199999, "");
    CHECK(write(fd, t, strlen(t)) == (ssize_t)strlen(t));
    close(fd);
    free(t);
    gr_job_spec s;
    gr_error e = {0};
    CHECK(gr_spec_load(path, NULL, 0, &s, &e) == GR_ERR_USAGE);
    char want[96];
    snprintf(want, sizeof want, "%s:1:1: k0: unknown key", path);
    CHECK_STR_CONTAINS(e.msg, want);
    unlink(path);
}

/* --set KEY=<n times c> on valid_min.yaml: its status, and the message in msg. */
static gr_status set_long(const char *key, size_t n, char *msg, size_t cap) {
    size_t klen = strlen(key);
    char *set = malloc(klen + n + 2);
    memcpy(set, key, klen);
    set[klen] = '=';
    set[klen + 1] = '/';
    memset(set + klen + 2, 'd', n - 1);
    set[klen + 1 + n] = '\0';
    const char *sets[1] = {set};
    gr_job_spec s;
    gr_error e = {0};
    gr_status st = gr_spec_load(SPEC("valid_min.yaml"), sets, 1, &s, &e);
    if (!st) gr_spec_free(&s);
    snprintf(msg, cap, "%s", st ? e.msg : "");
    free(set);
    return st;
}

static void test_path_lengths(void) {
    static const struct {
        const char *key;
        size_t max;
    } rows[] = {{"log.dir", GR_DIR_MAX}, {"checkpoint.dir", GR_DIR_MAX}, {"data.train.path", GR_PATH_MAX - 1},
                {"data.val.path", GR_PATH_MAX - 1}, {"model.init_from", GR_PATH_MAX - 1}};
    CHECK(GR_DIR_MAX == 1000 && GR_PATH_MAX - 1 == 1023);
    for (size_t i = 0; i < GR_ARRAY_LEN(rows); i++) {
        char msg[GR_ERROR_MSG_MAX], want[128];
        CHECK_MSG(set_long(rows[i].key, rows[i].max, msg, sizeof msg) == GR_OK, "%s of %zu bytes: %s", rows[i].key,
                  rows[i].max, msg);
        CHECK(set_long(rows[i].key, rows[i].max + 1, msg, sizeof msg) == GR_ERR_USAGE);
        snprintf(want, sizeof want, "--set:1:1: %s: %zu bytes long; the limit is %zu bytes", rows[i].key, rows[i].max + 1,
                 rows[i].max);
        CHECK_STR_CONTAINS(msg, want);
        CHECK(set_long(rows[i].key, 5000, msg, sizeof msg) == GR_ERR_USAGE);
        CHECK_STR_CONTAINS(msg, "the limit is");
    }
}

static void test_counts(void) {
    static const struct {
        const char *set, *expect; /* expect NULL: accepted */
    } rows[] = {
        {"seed=9223372036854775807", NULL},
        {"seed=9223372036854775808", "--set:1:1: seed: integer out of range, got 9223372036854775808"},
        {"seed=18446744073709551616", "--set:1:1: seed: integer out of range, got 18446744073709551616"},
        {"train.steps=99999999999999999999", "--set:1:1: train.steps: integer out of range, got 99999999999999999999"},
        {"data.workers=4294967298", "--set:1:1: data.workers: expected auto or an integer <= 256, got 4294967298"},
        {"parallel.bucket_mb=1048576", NULL},
        {"parallel.bucket_mb=1048577", "--set:1:1: parallel.bucket_mb: must be in [0, 1048576], got 1048577"},
        {"parallel.bucket_mb=1e300", "--set:1:1: parallel.bucket_mb: must be in [0, 1048576], got 1e300"},
        {"model.input=[1, 8, 18446744073709551617]", "--set:1:8: model.input[2]: integer out of range"},
    };
    for (size_t i = 0; i < GR_ARRAY_LEN(rows); i++) {
        const char *sets[1] = {rows[i].set};
        gr_job_spec s;
        gr_error e = {0};
        gr_status st = gr_spec_load(SPEC("valid_min.yaml"), sets, 1, &s, &e);
        if (!st) gr_spec_free(&s);
        if (!rows[i].expect) CHECK_MSG(st == GR_OK, "--set %s: %s", rows[i].set, e.msg);
        else CHECK_MSG(st == GR_ERR_USAGE && strstr(e.msg, rows[i].expect), "--set %s: %s", rows[i].set, e.msg);
    }
}

int main(void) {
    test_big_map();
    test_index_threshold();
    test_anchors();
    test_big_spec();
    test_path_lengths();
    test_counts();
    return gr_test_report();
}
