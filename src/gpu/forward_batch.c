/* forward_batch.c — lean_backend_gpu's batched calls: one pass over the tokens of several
 * contexts of one model (lean_decode_batch: backend.h's forward_batch), and their resident
 * generations advanced together (lean_gen_next_batch: gen_next_batch), with the step after run
 * ahead while the host reads the ids.
 *
 * What it does: the leading context (s[0]) makes, on its first batched call, the pass's own
 * kernels (gpu_batch: an embedding of n rows, Wo over the rows' attention, the rows' logits)
 * and per KV page of the model's pool its rows lie in, the rows' attention kernels
 * (gpu_attention_rows); the other matmuls are its decode kernels run over n rows. The state,
 * the forward pass and the one-context generation are forward.c's (forward_impl.h).
 * What it does not: take the device's lock (forward.c's table does), check ids (lean_ctx does).
 *
 * Sections: state · batch (the pass: kernels, KV pages, recording, the call) · generation,
 * batched (the step, the run-ahead)
 */
#include "gpu/forward_impl.h"

/* ---- state ---- */

/* A batched step's ids (forward_impl.h): rb's row k the id of the step's row k, mapped once
 * for all of them. The batch keeps a ring of these (gpu_batch.reads) and reuses one no row holds
 * (a row holds it from its step's submit until it takes its id or ends); a row may outlive its
 * batch (the leader freed first), so the last of the batch and the rows frees it. */
struct gpu_step_ids {
    lean_gpu_buf *rb;       /* READBACK, GPU_KV_PAGE_SLOTS u32 */
    int32_t holds;          /* rows yet to take their id or end */
    int32_t n;              /* the step's rows */
    bool kept;              /* in its batch's ring */
    bool mapping;           /* the map in flight */
    lean_status failed;     /* the map's take, where it failed (the rows after then fail alike) */
    int32_t ids[GPU_KV_PAGE_SLOTS];
};

/* The batched pass's kernels over one KV page (section "batch"), made by the leader the first
 * time its rows lie there. */
typedef struct gpu_batch_page {
    uint64_t id;                /* the page's (gpu_kv_page.id): pages go, their ids are never reused */
    lean_gpu_buf *rows;         /* UNIFORM (rows_max vec4<u32>): batch_rows.wgsl, written each pass */
    gpu_attention_rows *layers; /* n_layer */
} gpu_batch_page;

/* The batched decode pass's own kernels and buffers (section "batch"), made on the first
 * lean_decode_batch that a context leads (its rows: s->x, xn, qkv, gate, up's first n). */
typedef struct gpu_batch {
    lean_gpu_buf *step;      /* uniform {n, 0, 0, 0}: the embedding's row count */
    gpu_get_rows *embed;     /* ids -> x, n rows */
    lean_gpu_buf *drawn;     /* (rows_max) u32: a batched draw's rows' last ids, gathered (gen_next_batch) */
    gpu_get_rows *embed_drawn; /* drawn -> x, n rows */
    gpu_op norm_out;         /* x -> xn, every row: the final norm */
    int32_t rows_max;        /* the most rows a pass: min(n_batch, GPU_KV_PAGE_SLOTS) */
    lean_gpu_buf *att;       /* the rows' attention (gpu_attention_rows_out_floats) */
    lean_gpu_buf *part;      /* the tiled FFN's split sums for rows_max tokens (NULL: unsplit) */
    gpu_matmul **mm;         /* n_layer x N_MATRICES: the layers' matrices over the rows (gpu_make_batch_matmuls) */
    gpu_batch_page *pages;   /* n_pages, one per KV page its rows have lain in (live ones) */
    int32_t n_pages;
    int32_t rows;            /* what mm_out and the logits hold */
    gpu_matmul *mm_out;      /* xn -> logits, rows */
    lean_gpu_buf *logits, *logits_rb; /* (rows, n_vocab); READBACK */
    gpu_sampler_rows *draw;  /* the batched generation's draw over the rows of logits (made on its first step) */
    lean_gpu_buf *picked;    /* (rows) u32: its ids */
    gpu_step_ids **reads;    /* n_reads: the batched steps' read-backs (section "generation, batched") */
    int32_t n_reads;
} gpu_batch;

/* ---- batch ----
 * lean_decode_batch's pass over n sequences, one token each (backend.h's forward_batch), led by
 * s[0]: rows 0 .. n - 1 of its x, xn, qkv, gate and up hold the n sequences' tokens, and every
 * matmul runs the one-token kernel over the n rows (the pass's own matmuls,
 * gpu_make_batch_matmuls: one dispatch a matrix for all the rows, each weight chunk loaded once
 * for several rows, each row's bits decode's). Their inputs are plain, so the pass runs the two
 * RMSNorms as dispatches (decode fuses them into its matmuls: the same bits). A sequence's cache
 * is its slot of the model's KV pool (kvpool.h), so per layer and per KV page the rows' caches lie
 * in, one qkv_post and one attention dispatch (and a merge past GPU_ATTN_MIN_CHUNK keys) take
 * every row of the page at its own position in its own slot (gpu_attention_rows: the positions and
 * slots in a small uniform, batch_rows.wgsl), into the batch's att rows, and Wo reads them there.
 * A layer is then its decode dispatches over the rows plus 2 (3) a page; rows made together lie in
 * few pages (kvpool.h's growth rule: 32 contexts, 6), in one where they were made with
 * lean_ctx_params.n_seq (lean serve --parallel, lean bench --streams). The logits of every row
 * come back in one copy and one map. Decode's q|k|v epilogue writes one position, so the pass's Q,
 * K, V matmuls have none, and it runs qkv_post, the same expressions (matmul_out.wgsl). A model
 * whose rows do not start on a vec4 (gpu_matmul_rows_fit), or whose logits of n rows pass a
 * binding, and a batch with LoRA adapters on any of its contexts decode the rows one after another
 * instead (batch_each). */

/* A pass of at least BATCH_TILED_ROWS rows, off the exact path, runs the FFN's matmuls (gate,
 * up, down) through prefill's tiled kernel, and one of at least BATCH_TILED_LOGITS rows the
 * logits': the kernel reads each weight once for all the rows where matmul_vec reads it once for
 * TPW rows. Both are the pass's own, reading its step uniform; the FFN's are made for rows_max
 * tokens, so the kernel splits them over K for that few (matmul.c's tile_ksplit). Its sums run
 * in another order than decode's, so those rows' logits are close to, not the bits of, the
 * sequence decoded alone; a row's result depends on how many rows its pass
 * has, not on which rows share it or where it sits (the kernel's order is a function of the
 * shape and the count it was made for). Fewer rows stay on matmul_vec, faster there, and so do Q,
 * K, V and Wo at any count (tiled, they were slower); the exact path keeps decode's bits at any
 * count. docs/runs/2026-12-07-gpu-batch-tiled.md, 2026-12-07-gpu-batch-logits.md and
 * 2026-12-07-gpu-batch-split.md measured them. */
enum { BATCH_TILED_ROWS = 12, BATCH_TILED_LOGITS = 2 };
static bool batch_tiled(const lean_backend_state *s0, int32_t n) { return !s0->exact && n >= BATCH_TILED_ROWS; }
static bool batch_tiled_logits(const lean_backend_state *s0, int32_t n) {
    return !s0->exact && n >= BATCH_TILED_LOGITS;
}

/* The pass's logits over its n rows (xn -> b->logits). */
static void batch_logits_record(lean_gpu_cmd *c, const lean_backend_state *s0, int32_t n) {
    if (batch_tiled_logits(s0, n)) gpu_matmul_record(c, s0->batch->mm_out, n);
    else gpu_matmul_record_rows(c, s0->batch->mm_out, n);
}

static void batch_page_free(gpu_batch_page *p, int32_t n_layer) {
    for (int32_t il = 0; p->layers && il < n_layer; il++) gpu_attention_rows_free(&p->layers[il]);
    lean_free(p->layers);
    lean_gpu_buf_free(p->rows);
    *p = (gpu_batch_page){0};
}

static void step_ids_free(gpu_step_ids *p) {
    if (p->mapping) lean_gpu_map_drop(p->rb);
    lean_gpu_buf_free(p->rb);
    lean_free(p);
}

void gpu_batch_free(lean_backend_state *s) {
    gpu_batch *b = s->batch;
    if (!b) return;
    const int32_t n_layer = s->m->hp.n_layer;
    for (int32_t i = 0; i < b->n_pages; i++) batch_page_free(&b->pages[i], n_layer);
    lean_free(b->pages);
    for (int32_t i = 0; b->mm && i < n_layer * N_MATRICES; i++) gpu_matmul_free(b->mm[i]);
    lean_free(b->mm);
    gpu_get_rows_free(b->embed);
    gpu_get_rows_free(b->embed_drawn);
    gpu_op_free(&b->norm_out);
    gpu_matmul_free(b->mm_out);
    gpu_sampler_rows_free(b->draw);
    for (int32_t i = 0; i < b->n_reads; i++) { /* those rows still hold go with the last of them */
        b->reads[i]->kept = false;
        if (!b->reads[i]->holds) step_ids_free(b->reads[i]);
    }
    lean_free(b->reads);
    lean_gpu_buf *bufs[] = {b->step, b->att, b->part, b->logits, b->logits_rb, b->drawn, b->picked};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) lean_gpu_buf_free(bufs[i]);
    lean_free(b);
    s->batch = NULL;
}

/* Whether every matrix of the model takes rows (gpu_matmul_rows_fit). */
static bool batch_fits(const lean_backend_state *s) {
    const lean_backend_model *bm = s->bm;
    bool fits = gpu_matmul_rows_fit(s->m->tied_output ? &bm->tok_embd : &bm->output);
    for (int32_t il = 0; fits && il < s->m->hp.n_layer; il++)
        for (int i = 0; fits && i < N_MATRICES; i++)
            fits = !bm->layers[il].w[i].buf || gpu_matmul_rows_fit(&bm->layers[il].w[i]);
    return fits;
}

/* s's batch kernels (made once), and its logits for n rows (remade for more rows). */
static lean_status batch_prepare(lean_backend_state *s, int32_t n, lean_error *err) {
    const lean_model *m = s->m;
    const lean_backend_model *bm = s->bm;
    const int32_t n_layer = m->hp.n_layer;
    lean_status st = LEAN_OK;
    if (!s->batch) {
        gpu_batch *b = s->batch = lean_calloc(1, sizeof *b);
        if (!b) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: the batched pass's kernels");
        b->rows_max = s->n_batch < GPU_KV_PAGE_SLOTS ? s->n_batch : GPU_KV_PAGE_SLOTS;
        b->mm = lean_calloc((size_t)n_layer * N_MATRICES, sizeof *b->mm);
        if (!b->mm) st = LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: the batched pass's %d layers", n_layer);
        if (!st) st = lean_gpu_buf_create(s->g, 16, LEAN_GPU_UNIFORM, "batch step", &b->step, err);
        if (!st) st = gpu_get_rows_create(s->g, &bm->tok_embd, s->n_batch, b->step, s->ids, s->x, &b->embed, err);
        if (!st) st = gpu_new_buf(s, (uint64_t)b->rows_max, 1, "batch drawn ids", &b->drawn, err);
        if (!st)
            st = gpu_get_rows_create(s->g, &bm->tok_embd, b->rows_max, b->step, b->drawn, s->x, &b->embed_drawn, err);
        if (!st)
            st = gpu_rmsnorm_create(s->g, s->step, s->x, bm->output_norm, s->xn, m->hp.n_embd, m->hp.rms_eps, false,
                                    &b->norm_out, err);
        if (!st)
            st = gpu_new_buf(s, gpu_attention_rows_out_floats(&m->hp, b->rows_max), 1, "batch attention", &b->att, err);
        /* the FFN's tiled kernel only where a pass of this context can take it */
        const bool tiled_ffn = batch_tiled(s, b->rows_max);
        if (!st && tiled_ffn) st = gpu_new_part(s, b->rows_max, "batch matmul parts", &b->part, err);
        for (int32_t il = 0; !st && il < n_layer; il++)
            st = gpu_make_batch_matmuls(s, il, b->rows_max, b->step, b->att, tiled_ffn, b->part,
                                        &b->mm[il * N_MATRICES], err);
    }
    gpu_batch *b = s->batch;
    if (!st && b->rows < n) {
        const uint64_t n_vocab = (uint64_t)m->hp.n_vocab;
        gpu_matmul_free(b->mm_out);
        gpu_sampler_rows_free(b->draw);
        lean_gpu_buf_free(b->logits);
        lean_gpu_buf_free(b->logits_rb);
        lean_gpu_buf_free(b->picked);
        b->mm_out = NULL, b->draw = NULL, b->logits = b->logits_rb = b->picked = NULL, b->rows = 0;
        st = gpu_new_buf(s, (uint64_t)n, n_vocab, "batch logits", &b->logits, err);
        if (!st)
            st = lean_gpu_buf_create(s->g, 4 * (uint64_t)n * n_vocab, LEAN_GPU_READBACK, "batch logits read-back",
                                     &b->logits_rb, err);
        /* unsplit: made for n rows, the most so far, a split would depend on the passes before */
        if (!st)
            st = gpu_matmul_create(s->g, m->tied_output ? &bm->tok_embd : &bm->output, n, b->step,
                                   &(gpu_mm_in){.x = s->xn}, &(gpu_mm_out){.y = b->logits}, &b->mm_out, err);
        if (!st) b->rows = n;
    }
    if (st) gpu_batch_free(s);
    return st;
}

/* Drops the leader's kernels over pages gone (their ids are never seen again). */
static void batch_prune(lean_backend_state *s) {
    gpu_batch *b = s->batch;
    for (int32_t i = 0; i < b->n_pages;) {
        const gpu_kv_page *live = s->bm->pool.pages;
        while (live && live->id != b->pages[i].id) live = live->next;
        if (live) {
            i++;
            continue;
        }
        batch_page_free(&b->pages[i], s->m->hp.n_layer);
        b->pages[i] = b->pages[--b->n_pages];
    }
}

/* *at = the index of the leader s's kernels over KV page kp in its list, made on first use
 * (appended: the indices of the others stay). */
static lean_status batch_page(lean_backend_state *s, const gpu_kv_page *kp, int32_t *at, lean_error *err) {
    gpu_batch *b = s->batch;
    const int32_t n_layer = s->m->hp.n_layer;
    for (int32_t i = 0; i < b->n_pages; i++)
        if (b->pages[i].id == kp->id) return *at = i, LEAN_OK;
    gpu_batch_page *grown = lean_realloc(b->pages, sizeof *grown * (size_t)(b->n_pages + 1));
    if (!grown) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: the batched pass's KV pages");
    b->pages = grown;
    gpu_batch_page *p = &b->pages[b->n_pages];
    *p = (gpu_batch_page){.id = kp->id};
    p->layers = lean_calloc((size_t)n_layer, sizeof *p->layers);
    lean_status st = p->layers ? LEAN_OK : LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: the batched pass's layers");
    if (!st) st = lean_gpu_buf_create(s->g, 16 * (uint64_t)b->rows_max, LEAN_GPU_UNIFORM, "batch rows", &p->rows, err);
    for (int32_t il = 0; !st && il < n_layer; il++)
        st = gpu_attention_rows_create(s->g, &s->m->hp, p->rows, b->rows_max, s->qkv, kp->k[il], kp->v[il], kp->rope,
                                       s->bm->layers[il].qk_norm, b->att, &p->layers[il], err);
    if (st) {
        batch_page_free(p, n_layer);
        return st;
    }
    *at = b->n_pages++;
    return LEAN_OK;
}

/* The pass's rows grouped by KV page: group g holds n[g] rows, the greatest position max_pos[g],
 * its kernels page[g] (their rows uniform written here). */
typedef struct batch_groups {
    int32_t count;
    const gpu_batch_page *page[GPU_KV_PAGE_SLOTS];
    int32_t n[GPU_KV_PAGE_SLOTS], max_pos[GPU_KV_PAGE_SLOTS];
} batch_groups;

static lean_status batch_group(lean_backend_state *lead, lean_backend_state *const *s, const int32_t *pos, int32_t n,
                               batch_groups *gr, lean_error *err) {
    const gpu_kv_page *kp[GPU_KV_PAGE_SLOTS];
    int32_t of[GPU_KV_PAGE_SLOTS], at[GPU_KV_PAGE_SLOTS]; /* row i's group; group g's index in the list */
    gr->count = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t g = 0;
        while (g < gr->count && kp[g] != s[i]->kv.page) g++;
        if (g == gr->count) kp[gr->count++] = s[i]->kv.page;
        of[i] = g;
    }
    batch_prune(lead);
    lean_status st = LEAN_OK;
    for (int32_t g = 0; !st && g < gr->count; g++) st = batch_page(lead, kp[g], &at[g], err);
    for (int32_t g = 0; !st && g < gr->count; g++) {
        uint32_t rows[GPU_KV_PAGE_SLOTS][4]; /* batch_rows.wgsl's entries */
        gr->page[g] = &lead->batch->pages[at[g]];
        gr->n[g] = 0, gr->max_pos[g] = 0;
        for (int32_t i = 0; i < n; i++) {
            if (of[i] != g) continue;
            uint32_t *e = rows[gr->n[g]++];
            e[0] = (uint32_t)i, e[1] = (uint32_t)pos[i], e[2] = gpu_kv_slot_base(&s[i]->kv);
            e[3] = gpu_attention_chunk(pos[i]);
            gr->max_pos[g] = pos[i] > gr->max_pos[g] ? pos[i] : gr->max_pos[g];
        }
        st = lean_gpu_buf_write(lead->g, gr->page[g]->rows, 0, rows, 16 * (uint64_t)gr->n[g], err);
    }
    return st;
}

/* Layer il of the pass (see the section's top). */
static void record_batch_layer(lean_gpu_cmd *c, const lean_backend_state *s0, const batch_groups *gr, int32_t n,
                               int32_t il) {
    const gpu_layer *L = &s0->layers[il];
    gpu_matmul *const *mm = &s0->batch->mm[il * N_MATRICES];
    gpu_op_record(c, &L->norm_attn, n);
    for (int k = 0; k < 4; k++)
        if (mm[QKV_ORDER[k]]) gpu_matmul_record_rows(c, mm[QKV_ORDER[k]], n);
    for (int32_t g = 0; g < gr->count; g++)
        gpu_attention_rows_record(c, &gr->page[g]->layers[il], gr->n[g], gr->max_pos[g]);
    gpu_matmul_record_rows(c, mm[W_O], n);
    gpu_op_record(c, &L->norm_ffn, n);
    void (*record)(lean_gpu_cmd *, const gpu_matmul *, int32_t) =
        batch_tiled(s0, n) ? gpu_matmul_record : gpu_matmul_record_rows;
    if (mm[W_GATE_UP]) {
        record(c, mm[W_GATE_UP], n);
    } else {
        record(c, mm[W_GATE], n);
        record(c, mm[W_UP], n);
        gpu_op_record(c, &L->swiglu, n);
    }
    record(c, mm[W_DOWN], n);
}

/* A read-back left pending (pump mode) is dropped: lean_decode_batch never returns LEAN_PENDING. */
static lean_status batch_wait(lean_gpu_buf *rb, void *dst, uint64_t bytes, lean_error *err) {
    lean_status st = lean_gpu_map_take(rb, dst, bytes, err);
    if (st != LEAN_PENDING) return st;
    lean_gpu_map_drop(rb);
    return LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED,
                     "lean_decode_batch cannot wait for the GPU in this host (no JSPI): use lean_decode");
}

/* The rows one after another, each its own forward (where the pass does not fit). */
static lean_status batch_each(lean_backend_state *const *s, const int32_t *ids, const int32_t *pos, int32_t n,
                              float *logits, lean_error *err) {
    const uint64_t n_vocab = (uint64_t)s[0]->m->hp.n_vocab;
    lean_status st = LEAN_OK;
    for (int32_t i = 0; !st && i < n; i++) {
        float *row = logits ? logits + (uint64_t)i * n_vocab : NULL;
        st = gpu_forward(s[i], &ids[i], 1, pos[i], row, err);
        if (st == LEAN_PENDING) {
            st = batch_wait(s[i]->logits_rb, row, n_vocab * 4, err);
            s[i]->logits_wait = false;
        }
    }
    return st;
}

lean_status gpu_forward_batch(lean_backend_state *const *s, const int32_t *ids, const int32_t *pos, int32_t n,
                              float *logits, lean_error *err) {
    lean_backend_state *s0 = s[0];
    for (int32_t i = 0; i < n; i++)
        if (s[i]->gen.on || s[i]->logits_wait || pos[i] < 0 || pos[i] >= s[i]->n_ctx)
            return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: batch row %d at position %d (n_ctx %d)%s", i, pos[i],
                             s[i]->n_ctx, s[i]->gen.on || s[i]->logits_wait ? " during a generation" : "");
    if (n > s0->n_batch)
        return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: %d batch rows past the first's n_batch %d", n, s0->n_batch);
    bool adapted = false; /* adapters (forward.c, "LoRA") are added by each context's own forward */
    for (int32_t i = 0; i < n; i++) adapted |= s[i]->lora != NULL;
    lean_status st = batch_fits(s0) && !adapted && n <= GPU_KV_PAGE_SLOTS ? batch_prepare(s0, n, err)
                                                                           : LEAN_ERR_UNSUPPORTED;
    if (st == LEAN_ERR_UNSUPPORTED) return batch_each(s, ids, pos, n, logits, err);
    const gpu_batch *b = s0->batch;
    batch_groups gr;
    uint32_t step[4];
    gpu_step_words(n, 0, step);
    /* ids are >= 0 (lean_ctx checks them), so their int32 bits are the u32 the kernels read */
    if (!st) st = lean_gpu_buf_write(s0->g, s0->ids, 0, ids, (uint64_t)n * 4, err);
    if (!st) st = lean_gpu_buf_write(s0->g, b->step, 0, step, sizeof step, err);
    if (!st) st = batch_group(s0, s, pos, n, &gr, err);
    lean_gpu_cmd *c = NULL;
    if (!st) st = lean_gpu_begin(s0->g, &c, err);
    if (st) return st;
    gpu_get_rows_record(c, b->embed, n);
    for (int32_t il = 0; il < s0->m->hp.n_layer; il++) record_batch_layer(c, s0, &gr, n, il);
    const uint64_t bytes = (uint64_t)n * (uint64_t)s0->m->hp.n_vocab * 4;
    if (logits) {
        gpu_op_record(c, &b->norm_out, n);
        batch_logits_record(c, s0, n);
        lean_gpu_copy(c, b->logits, 0, b->logits_rb, 0, bytes);
    }
    st = lean_gpu_submit_step(c, err);
    if (!st) s0->batch_rows += n, s0->batch_attn += (int64_t)gr.count * s0->m->hp.n_layer;
    if (!st && logits) st = lean_gpu_map_begin(b->logits_rb, err);
    return st || !logits ? st : batch_wait(b->logits_rb, logits, bytes, err);
}

/* One pass, one device: the contexts of one model part (the same device and options). */
lean_status gpu_batch_check(const lean_backend_state *first, const lean_backend_state *s, int32_t i,
                            lean_error *err) {
    if (s->bm == first->bm) return LEAN_OK;
    return LEAN_FAIL(err, LEAN_ERR_ARG,
                     "lean_decode_batch: ctx[%d] is on another GPU device than ctx[0] (other device options, or "
                     "another thread's OpenGL device): one batch, one device", i);
}

/* ---- generation, batched ----
 * gen_next_batch (backend.h): n resident generations one id further each. A batched step
 * (batch_step) submits step G->n_sub of each of its rows in one pass: the rows whose last
 * drawn id is still to be decoded (every row past its first draw) go through the batched pass
 * (section "batch"), their ids gathered on the GPU from each context's id buffer, where its
 * draw wrote them. The draw: the decoded rows whose sampler needs no state but the position (no
 * penalty, mask or bias, not the wide draw: gpu_sampler_rows_takes) are drawn together by the
 * batch's draw (gpu_sampler_rows: 4 dispatches for a 152k vocabulary whatever the rows), reading
 * the batch's logits in place, each row with its own sampler's settings, seed and position; the
 * other rows (and every row's first draw, from its prefill's logits) have their logits copied to
 * their context's, where their own sampler (its penalties' history, its mask, its bias) draws
 * (2-5 dispatches a row): either way the ids of lean_gen_next alone. A row the batch drew for
 * has its sampler's position reset before it draws alone (gpu_gen.behind). Each id is copied
 * into the step's read-back (gpu_step_ids: one buffer, one map for all its rows), and each row
 * queues a block of one read from there: a step so submitted is in the generation's own queue,
 * which gpu_gen_take, gpu_gen_next and gpu_gen_end serve and drop as they do lean_gen_next's
 * (the first row to take maps the step's ids for all; the last to end unread drops the map).
 * The run-ahead: a call first submits the step of the rows with none queued (each under its
 * mask), then, before it waits, the step after of the rows not masked (nothing the caller
 * decides changes their next draw), and then takes each row's oldest id. In steady state the
 * first step is empty and the GPU decodes step t + 1 while the host reads step t's ids, as
 * lean_gen_next's blocks do. A row that leaves (gpu_gen_end) drops its step in flight (its
 * cache row lies past the caller's position); a row that joins, or a masked row, has none and
 * takes the first step; a row further ahead (lean_gen_next's blocks) is served from its queue
 * until it is one step ahead. Where the pass does not fit (see the batch section; more rows
 * than its rows_max) each row steps alone, one step ahead where not masked. */

/* The batch's draw over its logits rows (gpu_sampler_rows), made on the first step that decodes
 * rows (again after batch_prepare remade the logits); one a device cannot hold leaves every row
 * to its own sampler. */
static lean_status batch_draw_prepare(lean_backend_state *s0, lean_error *err) {
    gpu_batch *b = s0->batch;
    if (b->draw) return LEAN_OK;
    lean_status st = b->picked ? LEAN_OK : gpu_new_buf(s0, (uint64_t)b->rows, 1, "batch picked ids", &b->picked, err);
    if (!st) st = gpu_sampler_rows_create(s0->g, s0->m->hp.n_vocab, b->rows, b->logits, b->picked, &b->draw, err);
    return st == LEAN_ERR_UNSUPPORTED ? LEAN_OK : st;
}

lean_status gpu_step_ids_take(gpu_step_ids *p, int32_t row, int32_t *id, lean_error *err) {
    if (p->mapping) {
        const lean_status st = lean_gpu_map_take(p->rb, p->ids, 4 * (uint64_t)p->n, err);
        if (st == LEAN_PENDING) return st;
        p->mapping = false;
        p->failed = st;
        if (st) return st;
    }
    if (p->failed) return LEAN_FAIL(err, p->failed, "gpu: the read-back of a batched step's ids failed");
    *id = p->ids[row];
    return LEAN_OK;
}

void gpu_step_ids_release(gpu_step_ids *p) {
    if (--p->holds > 0) return;
    if (!p->kept) {
        step_ids_free(p);
        return;
    }
    if (p->mapping) lean_gpu_map_drop(p->rb); /* every row ended before it was taken */
    p->mapping = false;
}

/* *out = a read-back of the batch's ring no row holds, or a new one added to it. */
static lean_status batch_step_ids(lean_backend_state *s0, gpu_step_ids **out, lean_error *err) {
    gpu_batch *b = s0->batch;
    for (int32_t i = 0; i < b->n_reads; i++)
        if (!b->reads[i]->holds) return *out = b->reads[i], LEAN_OK;
    gpu_step_ids **grown = lean_realloc(b->reads, sizeof *grown * (size_t)(b->n_reads + 1));
    if (!grown) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: a batched step's read-back");
    b->reads = grown;
    gpu_step_ids *p = lean_calloc(1, sizeof *p);
    if (!p) return LEAN_FAIL(err, LEAN_ERR_NOMEM, "gpu: a batched step's read-back");
    lean_status st = lean_gpu_buf_create(s0->g, 4 * GPU_KV_PAGE_SLOTS, LEAN_GPU_READBACK, "batch step ids", &p->rb, err);
    if (st) {
        lean_free(p);
        return st;
    }
    p->kept = true;
    b->reads[b->n_reads++] = *out = p;
    return LEAN_OK;
}

/* Submits step G->n_sub of each r[0..m) (the draw under masks[k] where masked) in one pass. */
static lean_status batch_step(lean_backend_state *s0, lean_backend_state *const *r, const uint32_t *const *masks,
                              int32_t m, lean_error *err) {
    lean_backend_state *ds[GPU_KV_PAGE_SLOTS]; /* the rows to decode, at pos */
    int32_t pos[GPU_KV_PAGE_SLOTS], d = 0;
    int32_t at[GPU_KV_PAGE_SLOTS]; /* r[k]'s row in the batch's draw, or -1: its own sampler draws */
    bool in_draw[GPU_KV_PAGE_SLOTS] = {0};
    for (int32_t k = 0; k < m; k++) {
        at[k] = -1;
        if (r[k]->gen.n_sub > 0) at[k] = d, ds[d] = r[k], pos[d++] = r[k]->gen.pos0 + r[k]->gen.n_sub - 1;
    }
    lean_status st = batch_prepare(s0, d > 0 ? d : 1, err);
    gpu_batch *b = s0->batch;
    if (!st && d) st = batch_draw_prepare(s0, err);
    bool drawing = false;
    for (int32_t j = 0; !st && b->draw && j < d; j++) gpu_sampler_rows_set(b->draw, j, NULL, 0);
    for (int32_t k = 0; k < m; k++) {
        const gpu_gen *G = &r[k]->gen;
        if (st || !b->draw || at[k] < 0 || G->masked || !gpu_sampler_rows_takes(G->smp)) {
            at[k] = -1;
            continue;
        }
        gpu_sampler_rows_set(b->draw, at[k], G->smp, (uint32_t)(G->pos0 + G->n_sub));
        in_draw[at[k]] = drawing = true;
    }
    if (!st && drawing) st = gpu_sampler_rows_write(b->draw, d, err);
    batch_groups gr;
    uint32_t step[4];
    gpu_step_words(d, 0, step);
    if (!st) st = lean_gpu_buf_write(s0->g, b->step, 0, step, sizeof step, err);
    if (!st && d) st = batch_group(s0, ds, pos, d, &gr, err);
    for (int32_t k = 0; !st && k < m; k++) {
        gpu_gen *G = &r[k]->gen;
        if (G->masked) st = gpu_sampler_set_mask(G->smp, masks[k], err);
        if (!st && at[k] < 0 && G->behind) /* drawn by the batch before (no window to restore) */
            st = gpu_sampler_reset(G->smp, (uint32_t)(G->pos0 + G->n_sub), NULL, 0, err), G->behind = st != LEAN_OK;
    }
    gpu_step_ids *ids = NULL; /* the rows' ids, row k at k */
    if (!st) st = batch_step_ids(s0, &ids, err);
    lean_gpu_cmd *c = NULL;
    if (!st) st = lean_gpu_begin(s0->g, &c, err);
    if (st) return st;
    const uint64_t row_bytes = 4 * (uint64_t)s0->m->hp.n_vocab;
    if (d) {
        for (int32_t j = 0; j < d; j++) lean_gpu_copy(c, ds[j]->ids, 0, b->drawn, 4 * (uint64_t)j, 4);
        gpu_get_rows_record(c, b->embed_drawn, d);
        for (int32_t il = 0; il < s0->m->hp.n_layer; il++) record_batch_layer(c, s0, &gr, d, il);
        gpu_op_record(c, &b->norm_out, d);
        batch_logits_record(c, s0, d);
        for (int32_t j = 0; j < d; j++)
            if (!in_draw[j]) lean_gpu_copy(c, b->logits, (uint64_t)j * row_bytes, ds[j]->logits, 0, row_bytes);
        if (drawing) gpu_sampler_rows_record(c, b->draw, d);
    }
    for (int32_t k = 0; k < m; k++) {
        gpu_gen *G = &r[k]->gen;
        if (at[k] >= 0) { /* the batch's draw: its id to the context's (the next step's input) and the step's */
            lean_gpu_copy(c, b->picked, 4 * (uint64_t)at[k], r[k]->ids, 0, 4);
            lean_gpu_copy(c, b->picked, 4 * (uint64_t)at[k], ids->rb, 4 * (uint64_t)k, 4);
            G->behind = true;
        } else {
            gpu_sampler_record(c, G->smp);
            lean_gpu_copy(c, r[k]->ids, 0, ids->rb, 4 * (uint64_t)k, 4);
        }
    }
    st = lean_gpu_submit_step(c, err);
    if (!st) s0->batch_rows += d, s0->batch_attn += d ? (int64_t)gr.count * s0->m->hp.n_layer : 0;
    if (!st) st = lean_gpu_map_begin(ids->rb, err);
    if (st) return st; /* only lean_gen_end follows a failure */
    *ids = (gpu_step_ids){.rb = ids->rb, .holds = m, .n = m, .kept = true, .mapping = true};
    const double t = gpu_now_ms();
    for (int32_t k = 0; k < m; k++) { /* each row's block of one, as gen_submit_block's, read from ids */
        gpu_gen *G = &r[k]->gen;
        const int i = G->b_sub % GEN_SLOTS;
        G->shared[i] = ids, G->shared_row[i] = k;
        G->slot_n[i] = 1;
        G->slot_t0_ms[i] = t;
        G->b_sub++, G->n_sub++;
    }
    return LEAN_OK;
}

lean_status gpu_gen_next_batch(lean_backend_state *const *s, const uint32_t *const *masks, int32_t n,
                               int32_t *ids, lean_error *err) {
    lean_backend_state *s0 = s[0];
    bool pass = n <= GPU_KV_PAGE_SLOTS && batch_fits(s0);
    for (int32_t i = 0; i < n; i++) {
        const gpu_gen *G = &s[i]->gen;
        if (!G->on || G->n_out >= G->limit) return LEAN_FAIL(err, LEAN_ERR_ARG, "gpu: batch row %d has no draw left", i);
        pass &= s[i]->lora == NULL; /* adapters: each context's own forward adds them */
    }
    lean_backend_state *r[GPU_KV_PAGE_SLOTS];
    const uint32_t *rm[GPU_KV_PAGE_SLOTS];
    int32_t m = 0;
    lean_status st = LEAN_OK;
    for (int32_t i = 0; pass && i < n; i++) /* the rows with no step queued: this draw's step */
        if (s[i]->gen.n_sub == s[i]->gen.n_out) r[m] = s[i], rm[m++] = masks[i];
    if (m) st = batch_step(s0, r, rm, m, err);
    m = 0;
    for (int32_t i = 0; pass && i < n; i++) { /* the run-ahead: the step after, where not masked */
        const gpu_gen *G = &s[i]->gen;
        if (!G->masked && G->n_sub == G->n_out + 1 && G->n_sub < G->limit) r[m] = s[i], rm[m++] = NULL;
    }
    if (!st && m) st = batch_step(s0, r, rm, m, err);
    for (int32_t i = 0; !st && i < n; i++) {
        s[i]->gen.stepwise = true;
        st = pass ? gpu_gen_take(s[i], &ids[i], err) : gpu_gen_next(s[i], masks[i], &ids[i], err);
        if (st == LEAN_PENDING)
            st = LEAN_FAIL(err, LEAN_ERR_UNSUPPORTED, "lean_gen_next_batch cannot wait for the GPU in this host "
                           "(no JSPI): use lean_gen_next");
    }
    return st;
}
