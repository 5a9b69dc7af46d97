/* repack.h — weight matrices copied at load into the layout a kernel reads faster (DESIGN.md
 * rule 3: weights stay in their own blocks; a kernel may want them in another order).
 *
 * Layout R16, the legacy formats Q4_0 Q4_1 Q5_0 Q5_1 Q8_0: rows in groups of 16; a group's
 * blocks in column order; each block of the 16 rows stored field by field across the rows, so
 * that a kernel holding 16 rows in its lanes (x86_avx512.c) loads every field with one wide
 * load, where the file's layout costs it a gather and a 16 x 4 transpose per block. Group g's
 * block b starts at g * 16 * row_bytes + b * 16 * block_bytes (row_bytes: the file's bytes of
 * one row), so the group of row r (r a multiple of 16) starts where row r does in the file:
 *   OFFSET  SIZE    DESCRIPTION (i = 0..15, the group's rows)
 *        0    32    d[i]: f16 scale
 *       32    32    m[i]: f16 minimum                        (Q4_1, Q5_1 only)
 *     next    64    qh[i]: u32 fifth bits                    (Q5_0, Q5_1 only)
 *     next    64 Q  qs dword j of row i at 64 j + 4 i, j < Q  (Q = 4; Q8_0: 8)
 * 16 x the block's bytes in all, the same as the rows it holds. A matrix whose rows are not a
 * multiple of 16 ends in a group padded with zero rows (scale 0).
 *
 * Layout KS, Q4_K and Q5_K: row by row, each super-block with its 12 bytes of packed 6-bit
 * scales and minimums (formats_layout.h's get_scale_min_k4) replaced by the 16 bytes they
 * decode to, so a kernel reads them instead of decoding them for every row it unpacks (the x86
 * files decoded them with ~40 scalar operations a super-block):
 *   OFFSET  SIZE    DESCRIPTION
 *        0     2    d: f16 super-block scale
 *        2     2    dmin: f16 super-block minimum scale
 *        4     8    sc[j]: the 6-bit scale of sub-block j, a byte each
 *       12     8    m[j]: the 6-bit minimum of sub-block j, a byte each
 *       20   ...    the rest of the block as in the file (Q4_K: qs 128; Q5_K: qh 32, qs 128)
 * 148 bytes a super-block (Q5_K 180): 4 more than the file's; row r at r * (cols / 256) * that.
 *
 * A model's copies (lean_packed) are made once, by its first CPU context whose kernel
 * table reads them (matmul_packed, kernels.h), and shared by all its contexts until
 * lean_model_free (model.h's lean_model_share). The file's bytes stay where they are: the exact
 * path, cpu-ref and the GPU read them. Memory: one more copy of those matrices
 * (of a mapped file, pages the kernels no longer touch, which the OS may drop).
 */
#ifndef LEAN_REPACK_H
#define LEAN_REPACK_H

#include "core/model.h"
#include "cpu/kernels.h"

/* Whether type has a repacked layout (R16 or KS). */
bool lean_repack_has(uint32_t type);

/* The bytes of the repacked copy of a (rows, cols) matrix of such a type. */
uint64_t lean_repack_bytes(uint32_t type, int64_t rows, int64_t cols);

/* dst (lean_repack_bytes) = the repacked copy of the (rows, cols) matrix src, rows row_bytes
 * apart. */
void lean_repack(uint32_t type, int64_t rows, int64_t cols, const void *src, size_t row_bytes, void *dst);

/* A model's repacked copies of its weight matrices of those types. */
typedef struct lean_packed lean_packed;

/* *out = m's copies, with every weight matrix of a type t with want[t] (and a layout) copied
 * now if it was not yet (under m->share->lock; the model owns them: contexts with other kernel
 * tables may want other types). LEAN_ERR_NOMEM when they do not fit (*out then still holds
 * those made). */
lean_status lean_packed_get(const lean_model *m, const bool want[LEAN_N_TYPE_IDS], const lean_packed **out,
                            lean_error *err);

/* The repacked copy of weight matrix t (a member of m's layers or m->output), or NULL (another type, or
 * not a weight matrix). */
const void *lean_packed_of(const lean_packed *p, const lean_model *m, const lean_tensor *t);

void lean_packed_free(lean_packed *p);

#endif
