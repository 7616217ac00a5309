/* spec_input.h — what the job-spec reader refuses at its door (the file,
 * the YAML tags, the run name), and a message helper config/ shares.
 * Internal to config/.
 *
 * Exports: gr_spec_read_file (the spec must be a regular file of at most
 * GR_SPEC_MAX_BYTES, read without blocking), gr_cfg_tag_rule (which YAML
 * tags a spec may carry), gr_spec_name_problem (the run name is a safe
 * file name, DESIGN 1.3) and gr_cfg_escape (control characters of a value
 * shown as \n, \xNN). */
#ifndef GR_SPEC_INPUT_H
#define GR_SPEC_INPUT_H

#include "spec.h"

/* A job spec is a page of YAML (ResNet-50 is under 80 lines); 4 MiB leaves
 * room for generated specs while a mistaken path (a dataset, a log) fails
 * at once instead of being parsed. */
#define GR_SPEC_MAX_BYTES ((size_t)4 << 20)

/* Reads the job spec at path into a new buffer (*len bytes, NUL-added),
 * refusing what is not a regular file (a FIFO must not block, /dev/zero
 * must not grow memory) and what is larger than GR_SPEC_MAX_BYTES; exit 2
 * ("spec.yaml: 5,000,000 bytes; a job spec is at most 4 MiB ..."). */
gr_status gr_spec_read_file(const char *path, char **buf, size_t *len, gr_error *err);

/* YAML tags: a spec is plain YAML, and a tag that asks for an object
 * (`!!python/object:...`) or a custom type (`!foo`) is refused rather than
 * silently read as text. The core schema's own tags are honoured:
 * !!str (the scalar is a string, as if quoted), !!int, !!float, !!bool (the
 * scalar is read as plain text, so the schema's typed readers check it),
 * !!null (an empty or null-spelled scalar), !!seq and !!map (on a list or
 * a map). */
typedef enum gr_cfg_tag {
    GR_TAG_REFUSED,   /* unknown, or on the wrong kind of node */
    GR_TAG_STR,
    GR_TAG_PLAIN,     /* !!int, !!float, !!bool */
    GR_TAG_NULL,
    GR_TAG_COLLECTION /* !!seq on a list, !!map on a map */
} gr_cfg_tag;

/* The rule for tag (libyaml's resolved form, e.g. "tag:yaml.org,2002:str")
 * on a node of kind; on GR_TAG_REFUSED writes the reason to why (e.g.
 * "unknown YAML tag '!!python/object:os.system' (...)"). */
gr_cfg_tag gr_cfg_tag_rule(const char *tag, gr_cfg_kind kind, char *why, size_t cap);

/* NULL when name is a safe file name for the run directory (runs/<name>):
 * 1 to GR_NAME_MAX - 1 (127) characters
 * from ASCII letters, digits and ._-, not starting with '.' or '-' (so not
 * "", ".", "..", "-x", ".hidden", "a/b" or a name with a newline); else
 * what it must be. */
const char *gr_spec_name_problem(const char *name);

/* s with control characters, quotes and backslashes escaped (\n, \t,
 * \xNN), cut to fit buf, for messages that quote a value. */
const char *gr_cfg_escape(const char *s, char *buf, size_t cap);

#endif
