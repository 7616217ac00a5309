/* cublas_dl.c — cuBLAS loaded at the first CUDA backend (cublas_dl.h). */
#include "cublas_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define GR_DL_STR_(x) #x
#define GR_DL_STR(x) GR_DL_STR_(x)

#ifndef GR_CUBLAS_PATH
#define GR_CUBLAS_PATH ""
#endif

gr_cublas_fns gr_cublas;

/* the symbol's address in a function pointer of any type (POSIX dlsym), by
 * the name the header's macro gives the function */
#define GR_CUBLAS_SYM(lib, f, fn) \
    ((*(void **)(&(f)->fn) = dlsym(lib, GR_DL_STR(cublas##fn))) != NULL || (missing = GR_DL_STR(cublas##fn), false))

gr_status gr_cublas_open(const char *const *libs, int nlibs, gr_cublas_fns *fns, gr_error *err) {
    char tried[GR_ERROR_MSG_MAX] = "";
    size_t len = 0;
    for (int i = 0; i < nlibs; i++) {
        if (!libs[i] || !libs[i][0]) continue;
        void *lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *why = dlerror();
            int k = snprintf(tried + len, sizeof tried - len, "%s%s", len ? "; " : "", why ? why : libs[i]);
            if (k > 0) len = GR_MIN(sizeof tried - 1, len + (size_t)k);
            continue;
        }
        gr_cublas_fns f;
        const char *missing = NULL;
        if (GR_CUBLAS_SYM(lib, &f, Create) && GR_CUBLAS_SYM(lib, &f, Destroy) && GR_CUBLAS_SYM(lib, &f, SetStream) &&
            GR_CUBLAS_SYM(lib, &f, SetMathMode) && GR_CUBLAS_SYM(lib, &f, SetWorkspace) &&
            GR_CUBLAS_SYM(lib, &f, GemmEx) && GR_CUBLAS_SYM(lib, &f, GetStatusString)) {
            *fns = f; /* the library stays loaded for the process's life */
            return GR_OK;
        }
        dlclose(lib);
        return gr_error_set(err, GR_ERR_DEVICE, "cuBLAS: %s has no %s (gpurun was built against cuBLAS %d)",
                            libs[i], missing, CUBLAS_VER_MAJOR);
    }
    return gr_error_set(err, GR_ERR_DEVICE, "cuBLAS could not be loaded, which the CUDA backend needs: %s",
                        len ? tried : "no library to try");
}

static gr_status gr_cublas_st = GR_OK;
static gr_error gr_cublas_err;
static pthread_once_t gr_cublas_once = PTHREAD_ONCE_INIT;

static void gr_cublas_load_once(void) {
    const char *libs[] = {"libcublas.so." GR_DL_STR(CUBLAS_VER_MAJOR), GR_CUBLAS_PATH};
    gr_cublas_st = gr_cublas_open(libs, 2, &gr_cublas, &gr_cublas_err);
}

gr_status gr_cublas_load(gr_error *err) {
    pthread_once(&gr_cublas_once, gr_cublas_load_once);
    if (gr_cublas_st != GR_OK && err) *err = gr_cublas_err;
    return gr_cublas_st;
}
