/* gpu.h — lean's WebGPU runtime: the only door the GPU backend (forward.c, the kernel
 * files) goes through to reach a GPU. Natively it is implemented over the standard webgpu.h
 * C API, dlopened at run time (native.c, device.c); in a browser build a web.c implements
 * the same functions over JavaScript imports. Nothing above this header sees a WGPU type.
 *
 * The model of work (DESIGN.md principle 4): at load, buffers, pipelines and bind groups are
 * made once; a forward step writes a few bytes of parameters, records a list of dispatches
 * (and copies) into one command buffer, submits it, and — only where a result is needed on
 * the host — reads a buffer back.
 *
 * Errors: every function that can fail returns a lean_status and fills *err (nullable) with
 * a message naming what failed (the pipeline label, the buffer label, the adapter). Once the
 * device is lost, every later call fails with LEAN_ERR_DEVICE and the loss's message. */
#ifndef LEAN_GPU_H
#define LEAN_GPU_H

#include "core/common.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct lean_gpu lean_gpu;                     /* library, instance, adapter, device, queue */
typedef struct lean_gpu_buf lean_gpu_buf;             /* a GPU buffer and its size */
typedef struct lean_gpu_pipeline lean_gpu_pipeline;   /* a compute pipeline, layout "auto" */
typedef struct lean_gpu_bindgroup lean_gpu_bindgroup; /* bind group 0 of a pipeline */
typedef struct lean_gpu_cmd lean_gpu_cmd;             /* a command buffer being recorded */

/* A subgroup-matrix shape the adapter offers (webgpu.h's WGPUSubgroupMatrixConfig): left (m
 * rows, k columns) x right (k rows, n columns) + result (m rows, n columns), computed by one
 * subgroup; the types by their WGSL names ("f32", "f16", "u32", "i32"). */
typedef struct lean_gpu_matrix_config {
    char type[4], result[4];
    uint32_t m, n, k;
} lean_gpu_matrix_config;
enum { LEAN_GPU_MATRIX_CONFIGS_MAX = 16 };

/* What the adapter is and what the device was created with (the adapter's own limits,
 * requested explicitly; the optional features only when offered). */
typedef struct lean_gpu_info {
    char adapter[128];      /* the adapter's device name, e.g. "NVIDIA H200" or "llvmpipe ..." */
    char vendor[64];
    char architecture[64];
    char backend[16];       /* "Vulkan", "OpenGLES", "Metal", "D3D12", "WebGPU" (browser) */
    char feature_level[16]; /* "core" or "compatibility" */
    bool software;          /* adapterType CPU (llvmpipe, SwiftShader): `auto` prefers the CPU backend */
    bool shader_f16, subgroups, timestamp_query; /* granted on the device */
    bool packed_dot; /* WGSL's packed_4x8_integer_dot_product (dot4I8Packed): the instance has it */
    uint32_t subgroup_min_size, subgroup_max_size; /* 0 when unknown */
    uint64_t max_storage_binding;  /* maxStorageBufferBindingSize, bytes */
    uint64_t max_buffer;           /* maxBufferSize, bytes */
    uint32_t max_storage_buffers_per_stage;
    uint32_t max_workgroup_storage; /* bytes */
    uint32_t max_invocations;       /* per workgroup */
    uint32_t max_workgroup_x, max_workgroup_y, max_workgroup_z;
    uint32_t max_workgroups_per_dim;
    uint32_t min_storage_offset_align, min_uniform_offset_align;
    /* Dawn's chromium_experimental_subgroup_matrix: granted on the device (where the adapter
     * offers it), and the shapes the adapter offers (the first LEAN_GPU_MATRIX_CONFIGS_MAX) */
    bool subgroup_matrix;
    uint32_t n_matrix_configs;
    lean_gpu_matrix_config matrix_configs[LEAN_GPU_MATRIX_CONFIGS_MAX];
} lean_gpu_info;

/* The choices a device is opened with; {0} is the library's own: the f16 path and the 8-bit
 * prefill where the adapter has them, each kernel variant where its measurements put it
 * (docs/gpu.md). */
typedef enum lean_gpu_force {
    LEAN_GPU_AUTO = 0, /* the library's choice */
    LEAN_GPU_OFF,
    LEAN_GPU_ON, /* where the device can (f16: shader-f16; int8: packed dot products) */
} lean_gpu_force;
typedef struct lean_gpu_options {
    bool profile; /* count and time every dispatch (lean_gpu_profiling); LEAN_PROFILE=1 also */
    /* lean_ctx_params.exact turns both OFF (forward.c) */
    lean_gpu_force f16;  /* prefill's matmuls in f16 (tiled_f16.wgsl) */
    lean_gpu_force int8; /* quantized prefill on 8-bit dot products (matmul_tiled_i8.wgsl) */
    /* Kernel variants the tests force, so that each runs on every format and shape where the
     * library would pick it for some of them only (weights.c, ops.c, forward.c say when): */
    lean_gpu_force tile_wide;     /* matmul_tiled's wide shape */
    lean_gpu_force tile_prefetch; /* matmul_tiled's loads a group ahead */
    lean_gpu_force vec_prefetch;  /* a normed matmul_vec's first chunk decoded before the norm */
    uint32_t tile_ksplit;   /* prefill matmuls split over their columns in this many parts (0: as
                             * their size says; at most one a 128-column step) */
    uint32_t attn_ksplits;  /* attention_tiled's key splits, 1 to 8 (0: GPU_ATTN_KSPLITS) */
    bool no_subgroups;      /* reduce.wgsl's trees where the device has subgroups */
    bool no_kv_epilogue;    /* decode's qkv_post as a dispatch, as on a device without the storage
                             * buffers for the Q, K, V matmuls to do its work */
    bool no_resident;       /* no resident generation: the host draws (gen_begin declines) */
    uint32_t gen_pace;      /* a resident generation's depth fixed, as for a step of 25 ms / gen_pace
                             * (16: greedy blocks of 16 ids, 8 sampled steps in flight), so that
                             * the steps run ahead do not depend on timing; 0: from the measured
                             * step time (forward.c, gen_pace) */
    /* Native Dawn only: the adapter toggle vulkan_enable_f16_on_nvidia (Dawn withholds
     * shader-f16 from NVIDIA's Vulkan driver without it), for f16 subgroup matrices there */
    bool nvidia_f16;
    bool null_backend; /* tests: Dawn's Null backend, which offers every feature and runs nothing
                        * (shaders are compiled and checked, results are never computed) */
} lean_gpu_options;

/* Finds a webgpu.h library (LEAN_WEBGPU_LIB, then the copy the setup step installs next to
 * the lean binary, then common names), creates the instance, asks for a high-performance
 * adapter (on a machine whose only GPU path is Mesa: OpenGL ES at compatibility level) and a
 * device with the adapter's limits; opt (NULL: {0}) is copied. LEAN_ERR_UNSUPPORTED when no
 * library or no adapter is found (the message says which and where it looked): callers fall
 * back to the CPU. Mesa's EGL without a display needs EGL_PLATFORM=surfaceless in the
 * environment before the first open (lean.h, "WebGPU"): the library sets no variable.
 * Pump mode: LEAN_PENDING while the adapter or device request is unanswered; the half-open
 * device is kept and the next call (with the same opt) resumes it. */
lean_status lean_gpu_open(lean_gpu **out, const lean_gpu_options *opt, lean_error *err);
/* The options g was opened with, for the kernel files to read; tests change the variants of a
 * device they hold between pipelines (a pipeline keeps the variant it was made with). */
lean_gpu_options *lean_gpu_options_of(lean_gpu *g);
/* Destroys the device (every buffer, pipeline and bind group with it) and frees g. Buffers
 * and bind groups not freed yet are freed here: free none of them after this call. */
void lean_gpu_close(lean_gpu *g);
const lean_gpu_info *lean_gpu_get_info(const lean_gpu *g);
/* The most bytes one storage binding of g may hold for the kernels: the least of the device's
 * maxStorageBufferBindingSize, its maxBufferSize, and 2^32 - 4 (what the kernels' u32 word and
 * element indices reach). The limit error messages print this number. */
static inline uint64_t gpu_binding_max_bytes(const lean_gpu *g) {
    const lean_gpu_info *info = lean_gpu_get_info(g);
    uint64_t limit = info->max_storage_binding < info->max_buffer ? info->max_storage_binding : info->max_buffer;
    return limit > (1ull << 32) - 4 ? (1ull << 32) - 4 : limit;
}
/* LEAN_OK, or LEAN_ERR_DEVICE with the message of the loss (or uncaptured error) that ended g. */
lean_status lean_gpu_check(const lean_gpu *g, lean_error *err);
/* The lean_gpu handles open in this process (opened and not yet closed): for tests. */
int lean_gpu_open_count(void);
/* One line per fact, for `lean info`: adapter, backend, features, limits. */
void lean_gpu_describe(const lean_gpu *g, char *buf, size_t cap);

/* ---- buffers ---- */
enum {
    LEAN_GPU_STORAGE = 1u << 0,  /* bound as var<storage>; also a copy source and destination */
    LEAN_GPU_UNIFORM = 1u << 1,  /* bound as var<uniform>; written with lean_gpu_buf_write */
    LEAN_GPU_READBACK = 1u << 2, /* a host-mappable staging buffer (copy destination, map read) */
};
/* size is rounded up to a multiple of 4; contents start zeroed. */
lean_status lean_gpu_buf_create(lean_gpu *g, uint64_t size, unsigned usage, const char *label,
                                lean_gpu_buf **out, lean_error *err);
void lean_gpu_buf_free(lean_gpu_buf *b); /* NULL is fine */
/* A view: bytes [offset, offset + size) of STORAGE buffer parent as a buffer of its own, for
 * every call here (binding, writes, reads, copies address that range). offset a multiple of the
 * device's storage offset alignment, size of 16; the parent must outlive the view, whose free
 * releases only the view. The KV pool (kvpool.h) hands contexts their caches as views. */
lean_status lean_gpu_buf_view(lean_gpu_buf *parent, uint64_t offset, uint64_t size, const char *label,
                              lean_gpu_buf **out, lean_error *err);
uint64_t lean_gpu_buf_size(const lean_gpu_buf *b);
/* The bytes of every buffer made on g and not yet freed (sizes as created: rounded up to 16),
 * staging included: what the weights, KV caches and activations hold on the device. */
uint64_t lean_gpu_bytes_allocated(const lean_gpu *g);
/* Queues a write (offset and size multiples of 4). Between two submits at most 8 MiB of writes
 * are pending, counted across every write on g: one that would pass that is preceded by an
 * empty submit (no wait), so a browser releases staging memory as a large upload proceeds
 * (DESIGN.md principle 1), however many small writes it is made of. Ordered before any command
 * buffer submitted after it. */
lean_status lean_gpu_buf_write(lean_gpu *g, lean_gpu_buf *b, uint64_t offset, const void *data,
                               uint64_t size, lean_error *err);
/* Waits for all submitted work, then copies [offset, offset + size) of a STORAGE buffer to
 * dst (through an internal staging buffer). Blocking: the native host loop's read-back. */
lean_status lean_gpu_buf_read(lean_gpu *g, lean_gpu_buf *b, uint64_t offset, void *dst, uint64_t size,
                              lean_error *err);

/* Asynchronous read-back of a READBACK buffer (the one read that does not wait for the whole
 * queue): lean_gpu_map_begin asks for b to be mapped once the work submitted so far is done
 * and returns at once; lean_gpu_map_take waits for that map, copies b's first size bytes to
 * dst and unmaps. One map per buffer at a time, and no submit may use b between the two
 * (WebGPU rejects work on a buffer being mapped). lean_gpu_map_drop ends a map in flight
 * unread (natively after waiting for it; in pump mode at once). A buffer freed with a map in
 * flight drops it. Pump mode (lean_gpu_settle): lean_gpu_map_take is LEAN_PENDING until the
 * map and every earlier check have been answered; the map stays in flight for the next take. */
lean_status lean_gpu_map_begin(lean_gpu_buf *b, lean_error *err);
lean_status lean_gpu_map_take(lean_gpu_buf *b, void *dst, uint64_t size, lean_error *err);
void lean_gpu_map_drop(lean_gpu_buf *b);

/* ---- pipelines ---- */
/* The text of src/gpu/shaders/NAME.wgsl, embedded at build time (a generated C file, made by
 * the Makefile from every .wgsl there); NULL for an unknown name. */
const char *lean_gpu_shader(const char *name);

/* The reductions every kernel that sums across a workgroup includes, with the constant SG =
 * lean_gpu_subgroup_size: reduce_sg.wgsl where that is not 0 (the device has subgroups of
 * one fixed size, and no_subgroups is not set), else reduce.wgsl. A source that starts with a
 * directive ("enable ...;") may go anywhere in a pipeline's list: the directive is moved
 * before the constants. */
uint32_t lean_gpu_subgroup_size(lean_gpu *g);
const char *lean_gpu_reduce_shader(lean_gpu *g);
/* Whether prefill's matmuls take the f16 path (tiled_f16.wgsl): the device grants shader-f16
 * and the options' f16 is not OFF. */
bool lean_gpu_f16(const lean_gpu *g);
/* whether quantized weights' prefill runs on 8-bit dot products (device.c says when) */
bool lean_gpu_int8(const lean_gpu *g);

/* A compile-time constant written into the source as `const NAME: TYPE = VALUE;` before the
 * code (no `override`): type 'u' (u32), 'i' (i32) or 'f' (f32). */
typedef struct lean_gpu_const {
    const char *name;
    char type;
    double value;
} lean_gpu_const;

/* Compiles consts + src[0] + src[1] + ... (concatenated in that order; a format's helper
 * functions then a kernel, say) with entry point "main", inside validation and internal
 * error scopes. A rejected shader or pipeline fails with LEAN_ERR_UNSUPPORTED and a message
 * "pipeline 'LABEL': ..." with the compiler's first message and its line. */
lean_status lean_gpu_pipeline_create(lean_gpu *g, const char *label, const char *const *src, int n_src,
                                     const lean_gpu_const *consts, int n_consts, lean_gpu_pipeline **out,
                                     lean_error *err);
/* Pipelines belong to g and live until lean_gpu_close. They are cached by their full source
 * text: a second call with the same constants and sources returns the same pipeline without
 * compiling again, so every layer's matmul of one shape shares one pipeline. */

/* The uniform binding size every adapter grants (maxUniformBufferBindingSize's minimum, core
 * and compatibility): kernels read small weights (norms) as uniforms up to this size, so their
 * storage buffers stay within the 4 every adapter grants. */
#define LEAN_GPU_UNIFORM_MAX_BYTES 16384

/* Bind group 0 of a pipeline: entry i is @binding(i). Every binding the shader declares must
 * be given and none other (the layout is the shader's "auto" layout). size 0 = to the end. */
typedef struct lean_gpu_bind {
    lean_gpu_buf *buf;
    uint64_t offset, size;
} lean_gpu_bind;
lean_status lean_gpu_bindgroup_create(lean_gpu *g, lean_gpu_pipeline *p, const lean_gpu_bind *binds, int n,
                                      const char *label, lean_gpu_bindgroup **out, lean_error *err);
void lean_gpu_bindgroup_free(lean_gpu_bindgroup *bg);

/* ---- subgroup matrices (matrix.c) ---- */
/* Runs shaders/matrix_probe.wgsl for shape c: one multiply-accumulate of small integers (exact
 * in every type) on the device, compared with the CPU's. run false: compiled only (Dawn's Null
 * backend, which runs nothing). *pass, and a line in report: "PASS ...", "FAIL ... the first
 * difference", or "compiled ... (not run)". LEAN_ERR_UNSUPPORTED where the device lacks
 * subgroup matrices, an f16 shape lacks shader-f16, or the compiler rejects the kernel (its
 * message in err). */
/* A pipeline of shaders/SHADER.wgsl for shape c: aliases T (c->type) and R (c->result), the
 * constants M, N, K, WG (the adapter's largest subgroup size: Dawn wants a workgroup's x size
 * a multiple of it where subgroup matrices are used) and up to 6 extra; `enable f16` where a
 * type is f16. LEAN_ERR_UNSUPPORTED as lean_gpu_matrix_probe says. */
lean_status lean_gpu_matrix_pipeline(lean_gpu *g, const lean_gpu_matrix_config *c, const char *shader,
                                     const lean_gpu_const *extra, int n_extra, lean_gpu_pipeline **out,
                                     lean_error *err);
lean_status lean_gpu_matrix_probe(lean_gpu *g, const lean_gpu_matrix_config *c, bool run, bool *pass,
                                  char *report, size_t cap, lean_error *err);

/* matrix_gemm.wgsl, the engine of a matmul on subgroup matrices (not in the forward pass yet):
 * out (rows, cols) = a (rows, depth) * b (cols, depth)^T, each workgroup a block of tm x tn
 * of c's matrices; rows, cols and depth multiples of the block (tm c->m, tn c->n, c->k). The
 * pipeline and its workgroup counts (x, y); the check runs it on small integers against the
 * CPU (depth at most 340, so every sum is exact in f16) as lean_gpu_matrix_probe does. */
typedef struct lean_gpu_gemm {
    uint32_t rows, cols, depth; /* elements */
    uint32_t tm, tn;            /* 1 .. 4 each */
} lean_gpu_gemm;
lean_status lean_gpu_matrix_gemm_pipeline(lean_gpu *g, const lean_gpu_matrix_config *c, const lean_gpu_gemm *m,
                                          lean_gpu_pipeline **out, uint32_t groups[2], lean_error *err);
lean_status lean_gpu_matrix_gemm_check(lean_gpu *g, const lean_gpu_matrix_config *c, const lean_gpu_gemm *m, bool run,
                                       bool *pass, char *report, size_t cap, lean_error *err);

/* ---- recording and submitting work ---- */
/* Consecutive dispatches share one compute pass; a copy ends the pass. Nothing runs until
 * lean_gpu_submit, which also frees the recorder (on success and on failure). */
lean_status lean_gpu_begin(lean_gpu *g, lean_gpu_cmd **out, lean_error *err);
void lean_gpu_dispatch(lean_gpu_cmd *c, lean_gpu_pipeline *p, lean_gpu_bindgroup *bg, uint32_t x, uint32_t y,
                       uint32_t z);
/* Dispatches recorded on g since it was opened (submitted or not): the number a
 * forward step costs, which bounds a small model's decode on a fast GPU (~4 us each). */
uint64_t lean_gpu_dispatch_count(const lean_gpu *g);
void lean_gpu_copy(lean_gpu_cmd *c, lean_gpu_buf *src, uint64_t src_offset, lean_gpu_buf *dst,
                   uint64_t dst_offset, uint64_t size);
/* Submits; fails if recording hit a validation error (the message names the first one) or the
 * device is lost. Does not wait. */
lean_status lean_gpu_submit(lean_gpu_cmd *c, lean_error *err);
/* lean_gpu_submit for lean's own forward steps, whose recordings are known good: where error
 * scopes are costly (JavaScript: gpu_steps_unscoped) it has none, and an error in it comes as
 * an uncaptured error, failing g, reported by the next wait. */
lean_status lean_gpu_submit_step(lean_gpu_cmd *c, lean_error *err);
/* Blocks until all submitted work is done; reports a device loss or an uncaptured error.
 * Pump mode: does not wait; the queue's answer is checked at the next wait (lean_gpu_settle). */
lean_status lean_gpu_finish(lean_gpu *g, lean_error *err);
/* Pump mode (the wasm32 build without JSPI: lean.h, LEAN_PENDING): no wait blocks. Error
 * scopes and queue-done checks are not waited for where they are made; a later wait is
 * LEAN_PENDING until those made before it have been answered, and this call until they all
 * have; then either fails with the first error they caught. Natively (and with JSPI) they
 * were answered where made: gpu_check. */
lean_status lean_gpu_settle(lean_gpu *g, lean_error *err);
/* ---- profile (profile.c) ----
 * On a device opened with the profile option (or LEAN_PROFILE=1 in the environment then),
 * every dispatch is counted and, where the adapter has timestamp-query, timed in a compute
 * pass of its own; each submit then waits for its times (a profiled run is slower; each
 * kernel's time is its own). */
bool lean_gpu_profiling(const lean_gpu *g);
/* Writes (NUL-terminated, at most cap bytes) dispatches and each kernel's calls and GPU time
 * since the last report, divided by steps (1: totals), longest first, and starts afresh. */
void lean_gpu_profile_report(lean_gpu *g, int64_t steps, char *text, size_t cap);

#endif
