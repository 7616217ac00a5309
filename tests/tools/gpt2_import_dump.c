/* gpt2_import_dump.c — loads a weights file through model.init_from's
 * dispatch (gr_init_from_load: HDF5, Hugging Face safetensors or llm.c's
 * GPT-2 checkpoint) into a GPT-2-shaped graph built by hand
 * (tests/gpt2_fixture.h), and writes what landed as gpurun weights (HDF5,
 * gr_weights_save), for tests/gpt2_import_torch.py to compare with PyTorch.
 *
 *   gpt2_import_dump L C VOCAB MAXT IN OUT.h5
 *
 * L block uses h0..h<L-1> of width C, a wte of VOCAB rows, a wpe of MAXT.
 * Exits with the load's status (6: a checkpoint error, its message on
 * stderr), 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>

#include "checkpoints/gpt2_import.h"
#include "checkpoints/weights.h"
#include "gpt2_fixture.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: gpt2_import_dump L C VOCAB MAXT IN OUT.h5\n");
        return 2;
    }
    const long L = atol(argv[1]), C = atol(argv[2]), vocab = atol(argv[3]), maxT = atol(argv[4]);
    if (L < 1 || L > 64 || C < 1 || C > 4096 || vocab < 1 || vocab > 1 << 20 || maxT < 1 || maxT > 1 << 16) {
        fprintf(stderr, "gpt2_import_dump: sizes out of range\n");
        return 2;
    }
    gr_graph g;
    g2_gpt2(&g, (int)L, C, vocab, maxT);
    float *p = gr_xcalloc((size_t)g.n_params + 1, sizeof *p);
    gr_error err = {0};
    gr_status st = gr_init_from_load(argv[5], &g, p, &err);
    if (!st) st = gr_weights_save(argv[6], &g, p, &err);
    if (st) fprintf(stderr, "gpt2_import_dump: %s\n", err.msg);
    free(p);
    gr_graph_free(&g);
    return (int)st;
}
