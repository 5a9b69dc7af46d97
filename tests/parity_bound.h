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
 *              (With no assumption on x, k(B) <= sqrt(B): 1.29% and 3.64%, which waives nearly
 *              every greedy step of a K-quant fixture: docs/parity.md.)
 *       f16:   x and w rounded to f16, then up to 4 fmas and 2 additions in f16 (the tiled
 *              kernel's lanes, test_gpu_weights.c): at most 8 roundings of relative rms
 *              u16 / sqrt(3), u16 = 2^-11, so rho16 = sqrt(8 / 3) 2^-11 = 7.97e-4.
 *     The error W dx has, relative to W x, the rms of dx relative to x: the fixtures' matrices
 *     are random, N(0, 1) / sqrt(cols) (scripts/make_fixtures.py), so ||W dx|| / ||W x|| is
 *     ||dx|| / ||x|| in expectation. Every matmul adds an output error of relative rms rho.
 *  2. Through the network. A token passes S = 7 n_layer + 1 matmuls (Wq Wk Wv Wo Wgate Wup
 *     Wdown per layer, then Wout). Their errors are independent; each reaches the logits with
 *     gain 1 (the residual stream adds the sublayers' outputs, RMSNorm keeps relative errors,
 *     softmax and SiLU are 1-Lipschitz), so they add in quadrature: the logits' error has rms
 *       sigma = rho sqrt(S) rms(logits)
 *     with rms(logits) over the vocabulary (cpu-ref's, within 1e-3 of transformers':
 *     test_parity.c).
 *  3. The checks. With rho = 0 (float weights on the CPU: F32 activations, only the summation
 *     order differs) only FIXTURE_TOL remains. Otherwise, at each step (the prompt, then every
 *     decoded token):
 *       every compared |fast - transformers| <= z sigma + FIXTURE_TOL, and |fast - cpu-ref|
 *         <= z sigma + FIXTURE_TOL over the whole vocabulary, z the Gaussian tail with
 *         probability BOUND_ALPHA of a false failure over the run's n_vocab x steps
 *         comparisons: n erfc(z / sqrt(2)) = BOUND_ALPHA;
 *       rms over the vocabulary of |fast - cpu-ref| <= (1 + z / sqrt(2 n)) sigma: a step's
 *         error energy is a sum over n = S x (n_embd / B) independent roundings (blocks; one
 *         per element on the f16 path), whose root spreads by 1 / sqrt(2 n) (chi's tail).
 *  4. Greedy. At a step where cpu-ref's top-2 gap exceeds 2 (z sigma + FIXTURE_TOL), every
 *     logit within the bound keeps transformers' pick on top: the step is decided, and the
 *     fast path's argmax must be transformers' id. A step inside that gap is a near-tie: it
 *     is waived, counted and printed (with whether the fast path picked it anyway). A fixture
 *     run must decide at least BOUND_MIN_DECIDED of its steps: a bound so wide that it waives
 *     (nearly) everything checks nothing.
 *
 * Header-only (static functions), beside fixture.h. */
#ifndef LEAN_TEST_PARITY_BOUND_H
#define LEAN_TEST_PARITY_BOUND_H

#include "fixture.h"

#include <math.h>

#define BOUND_ALPHA 1e-6 /* chance of a false failure per fixture run */
#define BOUND_MIN_DECIDED 1 /* steps a fixture run must decide (see 4) */

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

/* One fixture run's bound: rho (0: float arithmetic), the model's sqrt(S), z and the rms
 * check's factor. */
typedef struct bound {
    double rho, sqrt_s, z, rms_factor;
} bound;

enum bound_path { BOUND_FLOAT, BOUND_8BIT, BOUND_F16 };

/* The block of the 8-bit activations a fixture's weights take: Q8_K (256) for the K-quants,
 * Q8_32 for the others (quant_act.c's lean_act_for). */
static inline int bound_block_elems(const fixture *fx) { return strstr(fx->fmt, "_k") ? 256 : 32; }

/* The bound of path on model m over n_steps steps; block: the 8-bit activations' (32, 256). */
static inline bound bound_make(enum bound_path path, int block, const lean_model *m, int n_steps) {
    lean_model_info in;
    lean_model_get_info(m, &in);
    const double s = 7.0 * in.n_layer + 1, per_input = path == BOUND_8BIT ? fmax(1, in.n_embd / block) : in.n_embd;
    bound b = {0, sqrt(s), bound_z((double)in.n_vocab * n_steps), 0};
    if (path == BOUND_8BIT) b.rho = sqrt(bound_crest2(block)) / (127 * sqrt(12.0));
    if (path == BOUND_F16) b.rho = sqrt(8.0 / 3.0) * ldexp(1.0, -11);
    b.rms_factor = 1 + b.z / sqrt(2 * s * per_input);
    return b;
}

/* sigma of one step (2 above) from cpu-ref's logits. */
static inline double bound_sigma(const bound *b, const float *ref, int n) {
    double s2 = 0;
    for (int i = 0; i < n; i++) s2 += (double)ref[i] * ref[i];
    return b->rho * b->sqrt_s * sqrt(s2 / n);
}

/* z sigma + FIXTURE_TOL: the bound of every logit of one step (3). */
static inline double bound_max(const bound *b, const float *ref, int n) { return b->z * bound_sigma(b, ref, n) + FIXTURE_TOL; }

/* One step's errors of fast against cpu-ref's logits ref (n of them), each over its bound (3):
 * *max_ratio the largest |fast - ref| over z sigma + FIXTURE_TOL (NaN counts as infinite),
 * *rms_ratio their rms over rms_factor sigma + FIXTURE_TOL (0 for float arithmetic). Returns
 * z sigma + FIXTURE_TOL, the bound of every logit. */
static inline double bound_step(const bound *b, const float *fast, const float *ref, int n, double *max_ratio,
                                double *rms_ratio) {
    const double sigma = bound_sigma(b, ref, n), bmax = bound_max(b, ref, n);
    double e2 = 0, emax = 0;
    for (int v = 0; v < n; v++) {
        const double d = fabs((double)fast[v] - ref[v]);
        e2 += d * d;
        if (!(d <= emax)) emax = isnan(d) ? INFINITY : d;
    }
    *max_ratio = emax / bmax;
    *rms_ratio = b->rho > 0 ? sqrt(e2 / n) / (b->rms_factor * sigma + FIXTURE_TOL) : 0;
    if (isnan(*rms_ratio)) *rms_ratio = INFINITY;
    return bmax;
}

/* What a fixture run found (bound_fixture), for its row in the table. */
typedef struct bound_result {
    double worst_max;  /* largest max |fast - reference| / its bound over the steps */
    double worst_rms;  /* largest rms |fast - cpu-ref| / its bound (0 when rho is 0) */
    double worst_tf;   /* largest |fast - transformers| over the fixture's top ids */
    int steps, decided, match, ties, ties_match;
} bound_result;

static inline void bound_header(const char *what) {
    printf("%s against transformers (tests/parity_bound.h):\n"
           "| arch  | fmt  | path | max abs delta vs transformers | of the bound (max, rms) | greedy = transformers "
           "at decided steps | near-ties waived (picked anyway) |\n|---|---|---|---|---|---|---|\n", what);
}

/* Holds `fast` to transformers on fixture fx (both contexts fresh on fx's model, cpu-ref the
 * reference) on path: prefill the prompt, then decode transformers' continuation (both
 * contexts take its ids, so every step stays comparable); the checks of 3 and 4 at every step.
 * Prints the table row; returns the tally. */
static inline bound_result bound_fixture(const fixture *fx, const char *path_name, lean_ctx *fast, lean_ctx *ref,
                                         enum bound_path path, const lean_model *m) {
    bound_result r = {0};
    const int V = lean_model_n_vocab(m), n_steps = fx->n_cont + 1;
    const bound b = bound_make(path, bound_block_elems(fx), m, n_steps);
    float *lf = malloc(sizeof(float) * (size_t)V), *lr = malloc(sizeof(float) * (size_t)V);
    lean_error err;
    lean_status st = lf && lr ? LEAN_OK : LEAN_ERR_NOMEM;
    if (st == LEAN_OK) st = lean_prefill(ref, fx->prompt, fx->n_prompt, lr, &err);
    if (st == LEAN_OK) st = lean_prefill(fast, fx->prompt, fx->n_prompt, lf, &err);
    for (int i = 0; st == LEAN_OK && i < n_steps; i++) {
        double max_ratio, rms_ratio;
        const double bmax = bound_step(&b, lf, lr, V, &max_ratio, &rms_ratio);
        r.worst_max = fmax(r.worst_max, max_ratio);
        r.worst_rms = fmax(r.worst_rms, rms_ratio);
        CHECK(max_ratio <= 1, "%s %s step %d: max |fast - cpu-ref| %.3g x the bound %.3g", fx->model, path_name, i,
              max_ratio, bmax);
        CHECK(rms_ratio <= 1, "%s %s step %d: rms |fast - cpu-ref| %.3g x its bound", fx->model, path_name, i,
              rms_ratio);
        if (i == 0 || i == fx->n_cont) { /* transformers' own logits */
            const int *ids = i ? fx->end_ids : fx->top_ids;
            const float *want = i ? fx->end_logits : fx->top_logits;
            const double d = fixture_top_delta(lf, V, ids, want, i ? fx->n_end : fx->n_top, NULL);
            r.worst_tf = fmax(r.worst_tf, d);
            r.worst_max = fmax(r.worst_max, d / bmax);
            CHECK(d <= bmax, "%s %s step %d: max |fast - transformers| %.3g > the bound %.3g", fx->model, path_name, i,
                  d, bmax);
        }
        if (i < fx->n_cont) {
            const int pick = fixture_argmax(lf, V);
            r.steps++;
            if (fixture_top2_gap(lr, V) > 2 * bmax) {
                r.decided++;
                r.match += pick == fx->cont[i];
                CHECK(pick == fx->cont[i], "%s %s step %d: greedy pick %d, transformers' %d (a decided step)",
                      fx->model, path_name, i, pick, fx->cont[i]);
            } else {
                r.ties++;
                r.ties_match += pick == fx->cont[i];
            }
            st = lean_decode(ref, fx->cont[i], lr, &err);
            if (st == LEAN_OK) st = lean_decode(fast, fx->cont[i], lf, &err);
        }
    }
    CHECK(st == LEAN_OK, "%s %s: %s", fx->model, path_name, st == LEAN_ERR_NOMEM ? "out of memory" : err.msg);
    CHECK(r.decided >= BOUND_MIN_DECIDED, "%s %s: %d of %d greedy steps decided, fewer than %d", fx->model,
          path_name, r.decided, r.steps, BOUND_MIN_DECIDED);
    printf("| %-5s | %-4s | %s | %.2e | %.2f, %.2f | %d/%d | %d (%d) |\n", fx->arch, fx->fmt, path_name, r.worst_tf,
           r.worst_max, r.worst_rms, r.match, r.decided, r.ties, r.ties_match);
    free(lf), free(lr);
    return r;
}

#endif
