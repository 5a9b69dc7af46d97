/* backends.c — the one place that knows the list of backends: which one a
 * lean_ctx_params.backend name runs, and the rung below it when it cannot be built.
 *
 * "gpu" is WebGPU (gpu/forward.c), "cpu" the CPU kernels (cpu/forward.c), "cpu-<isa>" the CPU
 * kernels with one kernel table (cpu/kernels.h), "cpu-ref" the reference (cpu/forward_ref.c).
 * "auto" (and NULL) is the ladder: WebGPU on a hardware adapter, else the CPU kernels — when
 * there is no WebGPU library, only a software adapter (llvmpipe, SwiftShader: the CPU kernels
 * are faster), or the GPU backend fails to build for any reason, running out of memory
 * included (session.c climbs down and keeps the reason: lean_ctx_fallback). Exact (lean_ctx_params.exact) is the backends' own business: the
 * GPU keeps its matmuls in F32, the CPU kernels take float activations (cpu/forward.c). */
#include "core/backend.h"

#include <string.h>

lean_status lean_backend_choose(const char *name, lean_backend_choice *out, lean_error *err) {
    if (!name || !strcmp(name, "auto")) {
        *out = (lean_backend_choice){&lean_backend_gpu, NULL, true, &lean_backend_cpu};
    } else if (!strcmp(name, "gpu")) {
        *out = (lean_backend_choice){&lean_backend_gpu, NULL, false, NULL};
    } else if (!strcmp(name, "cpu")) {
        *out = (lean_backend_choice){&lean_backend_cpu, NULL, false, NULL};
    } else if (!strcmp(name, "cpu-ref")) {
        *out = (lean_backend_choice){&lean_backend_cpu_ref, NULL, false, NULL};
    } else if (!strncmp(name, "cpu-", 4) && name[4]) {
        *out = (lean_backend_choice){&lean_backend_cpu, name + 4, false, NULL};
    } else {
        return LEAN_FAIL(err, LEAN_ERR_ARG,
                         "unknown backend '%s' (auto, gpu, cpu, cpu-ref, or cpu-ISA: cpu-generic, cpu-avx2, "
                         "cpu-avx512, cpu-neon, cpu-relaxed, cpu-simd128)",
                         name);
    }
    return LEAN_OK;
}
