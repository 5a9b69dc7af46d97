/* test_sampler.c — src/core/sampler.c: transformers' processors bit for bit, the resident
 * sampler (sample_reference) statistically and bit for bit across builds, masks, greedy,
 * the history window, seeded determinism through the API, and parameter errors.
 *
 * Sections:
 *   1. transformers fixtures   tests/data/sampler/sampler.txt (scripts/make_sampler_fixtures.py):
 *                              every stage bit for bit, kept sets, probabilities, and
 *                              sample_reference's kept set and probabilities against them
 *   2. resident arithmetic     Philox known answers, u32-only mulhi, the uniform, exp accuracy
 *   3. top-k network           against a brute-force sort (ties, masks, ragged sizes)
 *   4. ties at the k-th logit  where transformers and sample_reference differ
 *   5. chi-square              draws against the exact distribution; a wrong one must fail
 *   6. determinism             golden ids (the same in every build), position keying, seeds,
 *                              generation through lean.h twice
 *   7. masks, greedy, penalty window, parameter errors, allocation failures
 */
#include "lean.h"
#include "core/sampler.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 65536 /* the largest fixture vocabulary the test reads */
#define FIXTURE "tests/data/sampler/sampler.txt"

/* A small deterministic generator for test data (not the sampler's). */
static uint64_t rng_state = 88172645463325252u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static sampler_cfg make_cfg(double temp, int32_t top_k, double top_p, double penalty, int32_t last_n,
                            uint64_t seed) {
    lean_sampler_params p = {.temperature = temp, .top_k = top_k, .top_p = top_p, .repeat_penalty = penalty,
                             .repeat_last_n = last_n, .seed = seed};
    sampler_cfg c;
    lean_error err;
    lean_status st = sampler_config(&p, &c, &err);
    CHECK(st == LEAN_OK, "sampler_config: %s", err.msg);
    return c;
}

/* The distinct ids of ids[0..n) (order of first appearance). */
static int32_t distinct(const int32_t *ids, int32_t n, int32_t *out) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t j = 0;
        while (j < k && out[j] != ids[i]) j++;
        if (j == k) out[k++] = ids[i];
    }
    return k;
}

/* ================================================================ 1. transformers fixtures */

typedef struct fx_point {
    char name[64], arch[32];
    int32_t n_vocab, n_hist, hist[256];
    float logits[MAXV];
} fx_point;

enum { ST_PENALIZED, ST_TEMPERED, ST_TOPK, ST_PROCESSED, ST_PROBS, N_STAGES };
static const char *const stage_names[N_STAGES] = {"penalized", "tempered", "topk", "processed", "probs"};

typedef struct fx_case {
    double penalty, temperature, top_p, margin;
    int32_t top_k;
    int have[N_STAGES];
    float stage[N_STAGES][MAXV];
} fx_case;

/* A vector of want values written as runs (scripts/make_sampler_fixtures.py's docstring): HEX,
 * HEX*K, or =K (from base, the vector before it; NULL: none). -1 unless they give exactly want. */
static int read_hex(FILE *f, float *dst, int32_t want, const float *base) {
    int n;
    if (fscanf(f, "%d", &n) != 1 || n != want) return -1;
    for (int i = 0; i < n;) {
        char tok[32], end;
        unsigned u;
        int k = 1;
        if (fscanf(f, "%31s", tok) != 1) return -1;
        if (tok[0] == '=') {
            if (!base || sscanf(tok + 1, "%d%c", &k, &end) != 1 || k < 1 || k > n - i) return -1;
            memcpy(dst + i, base + i, sizeof(float) * (size_t)k);
        } else {
            const int got = sscanf(tok, "%8x%c%d%c", &u, &end, &k, &end);
            if (strspn(tok, "0123456789abcdef") != 8 || !(got == 1 || (got == 3 && tok[8] == '*')) || k < 1 ||
                k > n - i)
                return -1;
            for (int j = 0; j < k; j++) dst[i + j] = float_of((uint32_t)u);
        }
        i += k;
    }
    return 0;
}

/* First differing index of two float vectors, bitwise; -1 if identical. */
static int first_diff(const float *a, const float *b, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (bits_of(a[i]) != bits_of(b[i])) return i;
    return -1;
}

static int n_fixture_cases, n_capped_cases;
static double worst_prob_rel, worst_resident_rel;

static void check_stage(const fx_point *pt, const fx_case *c, int stage, const float *lean) {
    const int d = first_diff(lean, c->stage[stage], pt->n_vocab);
    CHECK(d < 0, "%s case (%g, %g, %d, %g): %s differs at id %d: lean %08x (%.9g), transformers %08x (%.9g)",
          pt->name, c->penalty, c->temperature, c->top_k, c->top_p, stage_names[stage], d,
          d < 0 ? 0 : bits_of(lean[d]), d < 0 ? 0.0 : lean[d], d < 0 ? 0 : bits_of(c->stage[stage][d]),
          d < 0 ? 0.0 : c->stage[stage][d]);
}

static int n_wide_cases, n_wide_ties, wide_most_kept;

/* The wide draw (top_k 0 or > 64) on a fixture: its kept set (the entries no worse than the
 * trace's last one) is transformers' (fewer only where transformers keeps ids tied at the
 * k-th logit), its probabilities w_i / kept within 1e-5 of softmax(processed), and its kept
 * mass the sum of those weights. */
static void check_wide_case(const fx_point *pt, const fx_case *c, const sampler_cfg *cfg, const int32_t *pen_ids,
                            int32_t n_pen, const sample_trace *tr, const double *p, int32_t n_hf) {
    static float a[MAXV];
    const int32_t n = pt->n_vocab;
    memcpy(a, pt->logits, sizeof(float) * (size_t)n);
    for (int32_t j = 0; j < n_pen; j++) {
        const float v = a[pen_ids[j]];
        a[pen_ids[j]] = v < 0 ? v * cfg->penalty : v * cfg->inv_penalty;
    }
    const float last = tr->last_logit, top = tr->logit[0];
    int32_t n_kept = 0, extra = 0, missing = 0;
    double sum = 0, worst = 0;
    for (int32_t i = 0; i < n; i++) {
        const int kept = a[i] > last || (a[i] == last && i <= tr->last_id);
        const int hf = !isinf(c->stage[ST_PROCESSED][i]);
        n_kept += kept;
        extra += kept && !hf;
        missing += hf && !kept;
        if (!kept) continue;
        const double w = sampler_exp((a[i] - top) * cfg->inv_temperature);
        sum += w;
        if (p[i] > 1e-30) {
            const double rel = fabs(w / tr->kept - p[i]) / p[i];
            if (rel > worst) worst = rel;
        }
    }
    n_wide_cases++;
    if (n_kept > wide_most_kept) wide_most_kept = n_kept;
    const int ties = c->top_k > 0 && n_hf > c->top_k; /* deviation 3: transformers keeps the ties */
    n_wide_ties += ties && missing > 0;
    CHECK(n_kept == tr->n_kept && extra == 0 && (ties ? n_kept == c->top_k : missing == 0),
          "%s (%g, %g, %d, %g): the wide draw keeps %d ids (trace %d), transformers %d: %d extra, %d missing "
          "(top-p margin %.3g)", pt->name, c->penalty, c->temperature, c->top_k, c->top_p, n_kept, tr->n_kept, n_hf,
          extra, missing, c->margin);
    if (worst > worst_resident_rel) worst_resident_rel = worst;
    CHECK(!ties && worst <= 1e-5, "%s (%g, %g, %d, %g): wide probabilities %.3g from transformers'", pt->name,
          c->penalty, c->temperature, c->top_k, c->top_p, worst);
    CHECK(fabs(sum - tr->kept) <= 1e-5 * sum, "%s: kept mass %.9g, its weights sum to %.9g", pt->name, tr->kept, sum);
    CHECK(tr->id >= 0 && tr->id < n && !isinf(c->stage[ST_PROCESSED][tr->id]), "%s: drew %d, which transformers filters",
          pt->name, tr->id);
}

static void run_fixture_case(const fx_point *pt, const fx_case *c) {
    const int32_t n = pt->n_vocab;
    for (int s = 0; s < N_STAGES; s++)
        CHECK(c->have[s], "%s: case without a %s line", pt->name, stage_names[s]);
    sampler_cfg cfg = make_cfg(c->temperature, c->top_k, c->top_p, c->penalty, -1, 7);
    static float x[MAXV], y[MAXV];
    memcpy(x, pt->logits, sizeof(float) * (size_t)n);
    if (c->penalty != 1.0) hf_repetition_penalty(x, n, pt->hist, pt->n_hist, cfg.penalty);
    check_stage(pt, c, ST_PENALIZED, x);
    if (c->temperature != 1.0) hf_temperature(x, n, cfg.temperature);
    check_stage(pt, c, ST_TEMPERED, x);
    CHECK(hf_top_k(x, n, c->top_k, NULL) == LEAN_OK, "hf_top_k");
    check_stage(pt, c, ST_TOPK, x);
    if (c->top_p < 1.0) CHECK(hf_top_p(x, n, c->top_p, NULL) == LEAN_OK, "hf_top_p");
    check_stage(pt, c, ST_PROCESSED, x);
    /* The whole chain in one call, as the sampler builds it. */
    memcpy(y, pt->logits, sizeof(float) * (size_t)n);
    CHECK(hf_process(&cfg, y, n, NULL, pt->hist, pt->n_hist, NULL) == LEAN_OK, "hf_process");
    check_stage(pt, c, ST_PROCESSED, y);

    /* Probabilities: the same zeros exactly; torch's float32 softmax (its own vectorised exp)
     * within 1e-5 relative of the double-precision one. */
    static double p[MAXV];
    softmax_f64(c->stage[ST_PROCESSED], n, p);
    int zeros_equal = 1;
    for (int32_t i = 0; i < n; i++) {
        const double q = c->stage[ST_PROBS][i];
        if (isinf(c->stage[ST_PROCESSED][i]) && q != 0) zeros_equal = 0;
        if (q > 1e-30) { /* far from float32's subnormals, where relative error is meaningless */
            const double rel = fabs(p[i] - q) / q;
            if (rel > worst_prob_rel) worst_prob_rel = rel;
            CHECK(rel <= 1e-5, "%s: probability of id %d: lean %.9g, transformers %.9g", pt->name, i, p[i], q);
        } else {
            CHECK(fabs(p[i] - q) <= 1e-30, "%s: probability of id %d: lean %.9g, transformers %.9g", pt->name, i,
                  p[i], q);
        }
    }
    CHECK(zeros_equal, "%s: filtered ids do not have probability 0 in both", pt->name);

    /* The resident sampler on the same logits: the same kept set and the same probabilities
     * to float32 rounding (the wide draw: check_wide_case). */
    int32_t pen_ids[256];
    const int32_t n_pen = distinct(pt->hist, pt->n_hist, pen_ids);
    sample_trace tr;
    int32_t id;
    static float work[SAMPLER_WORK_FLOATS(MAXV)];
    lean_status st = sample_reference(&cfg, pt->logits, n, NULL, pen_ids, n_pen, 0, work, &id, &tr, NULL);
    CHECK(st == LEAN_OK, "%s: sample_reference failed", pt->name);
    if (st != LEAN_OK) return;
    n_fixture_cases++;
    int32_t n_hf = 0;
    for (int32_t i = 0; i < n; i++) n_hf += !isinf(c->stage[ST_PROCESSED][i]);
    if (tr.wide) {
        check_wide_case(pt, c, &cfg, pen_ids, n_pen, &tr, p, n_hf);
        return;
    }
    /* Where the sets may differ (deviations 3 and 4 in sampler.c): transformers keeps more
     * than k because of ties at the k-th logit. */
    const int32_t k_eff = c->top_k;
    const int same_sets = n_hf <= k_eff;
    int subset = 1;
    for (int32_t j = 0; j < tr.n_kept; j++) subset &= !isinf(c->stage[ST_PROCESSED][tr.ids[j]]);
    CHECK(subset, "%s: the resident sampler keeps an id transformers filters", pt->name);
    if (!same_sets) {
        n_capped_cases++;
        double dropped = 1;
        for (int32_t j = 0; j < tr.n_kept; j++) dropped -= p[tr.ids[j]];
        if (c->top_p >= 1.0)
            CHECK(tr.n_kept == k_eff, "%s: keeps %d, expected k = %d", pt->name, tr.n_kept, k_eff);
        printf("  %s (%g, %g, %d, %g): transformers keeps %d ids (%s), the resident sampler %d: "
               "probability %.3g not drawn\n", pt->name, c->penalty, c->temperature, c->top_k, c->top_p, n_hf,
               "ties at the k-th logit", tr.n_kept, dropped);
        return;
    }
    CHECK(tr.n_kept == n_hf, "%s (%g, %g, %d, %g): resident keeps %d ids, transformers %d (top-p margin %.3g)",
          pt->name, c->penalty, c->temperature, c->top_k, c->top_p, tr.n_kept, n_hf, c->margin);
    double total = 0;
    for (int32_t j = 0; j < tr.n_kept; j++) total += tr.weight[j];
    for (int32_t j = 0; j < tr.n_kept; j++) {
        const int32_t i = tr.ids[j];
        const double rel = fabs(tr.weight[j] / total - p[i]) / p[i];
        if (p[i] > 1e-30 && rel > worst_resident_rel) worst_resident_rel = rel;
        CHECK(p[i] < 1e-30 || rel <= 1e-5, "%s (%g, %g, %d, %g): resident probability of id %d: %.9g, exact %.9g",
              pt->name, c->penalty, c->temperature, c->top_k, c->top_p, i, tr.weight[j] / total, p[i]);
    }
}

static void test_fixtures(void) {
    FILE *f = fopen(FIXTURE, "r");
    CHECK(f != NULL, "cannot open %s: run scripts/make_sampler_fixtures.py %s where torch and transformers "
                     "exist, and commit its output", FIXTURE, "tests/data/sampler");
    if (!f) return;
    char line[512];
    int real = fgets(line, sizeof line, f) && strstr(line, "transformers ") && !strstr(line, "PLUMBING");
    CHECK(real, "%s was not made by transformers (first line: %s)", FIXTURE, line);
    rewind(f);
    static fx_point pt;
    static fx_case c;
    const float *prev = NULL; /* the vector read last: =K runs copy from it */
    int have_point = 0, in_case = 0, n_points = 0, ok = 1, n_here = 0, n_cases_min = 1 << 30, n_cases_max = 0;
    char word[64];
    while (ok && fscanf(f, "%63s", word) == 1) {
        if (word[0] == '#') {
            int ch;
            while ((ch = fgetc(f)) != '\n' && ch != EOF) {}
        } else if (!strcmp(word, "point")) {
            if (have_point && strcmp(pt.arch, "synthetic") != 0) {
                if (n_here < n_cases_min) n_cases_min = n_here;
                if (n_here > n_cases_max) n_cases_max = n_here;
            }
            n_here = 0;
            memset(&pt, 0, sizeof pt);
            ok = fscanf(f, "%63s %31s %d", pt.name, pt.arch, &pt.n_vocab) == 3 && pt.n_vocab > 0 &&
                 pt.n_vocab <= MAXV;
            have_point = ok;
            n_points++;
        } else if (!strcmp(word, "history") && have_point) {
            ok = fscanf(f, "%d", &pt.n_hist) == 1 && pt.n_hist >= 0 && pt.n_hist <= 256;
            for (int i = 0; ok && i < pt.n_hist; i++) ok = fscanf(f, "%d", &pt.hist[i]) == 1;
        } else if (!strcmp(word, "logits") && have_point) {
            ok = read_hex(f, pt.logits, pt.n_vocab, NULL) == 0;
            prev = pt.logits;
        } else if (!strcmp(word, "case") && have_point) {
            memset(&c, 0, sizeof c);
            ok = fscanf(f, "%lf %lf %d %lf", &c.penalty, &c.temperature, &c.top_k, &c.top_p) == 4;
            in_case = 1;
            prev = pt.logits;
        } else if (!strcmp(word, "margin") && in_case) {
            ok = fscanf(f, "%lf", &c.margin) == 1;
        } else if (!strcmp(word, "end") && in_case) {
            run_fixture_case(&pt, &c);
            n_here++;
            in_case = 0;
        } else {
            int s = 0;
            while (s < N_STAGES && strcmp(word, stage_names[s]) != 0) s++;
            ok = in_case && s < N_STAGES && read_hex(f, c.stage[s], pt.n_vocab, prev) == 0;
            if (ok) c.have[s] = 1, prev = c.stage[s];
        }
    }
    CHECK(ok, "%s: malformed near '%s'", FIXTURE, word);
    fclose(f);
    /* Every model point carries the script's settings (SETTINGS), the synthetic one 3. */
    CHECK(n_points >= 7 && n_cases_min == n_cases_max && n_fixture_cases == (n_points - 1) * n_cases_min + 3,
          "%s: %d points, %d cases, %d..%d a model point (expected >= 7 points, each with the same settings, "
          "and 3 synthetic cases)", FIXTURE, n_points, n_fixture_cases, n_cases_min, n_cases_max);
    CHECK(wide_most_kept > SAMPLER_K_CAP, "no wide case keeps more than %d ids (most: %d)", SAMPLER_K_CAP,
          wide_most_kept);
    printf("fixtures: %d cases bit-exact through every stage; probabilities within %.2g relative of torch's; "
           "resident within %.2g of exact; %d wide cases (up to %d ids kept, %d with ties at the k-th logit); "
           "%d capped cases where the kept sets differ by design (above)\n",
           n_fixture_cases, worst_prob_rel, worst_resident_rel, n_wide_cases, wide_most_kept, n_wide_ties,
           n_capped_cases);
}

/* ================================================================ 2. resident arithmetic */

static void test_philox(void) {
    /* Random123 kat_vectors: philox4x32 10 CTR(4) KEY(2) -> OUT(4). */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
         0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
         0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        philox4x32_10(kat[t], kat[t] + 4, out);
        CHECK(!memcmp(out, kat[t] + 6, sizeof out), "philox KAT %d: %08x %08x %08x %08x", t, out[0], out[1], out[2],
              out[3]);
    }
    /* The u32-only product against 64-bit arithmetic, edges and random pairs. */
    static const uint32_t edge[] = {0, 1, 2, 0xffff, 0x10000, 0xffffffff, 0xfffffffe, 0x80000000, 0xD2511F53, 0xCD9E8D57};
    int bad = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) {
            uint32_t hi, lo = sampler_mulhilo32(edge[i], edge[j], &hi);
            uint64_t p = (uint64_t)edge[i] * edge[j];
            bad += hi != (uint32_t)(p >> 32) || lo != (uint32_t)p;
        }
    for (int i = 0; i < 200000; i++) {
        uint32_t a = rnd() ^ (rnd() << 16), b = rnd() ^ (rnd() << 16), hi, lo = sampler_mulhilo32(a, b, &hi);
        uint64_t p = (uint64_t)a * b;
        bad += hi != (uint32_t)(p >> 32) || lo != (uint32_t)p;
    }
    CHECK(bad == 0, "sampler_mulhilo32 wrong in %d products", bad);
    /* The uniform: 24 bits of word 0, in [0, 1). */
    int range = 1, grid = 1;
    for (uint32_t pos = 0; pos < 4096; pos++) {
        const float u = sampler_uniform(0x0123456789abcdefu, pos);
        range &= u >= 0 && u < 1;
        grid &= u * 16777216.0f == floorf(u * 16777216.0f);
    }
    CHECK(range && grid, "uniform out of [0,1) or off the 2^-24 grid");
    const uint32_t ctr[4] = {5, 0, 0, 0}, key[2] = {0x89abcdef, 0x01234567};
    uint32_t out[4];
    philox4x32_10(ctr, key, out);
    CHECK(sampler_uniform(0x0123456789abcdefu, 5) == (float)(out[0] >> 8) * 0x1p-24f, "uniform != word 0 >> 8");
}

static void test_exp(void) {
    CHECK(sampler_exp(0.0f) == 1.0f, "exp(0) = %a", sampler_exp(0.0f));
    CHECK(sampler_exp(-INFINITY) == 0 && sampler_exp(-86.01f) == 0 && sampler_exp(NAN) == 0, "exp cut-off");
    CHECK(sampler_exp(-86.0f) > 0 && isnormal(sampler_exp(-86.0f)), "exp(-86) = %a", sampler_exp(-86.0f));
    /* Over a million float32 inputs in [-86, 0] (evenly spread bit patterns): <= 3 ulp from
     * the correctly rounded exp (the whole range, every float, measured 3). */
    int32_t worst = 0;
    float at = 0;
    const uint32_t lo = bits_of(-0.0f), hi = bits_of(-86.0f);
    for (uint32_t b = lo; b <= hi; b += 997) {
        const float d = float_of(b);
        const float e = sampler_exp(d), r = (float)exp((double)d);
        const int32_t ulp = abs((int32_t)bits_of(e) - (int32_t)bits_of(r));
        if (ulp > worst) worst = ulp, at = d;
        if (!isnormal(e)) worst = 1000, at = d;
    }
    CHECK(worst <= 3, "sampler_exp: %d ulp at %a", worst, at);
}

/* ================================================================ 3. top-k network */

static int ref_better(const float *x, int32_t i, int32_t j) { return x[i] > x[j] || (x[i] == x[j] && i < j); }

static void test_network(void) {
    static float x[5000];
    static int32_t order[5000];
    static uint32_t mask[LEAN_MASK_WORDS(5000)];
    float work[SAMPLER_WORK_FLOATS(5000)];
    const int32_t sizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 256, 1000, 4999};
    int bad = 0, runs = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int variant = 0; variant < 6; variant++) {
            const int32_t n = sizes[si];
            for (int32_t i = 0; i < n; i++) {
                /* few distinct values (many ties), or spread values, or descending runs */
                x[i] = variant % 3 == 0 ? (float)(rnd() % 7) : variant % 3 == 1 ? (float)(int32_t)(rnd() % 20001) * 0.01f - 100
                                                                                 : (float)(n - i) * 0.5f;
            }
            const int masked = variant >= 3;
            memset(mask, 0, sizeof mask);
            for (int32_t i = 0; i < n; i++)
                if (!masked || rnd() % 3) lean_mask_allow(mask, i);
            int32_t m = 0;
            for (int32_t i = 0; i < n; i++)
                if (lean_mask_allows(mask, i)) order[m++] = i;
            for (int32_t a = 1; a < m; a++) /* insertion sort under the reference order */
                for (int32_t b = a; b > 0 && ref_better(x, order[b], order[b - 1]); b--) {
                    int32_t t = order[b];
                    order[b] = order[b - 1];
                    order[b - 1] = t;
                }
            if (m == 0) continue;
            for (int32_t k = 1; k <= 64; k += k < 8 ? 1 : 13) {
                sampler_cfg cfg = make_cfg(1.0, k, 1.0, 1.0, 0, 3);
                sample_trace tr;
                int32_t id;
                lean_status st = sample_reference(&cfg, x, n, mask, NULL, 0, 0, work, &id, &tr, NULL);
                const int32_t want = k < m ? k : m;
                runs++;
                if (st != LEAN_OK || tr.n_cand != want) {
                    bad++;
                    continue;
                }
                for (int32_t j = 0; j < want; j++) bad += tr.ids[j] != order[j];
            }
        }
    CHECK(bad == 0, "top-k network differs from a full sort in %d places (%d runs)", bad, runs);
}

/* ================================================================ 4. ties at the k-th logit */

static void test_ties(void) {
    /* Logits 3, 3 at ids 1, 3; 2 at ids 2, 4, 5, 8. top_k = 3: the 3rd largest is 2. */
    const float x[16] = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 2.0f, 0.5f, -1.0f, 2.0f, -0.5f, 1.5f, 0.25f, 0.0f, -2.0f, 1.0f, 2.5f};
    float y[16], work[SAMPLER_WORK_FLOATS(16)];
    memcpy(y, x, sizeof y);
    CHECK(hf_top_k(y, 16, 3, NULL) == LEAN_OK, "hf_top_k");
    int32_t hf_kept = 0;
    for (int i = 0; i < 16; i++) hf_kept += !isinf(y[i]);
    /* transformers: 2.5 (id 15) is the 3rd largest here, so k = 3 keeps 3, 3, 2.5 exactly. */
    CHECK(hf_kept == 3, "hf top-3 keeps %d", hf_kept);
    memcpy(y, x, sizeof y);
    CHECK(hf_top_k(y, 16, 4, NULL) == LEAN_OK, "hf_top_k");
    hf_kept = 0;
    for (int i = 0; i < 16; i++) hf_kept += !isinf(y[i]);
    /* k = 4: the 4th largest is 2, shared by ids 2, 4, 5, 8: transformers keeps all 7. */
    CHECK(hf_kept == 7, "transformers' rule keeps every id tied at the k-th logit: %d, expected 7", hf_kept);
    sampler_cfg cfg = make_cfg(1.0, 4, 1.0, 1.0, 0, 3);
    sample_trace tr;
    int32_t id;
    sample_reference(&cfg, x, 16, NULL, NULL, 0, 0, work, &id, &tr, NULL);
    const int32_t want[4] = {1, 3, 15, 2}; /* 3, 3, 2.5, then the lowest id among the 2s */
    CHECK(tr.n_cand == 4 && !memcmp(tr.ids, want, sizeof want),
          "resident top-4 with ties: %d ids: %d %d %d %d, expected 1 3 15 2", tr.n_cand, tr.ids[0], tr.ids[1],
          tr.ids[2], tr.ids[3]);
    /* Over many draws, ids 4, 5 and 8 (kept by transformers) never appear here. */
    int never = 1;
    for (uint32_t pos = 0; pos < 20000; pos++) {
        sample_reference(&cfg, x, 16, NULL, NULL, 0, pos, work, &id, NULL, NULL);
        never &= id == 1 || id == 3 || id == 15 || id == 2;
    }
    CHECK(never, "resident top-4 drew an id beyond the 4 it keeps");
}

/* ================================================================ 4b. the wide draw
 *
 * top_k 0 or > 64 against its definition (sampler.c W1-W4) computed the slow way: every
 * allowed id ranked by a full sort, the mass of each prefix summed in id blocks, the kept
 * prefix and the draw found by walking ranks and ids. Then its kept set and probabilities
 * against the hf_* chain (held bit for bit to transformers by section 1) on a 4096-id
 * vocabulary: top-p cutting beyond 64 ids, top-k 100 .. 1000, flat temperatures. */

#define WIDE_N 4096
static const float *rank_x;
static int cmp_rank(const void *a, const void *b) {
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return ref_better(rank_x, i, j) ? -1 : ref_better(rank_x, j, i) ? 1 : 0;
}

/* The definition, slowly: id (and the kept count, kept mass, top-p's mass) for x[n] under
 * cfg at pos; mask nullable. */
static int32_t wide_by_definition(const sampler_cfg *cfg, const float *x, int32_t n, const uint32_t *mask,
                                  uint32_t pos, int32_t *n_kept, float *kept, float *mass) {
    static int32_t order[WIDE_N], rank[WIDE_N];
    static float w[WIDE_N];
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        rank[i] = -1;
        if (isfinite(x[i]) && (!mask || lean_mask_allows(mask, i))) order[m++] = i;
    }
    rank_x = x;
    qsort(order, (size_t)m, sizeof *order, cmp_rank);
    for (int32_t r = 0; r < m; r++) rank[order[r]] = r;
    for (int32_t i = 0; i < n; i++) w[i] = rank[i] < 0 ? 0 : sampler_exp((x[i] - x[order[0]]) * cfg->inv_temperature);
#define PREFIX_MASS(last, out)                                                                                         \
    do {                                                                                                               \
        float t_ = 0;                                                                                                  \
        for (int32_t b_ = 0; b_ < n; b_ += SAMPLER_SUM_BLOCK) {                                                        \
            float s_ = 0;                                                                                              \
            for (int32_t i_ = b_; i_ < n && i_ < b_ + SAMPLER_SUM_BLOCK; i_++)                                        \
                if (rank[i_] >= 0 && rank[i_] <= (last)) s_ = s_ + w[i_];                                              \
            t_ = t_ + s_;                                                                                              \
        }                                                                                                              \
        (out) = t_;                                                                                                    \
    } while (0)
    const int32_t k = cfg->top_k > 0 && cfg->top_k < m ? cfg->top_k : m;
    float limit = INFINITY, total = 0;
    if (cfg->use_top_p) {
        PREFIX_MASS(k - 1, total);
        limit = cfg->top_p_f * total;
    }
    int32_t r = 0;
    for (;; r++) {
        float pm;
        PREFIX_MASS(r, pm);
        if (r + 1 >= k || pm >= limit) break;
    }
    PREFIX_MASS(r, *kept);
#undef PREFIX_MASS
    *n_kept = r + 1;
    *mass = cfg->use_top_p ? total : 0;
    const float target = sampler_uniform(cfg->seed, pos) * *kept;
    float before = 0;
    for (int32_t b = 0; b < n; b += SAMPLER_SUM_BLOCK) {
        float s = 0;
        for (int32_t i = b; i < n && i < b + SAMPLER_SUM_BLOCK; i++)
            if (rank[i] >= 0 && rank[i] <= r) {
                s = s + w[i];
                if (target < before + s) return i;
            }
        before = before + s;
    }
    return -1;
}

static void test_wide(void) {
    static float x[WIDE_N], y[WIDE_N], work[SAMPLER_WORK_FLOATS(WIDE_N)];
    static double p[WIDE_N];
    static uint32_t mask[LEAN_MASK_WORDS(WIDE_N)];
    const struct {
        double temp, top_p;
        int32_t top_k;
    } cases[] = {{1.0, 1.0, 0},   {1.0, 0.9, 0},   {3.0, 0.95, 0},   {20.0, 0.5, 0}, {0.7, 0.99, 0},
                 {1.0, 1.0, 100}, {2.0, 0.9, 200}, {8.0, 1.0, 1000}, {1.0, 0.0, 0},  {5.0, 0.98, 65}};
    const int32_t sizes[] = {300, 1000, WIDE_N};
    int bad_def = 0, runs = 0, beyond = 0, bad_hf = 0, hf_runs = 0, near_ties = 0, k_ties = 0;
    double worst = 0;
    rng_state = 4242;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int variant = 0; variant < 4; variant++) {
            const int32_t n = sizes[si];
            /* spread values; few distinct values (ties at the threshold); a masked half; NaN/inf */
            for (int32_t i = 0; i < n; i++)
                x[i] = variant == 1 ? (float)(rnd() % 9) * 0.5f : (float)(int32_t)(rnd() % 20001) * 0.0006f - 6.0f;
            if (variant == 3)
                for (int32_t i = 0; i < n; i += 7) x[i] = i % 3 ? -INFINITY : NAN;
            memset(mask, 0, sizeof mask);
            for (int32_t i = 0; i < n; i++)
                if (variant != 2 || rnd() % 2) lean_mask_allow(mask, i);
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                sampler_cfg cfg = make_cfg(cases[c].temp, cases[c].top_k, cases[c].top_p, 1.0, 0, 0x77 + c);
                for (uint32_t pos = 0; pos < 3; pos++) {
                    sample_trace tr;
                    int32_t id = -1, n_kept = 0;
                    float kept = 0, mass = 0;
                    const uint32_t *mk = variant == 2 ? mask : NULL;
                    lean_status st = sample_reference(&cfg, x, n, mk, NULL, 0, pos * 1009, work, &id, &tr, NULL);
                    const int32_t want = wide_by_definition(&cfg, x, n, mk, pos * 1009, &n_kept, &kept, &mass);
                    runs++;
                    beyond += n_kept > SAMPLER_K_CAP;
                    if (st != LEAN_OK || !tr.wide || id != want || tr.id != id || tr.n_kept != n_kept ||
                        bits_of(tr.kept) != bits_of(kept) || bits_of(tr.mass) != bits_of(mass)) {
                        if (!bad_def++)
                            fprintf(stderr, "  wide: n %d variant %d case %zu pos %u: id %d/%d kept %d/%d mass %a/%a "
                                            "top-p's %a/%a\n", n, variant, c, pos, id, want, tr.n_kept, n_kept, tr.kept,
                                    kept, tr.mass, mass);
                    }
                }
                /* the kept set and probabilities against transformers' chain */
                if (variant == 1 || variant == 3) continue; /* ties at the k-th logit, NaN/inf: deviations 3, 6 */
                sampler_cfg hc = cfg;
                memcpy(y, x, sizeof(float) * (size_t)n);
                hf_process(&hc, y, n, variant == 2 ? mask : NULL, NULL, 0, NULL);
                softmax_f64(y, n, p);
                sample_trace tr;
                int32_t id;
                sample_reference(&cfg, x, n, variant == 2 ? mask : NULL, NULL, 0, 0, work, &id, &tr, NULL);
                int32_t n_hf = 0, same = 1;
                for (int32_t i = 0; i < n; i++) {
                    const int hf = !isinf(y[i]);
                    const int kept = isfinite(x[i]) && (variant != 2 || lean_mask_allows(mask, i)) &&
                                     (x[i] > tr.last_logit || (x[i] == tr.last_logit && i <= tr.last_id));
                    n_hf += hf;
                    same &= hf == kept;
                }
                hf_runs++;
                if (cases[c].top_k > 0) { /* ties at the k-th logit: deviation 3 (section 4) */
                    memcpy(y, x, sizeof(float) * (size_t)n);
                    hf_process(&(sampler_cfg){.top_k = cases[c].top_k, .temperature = 1, .inv_temperature = 1}, y, n,
                               variant == 2 ? mask : NULL, NULL, 0, NULL);
                    int32_t n_k = 0;
                    for (int32_t i = 0; i < n; i++) n_k += !isinf(y[i]);
                    if (n_k > cases[c].top_k) {
                        k_ties++;
                        continue;
                    }
                }
                if (!same || n_hf != tr.n_kept) {
                    /* top-p's margin: how far the exact mass of the ids above the last kept one,
                     * and of the kept ones, lie from top_p (float32 sums in rank order or in id
                     * blocks may fall on either side of it) */
                    double above = 0, all = 0, margin = 1;
                    for (int32_t i = 0; cfg.use_top_p && i < n; i++) {
                        if (!isfinite(x[i]) || (variant == 2 && !lean_mask_allows(mask, i))) continue;
                        int32_t r = 0; /* the rank of i */
                        for (int32_t j = 0; j < n; j++)
                            r += isfinite(x[j]) && (variant != 2 || lean_mask_allows(mask, j)) && ref_better(x, j, i);
                        const double e = exp(((double)x[i] - tr.logit[0]) / cases[c].temp);
                        if (cases[c].top_k == 0 || r < cases[c].top_k) all += e;
                        if (r < tr.n_kept - 1) above += e;
                    }
                    if (cfg.use_top_p) {
                        const double last = exp(((double)tr.last_logit - tr.logit[0]) / cases[c].temp);
                        margin = fmin(fabs(above / all - cases[c].top_p), fabs((above + last) / all - cases[c].top_p));
                    }
                    if (margin < 1e-5) {
                        near_ties++;
                        printf("  wide vs transformers' chain: n %d case %zu: top-p within %.2g of a cumulative "
                               "probability: keeps %d, transformers %d (a float32 near-tie)\n", n, c, margin,
                               tr.n_kept, n_hf);
                    } else if (!bad_hf++) {
                        fprintf(stderr, "  wide vs transformers: n %d variant %d case %zu: keeps %d, transformers %d\n",
                                n, variant, c, tr.n_kept, n_hf);
                    }
                    continue;
                }
                for (int32_t i = 0; i < n; i++)
                    if (!isinf(y[i]) && p[i] > 1e-30) {
                        const double q = sampler_exp((x[i] - tr.logit[0]) * cfg.inv_temperature) / tr.kept;
                        const double rel = fabs(q - p[i]) / p[i];
                        if (rel > worst) worst = rel;
                    }
            }
        }
    CHECK(bad_def == 0, "the wide draw differs from its definition in %d of %d draws", bad_def, runs);
    CHECK(beyond > runs / 4, "only %d of %d wide draws kept more than 64 ids", beyond, runs);
    CHECK(bad_hf == 0, "the wide draw's kept set differs from transformers' chain in %d of %d cases", bad_hf, hf_runs);
    CHECK(near_ties <= hf_runs / 20, "%d of %d kept sets differ at top-p near-ties: too many to be rounding", near_ties,
          hf_runs);
    CHECK(worst <= 1e-5, "wide probabilities %.3g from transformers' chain", worst);
    CHECK(k_ties <= hf_runs / 10, "%d of %d cases have ties at the k-th logit: the data hides the comparison", k_ties,
          hf_runs);
    printf("wide draw: %d draws as defined (%d keep more than 64 ids); %d of %d kept sets as transformers' chain's "
           "(%d near-ties, above; %d with ties at the k-th logit), probabilities within %.2g\n", runs, beyond,
           hf_runs - near_ties - k_ties, hf_runs, near_ties, k_ties, worst);
}

/* ================================================================ 5. chi-square */

/* The p = 0.001 critical value of chi-square with df degrees of freedom: the exact table
 * to 10, Wilson-Hilferty above (within 0.5% there). */
static double chi2_critical(int df) {
    static const double table[11] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588};
    if (df <= 10) return table[df < 1 ? 1 : df];
    const double z = 3.090232306, h = 2.0 / (9.0 * df), t = 1 - h + z * sqrt(h);
    return df * t * t * t;
}

/* Pearson's statistic of counts against n * expected; bins with expected count < 5 are
 * pooled (into the last bin). Returns the statistic; *df its degrees of freedom. */
static double chi2(const int64_t *counts, const double *expected, int32_t n_bins, int64_t n, int *df) {
    double stat = 0, pool_e = 0, pool_o = 0;
    int bins = 0;
    for (int32_t i = 0; i < n_bins; i++) {
        const double e = expected[i] * (double)n;
        if (e < 5) {
            pool_e += e;
            pool_o += (double)counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        bins++;
    }
    if (pool_e >= 5) {
        stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        bins++;
    } else if (pool_o > 0 && pool_e == 0) {
        stat = INFINITY; /* drew something that has probability 0 */
    }
    *df = bins - 1;
    return stat;
}

/* Draws n ids with sample_reference at positions 0..n-1 (or seeds 0..n-1 when by_seed) and
 * returns the chi-square statistic against the distribution transformers defines for
 * (temp_expected, ...), i.e. softmax(hf_process(logits)). */
static double draw_chi2(const float *logits, int32_t n_vocab, double temp, int32_t top_k, double top_p,
                        double temp_expected, int64_t n, int by_seed, int *df, int *outside) {
    static float x[MAXV], work[SAMPLER_WORK_FLOATS(MAXV)];
    static double p[MAXV];
    static int64_t counts[MAXV];
    sampler_cfg want = make_cfg(temp_expected, top_k, top_p, 1.0, 0, 0);
    memcpy(x, logits, sizeof(float) * (size_t)n_vocab);
    hf_process(&want, x, n_vocab, NULL, NULL, 0, NULL);
    softmax_f64(x, n_vocab, p);
    memset(counts, 0, sizeof counts);
    sampler_cfg cfg = make_cfg(temp, top_k, top_p, 1.0, 0, 0x5eed);
    *outside = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id;
        if (by_seed) cfg.seed = 0x9e3779b97f4a7c15u * (uint64_t)(i + 1);
        sample_reference(&cfg, logits, n_vocab, NULL, NULL, 0, by_seed ? 17 : (uint32_t)i, work, &id, NULL, NULL);
        counts[id]++;
        *outside += p[id] == 0;
    }
    return chi2(counts, p, n_vocab, n, df);
}

static void test_chi_square(void) {
    /* Logits with a realistic shape: a few large, a long tail (deterministic). */
    static float logits[MAXV];
    rng_state = 12345;
    for (int i = 0; i < 256; i++) logits[i] = (float)(rnd() % 10000) * 0.0008f - 4.0f;
    logits[17] = 6.0f, logits[99] = 5.5f, logits[3] = 5.2f, logits[250] = 4.9f, logits[128] = 4.0f;
    const struct {
        double temp, top_p;
        int32_t top_k;
        int by_seed;
    } cases[] = {
        {1.0, 1.0, 40, 0},  /* top-k only */
        {0.8, 0.95, 40, 0}, /* llama.cpp's defaults */
        {1.5, 0.9, 64, 0},  /* top-p at work among 64 */
        {1.2, 0.6, 20, 0},  /* a small kept set */
        {1.0, 0.5, 0, 0},   /* top-p without top-k: the wide draw */
        {1.0, 1.0, 40, 1},  /* across seeds at one position */
        {4.0, 0.95, 0, 0},  /* nearly flat: top-p keeps ~240 of 256 (the cap kept 64) */
        {2.0, 1.0, 0, 0},   /* temperature only, every id */
        {1.5, 0.98, 100, 0},/* top-k above 64 */
        {3.0, 1.0, 200, 1}, /* top-k 200, across seeds */
    };
    const int64_t n = 60000;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int df, outside;
        const double stat = draw_chi2(logits, 256, cases[c].temp, cases[c].top_k, cases[c].top_p, cases[c].temp, n,
                                      cases[c].by_seed, &df, &outside);
        const double crit = chi2_critical(df);
        printf("chi-square: temp %.2f top-k %d top-p %.2f%s: %.1f with %d df (p = 0.001 critical %.1f)\n",
               cases[c].temp, cases[c].top_k, cases[c].top_p, cases[c].by_seed ? " (seeds)" : "", stat, df, crit);
        CHECK(df >= 3 && stat < crit, "draws do not follow the distribution: chi-square %.1f >= %.1f (df %d)", stat,
              crit, df);
        CHECK(outside == 0, "%d draws of ids transformers filters", outside);
    }
    /* The test can fail: draws at temperature 0.84 against the distribution at 0.8 (the same
     * 40 ids, probabilities a few percent off) must be rejected. */
    int df, outside;
    const double stat = draw_chi2(logits, 256, 0.84, 40, 1.0, 0.8, n, 0, &df, &outside);
    printf("chi-square against a wrong distribution (temperature 5%% off): %.1f with %d df (critical %.1f)\n", stat,
           df, chi2_critical(df));
    CHECK(stat > chi2_critical(df), "chi-square did not reject a wrong distribution: %.1f", stat);

    /* The uniform itself: 64 bins over 2^17 positions, and over 2^17 seeds. */
    for (int by_seed = 0; by_seed < 2; by_seed++) {
        int64_t counts[64] = {0};
        double expected[64];
        for (int i = 0; i < 64; i++) expected[i] = 1.0 / 64;
        for (uint32_t i = 0; i < (1u << 17); i++) {
            const float u = by_seed ? sampler_uniform((uint64_t)i << 20, 3) : sampler_uniform(42, i);
            counts[(int)(u * 64)]++;
        }
        const double s = chi2(counts, expected, 64, 1 << 17, &df);
        CHECK(s < chi2_critical(df), "uniform (%s): chi-square %.1f >= %.1f", by_seed ? "seeds" : "positions", s,
              chi2_critical(df));
    }
}

/* ================================================================ 6. determinism */

/* 32 draws of the resident sampler on fixed logits; any build (gcc, clang + sanitizers, wasm)
 * and any future backend must give these ids. */
static void golden_run(int wide) {
    float logits[256];
    rng_state = 777;
    for (int i = 0; i < 256; i++) logits[i] = (float)(int32_t)(rnd() % 4001) * 0.0025f - 5.0f;
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = wide ? 2.5 : 1.3;
    p.top_k = wide ? 0 : 50; /* wide: top-p keeps ~200 of 256 */
    p.top_p = 0.97;
    p.repeat_penalty = 1.2;
    p.repeat_last_n = -1;
    p.seed = 0xfeedbeefcafe1234u;
    lean_sampler *s = NULL;
    lean_error err;
    CHECK(lean_sampler_create(&p, 256, &s, &err) == LEAN_OK, "create: %s", err.msg);
    if (!s) return;
    const int32_t prompt[6] = {5, 17, 5, 200, 31, 17};
    lean_sampler_accept(s, prompt, 6, &err);
    int32_t got[32];
    for (int i = 0; i < 32; i++) {
        CHECK(lean_sampler_sample(s, logits, 6 + i, NULL, &got[i], &err) == LEAN_OK, "sample: %s", err.msg);
        lean_sampler_accept(s, &got[i], 1, &err);
    }
    static const int32_t golden[2][32] = {{182, 231, 247, 244, 43, 142, 33, 169, 191, 169, 137, 219, 79, 87, 21, 67,
                                           33, 113, 57, 145, 62, 130, 78, 214, 7, 58, 192, 105, 33, 169, 203, 169},
                                          {140, 214, 169, 215, 212, 68, 78, 145, 24, 239, 133, 169, 195, 25, 142, 137,
                                           172, 162, 57, 62, 98, 207, 182, 254, 24, 13, 73, 79, 132, 215, 229, 217}};
    if (wide) { /* the golden ids come from a kept set wider than the cap */
        sampler_cfg cfg;
        sampler_config(&p, &cfg, NULL);
        sample_trace tr;
        int32_t id;
        float work[SAMPLER_WORK_FLOATS(256)];
        sample_reference(&cfg, logits, 256, NULL, NULL, 0, 0, work, &id, &tr, NULL);
        CHECK(tr.wide && tr.n_kept > SAMPLER_K_CAP, "the wide golden run keeps %d ids", tr.n_kept);
    }
    int same = !memcmp(got, golden[wide], sizeof got);
    CHECK(same, "golden ids (%s draw) differ: the resident computation changed (or this build computes differently)",
          wide ? "wide" : "capped");
    if (!same) {
        for (int i = 0; i < 32; i++) fprintf(stderr, "%d, ", got[i]);
        fputc('\n', stderr);
    }
    lean_sampler_free(s);
}

static void test_golden(void) {
    golden_run(0);
    golden_run(1);
}

/* A draw depends on (seed, position, logits, window) only: not on earlier draws. */
static void test_position_keying(void) {
    float logits[64];
    for (int i = 0; i < 64; i++) logits[i] = (float)(i % 9) * 0.3f;
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = 2.0;
    p.seed = 99;
    lean_sampler *a = NULL, *b = NULL, *c = NULL;
    lean_sampler_create(&p, 64, &a, NULL);
    lean_sampler_create(&p, 64, &b, NULL);
    p.seed = 100;
    lean_sampler_create(&p, 64, &c, NULL);
    if (!a || !b || !c) {
        CHECK(0, "create");
        goto done;
    }
    int32_t ia, ib, ic, n_diff = 0, same = 1;
    for (int32_t pos = 0; pos < 64; pos++) lean_sampler_sample(a, logits, pos, NULL, &ia, NULL);
    lean_sampler_sample(a, logits, 40, NULL, &ia, NULL);
    lean_sampler_sample(b, logits, 40, NULL, &ib, NULL); /* fresh: no draws before */
    CHECK(ia == ib, "the draw at position 40 depends on earlier draws (%d vs %d)", ia, ib);
    for (int32_t pos = 0; pos < 64; pos++) {
        lean_sampler_sample(a, logits, pos, NULL, &ia, NULL);
        lean_sampler_sample(b, logits, pos, NULL, &ib, NULL);
        lean_sampler_sample(c, logits, pos, NULL, &ic, NULL);
        same &= ia == ib;
        n_diff += ia != ic;
    }
    CHECK(same, "the same seed gave different ids");
    CHECK(n_diff >= 32, "seeds 99 and 100 agree on %d of 64 draws", 64 - n_diff);
    /* A random seed is resolved and reported. */
    p.seed = LEAN_SEED_RANDOM;
    lean_sampler *r = NULL;
    lean_sampler_create(&p, 64, &r, NULL);
    CHECK(r && lean_sampler_seed(r) != LEAN_SEED_RANDOM, "random seed not resolved");
    lean_sampler_free(r);
done:
    lean_sampler_free(a);
    lean_sampler_free(b);
    lean_sampler_free(c);
}

/* What `lean run -m qwen2-q8_0.gguf --ids ... -n 24 --seed S ...` does, through lean.h. */
static int generate(lean_model *m, const lean_sampler_params *p, const int32_t *prompt, int32_t n_prompt,
                    int32_t *out, int32_t n_out) {
    lean_error err;
    lean_ctx *c = NULL;
    lean_sampler *s = NULL;
    float *logits = malloc(sizeof(float) * (size_t)lean_model_n_vocab(m));
    int ok = logits && lean_ctx_create(m, NULL, &c, &err) == LEAN_OK &&
             lean_sampler_create(p, lean_model_n_vocab(m), &s, &err) == LEAN_OK &&
             lean_sampler_accept(s, prompt, n_prompt, &err) == LEAN_OK &&
             lean_prefill(c, prompt, n_prompt, logits, &err) == LEAN_OK;
    for (int32_t i = 0; ok && i < n_out; i++)
        ok = lean_sampler_sample(s, logits, lean_ctx_pos(c), NULL, &out[i], &err) == LEAN_OK &&
             lean_sampler_accept(s, &out[i], 1, &err) == LEAN_OK &&
             (i + 1 == n_out || lean_decode(c, out[i], logits, &err) == LEAN_OK);
    CHECK(ok, "generate: %s", err.msg);
    lean_sampler_free(s);
    lean_ctx_free(c);
    free(logits);
    return ok;
}

static void test_seeded_generation(void) {
    lean_model *m = NULL;
    lean_error err;
    if (lean_model_load_file("build/fixtures/qwen2-q8_0.gguf", &m, &err) != LEAN_OK) {
        CHECK(0, "load: %s", err.msg);
        return;
    }
    const int32_t prompt[8] = {170, 42, 9, 201, 77, 13, 250, 64};
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = 4.0;
    p.top_k = 0;
    p.top_p = 1.0;
    p.repeat_penalty = 1.3;
    p.seed = 20261202;
    int32_t a[24], b[24], c[24], g[24], g2[24];
    generate(m, &p, prompt, 8, a, 24);
    generate(m, &p, prompt, 8, b, 24);
    p.seed = 20261203;
    generate(m, &p, prompt, 8, c, 24);
    CHECK(!memcmp(a, b, sizeof a), "two runs with the same seed differ");
    CHECK(memcmp(a, c, sizeof a) != 0, "seeds 20261202 and 20261203 gave the same 24 ids");
    /* Greedy ignores the seed. */
    p.greedy = 1;
    generate(m, &p, prompt, 8, g, 24);
    p.seed = 1;
    generate(m, &p, prompt, 8, g2, 24);
    CHECK(!memcmp(g, g2, sizeof g), "greedy depends on the seed");
    lean_model_free(m);
}

/* ================================================================ 7. masks, greedy, penalty, errors */

static void test_masks(void) {
    float logits[100];
    for (int i = 0; i < 100; i++) logits[i] = (float)((i * 37) % 100) * 0.05f;
    uint32_t bits[LEAN_MASK_WORDS(100)] = {0};
    const int32_t allowed[5] = {3, 31, 32, 64, 99}; /* word edges */
    for (int i = 0; i < 5; i++) lean_mask_allow(bits, allowed[i]);
    lean_mask mask = {bits, 100};
    lean_sampler_params p = lean_sampler_default_params();
    p.temperature = 5.0;
    p.seed = 3;
    lean_sampler *s = NULL;
    lean_error err;
    lean_sampler_create(&p, 100, &s, &err);
    if (!s) {
        CHECK(0, "create");
        return;
    }
    int hits[100] = {0}, inside = 1;
    for (int32_t pos = 0; pos < 5000; pos++) {
        int32_t id = -1;
        lean_sampler_sample(s, logits, pos, &mask, &id, &err);
        inside &= id >= 0 && lean_mask_allows(bits, id);
        if (id >= 0) hits[id]++;
    }
    CHECK(inside, "a masked-out id was drawn");
    CHECK(hits[3] && hits[31] && hits[32] && hits[64] && hits[99], "an allowed id was never drawn at temperature 5");
    /* hf_process sets masked-out ids to -inf. */
    sampler_cfg cfg = make_cfg(1.0, 0, 1.0, 1.0, 0, 1);
    float x[100];
    memcpy(x, logits, sizeof x);
    hf_process(&cfg, x, 100, bits, NULL, 0, NULL);
    int ok = 1;
    for (int i = 0; i < 100; i++) ok &= lean_mask_allows(bits, i) ? x[i] == logits[i] : x[i] == -INFINITY;
    CHECK(ok, "hf_process mask");
    /* Greedy under a mask: the argmax among allowed ids (logit of 99 is (99*37)%100*0.05 = 3.15). */
    lean_sampler_params g = p;
    g.greedy = 1;
    lean_sampler *sg = NULL;
    lean_sampler_create(&g, 100, &sg, NULL);
    int32_t id = -1, want = 3;
    for (int i = 0; i < 5; i++)
        if (logits[allowed[i]] > logits[want]) want = allowed[i];
    lean_sampler_sample(sg, logits, 0, &mask, &id, NULL);
    CHECK(id == want, "greedy with a mask: %d, expected %d", id, want);
    /* One allowed id: always it. Nothing allowed, or a mask of the wrong size: an error. */
    uint32_t one[LEAN_MASK_WORDS(100)] = {0};
    lean_mask_allow(one, 50);
    lean_mask m1 = {one, 100};
    int always = 1;
    for (int32_t pos = 0; pos < 200; pos++) {
        lean_sampler_sample(s, logits, pos, &m1, &id, NULL);
        always &= id == 50;
    }
    CHECK(always, "a one-id mask drew another id");
    uint32_t none[LEAN_MASK_WORDS(100)] = {0};
    lean_mask m0 = {none, 100}, wrong = {bits, 99};
    CHECK(lean_sampler_sample(s, logits, 0, &m0, &id, &err) == LEAN_ERR_ARG && strstr(err.msg, "allowed"),
          "empty mask: %s", err.msg);
    CHECK(lean_sampler_sample(s, logits, 0, &wrong, &id, &err) == LEAN_ERR_ARG && strstr(err.msg, "mask"),
          "wrong-size mask: %s", err.msg);
    lean_sampler_free(s);
    lean_sampler_free(sg);
}

static void test_greedy(void) {
    float logits[300];
    for (int i = 0; i < 300; i++) logits[i] = (float)(i % 50) * 0.1f;
    logits[120] = logits[7] = logits[250] = 9.0f; /* a three-way tie at the max */
    lean_sampler_params p = lean_sampler_default_params();
    int32_t id;
    for (int mode = 0; mode < 2; mode++) { /* temperature 0, or --greedy at temperature 0.8 */
        p.temperature = mode ? 0.8 : 0.0;
        p.greedy = mode;
        lean_sampler *s = NULL;
        lean_sampler_create(&p, 300, &s, NULL);
        id = -1;
        if (s) lean_sampler_sample(s, logits, 5, NULL, &id, NULL);
        CHECK(id == 7, "greedy (mode %d) with ties: %d, expected the lowest id 7", mode, id);
        /* With a penalty on 7 (positive logit / 1.5): 120 wins. */
        lean_sampler_free(s);
        p.repeat_penalty = 1.5;
        lean_sampler_create(&p, 300, &s, NULL);
        const int32_t hist[2] = {7, 7};
        lean_sampler_accept(s, hist, 2, NULL);
        id = -1;
        if (s) lean_sampler_sample(s, logits, 5, NULL, &id, NULL);
        CHECK(id == 120, "greedy after penalizing 7: %d, expected 120", id);
        lean_sampler_free(s);
        p.repeat_penalty = 1.0;
    }
    /* NaN and infinite logits count as masked out. */
    logits[7] = NAN;
    logits[120] = INFINITY;
    p.temperature = 0;
    p.greedy = 0;
    lean_sampler *s = NULL;
    lean_sampler_create(&p, 300, &s, NULL);
    if (s) lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
    CHECK(id == 250, "greedy skips NaN and inf: %d", id);
    /* -0 and +0 tie (the first id wins, whichever sign it has), below them only negatives;
     * then nothing finite at all: an error, not an id. */
    for (int i = 0; i < 300; i++) logits[i] = -1.0f - (float)(i % 7);
    for (int sign = 0; sign < 2; sign++) {
        logits[3] = sign ? -0.0f : 0.0f, logits[9] = sign ? 0.0f : -0.0f;
        id = -1;
        if (s) lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
        CHECK(id == 3, "greedy with a tie of -0 and +0 (sign %d): %d, expected 3", sign, id);
    }
    for (int i = 0; i < 300; i++) logits[i] = i % 2 ? NAN : -INFINITY;
    CHECK(s && lean_sampler_sample(s, logits, 0, NULL, &id, NULL) != LEAN_OK, "greedy with no finite logit drew an id");
    lean_sampler_free(s);
    /* One largest logit at every id (every lane of the unmasked scan, and the ids past its
     * last whole group of 8), beside a NaN and an inf. */
    const int32_t sizes[3] = {8, 13, 299};
    for (int k = 0; k < 3; k++) {
        s = NULL;
        lean_sampler_create(&p, sizes[k], &s, NULL);
        for (int32_t at = 0; s && at < sizes[k]; at++) {
            for (int32_t i = 0; i < sizes[k]; i++) logits[i] = (float)((i * 7) % 5) - 3.0f;
            logits[(at + 1) % sizes[k]] = NAN, logits[(at + 2) % sizes[k]] = INFINITY;
            logits[at] = 4.0f;
            id = -1;
            lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
            CHECK(id == at, "greedy over %d ids, the largest at %d: %d", sizes[k], at, id);
        }
        lean_sampler_free(s);
    }
}

static void test_penalty(void) {
    /* Once per distinct id, not once per occurrence: 3 occurrences of id 2 divide once. */
    float x[8] = {1.0f, -1.0f, 2.0f, -2.0f, 0.5f, 0.0f, 3.0f, -0.0f};
    const int32_t hist[7] = {2, 2, 1, 2, 5, 7, 1};
    const float pen = (float)1.3;
    hf_repetition_penalty(x, 8, hist, 7, pen);
    CHECK(x[2] == 2.0f / pen && x[1] == -1.0f * pen && x[5] == 0.0f && x[7] == 0.0f && x[0] == 1.0f && x[6] == 3.0f,
          "hf penalty: %g %g %g", x[2], x[1], x[5]);
    /* The window: repeat_last_n = 2 sees only the last two accepted ids. */
    float logits[10], work[SAMPLER_WORK_FLOATS(10)];
    for (int i = 0; i < 10; i++) logits[i] = 2.0f;
    logits[0] = 2.5f;
    lean_sampler_params p = lean_sampler_default_params();
    p.greedy = 1;
    p.repeat_penalty = 2.0;
    const struct {
        int32_t last_n;
        int32_t want;
    } w[] = {{2, 0}, {4, 1}, {-1, 1}, {0, 0}};
    /* history 0, 3, 4: last 2 = {3, 4} (0 unpenalized, wins at 2.5); last 4 / all include 0
     * (2.5 / 2 = 1.25; id 1 is the lowest unpenalized 2.0); off: 0 wins. */
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        p.repeat_last_n = w[i].last_n;
        lean_sampler *s = NULL;
        lean_sampler_create(&p, 10, &s, NULL);
        const int32_t h[3] = {0, 3, 4};
        lean_sampler_accept(s, h, 3, NULL);
        int32_t id = -1;
        if (s) lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
        CHECK(id == w[i].want, "repeat_last_n %d: %d, expected %d", w[i].last_n, id, w[i].want);
        /* reset forgets the history */
        lean_sampler_reset(s);
        if (s) lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
        CHECK(id == 0, "after reset: %d", id);
        lean_sampler_free(s);
    }
    /* The window slides over many accepts (compaction) and keeps the newest ids. */
    p.repeat_last_n = 3;
    lean_sampler *s = NULL;
    lean_sampler_create(&p, 10, &s, NULL);
    for (int i = 0; i < 5000; i++) {
        int32_t id = i % 7 == 0 ? 5 : 6;
        lean_sampler_accept(s, &id, 1, NULL);
    }
    int32_t last[3] = {0, 8, 9}, id = -1;
    lean_sampler_accept(s, last, 3, NULL);
    if (s) lean_sampler_sample(s, logits, 0, NULL, &id, NULL);
    CHECK(id == 1, "sliding window: %d, expected 1 (0, 8, 9 penalized)", id);
    lean_error err;
    const int32_t bad = 10;
    CHECK(lean_sampler_accept(s, &bad, 1, &err) == LEAN_ERR_ARG && strstr(err.msg, "vocabulary"), "accept 10: %s",
          err.msg);
    lean_sampler_free(s);
    /* sample_reference multiplies by the float32 reciprocal: at most one rounding from / */
    sampler_cfg cfg = make_cfg(1.0, 10, 1.0, 1.1, -1, 1);
    const int32_t ids[1] = {0};
    sample_trace tr;
    sample_reference(&cfg, logits, 10, NULL, ids, 1, 0, work, &id, &tr, NULL);
    float want = 2.5f / (float)1.1;
    int32_t pos0 = -1;
    for (int j = 0; j < tr.n_cand; j++)
        if (tr.ids[j] == 0) pos0 = j;
    CHECK(pos0 >= 0 && abs((int32_t)bits_of(tr.logit[pos0]) - (int32_t)bits_of(want)) <= 1,
          "resident penalty %a vs %a", pos0 >= 0 ? tr.logit[pos0] : 0.0f, want);
}

/* The logit bias: added first (before the penalty, the temperature, top-k, top-p, the argmax),
 * each value once, in float32; a reference computed here by hand from known logits. */
static void test_bias(void) {
    /* hf_logit_bias: x[id] + value, nothing else touched */
    float x[6] = {1.0f, -2.0f, 0.5f, 3.0f, -0.0f, 7.0f};
    const lean_logit_bias hb[3] = {{1, 2.5f}, {4, -1.25f}, {5, 0.1f}};
    hf_logit_bias(x, hb, 3);
    CHECK(x[0] == 1.0f && x[1] == 0.5f && x[2] == 0.5f && x[3] == 3.0f && x[4] == -1.25f && x[5] == 7.0f + 0.1f,
          "hf_logit_bias: %g %g %g %g %g %g", x[0], x[1], x[2], x[3], x[4], x[5]);

    /* The order: bias, then penalty. Id 2 at -1, bias +4, penalty 2 in the window: (-1 + 4) / 2
     * = 1.5 (penalty first would give -1 * 2 + 4 = 2); id 0 at 1.2 (unbiased, unpenalized),
     * id 1 at 2.0 biased by -1.5 (0.5), the rest at 0. */
    float logits[8] = {1.2f, 2.0f, -1.0f, 0, 0, 0, 0, 0}, work[SAMPLER_WORK_FLOATS(8)];
    const lean_logit_bias bias[2] = {{2, 4.0f}, {1, -1.5f}};
    sampler_cfg cfg = make_cfg(1.0, 8, 1.0, 2.0, -1, 9);
    cfg.bias = bias;
    cfg.n_bias = 2;
    const int32_t pen[1] = {2};
    sample_trace tr;
    int32_t id = -1;
    CHECK(sample_reference(&cfg, logits, 8, NULL, pen, 1, 0, work, &id, &tr, NULL) == LEAN_OK, "biased draw");
    CHECK(tr.n_cand == 8 && tr.ids[0] == 2 && tr.logit[0] == 1.5f && tr.ids[1] == 0 && tr.logit[1] == 1.2f &&
              tr.ids[2] == 1 && tr.logit[2] == 0.5f,
          "bias then penalty: candidates %d (%g), %d (%g), %d (%g); want 2 (1.5), 0 (1.2), 1 (0.5)", tr.ids[0],
          tr.logit[0], tr.ids[1], tr.logit[1], tr.ids[2], tr.logit[2]);
    /* the weights are those of the biased logits: exp(l - 1.5) */
    CHECK(tr.weight[0] == 1.0f && tr.weight[1] == sampler_exp(1.2f - 1.5f) && tr.weight[2] == sampler_exp(0.5f - 1.5f),
          "weights %g %g %g", tr.weight[0], tr.weight[1], tr.weight[2]);
    /* hf_process (transformers' chain) on the same settings: the same biased, penalized logits */
    float hx[8];
    memcpy(hx, logits, sizeof hx);
    const int32_t hh[2] = {2, 2};
    hf_process(&cfg, hx, 8, NULL, hh, 2, NULL);
    CHECK(hx[2] == 1.5f && hx[1] == 0.5f && hx[0] == 1.2f, "hf_process with a bias: %g %g %g", hx[2], hx[1], hx[0]);

    /* Every draw with a bias equals the unbiased draw over logits biased by hand (the capped
     * and the wide draw, under a mask too), trace for trace. */
    enum { V = 500 };
    static float lg[V], pre[V], wk[SAMPLER_WORK_FLOATS(V)];
    uint32_t u = 99, mask[LEAN_MASK_WORDS(V)] = {0};
    for (int i = 0; i < V; i++) {
        u = u * 1664525u + 1013904223u;
        lg[i] = (float)(u >> 8) * 0x1p-21f - 4.0f;
        if (i % 5) lean_mask_allow(mask, i);
    }
    const lean_logit_bias many[5] = {{7, 3.3f}, {123, -0.7f}, {250, 6.0f}, {499, 1.9f}, {31, -100.0f}};
    memcpy(pre, lg, sizeof pre);
    for (int k = 0; k < 5; k++) pre[many[k].id] += many[k].value;
    const struct {
        double t;
        int32_t k;
        double p;
    } rows[] = {{0.8, 40, 0.95}, {1.3, 64, 1.0}, {0.9, 0, 0.9}, {1.0, 100, 1.0}, {0, 0, 1}};
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
        for (int masked = 0; masked < 2; masked++)
            for (uint32_t pos = 0; pos < 20; pos++) {
                sampler_cfg c = make_cfg(rows[r].t, rows[r].k, rows[r].p, 1.2, -1, 77 + pos);
                const int32_t ph[3] = {7, 250, 3};
                sample_trace a, b;
                int32_t ia = -1, ib = -2;
                sample_reference(&c, pre, V, masked ? mask : NULL, ph, 3, pos, wk, &ia, &a, NULL);
                c.bias = many;
                c.n_bias = 5;
                sample_reference(&c, lg, V, masked ? mask : NULL, ph, 3, pos, wk, &ib, &b, NULL);
                char diff[200] = "";
                CHECK(ia == ib && sample_trace_same(&a, &b, diff, sizeof diff),
                      "row %zu masked %d pos %u: biased by hand %d, by the sampler %d (%s)", r, masked, pos, ia, ib, diff);
            }

    /* Greedy: +100 on an id picks it; -100 on the argmax gives the runner-up; 0 adds nothing. */
    lean_sampler_params p = lean_sampler_default_params();
    p.greedy = 1;
    lean_logit_bias one = {321, 100.0f};
    p.logit_bias = &one;
    p.n_logit_bias = 1;
    int32_t best = 0, second = -1;
    for (int i = 1; i < V; i++)
        if (lg[i] > lg[best]) best = i;
    for (int i = 0; i < V; i++)
        if (i != best && (second < 0 || lg[i] > lg[second])) second = i;
    for (int b = 0; b < 3; b++) {
        one = b == 0 ? (lean_logit_bias){321, 100.0f} : b == 1 ? (lean_logit_bias){best, -100.0f} : (lean_logit_bias){best, 0.0f};
        const int32_t want = b == 0 ? 321 : b == 1 ? second : best;
        lean_sampler *smp = NULL;
        lean_error err = {0};
        id = -1;
        if (lean_sampler_create(&p, V, &smp, &err) == LEAN_OK) lean_sampler_sample(smp, lg, 3, NULL, &id, &err);
        CHECK(id == want, "greedy with bias (%d, %g): %d, want %d (%s)", one.id, one.value, id, want, err.msg);
        lean_sampler_free(smp);
    }
    /* The list is copied at create: the caller's may change after. */
    lean_logit_bias mine[2] = {{10, 100.0f}, {11, 50.0f}};
    p.logit_bias = mine;
    p.n_logit_bias = 2;
    lean_sampler *smp = NULL;
    lean_sampler_create(&p, V, &smp, NULL);
    mine[0].value = -100.0f;
    id = -1;
    if (smp) lean_sampler_sample(smp, lg, 0, NULL, &id, NULL);
    CHECK(id == 10, "the sampler kept the caller's list, not a copy: %d", id);
    lean_sampler_free(smp);

    /* Bad lists: each refused with a message naming what is wrong. */
    const struct {
        lean_logit_bias b[2];
        int32_t n;
        const char *says;
    } bad[] = {
        {{{V, 1.0f}}, 1, "outside the vocabulary"},
        {{{-1, 1.0f}}, 1, "negative"},
        {{{3, NAN}}, 1, "finite"},
        {{{3, INFINITY}}, 1, "finite"},
        {{{3, -INFINITY}}, 1, "finite"},
        {{{3, 100.5f}}, 1, "[-100, 100]"},
        {{{3, -101.0f}}, 1, "[-100, 100]"},
        {{{3, 1.0f}, {3, 2.0f}}, 2, "twice"},
        {{{3, 0.0f}, {3, 2.0f}}, 2, "twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p.logit_bias = bad[i].b;
        p.n_logit_bias = bad[i].n;
        lean_error err = {0};
        smp = (lean_sampler *)&err;
        const lean_status st = lean_sampler_create(&p, V, &smp, &err);
        CHECK(st == LEAN_ERR_ARG && !smp && strstr(err.msg, bad[i].says) && strstr(err.msg, "logit_bias"),
              "bad bias %zu: status %d, '%s' (want '%s')", i, st, err.msg, bad[i].says);
    }
    p.logit_bias = NULL;
    p.n_logit_bias = 2;
    lean_error err = {0};
    CHECK(lean_sampler_params_check(&p, &err) == LEAN_ERR_ARG && strstr(err.msg, "NULL"), "NULL list: %s", err.msg);
    p.n_logit_bias = -1;
    CHECK(lean_sampler_params_check(&p, &err) == LEAN_ERR_ARG && strstr(err.msg, ">= 0"), "-1 entries: %s", err.msg);
}

static void test_params(void) {
    lean_sampler_params d = lean_sampler_default_params();
    CHECK(d.temperature == 0.8 && d.top_k == 40 && d.top_p == 0.95 && d.repeat_penalty == 1.0 &&
              d.repeat_last_n == 64 && d.seed == LEAN_SEED_RANDOM && !d.greedy,
          "defaults are not llama.cpp's");
    CHECK(lean_sampler_params_check(&d, NULL) == LEAN_OK, "defaults rejected");
    const struct {
        const char *name;
        lean_sampler_params p;
    } bad[] = {
        {"temperature", {.temperature = -0.1, .top_p = 1, .repeat_penalty = 1}},
        {"temperature", {.temperature = NAN, .top_p = 1, .repeat_penalty = 1}},
        {"temperature", {.temperature = 1e-300, .top_p = 1, .repeat_penalty = 1}},
        {"top_p", {.temperature = 1, .top_p = 1.01, .repeat_penalty = 1}},
        {"top_p", {.temperature = 1, .top_p = -0.5, .repeat_penalty = 1}},
        {"top_k", {.temperature = 1, .top_k = -1, .top_p = 1, .repeat_penalty = 1}},
        {"repeat_penalty", {.temperature = 1, .top_p = 1, .repeat_penalty = 0}},
        {"repeat_penalty", {.temperature = 1, .top_p = 1, .repeat_penalty = -1.1}},
        {"repeat_penalty", {.temperature = 1, .top_p = 1, .repeat_penalty = INFINITY}},
        {"repeat_last_n", {.temperature = 1, .top_p = 1, .repeat_penalty = 1, .repeat_last_n = -2}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lean_error err = {0};
        lean_sampler *s = (lean_sampler *)&err; /* must be set to NULL */
        lean_status st = lean_sampler_create(&bad[i].p, 10, &s, &err);
        CHECK(st == LEAN_ERR_ARG && s == NULL && strstr(err.msg, bad[i].name), "bad %s: status %d, '%s'", bad[i].name,
              st, err.msg);
    }
    lean_error err;
    lean_sampler *s = NULL;
    CHECK(lean_sampler_create(&d, 0, &s, &err) == LEAN_ERR_ARG && !s, "n_vocab 0");
    CHECK(lean_sampler_create(NULL, 10, &s, &err) == LEAN_ERR_ARG && !s, "NULL params");
    lean_sampler_create(&d, 10, &s, NULL);
    float l[10] = {0};
    int32_t id;
    CHECK(lean_sampler_sample(s, l, -1, NULL, &id, &err) == LEAN_ERR_ARG && strstr(err.msg, "position"), "pos -1");
    CHECK(lean_sampler_sample(s, NULL, 0, NULL, &id, &err) == LEAN_ERR_ARG, "NULL logits");
    lean_sampler_free(s);
    /* top_p = 0 keeps the most likely id only (transformers keeps min_tokens_to_keep = 1). */
    float x[10];
    for (int i = 0; i < 10; i++) x[i] = (float)i * 0.01f;
    lean_sampler_params p0 = {.temperature = 1, .top_p = 0, .repeat_penalty = 1, .seed = 5};
    lean_sampler_create(&p0, 10, &s, NULL);
    int only = 1;
    for (int32_t pos = 0; s && pos < 100; pos++) {
        lean_sampler_sample(s, x, pos, NULL, &id, NULL);
        only &= id == 9;
    }
    CHECK(only, "top_p 0 drew something other than the argmax");
    lean_sampler_free(s);
}

/* Every allocation failure in create and accept ends cleanly (ASan checks the leaks). */
static void test_alloc_failures(void) {
    lean_sampler_params p = lean_sampler_default_params();
    p.repeat_penalty = 1.1;
    p.repeat_last_n = -1;
    const lean_logit_bias bias[2] = {{3, 1.5f}, {9, -2.0f}};
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = i % 50;
    int clean = 1;
    for (uint64_t n = 1; n < 20; n++) {
        lean_alloc_fail_at(n, false);
        lean_sampler *s = NULL;
        lean_error err;
        lean_status st = lean_sampler_create(&p, 50, &s, &err);
        if (st == LEAN_OK) st = lean_sampler_accept(s, ids, 300, &err);
        lean_alloc_fail_at(0, false);
        clean &= st == LEAN_OK || st == LEAN_ERR_NOMEM;
        lean_sampler_free(s);
    }
    CHECK(clean, "an allocation failure gave another status");
}

int main(void) {
    test_fixtures();
    test_philox();
    test_exp();
    test_network();
    test_ties();
    test_wide();
    test_chi_square();
    test_golden();
    test_position_keying();
    test_seeded_generation();
    test_masks();
    test_greedy();
    test_penalty();
    test_bias();
    test_params();
    test_alloc_failures();
    return test_finish("test_sampler");
}
