/* native.c — finds a webgpu.h library at run time and resolves the functions lean calls.
 *
 * lean links against no WebGPU library: it dlopens one, so the same binary runs (on the CPU)
 * where none is installed. The search, first hit wins:
 *   1. $LEAN_WEBGPU_LIB (a path)
 *   2. webgpu/libwebgpu_wrapper.so next to the file holding lean's code (the lean binary or
 *      liblean.so, found with dladdr; also /proc/self/exe), or one folder up (the test
 *      programs in build/tests use build/webgpu) — where scripts/setup_webgpu.sh copies Dawn
 *   3. the plain names libwebgpu_wrapper.so, libwebgpu_dawn.so, libwgpu_native.so (the
 *      dynamic loader's own search path)
 * Every function of wgpu_api (webgpu.h) but the optional ones must resolve, else the library
 * is refused naming the first missing symbol. The library stays loaded until the process
 * exits: Dawn and the drivers below it (Mesa starts threads) are not safe to unload.
 *
 * Not in the wasm32 build, which has no dlopen: web.c reaches WebGPU through JavaScript. */
#ifndef __wasi__
#define _GNU_SOURCE /* dladdr */
#endif
#include "gpu/gpu_impl.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef __wasi__

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

/* Each member of wgpu_api and its symbol: "wgpu" + the member's name; OPT: may be missing. */
#define SYM(name) {"wgpu" #name, offsetof(wgpu_api, name), false}
#define OPT(name) {"wgpu" #name, offsetof(wgpu_api, name), true}
static const struct {
    const char *symbol;
    size_t offset;
    bool optional;
} api_symbols[] = {
    SYM(CreateInstance), SYM(InstanceRequestAdapter), SYM(InstanceWaitAny), SYM(InstanceRelease),
    OPT(InstanceHasWGSLLanguageFeature),
    SYM(AdapterGetInfo), SYM(AdapterInfoFreeMembers), SYM(AdapterGetLimits), SYM(AdapterHasFeature),
    SYM(AdapterRequestDevice), SYM(AdapterRelease), SYM(DeviceGetLimits), SYM(DeviceHasFeature),
    SYM(DeviceGetQueue), SYM(DeviceCreateBuffer), SYM(DeviceCreateShaderModule),
    SYM(DeviceCreateComputePipeline), SYM(DeviceCreateBindGroup), SYM(DeviceCreateCommandEncoder),
    SYM(DevicePushErrorScope), SYM(DevicePopErrorScope), SYM(DeviceCreateQuerySet), SYM(DeviceDestroy), SYM(DeviceRelease),
    SYM(QueueWriteBuffer), SYM(QueueSubmit), SYM(QueueOnSubmittedWorkDone), SYM(QueueRelease),
    SYM(BufferMapAsync), SYM(BufferGetConstMappedRange), SYM(BufferUnmap), SYM(BufferDestroy),
    SYM(BufferRelease), SYM(ShaderModuleRelease), SYM(ComputePipelineGetBindGroupLayout),
    SYM(ComputePipelineRelease), SYM(BindGroupLayoutRelease), SYM(BindGroupRelease),
    SYM(CommandEncoderBeginComputePass), SYM(CommandEncoderCopyBufferToBuffer),
    SYM(CommandEncoderResolveQuerySet), SYM(CommandEncoderFinish),
    SYM(CommandEncoderRelease), SYM(CommandBufferRelease), SYM(ComputePassEncoderSetPipeline),
    SYM(ComputePassEncoderSetBindGroup), SYM(ComputePassEncoderDispatchWorkgroups),
    SYM(ComputePassEncoderEnd), SYM(ComputePassEncoderRelease), SYM(QuerySetDestroy), SYM(QuerySetRelease),
    OPT(DeviceSetLoggingCallback), OPT(AdapterPropertiesSubgroupMatrixConfigsFreeMembers),
};
#undef SYM
#undef OPT
/* Every member is listed (a member left out would stay NULL). */
_Static_assert(sizeof api_symbols / sizeof api_symbols[0] * sizeof(void (*)(void)) == sizeof(wgpu_api),
               "api_symbols must name every member of wgpu_api");

/* What was tried, for the error message: "A (not found), B (missing wgpuX), ...". */
typedef struct tried {
    char text[384];
    size_t len;
} tried;

static void tried_add(tried *t, const char *path, const char *why) {
    int n = snprintf(t->text + t->len, sizeof t->text - t->len, "%s%s (%s)", t->len ? ", " : "", path, why);
    if (n > 0) t->len = t->len + (size_t)n < sizeof t->text ? t->len + (size_t)n : sizeof t->text - 1;
}

/* Opens path and resolves every symbol into *w. false (and a note in *t) if either fails. */
static bool try_library(const char *path, wgpu_api *w, tried *t) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        /* "cannot open shared object file" is the common case: say it briefly. */
        tried_add(t, path, e && !strstr(e, "No such file") ? e : "not found");
        return false;
    }
    for (size_t i = 0; i < sizeof api_symbols / sizeof api_symbols[0]; i++) {
        void *f = dlsym(lib, api_symbols[i].symbol);
        if (!f && !api_symbols[i].optional) {
            char why[96];
            snprintf(why, sizeof why, "no symbol %s", api_symbols[i].symbol);
            tried_add(t, path, why);
            dlclose(lib);
            return false;
        }
        /* POSIX: a dlsym result converts to the function pointer type it names. */
        memcpy((char *)w + api_symbols[i].offset, &f, sizeof f);
    }
    return true;
}

/* The folder of a file path ("." for a bare name) into dir. */
static void dir_of(const char *file, char *dir, size_t cap) {
    const char *slash = strrchr(file, '/');
    if (!slash) snprintf(dir, cap, ".");
    else snprintf(dir, cap, "%.*s", (int)(slash - file), file);
}

/* The folders to look in for webgpu/: the one holding this code, and the executable's. */
static int code_dirs(char dirs[2][PATH_MAX]) {
    int n = 0;
    Dl_info info;
    if (dladdr((void *)gpu_load_library, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
        dir_of(info.dli_fname, dirs[n++], PATH_MAX);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        dir_of(exe, dirs[n], PATH_MAX);
        if (n == 0 || strcmp(dirs[0], dirs[n]) != 0) n++;
    }
    return n;
}

/* The path found, absolute where it names a file, into out: for `lean info --gpu`. */
static lean_status found(const char *path, char *out, size_t cap) {
    char abs[PATH_MAX];
    snprintf(out, cap, "%s", strchr(path, '/') && realpath(path, abs) ? abs : path);
    return LEAN_OK;
}

lean_status gpu_load_library(wgpu_api *w, char *path, size_t path_cap, bool *pump, lean_error *err) {
    *pump = false; /* Dawn's waits block */
    tried t = {.len = 0};
    t.text[0] = 0;
    const char *env = getenv("LEAN_WEBGPU_LIB");
    if (env && *env && try_library(env, w, &t)) return found(env, path, path_cap);

    char dirs[2][PATH_MAX];
    int n_dirs = code_dirs(dirs);
    static const char *const beside[] = {"/webgpu/libwebgpu_wrapper.so", "/../webgpu/libwebgpu_wrapper.so"};
    for (int d = 0; d < n_dirs; d++)
        for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
            char p[PATH_MAX + 64];
            snprintf(p, sizeof p, "%.*s%s", PATH_MAX, dirs[d], beside[i]);
            if (try_library(p, w, &t)) return found(p, path, path_cap);
        }

    static const char *const names[] = {"libwebgpu_wrapper.so", "libwebgpu_dawn.so", "libwgpu_native.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (try_library(names[i], w, &t)) return found(names[i], path, path_cap);

    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                     "no WebGPU library (run scripts/setup_webgpu.sh or set LEAN_WEBGPU_LIB); tried %s%s",
                     env && *env ? "" : "LEAN_WEBGPU_LIB (unset), ", t.text);
}

bool gpu_wait_interrupted(void) {
    return false;
}

bool gpu_steps_unscoped(void) {
    return false;
}

/* Dawn looks for the Vulkan loader beside itself, then by name; so does this. Without one the
 * default request can only end at Dawn's Null backend. */
bool gpu_default_request_useful(const char *library) {
    char dir[PATH_MAX], p[PATH_MAX + 32];
    dir_of(library, dir, sizeof dir);
    snprintf(p, sizeof p, "%.*s/libvulkan.so.1", PATH_MAX, dir);
    void *lib = strchr(library, '/') ? dlopen(p, RTLD_LAZY | RTLD_LOCAL) : NULL;
    if (!lib) lib = dlopen("libvulkan.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (lib) dlclose(lib);
    return lib != NULL;
}

#endif
