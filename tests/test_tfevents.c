/* test_tfevents.c — CRC-32C against published vectors, and tfevents files
 * read back record by record: both CRCs of every record, the Event/Summary
 * protobuf fields, corruption detection, and open errors. The reader here
 * is written from the format (tfevents.h), not from the writer's code. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../runner/tfevents.h"
#include "gr_test.h"

/* ---- CRC-32C ---- */

static void test_crc32c_vectors(void) {
    unsigned char b[32];
    CHECK(gr_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(gr_crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    CHECK(gr_crc32c(0, "", 0) == 0);
    /* RFC 3720 (iSCSI) B.4 */
    memset(b, 0, sizeof b);
    CHECK(gr_crc32c(0, b, 32) == 0x8A9136AAu);
    CHECK(gr_crc32c_sw(0, b, 32) == 0x8A9136AAu);
    memset(b, 0xFF, sizeof b);
    CHECK(gr_crc32c(0, b, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    CHECK(gr_crc32c(0, b, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    CHECK(gr_crc32c(0, b, 32) == 0x113FDB5Cu);
}

/* Table and hardware paths agree at every length and alignment, and calls
 * chain like one call over the concatenation. */
static void test_crc32c_paths(void) {
    enum { N = 1100 };
    unsigned char *buf = malloc(N + 8);
    for (int i = 0; i < N + 8; i++) buf[i] = (unsigned char)(gr_hash64(7, (uint64_t)i) >> 56);
    int bad_sw = 0, bad_chain = 0;
    for (int off = 0; off < 8; off++)
        for (int n = 0; n <= N; n += (n < 40 ? 1 : 37)) {
            uint32_t c = gr_crc32c(0, buf + off, (size_t)n);
            if (c != gr_crc32c_sw(0, buf + off, (size_t)n)) bad_sw++;
            int h = n / 3;
            if (c != gr_crc32c(gr_crc32c(0, buf + off, (size_t)h), buf + off + h, (size_t)(n - h))) bad_chain++;
            if (c != gr_crc32c_sw(gr_crc32c_sw(0, buf + off, (size_t)h), buf + off + h, (size_t)(n - h)))
                bad_chain++;
        }
    CHECK_MSG(bad_sw == 0, "%d lengths where hardware and table CRCs differ", bad_sw);
    CHECK_MSG(bad_chain == 0, "%d lengths where chained CRCs differ", bad_chain);
    free(buf);
}

/* ---- an independent reader ---- */

static uint32_t rd_le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd_le64(const unsigned char *p) { return (uint64_t)rd_le32(p) | (uint64_t)rd_le32(p + 4) << 32; }

static uint32_t masked(const void *d, size_t n) {
    uint32_t c = gr_crc32c(0, d, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

typedef struct {
    double wall_time;
    int64_t step;
    char version[32];
    char tag[GR_TFEVENTS_TAG_MAX + 1];
    float value;
    int n_values;
} event;

/* Protobuf varint at *p (< end); false when it runs off the end. */
static bool pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7F) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* Walks one message; calls back with (field, wire, varint-or-fixed value,
 * bytes pointer and length). False on malformed input. */
typedef void (*pb_cb)(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n);
static bool pb_walk(const unsigned char *p, size_t n, pb_cb cb, void *ctx) {
    const unsigned char *end = p + n;
    while (p < end) {
        uint64_t key, v = 0;
        if (!pb_varint(&p, end, &key)) return false;
        unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
        const unsigned char *b = NULL;
        size_t len = 0;
        if (wire == 0) { if (!pb_varint(&p, end, &v)) return false; }
        else if (wire == 1) { if (end - p < 8) return false; v = rd_le64(p); p += 8; }
        else if (wire == 5) { if (end - p < 4) return false; v = rd_le32(p); p += 4; }
        else if (wire == 2) {
            if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p)) return false;
            b = p; len = (size_t)v; p += len;
        } else return false;
        cb(ctx, field, wire, v, b, len);
    }
    return true;
}

static void value_cb(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
    event *e = ctx;
    if (field == 1 && wire == 2 && n <= GR_TFEVENTS_TAG_MAX) { memcpy(e->tag, b, n); e->tag[n] = 0; }
    if (field == 2 && wire == 5) { uint32_t u = (uint32_t)v; memcpy(&e->value, &u, 4); }
}
static void summary_cb(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
    (void)v;
    event *e = ctx;
    if (field == 1 && wire == 2) { e->n_values++; pb_walk(b, n, value_cb, e); }
}
static void event_cb(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
    event *e = ctx;
    if (field == 1 && wire == 1) memcpy(&e->wall_time, &v, 8);
    if (field == 2 && wire == 0) e->step = (int64_t)v;
    if (field == 3 && wire == 2 && n < sizeof e->version) { memcpy(e->version, b, n); e->version[n] = 0; }
    if (field == 5 && wire == 2) pb_walk(b, n, summary_cb, e);
}

/* Reads every record of buf into ev (up to max); returns the count, or -1
 * (length CRC), -2 (data CRC), -3 (truncated), -4 (bad protobuf). */
static int read_records(const unsigned char *buf, size_t n, event *ev, int max) {
    size_t pos = 0;
    int k = 0;
    while (pos < n) {
        if (n - pos < 12) return -3;
        uint64_t len = rd_le64(buf + pos);
        if (rd_le32(buf + pos + 8) != masked(buf + pos, 8)) return -1;
        if (len > n - pos - 12 || n - pos - 12 - len < 4) return -3;
        const unsigned char *d = buf + pos + 12;
        if (rd_le32(d + len) != masked(d, (size_t)len)) return -2;
        if (k < max) {
            memset(&ev[k], 0, sizeof ev[k]);
            if (!pb_walk(d, (size_t)len, event_cb, &ev[k])) return -4;
        }
        k++;
        pos += 12 + len + 4;
    }
    return k;
}

/* ---- tfevents files ---- */

static char tmpdir[512];

static void test_roundtrip(void) {
    gr_tfevents *w = NULL;
    gr_error err = {0};
    CHECK(gr_tfevents_open(tmpdir, &w, &err) == GR_OK && w);
    if (!w) { fprintf(stderr, "%s\n", err.msg); return; }
    const char *base = strrchr(gr_tfevents_path(w), '/');
    CHECK(base && !strncmp(base, "/events.out.tfevents.", 21));
    char host[256] = "";
    gethostname(host, sizeof host);
    CHECK_STR_CONTAINS(base, host);

    char long_tag[201];
    memset(long_tag, 'x', 200); /* a length that needs a 2-byte varint */
    long_tag[200] = 0;
    struct { const char *tag; int64_t step; double t; float v; } in[] = {
        {"train/loss", 50, 1.7e9 + 0.25, 0.6931f},
        {"train/lr", 50, 1.7e9 + 0.25, 0.05f},
        {"train/samples_per_s", 50, 1.7e9 + 0.5, 12345.5f},
        {"val/accuracy", 100, 1.7e9 + 1.0, 0.875f},
        {"val/loss", (int64_t)1 << 40, 1.7e9 + 2.0, -3.5e-8f},
        {long_tag, 0, 0.0, 0.0f},
        {"neg", -1, 1.0, NAN},
    };
    int nin = (int)GR_ARRAY_LEN(in);
    double t_before = gr_tfevents_wall_time();
    for (int i = 0; i < nin; i++) CHECK(gr_tfevents_scalar(w, in[i].tag, in[i].step, in[i].t, in[i].v) == GR_OK);
    CHECK(gr_tfevents_flush(w, &err) == GR_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s", gr_tfevents_path(w));
    CHECK(gr_tfevents_close(w, &err) == GR_OK);

    size_t n = 0;
    unsigned char *buf = slurp(path, &n);
    CHECK(buf != NULL);
    if (!buf) return;
    event ev[16];
    int k = read_records(buf, n, ev, 16);
    CHECK_MSG(k == nin + 1, "%d records, expected %d", k, nin + 1);
    if (k == nin + 1) {
        CHECK(!strcmp(ev[0].version, "brain.Event:2"));
        CHECK(ev[0].n_values == 0);
        CHECK(ev[0].wall_time > 1.5e9 && ev[0].wall_time <= t_before + 1.0);
        for (int i = 0; i < nin; i++) {
            event *e = &ev[i + 1];
            CHECK_MSG(!strcmp(e->tag, in[i].tag), "record %d: tag %s", i + 1, e->tag);
            CHECK(e->n_values == 1 && e->version[0] == 0);
            CHECK(e->step == in[i].step);
            CHECK(e->wall_time == in[i].t);
            if (isnan(in[i].v)) CHECK(isnan(e->value));
            else CHECK(e->value == in[i].v);
        }
    }

    /* One flipped bit anywhere is caught by one of the two CRCs. */
    size_t first_len = 12 + (size_t)rd_le64(buf) + 4;
    size_t spots[] = {0, 3, 9, 12, 20, first_len - 1, first_len + 14, n - 5, n - 1};
    for (size_t i = 0; i < GR_ARRAY_LEN(spots); i++) {
        buf[spots[i]] ^= 0x10;
        int r = read_records(buf, n, ev, 16);
        CHECK_MSG(r == -1 || r == -2 || r == -3, "flip at byte %zu: read_records = %d", spots[i], r);
        buf[spots[i]] ^= 0x10;
    }
    CHECK(read_records(buf, n, ev, 16) == nin + 1);
    CHECK(read_records(buf, n - 1, ev, 16) == -3); /* truncated */
    free(buf);
    unlink(path);
}

/* Two writers in one second get different files; both are valid. */
static void test_two_files(void) {
    gr_tfevents *a = NULL, *b = NULL;
    gr_error err = {0};
    CHECK(gr_tfevents_open(tmpdir, &a, &err) == GR_OK);
    CHECK(gr_tfevents_open(tmpdir, &b, &err) == GR_OK);
    if (!a || !b) { gr_tfevents_close(a, NULL); gr_tfevents_close(b, NULL); return; }
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s", gr_tfevents_path(a));
    snprintf(pb, sizeof pb, "%s", gr_tfevents_path(b));
    CHECK(strcmp(pa, pb) != 0);
    gr_tfevents_scalar(a, "a", 1, 1.0, 1.0f);
    gr_tfevents_scalar(b, "b", 2, 2.0, 2.0f);
    CHECK(gr_tfevents_close(a, &err) == GR_OK);
    CHECK(gr_tfevents_close(b, &err) == GR_OK);
    const char *paths[] = {pa, pb};
    for (int i = 0; i < 2; i++) {
        size_t n = 0;
        unsigned char *buf = slurp(paths[i], &n);
        event ev[4];
        CHECK(buf && read_records(buf, n, ev, 4) == 2);
        CHECK(buf && ev[1].step == i + 1 && ev[1].tag[0] == 'a' + i);
        free(buf);
        unlink(paths[i]);
    }
}

static void test_open_errors(void) {
    gr_tfevents *w = (gr_tfevents *)&w;
    gr_error err = {0};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/no/such/dir", tmpdir);
    CHECK(gr_tfevents_open(dir, &w, &err) == GR_ERR_CKPT); /* run-directory storage: exit 6 */
    CHECK(w == NULL);
    CHECK_STR_CONTAINS(err.msg, dir);
    CHECK_STR_CONTAINS(err.msg, "events.out.tfevents.");
    CHECK_STR_CONTAINS(err.msg, strerror(ENOENT));
    CHECK(gr_tfevents_close(NULL, &err) == GR_OK);
}

int main(void) {
    test_crc32c_vectors();
    test_crc32c_paths();
    snprintf(tmpdir, sizeof tmpdir, "%s/tfevents.%ld", GR_TEST_TMP, (long)getpid());
    mkdir(GR_TEST_TMP, 0755);
    CHECK(mkdir(tmpdir, 0755) == 0 || errno == EEXIST);
    test_roundtrip();
    test_two_files();
    test_open_errors();
    rmdir(tmpdir);
    return gr_test_report();
}
