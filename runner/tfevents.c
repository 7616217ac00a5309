/* tfevents.c — TensorBoard event files (see tfevents.h).
 *
 * Protobuf fields written (tensorflow/core/util/event.proto, summary.proto):
 *   Event:         wall_time = 1 (double), step = 2 (int64),
 *                  file_version = 3 (string), summary = 5 (Summary)
 *   Summary:       value = 1 (repeated Value)
 *   Summary.Value: tag = 1 (string), simple_value = 2 (float)
 * All multi-byte values are little-endian, whatever the host. */
#include "tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/tmpfile.h"

struct gr_tfevents {
    FILE *f;
    char *path;
    int write_errno; /* first failed write's errno, 0 while all is well */
};

/* ---- protobuf encoding: a byte cursor over a caller's buffer ---- */

/* Protobuf wire types. */
enum { GR_PB_VARINT = 0, GR_PB_FIXED64 = 1, GR_PB_BYTES = 2, GR_PB_FIXED32 = 5 };

static unsigned char *gr_pb_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned char *gr_pb_key(unsigned char *p, unsigned field, unsigned wire) {
    return gr_pb_varint(p, (uint64_t)field << 3 | wire);
}

static unsigned char *gr_pb_le(unsigned char *p, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *gr_pb_double(unsigned char *p, unsigned field, double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return gr_pb_le(gr_pb_key(p, field, GR_PB_FIXED64), bits, 8);
}

static unsigned char *gr_pb_float(unsigned char *p, unsigned field, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return gr_pb_le(gr_pb_key(p, field, GR_PB_FIXED32), bits, 4);
}

static unsigned char *gr_pb_bytes(unsigned char *p, unsigned field, const void *data, size_t n) {
    p = gr_pb_varint(gr_pb_key(p, field, GR_PB_BYTES), n);
    memcpy(p, data, n);
    return p + n;
}

/* Bytes of a varint holding v. */
static size_t gr_pb_varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

/* ---- records ---- */

static uint32_t gr_tfevents_masked_crc(const void *data, size_t n) {
    uint32_t c = gr_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static gr_status gr_tfevents_record(gr_tfevents *w, const unsigned char *data, size_t n) {
    if (w->write_errno) return GR_ERR_CKPT;
    unsigned char head[12], tail[4];
    gr_pb_le(head, n, 8);
    gr_pb_le(head + 8, gr_tfevents_masked_crc(head, 8), 4);
    gr_pb_le(tail, gr_tfevents_masked_crc(data, n), 4);
    errno = 0;
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || fwrite(data, 1, n, w->f) != n ||
        fwrite(tail, 1, sizeof tail, w->f) != sizeof tail) {
        w->write_errno = errno ? errno : EIO;
        return GR_ERR_CKPT;
    }
    return GR_OK;
}

static gr_status gr_tfevents_report(const gr_tfevents *w, gr_error *err) {
    if (!w->write_errno) return GR_OK;
    return gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", w->path, strerror(w->write_errno));
}

/* ---- public ---- */

double gr_tfevents_wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *gr_tfevents_path(const gr_tfevents *w) { return w->path; }

gr_status gr_tfevents_open(const char *dir, gr_tfevents **out, gr_error *err) {
    *out = NULL;
    char host[256];
    if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    long long secs = (long long)time(NULL);

    size_t cap = strlen(dir) + strlen(host) + 64;
    char *path = gr_xmalloc(cap);
    int fd = -1;
    for (int k = 0; k < 100 && fd < 0; k++) {
        if (k == 0) snprintf(path, cap, "%s/events.out.tfevents.%lld.%s", dir, secs, host);
        else snprintf(path, cap, "%s/events.out.tfevents.%lld.%s.%d", dir, secs, host, k);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        gr_status st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot write: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        free(path);
        return st;
    }
    gr_tfevents *w = gr_xcalloc(1, sizeof *w);
    w->f = f;
    w->path = path;

    static const char version[] = "brain.Event:2";
    unsigned char buf[64], *p = buf;
    p = gr_pb_double(p, 1, gr_tfevents_wall_time());
    p = gr_pb_bytes(p, 3, version, sizeof version - 1);
    gr_tfevents_record(w, buf, (size_t)(p - buf));
    gr_status st = gr_tfevents_flush(w, err);
    if (st) {
        gr_tfevents_close(w, NULL);
        return st;
    }
    *out = w;
    return GR_OK;
}

gr_status gr_tfevents_scalar(gr_tfevents *w, const char *tag, int64_t step, double wall_time, float value) {
    size_t tag_len = strlen(tag);
    GR_ASSERT(tag_len <= GR_TFEVENTS_TAG_MAX);
    /* Sizes inside out: Value, then Summary (one Value), then the Event. */
    size_t value_len = 1 + gr_pb_varint_len(tag_len) + tag_len + 1 + 4;
    size_t summary_len = 1 + gr_pb_varint_len(value_len) + value_len;
    unsigned char buf[GR_TFEVENTS_TAG_MAX + 64], *p = buf;
    p = gr_pb_double(p, 1, wall_time);
    p = gr_pb_varint(gr_pb_key(p, 2, GR_PB_VARINT), (uint64_t)step);
    p = gr_pb_varint(gr_pb_key(p, 5, GR_PB_BYTES), summary_len);
    p = gr_pb_varint(gr_pb_key(p, 1, GR_PB_BYTES), value_len);
    p = gr_pb_bytes(p, 1, tag, tag_len);
    p = gr_pb_float(p, 2, value);
    GR_ASSERT((size_t)(p - buf) <= sizeof buf);
    return gr_tfevents_record(w, buf, (size_t)(p - buf));
}

gr_status gr_tfevents_flush(gr_tfevents *w, gr_error *err) {
    errno = 0;
    if (!w->write_errno && fflush(w->f) != 0) w->write_errno = errno ? errno : EIO;
    return gr_tfevents_report(w, err);
}

gr_status gr_tfevents_close(gr_tfevents *w, gr_error *err) {
    if (!w) return GR_OK;
    gr_tfevents_flush(w, NULL);
    errno = 0;
    if (fclose(w->f) != 0 && !w->write_errno) w->write_errno = errno ? errno : EIO;
    gr_status st = gr_tfevents_report(w, err);
    free(w->path);
    free(w);
    return st;
}

/* ---- trimming after a resume ---- */

static bool gr_pb_read_varint(const unsigned char *p, size_t n, size_t *pos, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *pos < n; shift += 7) {
        unsigned char b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* Event.step (field 2), 0 when absent; false on a malformed message. */
static bool gr_event_step(const unsigned char *p, size_t n, int64_t *step) {
    *step = 0;
    for (size_t pos = 0; pos < n;) {
        uint64_t key, v;
        if (!gr_pb_read_varint(p, n, &pos, &key)) return false;
        switch (key & 7) {
        case 0:
            if (!gr_pb_read_varint(p, n, &pos, &v)) return false;
            if ((key >> 3) == 2) *step = (int64_t)v;
            break;
        case 1: pos += 8; break;
        case 5: pos += 4; break;
        case 2:
            if (!gr_pb_read_varint(p, n, &pos, &v) || v > n - pos) return false;
            pos += (size_t)v;
            break;
        default: return false;
        }
        if (pos > n) return false;
    }
    return true;
}

/* One file: the records up to the first with a step > step (and up to a
 * torn or corrupt record: a kill mid-write) are kept; rewritten through a
 * private temporary (common/tmpfile.h, never a symlink planted at a fixed
 * name) and rename only when something goes. */
static gr_status gr_tfevents_trim_file(const char *path, int64_t step, gr_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return gr_error_set(err, GR_ERR_CKPT, "%s: cannot read: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = gr_xmalloc(cap);
    for (size_t r; (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) buf = gr_xrealloc(buf, cap *= 2);
    }
    fclose(f);
    size_t keep = 0;
    while (n - keep >= 16) {
        uint64_t len;
        uint32_t lcrc, dcrc;
        memcpy(&len, buf + keep, 8);
        memcpy(&lcrc, buf + keep + 8, 4);
        if (lcrc != gr_tfevents_masked_crc(buf + keep, 8) || len > n - keep - 16) break;
        const unsigned char *data = buf + keep + 12;
        memcpy(&dcrc, data + len, 4);
        int64_t s;
        if (dcrc != gr_tfevents_masked_crc(data, (size_t)len) || !gr_event_step(data, (size_t)len, &s) || s > step)
            break;
        keep += 12 + (size_t)len + 4;
    }
    gr_status st = GR_OK;
    gr_tmpfile tf;
    if (keep < n && !(st = gr_tmpfile_create(&tf, path, GR_ERR_CKPT, err))) {
        FILE *o = gr_tmpfile_fdopen(&tf, "wb");
        if (o) errno = 0;
        bool ok = o && fwrite(buf, 1, keep, o) == keep;
        if (o && fclose(o) != 0) ok = false;
        if (!ok) st = gr_error_set(err, GR_ERR_CKPT, "%s: cannot rewrite: %s", path, strerror(errno ? errno : EIO));
        else st = gr_tmpfile_commit(&tf, false, GR_ERR_CKPT, err);
        gr_tmpfile_abort(&tf); /* removes the temporary after a failure */
    }
    free(buf);
    return st;
}

gr_status gr_tfevents_trim(const char *dir, int64_t step, const char *except, gr_error *err) {
    DIR *d = opendir(dir);
    if (!d) return GR_OK;
    gr_status st = GR_OK;
    const char *ex = except ? strrchr(except, '/') : NULL;
    ex = ex ? ex + 1 : except;
    for (struct dirent *e; !st && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0 || (len > 4 && !strcmp(e->d_name + len - 4, ".tmp")))
            continue;
        if (ex && strcmp(e->d_name, ex) == 0) continue;
        size_t pl = strlen(dir) + len + 2;
        char *p = gr_xmalloc(pl);
        snprintf(p, pl, "%s/%s", dir, e->d_name);
        st = gr_tfevents_trim_file(p, step, err);
        free(p);
    }
    closedir(d);
    return st;
}
