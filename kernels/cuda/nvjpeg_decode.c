/* nvjpeg_decode.c — the CUDA backend's decoder of encoded images
 * (gr_backend_decoder_open / gr_backend_decode_images, kernels/backend.h;
 * data.decode gpu): a batch's JPEGs decoded by nvJPEG into a device arena,
 * then each through its transform into the input tensor by gpurun's own
 * kernel (imgproc.cu, kernels/body_image.h).
 *
 * Backends. nvjpegCreateEx with NVJPEG_BACKEND_HARDWARE where the GPU has
 * JPEG engines (A100, H100, H200 do): the batch's baseline colour JPEGs
 * that the engines take (nvjpegDecodeBatchedSupported on the parsed header)
 * go through one nvjpegDecodeBatched. Everything else — grayscale JPEGs
 * (decoded as their Y plane), progressive ones, 4:1:1 — and every JPEG on a
 * GPU without engines goes through a second handle on
 * NVJPEG_BACKEND_DEFAULT (GPU-assisted Huffman for baseline, hybrid
 * otherwise): colour ones through nvjpegDecodeBatched when there is no
 * hardware handle, the rest one at a time through nvjpegDecode. Which
 * backend is used is said by decoder_open's line.
 *
 * Full decode, not ROI: every image is decoded whole (no
 * nvjpegDecodeParamsSetROI). ROI decode is reached only through the
 * decoupled or nvjpegDecodeBatchedEx calls, whose ROI on the hardware
 * engines has alignment rules of its own; the engines still entropy-decode
 * every MCU up to the box's last row; and a whole image keeps the crop
 * arithmetic in our kernel exactly the host's, in stored pixels. The cost
 * is the decoded arena (sum of H x W x 3 bytes per batch).
 *
 * A JPEG nvJPEG cannot take (CMYK, a header that disagrees with the stored
 * shape, a decode that fails) is not an error here: it is marked need_host
 * and left for the host (runner/decode.c), which decodes it as the CPU path
 * does and says so once. nvJPEG calls that are not about one image (state
 * creation) go through GR_NVJPEG: a fault, exit 7, naming the call. */
#include "cuda_backend.h"
#include "cu_imgproc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GR_HAVE_NVJPEG
#include <nvjpeg.h>

static const char *gr_nvjpeg_status(nvjpegStatus_t s) {
    switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default: break;
    }
    return "an unknown nvjpegStatus_t";
}

#define GR_NVJPEG(call) do { \
    nvjpegStatus_t gr_s_ = (call); \
    if (gr_s_ != NVJPEG_STATUS_SUCCESS) gr_cuda_die(__FILE__, __LINE__, #call, gr_nvjpeg_status(gr_s_)); \
} while (0)

/* Where a JPEG of the batch is decoded. */
enum { ROUTE_NONE, ROUTE_BATCH, ROUTE_SINGLE };

struct gr_cuda_jpeg {
    gr_status open_st;            /* decoder_open's answer, kept for later calls */
    char desc[640], why[GR_ERROR_MSG_MAX];
    nvjpegHandle_t hw, gen;       /* the hardware backend (NULL: none), the default one */
    nvjpegJpegState_t hw_state;   /* hw's batched decodes */
    nvjpegJpegState_t genb_state; /* gen's batched decodes (no hw) */
    nvjpegJpegState_t gen_state;  /* gen's one-image decodes */
    nvjpegJpegStream_t parsed;    /* a header parsed for nvjpegDecodeBatchedSupported */
    int batch_init;               /* the batch size the batched state was initialized for (0: none) */
    uint8_t *arena;               /* decoded images, device */
    size_t arena_bytes;
    gr_img_desc *ddesc;           /* device descriptors, cap of them */
    int64_t cap;
    /* host, cap each: per sample (hdesc, route, off), per batched JPEG (data, len, img, which) */
    gr_img_desc *hdesc;
    int *route;
    size_t *off;
    const unsigned char **data;
    size_t *len;
    nvjpegImage_t *img;
    int64_t *which;
};

static void gr_jpeg_grow(gr_backend *be, struct gr_cuda_jpeg *j, int64_t n) {
    if (n <= j->cap) return;
    gr_backend_dealloc(be, j->ddesc);
    j->ddesc = NULL;
    free(j->hdesc), free(j->data), free(j->len), free(j->img), free(j->route), free(j->off), free(j->which);
    j->cap = n;
    j->hdesc = gr_xcalloc((size_t)n, sizeof *j->hdesc);
    j->data = gr_xcalloc((size_t)n, sizeof *j->data);
    j->len = gr_xcalloc((size_t)n, sizeof *j->len);
    j->img = gr_xcalloc((size_t)n, sizeof *j->img);
    j->route = gr_xcalloc((size_t)n, sizeof *j->route);
    j->off = gr_xcalloc((size_t)n, sizeof *j->off);
    j->which = gr_xcalloc((size_t)n, sizeof *j->which);
}

void gr_cuda_jpeg_free(gr_backend *be) {
    gr_cuda *cu = be->impl;
    struct gr_cuda_jpeg *j = cu->jpeg;
    if (!j) return;
    GR_CU(cudaStreamSynchronize(cu->stream));
    if (j->parsed) GR_NVJPEG(nvjpegJpegStreamDestroy(j->parsed));
    if (j->hw_state) GR_NVJPEG(nvjpegJpegStateDestroy(j->hw_state));
    if (j->genb_state) GR_NVJPEG(nvjpegJpegStateDestroy(j->genb_state));
    if (j->gen_state) GR_NVJPEG(nvjpegJpegStateDestroy(j->gen_state));
    if (j->hw) GR_NVJPEG(nvjpegDestroy(j->hw));
    if (j->gen) GR_NVJPEG(nvjpegDestroy(j->gen));
    gr_backend_dealloc(be, j->arena);
    gr_backend_dealloc(be, j->ddesc);
    free(j->hdesc), free(j->data), free(j->len), free(j->img), free(j->route), free(j->off), free(j->which);
    free(j);
    cu->jpeg = NULL;
}

/* The handles and states; GR_ERR_DEVICE naming the call that failed. */
static gr_status gr_jpeg_start(gr_cuda *cu, struct gr_cuda_jpeg *j, gr_error *err) {
    int ver[3] = {0, 0, 0};
    const libraryPropertyType prop[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
    for (int k = 0; k < 3; k++)
        if (nvjpegGetProperty(prop[k], &ver[k]) != NVJPEG_STATUS_SUCCESS) ver[k] = -1;
    char hw_why[160] = "";
    unsigned engines = 0, cores = 0;
    nvjpegStatus_t s = nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, NULL, NULL, NVJPEG_FLAGS_DEFAULT, &j->hw);
    if (s == NVJPEG_STATUS_SUCCESS) {
        s = nvjpegGetHardwareDecoderInfo(j->hw, &engines, &cores);
        if (s != NVJPEG_STATUS_SUCCESS || engines == 0) {
            snprintf(hw_why, sizeof hw_why, "nvjpegGetHardwareDecoderInfo: %s, %u engines",
                     gr_nvjpeg_status(s), engines);
            GR_NVJPEG(nvjpegDestroy(j->hw));
            j->hw = NULL;
        }
    } else {
        snprintf(hw_why, sizeof hw_why, "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE): %s", gr_nvjpeg_status(s));
        j->hw = NULL;
    }
    const char *call = "nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT)";
    if ((s = nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, NULL, NULL, NVJPEG_FLAGS_DEFAULT, &j->gen)) != NVJPEG_STATUS_SUCCESS)
        goto fail;
    call = "nvjpegJpegStateCreate";
    if ((s = nvjpegJpegStateCreate(j->gen, &j->gen_state)) != NVJPEG_STATUS_SUCCESS) goto fail;
    if (j->hw) {
        if ((s = nvjpegJpegStateCreate(j->hw, &j->hw_state)) != NVJPEG_STATUS_SUCCESS) goto fail;
        call = "nvjpegJpegStreamCreate";
        if ((s = nvjpegJpegStreamCreate(j->hw, &j->parsed)) != NVJPEG_STATUS_SUCCESS) goto fail;
    } else if ((s = nvjpegJpegStateCreate(j->gen, &j->genb_state)) != NVJPEG_STATUS_SUCCESS) {
        goto fail;
    }
    if (j->hw)
        snprintf(j->desc, sizeof j->desc, "cuda:%d with nvJPEG %d.%d.%d (hardware backend, %u engine%s x %u cores)",
                 cu->device, ver[0], ver[1], ver[2], engines, engines == 1 ? "" : "s", cores);
    else /* the slower path, said */
        snprintf(j->desc, sizeof j->desc, "cuda:%d with nvJPEG %d.%d.%d (default backend, GPU-assisted Huffman: no "
                 "JPEG engines on %s: %s)", cu->device, ver[0], ver[1], ver[2], cu->name, hw_why);
    return GR_OK;
fail:
    return gr_error_set(err, GR_ERR_DEVICE, "nvJPEG %d.%d.%d on cuda:%d: %s failed: %s", ver[0], ver[1], ver[2],
                        cu->device, call, gr_nvjpeg_status(s));
}

gr_status gr_cuda_decoder_open(gr_backend *be, char *desc, size_t n, gr_error *err) {
    gr_cuda *cu = be->impl;
    if (!cu->jpeg) {
        struct gr_cuda_jpeg *j = cu->jpeg = gr_xcalloc(1, sizeof *j);
        gr_error e = {0};
        j->open_st = gr_jpeg_start(cu, j, &e);
        snprintf(j->why, sizeof j->why, "%s", e.msg);
    }
    if (cu->jpeg->open_st != GR_OK) return gr_error_set(err, cu->jpeg->open_st, "%s", cu->jpeg->why);
    snprintf(desc, n, "%s", cu->jpeg->desc);
    return GR_OK;
}

/* Sample i left for the host; the first such reason (msg) into why. */
static void gr_jpeg_refuse(uint8_t *need_host, int64_t i, char *why, size_t why_n, bool *said, const char *msg) {
    need_host[i] = 1;
    if (*said || !why_n) return;
    *said = true;
    snprintf(why, why_n, "%s", msg);
}

/* Where sample i goes, its plane layout in d (px set later) and its bytes
 * in the arena at *at; ROUTE_NONE when nvJPEG cannot take it. */
static int gr_jpeg_route(struct gr_cuda_jpeg *j, const gr_enc_batch *e, int64_t i, gr_img_desc *d, size_t *at,
                         uint8_t *need_host, char *why, size_t why_n, bool *said) {
    const gr_enc_sample *o = &e->s[i];
    const unsigned char *data = e->bytes + o->off;
    int nc = 0, w[NVJPEG_MAX_COMPONENT], h[NVJPEG_MAX_COMPONENT];
    nvjpegChromaSubsampling_t css;
    char msg[200];
    nvjpegStatus_t s = nvjpegGetImageInfo(j->gen, data, o->len, &nc, &css, w, h);
    if (s != NVJPEG_STATUS_SUCCESS) {
        snprintf(msg, sizeof msg, "nvjpegGetImageInfo: %s (sample %lld)", gr_nvjpeg_status(s), (long long)o->index);
        gr_jpeg_refuse(need_host, i, why, why_n, said, msg);
        return ROUTE_NONE;
    }
    if ((nc != 1 && nc != 3) || w[0] != o->w || h[0] != o->h) {
        snprintf(msg, sizeof msg, "sample %lld: nvjpegGetImageInfo says %d components of %dx%d (HxW), the split's "
                 "shapes %dx%dx%d", (long long)o->index, nc, h[0], w[0], o->h, o->w, o->c);
        gr_jpeg_refuse(need_host, i, why, why_n, said, msg);
        return ROUTE_NONE;
    }
    d->h = o->h, d->w = o->w, d->chans = nc == 1 ? 1 : 3;
    d->pitch = (int64_t)o->w * d->chans;
    *at = (*at + 255) & ~(size_t)255;
    j->off[i] = *at;
    *at += (size_t)d->pitch * (size_t)o->h;
    if (nc == 1) return ROUTE_SINGLE; /* its Y plane: one channel read as three */
    if (!j->hw) return ROUTE_BATCH;
    int unsupported = 1;
    if (nvjpegJpegStreamParseHeader(j->hw, data, o->len, j->parsed) == NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatchedSupported(j->hw, j->parsed, &unsupported) == NVJPEG_STATUS_SUCCESS && unsupported == 0)
        return ROUTE_BATCH;
    return ROUTE_SINGLE; /* progressive, 4:1:1, ...: the default backend */
}

/* The batched decode of the nb JPEGs in j->data, j->len into j->img
 * (colour, RGBI); false when nvJPEG refused the batch (the batched state is
 * initialized again on the next call): the caller decodes them one at a
 * time, and the first refusal's reason goes to why. */
static bool gr_jpeg_batched(gr_cuda *cu, struct gr_cuda_jpeg *j, int nb, char *why, size_t why_n, bool *said) {
    nvjpegHandle_t h = j->hw ? j->hw : j->gen;
    nvjpegJpegState_t st = j->hw ? j->hw_state : j->genb_state;
    const char *call = "nvjpegDecodeBatchedInitialize";
    nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;
    if (j->batch_init != nb) {
        j->batch_init = 0;
        if ((s = nvjpegDecodeBatchedInitialize(h, st, nb, 1, NVJPEG_OUTPUT_RGBI)) != NVJPEG_STATUS_SUCCESS) goto fail;
        j->batch_init = nb;
    }
    call = "nvjpegDecodeBatched";
    if ((s = nvjpegDecodeBatched(h, st, j->data, j->len, j->img, cu->stream)) != NVJPEG_STATUS_SUCCESS) goto fail;
    return true;
fail:
    j->batch_init = 0;
    if (!*said && why_n) {
        *said = true;
        snprintf(why, why_n, "%s of %d JPEGs (%s backend): %s; they were decoded one at a time", call, nb,
                 j->hw ? "hardware" : "default", gr_nvjpeg_status(s));
    }
    return false;
}

/* One JPEG through the default backend's one-image decode, as RGBI or its
 * Y plane (chans 1); false with the reason in why (the first) when it fails. */
static bool gr_jpeg_single(gr_cuda *cu, struct gr_cuda_jpeg *j, const gr_enc_batch *e, int64_t i, uint8_t *px,
                           const gr_img_desc *d, char *why, size_t why_n, bool *said) {
    const gr_enc_sample *o = &e->s[i];
    nvjpegImage_t img;
    memset(&img, 0, sizeof img);
    img.channel[0] = px;
    img.pitch[0] = (size_t)d->pitch;
    const nvjpegOutputFormat_t fmt = d->chans == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGBI;
    nvjpegStatus_t s = nvjpegDecode(j->gen, j->gen_state, e->bytes + o->off, o->len, fmt, &img, cu->stream);
    if (s == NVJPEG_STATUS_SUCCESS) return true;
    if (!*said && why_n) {
        *said = true;
        snprintf(why, why_n, "nvjpegDecode: %s (sample %lld)", gr_nvjpeg_status(s), (long long)o->index);
    }
    return false;
}

/* The arena holds `bytes`: grown (a quarter more) when it does not. */
static gr_status gr_jpeg_arena(gr_backend *be, struct gr_cuda_jpeg *j, size_t bytes, int64_t n, gr_error *err) {
    if (bytes <= j->arena_bytes) return GR_OK;
    gr_cuda *cu = be->impl;
    gr_backend_dealloc(be, j->arena); /* syncs: the last batch's kernel is done with it */
    j->arena_bytes = 0;
    const size_t want = bytes + bytes / 4;
    if (!(j->arena = gr_backend_alloc(be, want))) {
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: %zu bytes for a batch's %lld decoded JPEGs "
                            "(data.decode gpu); %zu free of %zu (data.decode: cpu decodes on the host)", cu->device,
                            want, (long long)n, fr, tot);
    }
    j->arena_bytes = want;
    return GR_OK;
}

gr_status gr_cuda_decode_images(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                                size_t why_n, gr_error *err) {
    gr_cuda *cu = be->impl;
    struct gr_cuda_jpeg *j = cu->jpeg;
    GR_ASSERT(j && j->open_st == GR_OK);
    const int64_t n = e->n;
    bool said = false;
    if (why_n) why[0] = 0;
    gr_jpeg_grow(be, j, n);
    if (!j->ddesc && !(j->ddesc = gr_backend_alloc(be, (size_t)j->cap * sizeof *j->ddesc)))
        return gr_error_set(err, GR_ERR_OOM, "out of memory on cuda:%d: %zu bytes for %lld image descriptors",
                            cu->device, (size_t)j->cap * sizeof *j->ddesc, (long long)j->cap);
    /* where each goes, and the arena's layout */
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        gr_img_desc *d = &j->hdesc[i];
        memset(d, 0, sizeof *d);
        need_host[i] = 0;
        j->route[i] = e->s[i].host ? ROUTE_NONE : gr_jpeg_route(j, e, i, d, &at, need_host, why, why_n, &said);
    }
    gr_status st = gr_jpeg_arena(be, j, at, n, err);
    if (st != GR_OK) return st;
    /* the batched ones, then one at a time the others (and a refused batch's) */
    int nb = 0;
    for (int64_t i = 0; i < n; i++) {
        if (j->route[i] != ROUTE_BATCH) continue;
        const gr_enc_sample *o = &e->s[i];
        j->which[nb] = i;
        j->data[nb] = e->bytes + o->off;
        j->len[nb] = o->len;
        memset(&j->img[nb], 0, sizeof j->img[nb]);
        j->img[nb].channel[0] = j->arena + j->off[i];
        j->img[nb].pitch[0] = (size_t)j->hdesc[i].pitch;
        nb++;
    }
    if (nb > 0 && !gr_jpeg_batched(cu, j, nb, why, why_n, &said))
        for (int k = 0; k < nb; k++) j->route[j->which[k]] = ROUTE_SINGLE;
    for (int64_t i = 0; i < n; i++)
        if (j->route[i] == ROUTE_SINGLE &&
            !gr_jpeg_single(cu, j, e, i, j->arena + j->off[i], &j->hdesc[i], why, why_n, &said)) {
            j->route[i] = ROUTE_NONE;
            need_host[i] = 1;
        }
    /* the transforms: one kernel over the batch */
    for (int64_t i = 0; i < n; i++) {
        gr_img_desc *d = &j->hdesc[i];
        const gr_enc_sample *o = &e->s[i];
        d->skip = j->route[i] == ROUTE_NONE;
        if (d->skip) continue;
        d->px = j->arena + j->off[i];
        d->y0 = o->y0, d->x0 = o->x0, d->bh = o->bh, d->bw = o->bw, d->flip = o->flip;
        const int64_t R = e->short_side, W = o->w, H = o->h;
        if (W <= H) d->fw = (int32_t)R, d->fh = (int32_t)GR_MAX(llround((double)H * (double)R / (double)W), R);
        else d->fh = (int32_t)R, d->fw = (int32_t)GR_MAX(llround((double)W * (double)R / (double)H), R);
    }
    gr_img_norm nm;
    memset(&nm, 0, sizeof nm);
    nm.S = e->size;
    for (int c = 0; c < 3; c++) { /* gr_decoder_init's */
        nm.mean[c] = e->mean[c], nm.std[c] = e->std[c];
        nm.k[c] = (float)(1.0 / e->std[c]);
        nm.b[c] = (float)(-e->mean[c] / e->std[c]);
    }
    /* pageable source: staged before the call returns, so hdesc is free again at once */
    GR_CU(cudaMemcpyAsync(j->ddesc, j->hdesc, (size_t)n * sizeof *j->hdesc, cudaMemcpyHostToDevice, cu->stream));
    gr_cu_img_transform(cu->stream, j->ddesc, n, &nm, e->center, dst);
    return GR_OK;
}

#else /* a CUDA build without nvJPEG */

void gr_cuda_jpeg_free(gr_backend *be) { (void)be; }

gr_status gr_cuda_decoder_open(gr_backend *be, char *desc, size_t n, gr_error *err) {
    (void)desc, (void)n;
    return gr_error_set(err, GR_ERR_DEVICE, "this gpurun's CUDA build has no nvJPEG (nvjpeg.h and libnvjpeg were not "
                        "found when it was configured; NVJPEG_ROOT names a tree that has them) on cuda:%d",
                        ((gr_cuda *)be->impl)->device);
}

gr_status gr_cuda_decode_images(gr_backend *be, const gr_enc_batch *e, float *dst, uint8_t *need_host, char *why,
                                size_t why_n, gr_error *err) {
    (void)be, (void)e, (void)dst, (void)need_host, (void)why, (void)why_n, (void)err;
    GR_ASSERT(!"gr_cuda_decode_images: no nvJPEG in this build (decoder_open said so)");
    return GR_ERR_INTERNAL;
}

#endif
