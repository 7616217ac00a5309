/* spec_dump.c — the resolved job spec back as YAML (gr_spec_dump, spec.h):
 * every row of the schema table (schema.c) in table order with its value,
 * defaults filled, sentinels ("not given") left out, the model section as
 * given; what it writes, gr_spec_load reads back to the same spec. */
#include "schema.h"

#include <inttypes.h>
#include <string.h>

/* Does row r have a value worth writing? Values outside the row's bounds
 * are the "not given" sentinels (epochs 0, crop size 0), "" strings and
 * empty lists likewise; a section needs all its required rows. */
static bool gr_spec_present(const gr_job_spec *spec, const gr_spec_row *r) {
    const char *p = (const char *)spec + r->off;
    if (!gr_spec_when(spec, r)) return false;
    switch (r->type) {
    case GR_ST_SECTION: {
        bool any = false;
        for (size_t i = 0; i < gr_spec_n_rows; i++) {
            const gr_spec_row *c = &gr_spec_rows[i];
            if (!gr_spec_row_is_child(c, r->path)) continue;
            bool here = gr_spec_present(spec, c);
            if ((c->flags & GR_SF_REQ) && !here) return false;
            any |= here;
        }
        return any;
    }
    case GR_ST_INT: {
        if (r->flags & GR_SF_U64) return true;
        int64_t v;
        memcpy(&v, p, sizeof v);
        return (v >= r->ilo && v <= r->ihi) || ((r->flags & GR_SF_AUTO_NEG) && v == -1); /* -1: auto */
    }
    case GR_ST_STR: return p[0] != 0;
    case GR_ST_FLOATS:
    case GR_ST_INTS: {
        if (r->flags & GR_SF_FIXED) return true;
        int k;
        memcpy(&k, (const char *)spec + r->n_off, sizeof k);
        return k > 0;
    }
    case GR_ST_TREE: {
        const gr_cfg *t;
        memcpy(&t, p, sizeof t);
        return t != NULL;
    }
    default: return true;
    }
}

static void gr_spec_dump_section(const gr_job_spec *spec, const char *prefix, FILE *f, int indent) {
    for (size_t i = 0; i < gr_spec_n_rows; i++) {
        const gr_spec_row *r = &gr_spec_rows[i];
        if (!gr_spec_row_is_child(r, prefix) || !gr_spec_present(spec, r)) continue;
        const char *p = (const char *)spec + r->off;
        char num[64];
        fprintf(f, "%*s%s:", indent, "", gr_spec_row_leaf(r));
        switch (r->type) {
        case GR_ST_SECTION:
            fputc('\n', f);
            gr_spec_dump_section(spec, r->path, f, indent + 2);
            continue;
        case GR_ST_INT: {
            if (r->flags & GR_SF_U64) {
                uint64_t u;
                memcpy(&u, p, sizeof u);
                fprintf(f, " %" PRIu64, u);
            } else {
                int64_t v;
                memcpy(&v, p, sizeof v);
                if (((r->flags & GR_SF_AUTO) && v == 0) || ((r->flags & GR_SF_AUTO_NEG) && v == -1)) fputs(" auto", f);
                else fprintf(f, " %" PRId64, v);
            }
            break;
        }
        case GR_ST_FLOAT: {
            double v;
            memcpy(&v, p, sizeof v);
            gr_fmt_double(num, sizeof num, v);
            fprintf(f, " %s", num);
            break;
        }
        case GR_ST_BOOL: {
            bool v;
            memcpy(&v, p, sizeof v);
            fputs(v ? " true" : " false", f);
            break;
        }
        case GR_ST_STR:
            fputc(' ', f);
            gr_cfg_write_str(f, p, false);
            break;
        case GR_ST_ENUM:
            if (r->size) {
                fprintf(f, " %s", p);
            } else {
                int v;
                memcpy(&v, p, sizeof v);
                fprintf(f, " %s", gr_spec_choice(r->choices, v, num, sizeof num));
            }
            break;
        case GR_ST_FLOATS:
        case GR_ST_INTS: {
            int k = (int)r->size;
            if (!(r->flags & GR_SF_FIXED)) memcpy(&k, (const char *)spec + r->n_off, sizeof k);
            fputs(" [", f);
            for (int j = 0; j < k; j++) {
                if (r->type == GR_ST_FLOATS) {
                    double v;
                    memcpy(&v, p + (size_t)j * sizeof v, sizeof v);
                    gr_fmt_double(num, sizeof num, v);
                    fprintf(f, "%s%s", j ? ", " : "", num);
                } else {
                    int64_t v;
                    memcpy(&v, p + (size_t)j * sizeof v, sizeof v);
                    fprintf(f, "%s%" PRId64, j ? ", " : "", v);
                }
            }
            fputc(']', f);
            break;
        }
        case GR_ST_TREE: {
            const gr_cfg *t;
            memcpy(&t, p, sizeof t);
            gr_cfg_dump_value(t, f, indent + 2);
            continue;
        }
        case GR_ST_LOSS_SCALE:
            if (spec->loss_scale_dynamic) {
                fputs(" dynamic", f);
            } else if (spec->loss_scale == 1) {
                fputs(" none", f);
            } else {
                gr_fmt_double(num, sizeof num, spec->loss_scale);
                fprintf(f, " %s", num);
            }
            break;
        }
        fputc('\n', f);
    }
}

void gr_spec_dump(const gr_job_spec *spec, FILE *f) {
    fprintf(f, "# gpurun job spec (schema v1), resolved from %s\n", spec->file);
    gr_spec_dump_section(spec, "", f, 0);
}
