/* test_hooks.h — what the library exposes only for its tests (session.c): the backend a
 * context runs on and its state. They stay in the library because lean_ctx is opaque
 * (defined in session.c); nothing in the library calls them. */
#ifndef LEAN_TEST_HOOKS_H
#define LEAN_TEST_HOOKS_H

#include "core/backend.h"

/* lean_ctx_create with the GPU backend's kernel variants forced (gpu.h's lean_gpu_options;
 * the params' exact and profile apply over them). */
lean_status lean_ctx_create_gpu(const lean_model *m, const lean_ctx_params *p, const struct lean_gpu_options *gpu,
                                lean_ctx **out, lean_error *err);
const lean_backend *lean_ctx_backend(const lean_ctx *c);
lean_backend_state *lean_ctx_backend_state(lean_ctx *c);
/* Whether the generation in progress runs on the backend (gen_begin took it). */
bool lean_ctx_gen_resident(const lean_ctx *c);

#endif
