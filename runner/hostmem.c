/* hostmem.c — a run's host memory, planned (see hostmem.h). */
#include "hostmem.h"
#include "jobio.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static size_t gr_hostmem_at_start;

size_t gr_hostmem_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (!f) return 0;
    int got = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (size_t)resident * (size_t)page : 0;
}

void gr_hostmem_start(void) { gr_hostmem_at_start = gr_hostmem_rss(); }

void gr_hostmem_of(const gr_job *j, const gr_mem_need *dev, bool resuming, gr_host_need *out) {
    memset(out, 0, sizeof *out);
    out->process = gr_hostmem_at_start;
    out->libs = GR_HOST_LIBS_BYTES;
    gr_loader_config tl, vl;
    gr_job_loader_configs(j, &tl, &vl);
    if (j->byname) out->data = gr_jobio_host_bytes(j, &tl, &vl, &out->loaders);
    if (j->train_ds) {
        out->data = gr_dataset_host_bytes(j->train_ds);
        out->loaders = gr_loader_host_bytes(j->train_ds, &tl);
    }
    if (j->val_ds) {
        out->data += gr_dataset_host_bytes(j->val_ds);
        out->loaders += gr_loader_host_bytes(j->val_ds, &vl);
    }
    if (j->be && gr_backend_host_addressable(j->be)) out->device = dev->total;
    /* the model's arenas as memfit counts them (gr_model_bytes) */
    if (gr_job_writer(j)) /* the saver's snapshot (params, optimizer state), then the final weights' copy */
        out->ckpt = dev->params + dev->optim + dev->params;
    if (resuming) out->resume = dev->params + 2 * dev->grads; /* params and two slots' room, as resume.c reads */
    out->total = out->process + out->libs + out->data + out->loaders + out->device + out->ckpt + out->resume;
}
