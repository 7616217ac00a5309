/* spec_input.c — the job spec's door (spec_input.h): the file must be a
 * regular file of bounded size, its YAML may carry only the core schema's
 * tags, and the run name must be a safe file name. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "spec_input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *gr_cfg_escape(const char *s, char *buf, size_t cap) {
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && k + 5 < cap; c++) {
        if (*c == '\n') k += (size_t)snprintf(buf + k, cap - k, "\\n");
        else if (*c == '\t') k += (size_t)snprintf(buf + k, cap - k, "\\t");
        else if (*c == '\'' || *c == '\\') k += (size_t)snprintf(buf + k, cap - k, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f) k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", *c);
        else buf[k++] = (char)*c;
    }
    if (cap) buf[k < cap ? k : cap - 1] = 0;
    return buf;
}

gr_status gr_spec_read_file(const char *path, char **buf, size_t *len, gr_error *err) {
    *buf = NULL;
    *len = 0;
    gr_status st = gr_check_regular(path, "job spec", GR_ERR_USAGE, err);
    if (st) return st;
    /* O_NONBLOCK: should path become a FIFO after the check, open() still
     * returns at once, and fstat() below refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return gr_error_set(err, GR_ERR_USAGE, "%s: cannot read job spec: %s", path, strerror(errno));
    struct stat sb;
    char n1[32], n2[32];
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return gr_error_set(err, GR_ERR_USAGE, "%s: job spec is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > GR_SPEC_MAX_BYTES) {
        close(fd);
        return gr_error_set(err, GR_ERR_USAGE, "%s: %s bytes; a job spec is at most 4 MiB (%s bytes)", path,
                            gr_fmt_count((int64_t)sb.st_size, n1, sizeof n1),
                            gr_fmt_count((int64_t)GR_SPEC_MAX_BYTES, n2, sizeof n2));
    }
    /* read to the end, whatever the size said (a file may grow), but never
     * more than the cap */
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *b = gr_xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > GR_SPEC_MAX_BYTES) break;
            cap = GR_MIN(2 * cap, GR_SPEC_MAX_BYTES + 1);
            b = gr_xrealloc(b, cap + 1);
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            close(fd);
            free(b);
            return gr_error_set(err, GR_ERR_USAGE, "%s: cannot read job spec: %s", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > GR_SPEC_MAX_BYTES) {
        free(b);
        return gr_error_set(err, GR_ERR_USAGE, "%s: more than %s bytes; a job spec is at most 4 MiB", path,
                            gr_fmt_count((int64_t)GR_SPEC_MAX_BYTES, n1, sizeof n1));
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return GR_OK;
}

gr_cfg_tag gr_cfg_tag_rule(const char *tag, gr_cfg_kind kind, char *why, size_t cap) {
    static const char core[] = "tag:yaml.org,2002:";
    static const struct {
        const char *name;
        gr_cfg_kind kind;
        gr_cfg_tag rule;
    } known[] = {
        {"str", GR_CFG_SCALAR, GR_TAG_STR},    {"int", GR_CFG_SCALAR, GR_TAG_PLAIN},
        {"float", GR_CFG_SCALAR, GR_TAG_PLAIN}, {"bool", GR_CFG_SCALAR, GR_TAG_PLAIN},
        {"null", GR_CFG_SCALAR, GR_TAG_NULL},  {"seq", GR_CFG_SEQ, GR_TAG_COLLECTION},
        {"map", GR_CFG_MAP, GR_TAG_COLLECTION},
    };
    static const char *const kinds[] = {"a scalar", "a map", "a list"};
    const bool is_core = strncmp(tag, core, sizeof core - 1) == 0;
    const char *local = is_core ? tag + sizeof core - 1 : tag;
    char shown[200], esc[160];
    snprintf(shown, sizeof shown, "%s%s", is_core ? "!!" : "", gr_cfg_escape(local, esc, sizeof esc));
    for (size_t i = 0; is_core && i < GR_ARRAY_LEN(known); i++) {
        if (strcmp(local, known[i].name) != 0) continue;
        if (known[i].kind == kind) return known[i].rule;
        snprintf(why, cap, "the YAML tag '%s' is for %s, but tags %s", shown, kinds[known[i].kind], kinds[kind]);
        return GR_TAG_REFUSED;
    }
    snprintf(why, cap, "unknown YAML tag '%s' (a job spec is plain YAML; the only tags it takes are !!str, "
             "!!int, !!float, !!bool, !!null, !!seq and !!map)", shown);
    return GR_TAG_REFUSED;
}

const char *gr_spec_name_problem(const char *name) {
    static const char rule[] = "must be a safe file name (letters, digits, '.', '_' and '-', not starting "
                               "with '.' or '-'): it names the run directory";
    if (!name[0] || name[0] == '.' || name[0] == '-') return rule;
    for (const char *c = name; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '.' || *c == '_' || *c == '-';
        if (!ok) return rule;
    }
    if (strlen(name) >= GR_NAME_MAX) return "must be a safe file name of at most 127 characters";
    return NULL;
}
