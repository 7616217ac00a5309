/* tokens_desc.c — what a token split says about its tokens (dataio.h's
 * gr_tokens_desc_read): the `tokenizer` and `vocab_size` attributes of its
 * `tokens` dataset, as `gpurun data text` and `gpurun data tokens` write
 * them (DESIGN 1.5). `gpurun generate` reads them to turn text into tokens
 * and back the way the model's data did. */
#include <stdlib.h>
#include <string.h>

#include "dataio.h"
#include "h5util.h"

gr_status gr_tokens_desc_read(const char *path, const char *group, gr_tokens_desc *d, gr_error *err) {
    memset(d, 0, sizeof *d);
    gr_h5_init();
    struct stat sb;
    gr_status st = gr_h5_check_input(path, &sb, err);
    if (st) return st;
    char *grp = gr_h5_normalize_group(group), *name = gr_h5_join(grp, "tokens");
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = -1, a = -1;
    if (f < 0) {
        st = gr_h5_fail(err, GR_ERR_DATA, "%s: not an HDF5 file or corrupt", path);
        goto done;
    }
    if (gr_h5_path_exists(f, name) <= 0 || (ds = H5Dopen2(f, name, H5P_DEFAULT)) < 0) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: no such dataset (a token split, as `gpurun data text` "
                          "writes one, holds its tokens there)", path, name);
        goto done;
    }
    int r = gr_h5_read_string_attr(ds, "tokenizer", d->tokenizer, sizeof d->tokenizer);
    if (r != 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: %s", path, name,
                          r == 0 ? "no `tokenizer` attribute (which tokenizer made these tokens?)"
                                 : "the `tokenizer` attribute is not a string");
        goto done;
    }
    int64_t v = 0;
    if (H5Aexists(ds, "vocab_size") <= 0 || (a = H5Aopen(ds, "vocab_size", H5P_DEFAULT)) < 0 ||
        H5Aread(a, H5T_NATIVE_INT64, &v) < 0 || v < 1) {
        st = gr_error_set(err, GR_ERR_DATA, "%s: %s: no positive integer `vocab_size` attribute", path, name);
        goto done;
    }
    d->vocab_size = v;
done:
    if (a >= 0) H5Aclose(a);
    if (ds >= 0) H5Dclose(ds);
    if (f >= 0) H5Fclose(f);
    free(grp);
    free(name);
    return st;
}
