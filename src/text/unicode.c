/* unicode.c — UTF-8, character properties and NFC over the generated tables (unicode.h).
 *
 * Sections: 1. UTF-8 (decoding with maximal-subpart replacement, encoding, boundaries),
 * 2. properties (category, White_Space, combining class: binary searches over runs),
 * 3. NFC (decompose, order the combining marks, compose; Hangul by arithmetic).
 * Not here: anything about tokens (tokenizer*.c). The tables: unicode_tables.c. */
#include "text/unicode.h"

#include <string.h>

/* ====================================================================== 1. UTF-8 */

/* Unicode 15.0 Table 3-7, well-formed byte sequences: the allowed range of the second byte
 * depends on the first (no overlongs, no surrogates, nothing past U+10FFFF). */
static bool second_ok(uint8_t b0, uint8_t b1) {
    switch (b0) {
    case 0xE0: return b1 >= 0xA0 && b1 <= 0xBF;
    case 0xED: return b1 >= 0x80 && b1 <= 0x9F;
    case 0xF0: return b1 >= 0x90 && b1 <= 0xBF;
    case 0xF4: return b1 >= 0x80 && b1 <= 0x8F;
    default: return b1 >= 0x80 && b1 <= 0xBF;
    }
}

/* Bytes a sequence starting with b0 has when well-formed; 0 if b0 can start none. */
static size_t seq_len(uint8_t b0) {
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) return 2;
    if (b0 >= 0xE0 && b0 <= 0xEF) return 3;
    if (b0 >= 0xF0 && b0 <= 0xF4) return 4;
    return 0;
}

size_t lean_utf8_next(const uint8_t *s, size_t n, uint32_t *cp, bool *valid) {
    const size_t len = seq_len(s[0]);
    *valid = false;
    *cp = LEAN_UTF8_REPLACEMENT;
    if (len == 1) {
        *cp = s[0], *valid = true;
        return 1;
    }
    if (len == 0) return 1;
    /* count how much of a well-formed sequence is there: the maximal subpart */
    size_t got = 1;
    if (got < n && second_ok(s[0], s[1])) {
        got = 2;
        while (got < len && got < n && (s[got] & 0xC0) == 0x80) got++;
    }
    if (got < len) return got;
    uint32_t v = s[0] & (0xFFu >> (len + 1));
    for (size_t i = 1; i < len; i++) v = (v << 6) | (s[i] & 0x3Fu);
    *cp = v, *valid = true;
    return len;
}

size_t lean_utf8_put(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) return out[0] = (uint8_t)cp, 1;
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t lean_utf8_complete_prefix(const uint8_t *s, size_t n) {
    /* Only the last (at most 3) bytes can be an incomplete sequence: find the last byte
     * that could start one and see whether what follows it is a valid, unfinished prefix. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const size_t at = n - back;
        const size_t len = seq_len(s[at]);
        if ((s[at] & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        if (len <= back) return n;             /* ASCII, invalid, or a complete sequence */
        if (back >= 2 && !second_ok(s[at], s[at + 1])) return n;
        for (size_t i = at + 2; i < n; i++)
            if ((s[i] & 0xC0) != 0x80) return n;
        return at;
    }
    return n;
}

/* ====================================================================== 2. properties */

static uint8_t run_lookup(const lean_urun *runs, size_t count, uint32_t cp) {
    size_t lo = 0, hi = count; /* the last run with first <= cp; runs[0].first == 0 */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (runs[mid].first <= cp) lo = mid;
        else hi = mid;
    }
    return runs[lo].value;
}

enum lean_ucat lean_ucat_of(uint32_t cp) {
    if (cp < 256) return (enum lean_ucat)lean_ucat_latin1[cp];
    if (cp > 0x10FFFF) return LEAN_UCAT_CN;
    return (enum lean_ucat)run_lookup(lean_ucat_runs, lean_ucat_runs_count, cp);
}

bool lean_is_space(uint32_t cp) {
    for (size_t i = 0; i < lean_space_ranges_count; i++) {
        if (cp < lean_space_ranges[i].first) return false;
        if (cp <= lean_space_ranges[i].last) return true;
    }
    return false;
}

uint8_t lean_ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    return run_lookup(lean_ccc_runs, lean_ccc_runs_count, cp);
}

/* ====================================================================== 3. NFC */

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
       L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT,
       S_COUNT = L_COUNT * N_COUNT };
#define MAX_DECOMP 4 /* longest full canonical decomposition of one code point (the generator checks) */

static const lean_udecomp *find_decomp(uint32_t cp) {
    size_t lo = 0, hi = lean_decomp_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lean_decomp[mid].cp == cp) return &lean_decomp[mid];
        if (lean_decomp[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE &&
        b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = lean_comp_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const lean_ucomp *c = &lean_comp[mid];
        if (c->first == a && c->second == b) return c->composite;
        if (c->first < a || (c->first == a && c->second < b)) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

lean_status lean_nfc(const char *s, size_t n, char **out, size_t *out_n, lean_error *err) {
    const uint8_t *u = (const uint8_t *)s;
    size_t n_cp = 0;
    for (size_t i = 0; i < n; n_cp++) {
        uint32_t cp;
        bool ok;
        i += lean_utf8_next(u + i, n - i, &cp, &ok);
    }
    /* every code point decomposes into at most MAX_DECOMP; n_cp <= n, so no overflow
     * below for any n that fits in memory */
    uint32_t *d = NULL;
    if (n_cp > SIZE_MAX / sizeof *d / MAX_DECOMP ||
        !(d = lean_malloc(n_cp * MAX_DECOMP * sizeof *d)))
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "NFC: no memory for %zu code points", n_cp);

    /* 1. full canonical decomposition */
    size_t nd = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        i += lean_utf8_next(u + i, n - i, &cp, &ok);
        if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
            const uint32_t si = cp - S_BASE;
            d[nd++] = L_BASE + si / N_COUNT;
            d[nd++] = V_BASE + (si % N_COUNT) / T_COUNT;
            if (si % T_COUNT) d[nd++] = T_BASE + si % T_COUNT;
            continue;
        }
        const lean_udecomp *e = find_decomp(cp);
        if (!e) {
            d[nd++] = cp;
            continue;
        }
        memcpy(d + nd, lean_decomp_pool + e->off, e->len * sizeof *d);
        nd += e->len;
    }
    /* 2. canonical ordering: a stable insertion sort of each run of non-starters */
    for (size_t i = 1; i < nd; i++) {
        const uint32_t c = d[i];
        const uint8_t cc = lean_ccc_of(c);
        if (cc == 0) continue;
        size_t j = i;
        while (j > 0 && lean_ccc_of(d[j - 1]) > cc) {
            d[j] = d[j - 1];
            j--;
        }
        d[j] = c;
    }
    /* 3. canonical composition: each character joins the last starter unless blocked (a
     * character between them of class 0 or >= its own; after step 2 the last one kept is
     * the largest). last_ccc is -1 while nothing follows the starter. */
    size_t nc = 0, starter = SIZE_MAX;
    int last_ccc = -1;
    for (size_t i = 0; i < nd; i++) {
        const uint32_t c = d[i];
        const int cc = lean_ccc_of(c);
        if (starter != SIZE_MAX && (last_ccc == -1 || last_ccc < cc)) {
            const uint32_t composite = compose(d[starter], c);
            if (composite) {
                d[starter] = composite;
                continue;
            }
        }
        if (cc == 0) starter = nc, last_ccc = -1;
        else last_ccc = cc;
        d[nc++] = c;
    }
    /* 4. back to UTF-8 */
    size_t bytes = 0;
    uint8_t tmp[4];
    for (size_t i = 0; i < nc; i++) bytes += lean_utf8_put(d[i], tmp);
    char *o = lean_malloc(bytes + 1);
    if (!o) {
        lean_free(d);
        return LEAN_FAIL(err, LEAN_ERR_NOMEM, "NFC: no memory for %zu bytes", bytes);
    }
    size_t at = 0;
    for (size_t i = 0; i < nc; i++) at += lean_utf8_put(d[i], (uint8_t *)o + at);
    o[at] = 0;
    lean_free(d);
    *out = o;
    *out_n = at;
    return LEAN_OK;
}
