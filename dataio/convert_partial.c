/* convert_partial.c — a conversion's resumable work in OUT.partial (see
 * convert_partial.h): the index's header and records, the bytes files, the
 * lock, resuming and starting over. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include "convert_partial.h"
#include "../common/crc32c.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PART_VERSION_LINE "gpurun-partial 1\n"
#define PART_END_LINE "end\n"
#define PART_REC_MAGIC 0x4b4c4252u /* "RBLK" */
#define PART_REC_HEAD 32           /* magic, length, split, count (u32 each), first, bytes (u64 each) */
#define PART_REC_FILE 16           /* size or reason length (u64), H, W, C (u16), format, left out (u8) */
#define PART_REC_MAX_FILES (1 << 20)

/* ---- little-endian fields ---- */
static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- the header ---- */

/* FNV-1a, 64 bits. */
static uint64_t part_fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* What the fingerprint takes from a split's files: path, label, size, mtime. */
static uint64_t part_files_hash(const gr_conv_file *files, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        uint8_t rest[20];
        put_u32(rest, (uint32_t)files[i].label);
        put_u64(rest + 4, (uint64_t)files[i].size);
        put_u64(rest + 12, (uint64_t)files[i].mtime_ns);
        h = part_fnv(h, files[i].path, strlen(files[i].path) + 1);
        h = part_fnv(h, rest, sizeof rest);
    }
    return h;
}

/* This conversion's header, allocated. */
static char *part_header(const gr_conv_part *parts, int nparts, const char *options) {
    size_t cap = 256 + strlen(options), len = 0;
    for (int k = 0; k < nparts; k++) cap += strlen(parts[k].name) + 64;
    char *h = gr_xmalloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "%soptions %s\n", PART_VERSION_LINE, options);
    for (int k = 0; k < nparts; k++)
        len += (size_t)snprintf(h + len, cap - len, "split %s %lld %016llx\n", parts[k].name, (long long)parts[k].n,
                                (unsigned long long)part_files_hash(parts[k].files, parts[k].n));
    snprintf(h + len, cap - len, "%s", PART_END_LINE);
    return h;
}

/* The length of the header at buf (through its end line); 0 when there is
 * none whole (a torn first write: nothing was committed after it). */
static size_t part_header_len(const uint8_t *buf, size_t n) {
    const size_t v = strlen(PART_VERSION_LINE);
    if (n < v || memcmp(buf, PART_VERSION_LINE, v) != 0) return 0;
    for (size_t i = v; i + 4 <= n; i++)
        if (buf[i - 1] == '\n' && memcmp(buf + i, PART_END_LINE, 4) == 0) return i + 4;
    return 0;
}

/* The groups of the header's split lines ("split NAME COUNT HASH"), allocated. */
static int part_header_groups(const char *h, size_t len, char ***names) {
    int n = 0;
    *names = NULL;
    for (const char *line = h; line < h + len;) {
        const char *eol = memchr(line, '\n', (size_t)(h + len - line)), *cnt;
        if (!eol) break;
        if (strncmp(line, "split ", 6) == 0) {
            int spaces = 0;
            for (cnt = eol; cnt > line + 6 && spaces < 2;) spaces += *--cnt == ' ';
            if (spaces == 2 && cnt > line + 6) {
                *names = gr_xrealloc(*names, (size_t)(n + 1) * sizeof **names);
                (*names)[n++] = strndup(line + 6, (size_t)(cnt - (line + 6)));
            }
        }
        line = eol + 1;
    }
    return n;
}

/* The first line of a that differs from b's, into buf (a placeholder past a's end). */
static void part_first_diff(const char *a, const char *b, char *buf, size_t cap) {
    while (*a && *a == *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        if (!ea || !eb || ea - a != eb - b || memcmp(a, b, (size_t)(ea - a)) != 0) break;
        a = ea + 1, b = eb + 1;
    }
    const size_t n = strcspn(a, "\n");
    snprintf(buf, cap, "%.*s", (int)GR_MIN(n, 300), n ? a : "(no such line)");
}

/* ---- records ---- */

typedef struct part_rec {
    uint32_t split, count;
    uint64_t first, bytes;
    const uint8_t *files, *reasons; /* count entries; their reasons, one after another */
    size_t len;                     /* of the whole record */
} part_rec;

/* The record at p (avail bytes on); false when there is none whole and sound. */
static bool part_rec_read(const uint8_t *p, size_t avail, part_rec *r) {
    if (avail < PART_REC_HEAD + 4 || get_u32(p) != PART_REC_MAGIC) return false;
    r->len = get_u32(p + 4);
    r->split = get_u32(p + 8), r->count = get_u32(p + 12);
    r->first = get_u64(p + 16), r->bytes = get_u64(p + 24);
    const size_t fixed = PART_REC_HEAD + (size_t)r->count * PART_REC_FILE + 4;
    if (r->count == 0 || r->count > PART_REC_MAX_FILES || r->len < fixed || r->len > avail) return false;
    if (gr_crc32c(0, p, r->len - 4) != get_u32(p + r->len - 4)) return false;
    r->files = p + PART_REC_HEAD;
    r->reasons = r->files + (size_t)r->count * PART_REC_FILE;
    uint64_t stored = 0, reasons = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        const uint8_t *f = r->files + (size_t)i * PART_REC_FILE;
        *(f[15] ? &reasons : &stored) += get_u64(f);
    }
    return stored == r->bytes && reasons == r->len - fixed;
}

/* The record of count files from es, allocated, its length in *len. */
static uint8_t *part_rec_make(int k, int64_t first, const gr_conv_stored *es, int64_t count, size_t *len) {
    size_t reasons = 0;
    uint64_t bytes = 0;
    for (int64_t i = 0; i < count; i++) {
        if (es[i].why) reasons += strlen(es[i].why);
        else bytes += es[i].n;
    }
    *len = PART_REC_HEAD + (size_t)count * PART_REC_FILE + reasons + 4;
    uint8_t *r = gr_xcalloc(1, *len), *why = r + PART_REC_HEAD + (size_t)count * PART_REC_FILE;
    put_u32(r, PART_REC_MAGIC);
    put_u32(r + 4, (uint32_t)*len);
    put_u32(r + 8, (uint32_t)k);
    put_u32(r + 12, (uint32_t)count);
    put_u64(r + 16, (uint64_t)first);
    put_u64(r + 24, bytes);
    for (int64_t i = 0; i < count; i++) {
        uint8_t *f = r + PART_REC_HEAD + (size_t)i * PART_REC_FILE;
        const size_t wl = es[i].why ? strlen(es[i].why) : 0;
        put_u64(f, es[i].why ? wl : es[i].n);
        for (int d = 0; d < 3; d++) put_u16(f + 8 + 2 * d, es[i].shape[d]);
        f[14] = es[i].format;
        f[15] = es[i].why != NULL;
        if (wl) memcpy(why, es[i].why, wl), why += wl;
    }
    put_u32(r + *len - 4, gr_crc32c(0, r, *len - 4));
    return r;
}

/* Files the whole records of buf[0, n) hold, and where the last one ends. */
static int64_t part_rec_count(const uint8_t *buf, size_t n, size_t *end) {
    int64_t files = 0;
    part_rec r;
    size_t at = 0;
    while (part_rec_read(buf + at, n - at, &r)) files += r.count, at += r.len;
    if (end) *end = at;
    return files;
}

/* ---- the splits' tables ---- */

/* Adds record r's files to split k: the tables, the files left out. false:
 * it does not follow the records before it. */
static bool part_apply(gr_conv_partial *p, const part_rec *r, gr_imagefolder_report *report) {
    if (r->split >= (uint32_t)p->nparts) return false;
    for (uint32_t s = 0; s < r->split; s++)
        if (p->parts[s].done != p->parts[s].n) return false;
    gr_conv_part *t = &p->parts[r->split];
    if (r->first != (uint64_t)t->done || r->count > (uint64_t)(t->n - t->done)) return false;
    const uint8_t *why = r->reasons;
    for (uint32_t i = 0; i < r->count; i++) {
        const uint8_t *f = r->files + (size_t)i * PART_REC_FILE;
        const gr_conv_file *file = &t->files[t->done + i];
        const uint64_t size = get_u64(f);
        if (f[15]) {
            if (t->first_bad < 0) t->first_bad = report->nbad;
            gr_imagefolder_report_bad(report, file->path, strndup((const char *)why, (size_t)size));
            why += size;
            continue;
        }
        const int64_t k = t->kept++;
        t->offsets[k + 1] = t->offsets[k] + size;
        for (int d = 0; d < 3; d++) t->shapes[3 * k + d] = get_u16(f + 8 + 2 * d);
        t->formats[k] = f[14];
        t->labels[k] = file->label;
    }
    t->done += r->count;
    p->done += r->count;
    return true;
}

/* dir/<group as a file name>.bytes: "/train" -> train.bytes, "/a/b" -> a.b.bytes. */
static char *part_bytes_path(const char *dir, const char *group) {
    char name[112];
    size_t n = 0;
    for (const char *c = group; *c && n < 100; c++) {
        if (*c == '/') {
            if (n > 0) name[n++] = '.';
        } else {
            name[n++] = isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.' ? *c : '_';
        }
    }
    snprintf(name + n, sizeof name - n, "%s.bytes", n ? "" : "root");
    return gr_conv_join(dir, name);
}

/* Opens split k's bytes file and cuts it to what the records cover. */
static gr_status part_begin(gr_conv_partial *p, int k, gr_error *err) {
    gr_conv_part *t = &p->parts[k];
    if (t->bytes_fd >= 0) return GR_OK;
    t->bytes_fd = open(t->bytes_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct stat sb;
    if (t->bytes_fd < 0 || fstat(t->bytes_fd, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", t->bytes_path, strerror(errno));
    const uint64_t want = t->offsets[t->kept];
    if ((uint64_t)sb.st_size < want)
        return gr_error_set(err, GR_ERR_DATA, "%s: %lld bytes, but %s says its committed blocks hold %llu: the "
                            "work kept there is damaged; add --restart to start over", t->bytes_path,
                            (long long)sb.st_size, p->index_path, (unsigned long long)want);
    /* past the records: part of a block that was never committed */
    if (((uint64_t)sb.st_size > want && ftruncate(t->bytes_fd, (off_t)want) != 0) ||
        lseek(t->bytes_fd, (off_t)want, SEEK_SET) < 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot cut to %llu bytes: %s", t->bytes_path,
                            (unsigned long long)want, strerror(errno));
    return GR_OK;
}

/* ---- open, resume, start over ---- */

/* Removes what OUT.partial holds for these splits and the index; the
 * directory too when asked (and empty). false with errno on a failure. */
static bool part_remove(const gr_conv_partial *p, char *const *old, int nold, bool rmdir_too) {
    bool ok = true;
    for (int k = 0; k < p->nparts; k++)
        if (unlink(p->parts[k].bytes_path) != 0 && errno != ENOENT) ok = false;
    for (int k = 0; k < nold; k++) {
        char *path = part_bytes_path(p->dir, old[k]);
        if (unlink(path) != 0 && errno != ENOENT) ok = false;
        free(path);
    }
    if (rmdir_too && ((unlink(p->index_path) != 0 && errno != ENOENT) || rmdir(p->dir) != 0)) ok = false;
    return ok;
}

static void part_release(gr_conv_partial *p) {
    if (p->stop) atomic_store(&p->stop->held, 0);
    for (int k = 0; k < p->nparts; k++) {
        gr_conv_part *t = &p->parts[k];
        if (t->bytes_fd >= 0) close(t->bytes_fd);
        free(t->bytes_path);
        free(t->offsets), free(t->shapes), free(t->formats), free(t->labels);
        t->bytes_fd = -1, t->bytes_path = NULL;
        t->offsets = NULL, t->shapes = NULL, t->formats = NULL, t->labels = NULL;
    }
    if (p->index_fd >= 0) close(p->index_fd);
    free(p->pending);
    free(p->dir);
    free(p->index_path);
    memset(p, 0, sizeof *p);
    p->index_fd = -1;
}

/* OUT.partial made or found (a directory, not a link), its index opened and locked. */
static gr_status part_lock(gr_conv_partial *p, gr_error *err) {
    struct stat sb;
    if (mkdir(p->dir, 0777) != 0 && errno != EEXIST)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot create (a conversion's resumable work is kept there): %s",
                            p->dir, strerror(errno));
    if (lstat(p->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return gr_error_set(err, GR_ERR_DATA, "%s: is not a directory (a conversion's resumable work is kept "
                            "there): move it away", p->dir);
    p->index_fd = open(p->index_path, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (p->index_fd < 0) return gr_error_set(err, GR_ERR_DATA, "%s: cannot open: %s", p->index_path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    /* no locks on this file system: nothing to serialize on, as for tmpfile.h's sweep */
    if (fcntl(p->index_fd, F_OFD_SETLK, &fl) != 0 && (errno == EAGAIN || errno == EACCES))
        return gr_error_set(err, GR_ERR_DATA, "%s: another conversion to the same output is running (it holds "
                            "%s locked); wait for it to end or stop it", p->dir, p->index_path);
    return GR_OK;
}

/* The whole index into *buf (allocated), its size in *n. */
static gr_status part_read_index(const gr_conv_partial *p, uint8_t **buf, size_t *n, gr_error *err) {
    struct stat sb;
    *buf = NULL, *n = 0;
    if (fstat(p->index_fd, &sb) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", p->index_path, strerror(errno));
    *buf = gr_xmalloc((size_t)sb.st_size + 1);
    while (*n < (size_t)sb.st_size) {
        const ssize_t r = pread(p->index_fd, *buf + *n, (size_t)sb.st_size - *n, (off_t)*n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return gr_error_set(err, GR_ERR_DATA, "%s: cannot read: %s", p->index_path,
                                        r < 0 ? strerror(errno) : "shorter than its size");
        *n += (size_t)r;
    }
    (*buf)[*n] = 0;
    return GR_OK;
}

static gr_status part_write_all(int fd, const void *data, size_t n, const char *path, gr_error *err) {
    for (const uint8_t *q = data; n > 0;) {
        const ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return gr_error_set(err, GR_ERR_DATA, "%s: write failed: %s", path, strerror(errno));
        q += w, n -= (size_t)w;
    }
    return GR_OK;
}

/* Starts the index over: cut, this conversion's header written and synced. */
static gr_status part_fresh(gr_conv_partial *p, const char *header, gr_error *err) {
    if (ftruncate(p->index_fd, 0) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot cut: %s", p->index_path, strerror(errno));
    gr_status st = part_write_all(p->index_fd, header, strlen(header), p->index_path, err);
    if (st == GR_OK && fdatasync(p->index_fd) != 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: cannot sync: %s", p->index_path, strerror(errno));
    return st;
}

/* The records after the header applied (buf[0, n), the header hlen bytes);
 * a torn last one cut off the index. */
static gr_status part_resume(gr_conv_partial *p, const uint8_t *buf, size_t n, size_t hlen,
                             gr_imagefolder_report *report, gr_error *err) {
    size_t at = hlen;
    part_rec r;
    for (int64_t i = 0; part_rec_read(buf + at, n - at, &r); i++, at += r.len)
        if (!part_apply(p, &r, report))
            return gr_error_set(err, GR_ERR_DATA, "%s: record %lld (at byte %zu) does not follow the ones before "
                                "it; add --restart to start over", p->index_path, (long long)i + 1, at);
    if (at < n && ftruncate(p->index_fd, (off_t)at) != 0)
        return gr_error_set(err, GR_ERR_DATA, "%s: cannot cut its torn end: %s", p->index_path, strerror(errno));
    for (int k = 0; k < p->nparts; k++)
        if (p->parts[k].done > 0) {
            gr_status st = part_begin(p, k, err);
            if (st != GR_OK) return st;
        }
    return GR_OK;
}

/* The index found (buf[0, n)) against this conversion's header: resumed,
 * started over, or refused. */
static gr_status part_settle(gr_conv_partial *p, const uint8_t *buf, size_t n, const char *header, bool restart,
                             bool progress, const char *out, gr_imagefolder_report *report, gr_error *err) {
    const size_t hlen = part_header_len(buf, n);
    const int64_t was = hlen ? part_rec_count(buf + hlen, n - hlen, NULL) : 0;
    const bool same = hlen == strlen(header) && memcmp(buf, header, hlen) == 0;
    char c1[32], c2[32];
    if (same && !restart) {
        gr_status st = part_resume(p, buf, n, hlen, report, err);
        if (st == GR_OK && p->done > 0 && progress)
            fprintf(stderr, "gpurun data: %s: resuming: %s of %s files done (kept in %s)\n", out,
                    gr_fmt_count(p->done, c1, sizeof c1), gr_fmt_count(p->total, c2, sizeof c2), p->dir);
        return st;
    }
    if (was > 0 && !restart) {
        char then[320], now[320];
        part_first_diff((const char *)buf, header, then, sizeof then);
        part_first_diff(header, (const char *)buf, now, sizeof now);
        return gr_error_set(err, GR_ERR_USAGE, "%s: holds %s files converted by another conversion to %s (its index "
                            "says '%s', this one '%s': other options, or other files, labels, sizes or modification "
                            "times); run the same command as then to go on with it, or add --restart to discard it",
                            p->dir, gr_fmt_count(was, c1, sizeof c1), out, then, now);
    }
    if (was > 0 && progress)
        fprintf(stderr, "gpurun data: %s: --restart: discarding the %s files converted in %s\n", out,
                gr_fmt_count(was, c1, sizeof c1), p->dir);
    char **old = NULL;
    const int nold = hlen ? part_header_groups((const char *)buf, hlen, &old) : 0;
    const bool removed = part_remove(p, old, nold, false);
    for (int k = 0; k < nold; k++) free(old[k]);
    free(old);
    if (!removed) return gr_error_set(err, GR_ERR_DATA, "%s: cannot remove its old work: %s", p->dir, strerror(errno));
    return part_fresh(p, header, err);
}

/* The names a stop signal's handler needs (convert.h), when they fit. */
static void part_note_stop(gr_conv_partial *p) {
    gr_conv_stop *s = p->stop;
    if (!s) return;
    atomic_store(&s->files, p->done);
    if (strlen(p->index_path) >= sizeof s->index || strlen(p->parts[0].bytes_path) >= sizeof s->first) return;
    snprintf(s->dir, sizeof s->dir, "%s", p->dir);
    snprintf(s->index, sizeof s->index, "%s", p->index_path);
    snprintf(s->first, sizeof s->first, "%s", p->parts[0].bytes_path);
    atomic_store(&s->held, 1);
}

gr_status gr_conv_partial_open(gr_conv_partial *p, const char *out, gr_conv_part *parts, int nparts,
                               const char *options, bool restart, gr_conv_stop *stop, bool progress,
                               gr_imagefolder_report *report, gr_error *err) {
    GR_ASSERT(nparts >= 1);
    memset(p, 0, sizeof *p);
    p->index_fd = -1;
    size_t len = strlen(out) + sizeof GR_CONV_PARTIAL_SUFFIX;
    p->dir = gr_xmalloc(len);
    snprintf(p->dir, len, "%s%s", out, GR_CONV_PARTIAL_SUFFIX);
    p->index_path = gr_conv_join(p->dir, "index");
    p->parts = parts, p->nparts = nparts, p->stop = stop;
    for (int k = 0; k < nparts; k++) {
        gr_conv_part *t = &parts[k];
        GR_ASSERT(t->n >= 1);
        t->done = t->kept = 0, t->first_bad = -1, t->bytes_fd = -1;
        t->offsets = gr_xcalloc((size_t)t->n + 1, sizeof *t->offsets);
        t->shapes = gr_xmalloc((size_t)t->n * 3 * sizeof *t->shapes);
        t->formats = gr_xmalloc((size_t)t->n);
        t->labels = gr_xmalloc((size_t)t->n * sizeof *t->labels);
        t->bytes_path = part_bytes_path(p->dir, t->name);
        p->total += t->n;
    }
    char *header = part_header(parts, nparts, options);
    uint8_t *buf = NULL;
    size_t n = 0;
    gr_status st = part_lock(p, err);
    if (st == GR_OK) st = part_read_index(p, &buf, &n, err);
    if (st == GR_OK) st = part_settle(p, buf, n, header, restart, progress, out, report, err);
    free(header);
    free(buf);
    if (st != GR_OK) {
        p->stop = NULL; /* its `held` is not ours to clear */
        part_release(p);
        return st;
    }
    p->resumed = p->committed = p->done;
    p->committed_at = gr_now();
    part_note_stop(p);
    return GR_OK;
}

int gr_conv_partial_bytes_fd(const gr_conv_partial *p, int k) { return p->parts[k].bytes_fd; }

gr_status gr_conv_partial_add(gr_conv_partial *p, int k, gr_conv_stored *es, int64_t count,
                              gr_imagefolder_report *report, gr_error *err) {
    gr_conv_part *t = &p->parts[k];
    GR_ASSERT(count >= 1 && count <= PART_REC_MAX_FILES && t->done + count <= t->n);
    gr_status st = part_begin(p, k, err);
    for (int64_t i = 0; i < count && st == GR_OK; i++)
        if (!es[i].why) st = part_write_all(t->bytes_fd, es[i].bytes, es[i].n, t->bytes_path, err);
    if (st != GR_OK) return st;
    size_t len;
    uint8_t *rec = part_rec_make(k, t->done, es, count, &len);
    part_rec r;
    GR_ASSERT(part_rec_read(rec, len, &r) && part_apply(p, &r, report));
    for (int64_t i = 0; i < count; i++) free(es[i].why), es[i].why = NULL; /* applied: copied to the report */
    GR_GROW(p->pending, p->pending_cap, p->npending + len);
    memcpy(p->pending + p->npending, rec, len);
    p->npending += len;
    free(rec);
    return gr_now() - p->committed_at >= GR_CONV_COMMIT_S ? gr_conv_partial_commit(p, err) : GR_OK;
}

gr_status gr_conv_partial_commit(gr_conv_partial *p, gr_error *err) {
    if (p->npending == 0) return GR_OK;
    /* the bytes first, synced: a record never names bytes that are not on disk */
    for (int k = 0; k < p->nparts; k++)
        if (p->parts[k].bytes_fd >= 0 && fdatasync(p->parts[k].bytes_fd) != 0)
            return gr_error_set(err, GR_ERR_DATA, "%s: cannot sync: %s", p->parts[k].bytes_path, strerror(errno));
    gr_status st = part_write_all(p->index_fd, p->pending, p->npending, p->index_path, err);
    if (st == GR_OK && fdatasync(p->index_fd) != 0)
        st = gr_error_set(err, GR_ERR_DATA, "%s: cannot sync: %s", p->index_path, strerror(errno));
    if (st != GR_OK) return st;
    p->npending = 0;
    p->committed = p->done;
    p->committed_at = gr_now();
    if (p->stop) atomic_store(&p->stop->files, p->committed);
    return GR_OK;
}

void gr_conv_partial_done(gr_conv_partial *p, gr_imagefolder_report *report) {
    if (p->stop) atomic_store(&p->stop->held, 0);
    if (!part_remove(p, NULL, 0, true)) {
        char line[1200];
        snprintf(line, sizeof line, "%.1100s: cannot remove it after the output was written: %s", p->dir,
                 strerror(errno));
        GR_GROW(report->warnings, report->warnings_cap, report->nwarnings + 1);
        report->warnings[report->nwarnings++] = gr_xstrdup(line);
    }
    part_release(p);
}

void gr_conv_partial_close(gr_conv_partial *p) {
    if (!p->dir) return;
    gr_conv_partial_commit(p, NULL); /* keeps what it can; a failure keeps the last commit */
    if (p->committed == 0) {
        if (p->stop) atomic_store(&p->stop->held, 0);
        part_remove(p, NULL, 0, true); /* nothing committed: nothing to keep */
    }
    part_release(p);
}
