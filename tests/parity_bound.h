/* parity_bound.h — how far a fast path's logits may be from transformers' on the parity
 * fixtures (fixture.h), derived from the path's arithmetic, and the greedy check that goes with
 * it. test_cpu_backend.c holds the CPU's 8-bit path with it, test_gpu_forward.c the GPU's 8-bit
 * prefill and f16 path; docs/parity.md says what is held to what.
 *
 * The derivation (first order, with rounding errors as independent zero-mean random variables:
 * the probabilistic rounding analysis of Higham & Mary, SIAM J. Sci. Comput. 41(5), 2019):
 *
 *  1. One matmul. A fast path computes y = W x with x (and on the f16 path W) rounded:
 *       8-bit: x in blocks of B values (B = 32; 256 for the K-quants, quant_act.c), each block
 *              on the grid d = max|x| / 127; the error of an element is at most d/2 and, as a
 *              random variable, uniform in +-d/2: mean square d^2 / 12. With the block's values
 *              N(0, s^2) (matrices' inputs are sums of many random terms), E[max|x|^2] =
 *              k(B)^2 s^2 with k(B)^2 = E[max of B chi-square(1)] = int_0^inf 1 - erf(sqrt(t/2))^B dt
 *              (k = 2.39 for B = 32, 3.07 for B = 256), so the relative rms error of x is
 *                rho8(B) = k(B) / (127 sqrt(12))          0.54% for B = 32, 0.70% for B = 256.
 *              (With no assumption on x, k(B) <= sqrt(B): 1.29% and 3.64%, a bound that left
 *              K-quant fixtures no decided greedy step: docs/parity.md.)
 *       f16:   x and w rounded to f16, then up to 4 fmas and 2 additions in f16 (the tiled
 *              kernel's lanes, test_gpu_weights.c): at most 8 roundings of relative rms
 *              u16 / sqrt(3), u16 = 2^-11, so rho16 = sqrt(8 / 3) 2^-11 = 7.97e-4.
 *     The error W dx has, relative to W x, the rms of dx relative to x: the fixtures' matrices
 *     are random, N(0, 1) / sqrt(cols) (scripts/make_fixtures.py), so ||W dx|| / ||W x|| is
 *     ||dx|| / ||x|| in expectation. Every matmul adds an output error of relative rms rho.
 *  2. Through the network. A token passes S = 7 n_layer + 1 matmuls (Wq Wk Wv Wo Wgate Wup
 *     Wdown per layer, then Wout). Their errors are independent; each reaches the logits with
 *     gain 1 (the residual stream adds the sublayers' outputs, RMSNorm keeps relative errors,
 *     softmax and SiLU are 1-Lipschitz; SiLU's relative gain, 1.2 for a N(0, 1) gate, is left
 *     out: the printed rms gain of 3 shows what the model misses), so they add in
 *     quadrature: the logits' error has rms
 *       sigma = rho sqrt(S) rms(logits)
 *     with rms(logits) over the vocabulary (cpu-ref's, within 1e-3 of transformers':
 *     test_parity.c).
 *  3. The check. With rho = 0 (float weights on the CPU: F32 activations, only the summation
 *     order differs) only FIXTURE_TOL remains. Otherwise, at each step (every prompt position,
 *     then every decoded token), every logit within z sigma + FIXTURE_TOL of cpu-ref's (the
 *     whole vocabulary) and of transformers' (its top-21 where recorded, with the same top-k
 *     id set where that bound cannot reorder it), z the Gaussian tail with probability
 *     BOUND_ALPHA of a false failure over the run's n_vocab x steps comparisons:
 *     n erfc(z / sqrt(2)) = BOUND_ALPHA. The rms of |fast - cpu-ref| over sigma (the gain
 *     2 takes as 1) is printed, not held: the model gives its mean, not its spread from step
 *     to step (a chi tail over the roundings was exceeded 1.07x on llama-tied q4_1).
 *  4. Greedy. The fast path's pick leaves cpu-ref's top id i for j only if e_j - e_i (rms
 *     sqrt(2) sigma) exceeds their gap, which is transformers' within 2 FIXTURE_TOL. A step
 *     where the chance of any flip, sum_j erfc((gap_j - 2 FIXTURE_TOL) / (2 sigma)) / 2, is
 *     below BOUND_ALPHA / n_cont is decided: the fast path's argmax must be
 *     transformers' id. Any other step is a near-tie: waived, counted and printed (with
 *     whether the fast path picked transformers' id anyway). Every fixture run must decide a
 *     step, and a path BOUND_MIN_DECIDED_PCT percent of its steps over all fixtures
 *     (bound_summary): a bound so wide that it waives (nearly) everything checks nothing.
 *     That minimum is a policy, not derived: the new fixtures decide 9%-56% per run.
 *
 * Header-only (static functions), beside fixture.h. */
#ifndef LEAN_TEST_PARITY_BOUND_H
#define LEAN_TEST_PARITY_BOUND_H

#include "fixture.h"

#include <math.h>

#define BOUND_ALPHA 1e-6 /* chance of a false failure per fixture run */
#define BOUND_MIN_DECIDED_PCT 25 /* of a path's greedy steps over the fixtures that must be decided (4) */

/* k(B)^2 of 1: E[max of B chi-square(1) values], by the midpoint rule (the integrand falls
 * below 1e-12 long before t = 80). */
static inline double bound_crest2(int block) {
    const double h = 1e-3;
    double sum = 0;
    for (double t = h / 2; t < 80; t += h) sum += 1 - pow(erf(sqrt(t / 2)), block);
    return sum * h;
}

/* z with n erfc(z / sqrt 2) = BOUND_ALPHA (bisection; erfc falls monotonically). */
static inline double bound_z(double n) {
    double lo = 0, hi = 40;
    for (int i = 0; i < 100; i++) {
        const double mid = 0.5 * (lo + hi);
        if (n * erfc(mid / sqrt(2.0)) > BOUND_ALPHA) lo = mid;
        else hi = mid;
    }
    return hi;
}

/* One fixture run's bound: rho (0: float arithmetic), the model's sqrt(S) and z. */
typedef struct bound {
    double rho, sqrt_s, z;
} bound;

/* BOUND_8BIT: 8-bit activations in the CPU backend's blocks (bound_block_elems); BOUND_8BIT_32:
 * in blocks of 32 whatever the format (the GPU's matmul_tiled_i8.wgsl) */
enum bound_path { BOUND_FLOAT, BOUND_8BIT, BOUND_F16, BOUND_8BIT_32 };

/* The block of the 8-bit activations a fixture's weights take on path: Q8_K (256) for the
 * K-quants, Q8_32 for the others (quant_act.c's lean_act_for); 32 on BOUND_8BIT_32. */
static inline int bound_block_elems(const fixture *fx, enum bound_path path) {
    return path != BOUND_8BIT_32 && strstr(fx->fmt, "_k") ? 256 : 32;
}

/* The bound of path on model m over n_steps steps; block: the 8-bit activations' (32, 256). */
static inline bound bound_make(enum bound_path path, int block, const lean_model *m, int n_steps) {
    lean_model_info in;
    lean_model_get_info(m, &in);
    bound b = {0, sqrt(7.0 * in.n_layer + 1), bound_z((double)in.n_vocab * n_steps)};
    if (path == BOUND_8BIT || path == BOUND_8BIT_32) b.rho = sqrt(bound_crest2(block)) / (127 * sqrt(12.0));
    if (path == BOUND_F16) b.rho = sqrt(8.0 / 3.0) * ldexp(1.0, -11);
    return b;
}

/* sigma of one step (2 above) from cpu-ref's logits. */
static inline double bound_sigma(const bound *b, const float *ref, int n) {
    double s2 = 0;
    for (int i = 0; i < n; i++) s2 += (double)ref[i] * ref[i];
    return b->rho * b->sqrt_s * sqrt(s2 / n);
}

/* z sigma + FIXTURE_TOL: the bound of every logit of one step (3). */
static inline double bound_max(const bound *b, const float *ref, int n) {
    return b->z * bound_sigma(b, ref, n) + FIXTURE_TOL;
}

/* One step's errors of fast against cpu-ref's logits ref (n of them): *max_ratio the largest
 * |fast - ref| over the bound z sigma + FIXTURE_TOL (NaN counts as infinite), *gain their rms
 * over sigma (0 for float arithmetic: the model's gain, reported, not held). Returns the bound. */
static inline double bound_step(const bound *b, const float *fast, const float *ref, int n, double *max_ratio,
                                double *gain) {
    const double sigma = bound_sigma(b, ref, n), bmax = bound_max(b, ref, n);
    double e2 = 0, emax = 0;
    for (int v = 0; v < n; v++) {
        const double d = fabs((double)fast[v] - ref[v]);
        e2 += d * d;
        if (!(d <= emax)) emax = isnan(d) ? INFINITY : d;
    }
    *max_ratio = emax / bmax;
    *gain = sigma > 0 ? sqrt(e2 / n) / sigma : 0;
    if (isnan(*gain)) *gain = INFINITY;
    return bmax;
}

/* Is the greedy pick at a step with cpu-ref's logits ref decided (4)? Decided: the chance of
 * any flip, sum_j erfc((gap_j - 2 FIXTURE_TOL) / (2 sigma)) / 2, is below BOUND_ALPHA over the
 * run's n_cont continuation steps. With sigma 0: every gap above 2 FIXTURE_TOL. */
static inline bool bound_decided(const bound *b, const float *ref, int n, int n_cont) {
    const int top = fixture_argmax(ref, n);
    const double sigma = bound_sigma(b, ref, n);
    double p = 0;
    for (int j = 0; j < n; j++) {
        if (j == top) continue;
        const double gap = (double)ref[top] - ref[j] - 2 * FIXTURE_TOL;
        if (gap <= 0) return false;
        if (sigma > 0) p += 0.5 * erfc(gap / (2 * sigma));
    }
    return p <= BOUND_ALPHA / n_cont;
}

/* The logits of c at every step of fx into out ((n_prompt + n_cont) x n_vocab): step s < n_prompt
 * after prefilling the prompt's first s + 1 ids into an emptied context, step n_prompt + i
 * after then decoding cont[0..i] (transformers' ids, so every step stays comparable). Step s
 * is fixture point n_pos = s + 1. */
static inline bool bound_run(const fixture *fx, lean_ctx *c, int n_vocab, float *out) {
    lean_error err;
    lean_status st = LEAN_OK;
    for (int p = 1; st == LEAN_OK && p <= fx->n_prompt; p++) {
        st = lean_ctx_truncate(c, 0, &err);
        if (st == LEAN_OK) st = lean_prefill(c, fx->prompt, p, out + (size_t)(p - 1) * n_vocab, &err);
    }
    for (int i = 0; st == LEAN_OK && i < fx->n_cont; i++)
        st = lean_decode(c, fx->cont[i], out + (size_t)(fx->n_prompt + i) * n_vocab, &err);
    CHECK(st == LEAN_OK, "%s: %s", fx->model, err.msg);
    return st == LEAN_OK;
}

/* floats for bound_run's logits of fx */
static inline float *bound_alloc(const fixture *fx, int n_vocab) {
    float *p = malloc(sizeof(float) * (size_t)n_vocab * (size_t)(fx->n_prompt + fx->n_cont));
    CHECK(p != NULL, "out of memory");
    return p;
}

/* What a fixture run found (bound_fixture), for its row in the table. */
typedef struct bound_result {
    double worst_max;  /* largest max |fast - reference| / its bound over the steps */
    double worst_gain; /* largest rms |fast - cpu-ref| / sigma (0 when rho is 0) */
    double worst_tf;   /* largest |fast - transformers| over the fixture's points */
    int sets, sets_equal; /* points whose top-k id set is transformers' (k: fixture_point_safe_k) */
    int steps, decided, match, ties, ties_match;
} bound_result;

/* The runs since the last bound_summary. */
static bound_result bound_total;

/* Prints and checks the runs since the last call (what: the path): at least
 * BOUND_MIN_DECIDED_PCT percent of their greedy steps decided. */
static inline void bound_summary(const char *what) {
    const bound_result *t = &bound_total;
    printf("summary: %s: %d of %d greedy steps decided (%d transformers' pick), %d near-ties waived (%d picked anyway); "
           "worst max error %.2f of the bound, worst rms error %.2f sigma\n", what, t->decided, t->steps, t->match,
           t->ties, t->ties_match, t->worst_max, t->worst_gain);
    CHECK(100 * t->decided >= BOUND_MIN_DECIDED_PCT * t->steps, "%s: %d of %d greedy steps decided, under %d%%", what,
          t->decided, t->steps, BOUND_MIN_DECIDED_PCT);
    bound_total = (bound_result){0};
}

static inline void bound_header(const char *what) {
    printf("%s against transformers (tests/parity_bound.h):\n"
           "| model | fmt  | path | max abs delta vs transformers | of the bound | rms error / sigma | top-k ids equal "
           "| greedy = transformers at decided steps | near-ties waived (picked anyway) |\n"
           "|---|---|---|---|---|---|---|---|---|\n", what);
}

/* Holds the fast path's logits lf to transformers on fx and to cpu-ref's lr (both bound_run's,
 * on fx's model m) with path's bound: the checks of 3 at every step (every prompt position and
 * every decoded token; transformers' top-21 at its recorded points, with the same top-k id set
 * where the bound cannot reorder it) and the greedy check of 4 at every continuation step.
 * Prints the table row; returns the tally. */
static inline bound_result bound_fixture(const fixture *fx, const char *path_name, const float *lf, const float *lr,
                                         enum bound_path path, const lean_model *m) {
    bound_result r = {0};
    const int V = lean_model_n_vocab(m), n_steps = fx->n_prompt + fx->n_cont;
    const bound b = bound_make(path, bound_block_elems(fx, path), m, n_steps);
    for (int s = 0; s < n_steps; s++) {
        const float *f = lf + (size_t)s * V, *ref = lr + (size_t)s * V;
        double max_ratio, gain;
        const double bmax = bound_step(&b, f, ref, V, &max_ratio, &gain);
        r.worst_max = fmax(r.worst_max, max_ratio);
        r.worst_gain = fmax(r.worst_gain, gain);
        CHECK(max_ratio <= 1, "%s %s after %d ids: max |fast - cpu-ref| %.3g x the bound %.3g", fx->model, path_name,
              s + 1, max_ratio, bmax);
        const fixture_point *pt = fixture_at(fx, s + 1);
        if (pt) { /* transformers' own logits */
            float d;
            int k;
            const bool same = fixture_point_check(pt, f, V, (float)bmax, &d, &k);
            r.worst_tf = fmax(r.worst_tf, d);
            r.worst_max = fmax(r.worst_max, d / bmax);
            r.sets++, r.sets_equal += same;
            CHECK(d <= bmax, "%s %s after %d ids: max |fast - transformers| %.3g > the bound %.3g", fx->model,
                  path_name, s + 1, d, bmax);
            CHECK(same, "%s %s after %d ids: the top-%d ids differ from transformers'", fx->model, path_name, s + 1,
                  k);
        }
        const int i = s - (fx->n_prompt - 1); /* the continuation step these logits pick */
        if (i >= 0 && i < fx->n_cont) {
            const int pick = fixture_argmax(f, V);
            r.steps++;
            if (bound_decided(&b, ref, V, fx->n_cont)) {
                r.decided++;
                r.match += pick == fx->cont[i];
                CHECK(pick == fx->cont[i], "%s %s step %d: greedy pick %d, transformers' %d (a decided step)",
                      fx->model, path_name, i, pick, fx->cont[i]);
            } else {
                r.ties++;
                r.ties_match += pick == fx->cont[i];
            }
        }
    }
    CHECK(r.decided >= 1, "%s %s: none of %d greedy steps decided", fx->model, path_name, r.steps);
    bound_total.steps += r.steps, bound_total.decided += r.decided, bound_total.match += r.match;
    bound_total.ties += r.ties;
    bound_total.ties_match += r.ties_match, bound_total.worst_max = fmax(bound_total.worst_max, r.worst_max);
    bound_total.worst_gain = fmax(bound_total.worst_gain, r.worst_gain);
    printf("| %-12s | %-4s | %s | %.2e | %.2f | %.2f | %d/%d | %d/%d | %d (%d) |\n", fx->arch, fx->fmt, path_name,
           r.worst_tf, r.worst_max, r.worst_gain, r.sets_equal, r.sets, r.match, r.decided, r.ties, r.ties_match);
    return r;
}

#endif
