/*
 * Plain-C reference implementations of three ETC batch-mapping heuristics, for
 * benchmarks/bench_mapping.py only (compiled at benchmark time into a temp folder, never shipped).
 *
 * Definitions and tie-breaks: decisions A4.1-A4.3, A4.7 in docs/decisions/thesis.md.
 *   minmin            Min-min, incremental: after loading machine j only tasks whose best machine
 *                     was j are rescanned (ready[j] only grows, so nobody else's best changes); the
 *                     rescan, the selection and the removal of the mapped task share one pass over a
 *                     compacted list of unassigned tasks kept in ascending index order.
 *   minmin_rescan     Min-min, textbook O(n^2 m): every step rescans every unassigned task.
 *   sufferage         Sufferage (simple version), incremental: only tasks whose best or second-best
 *                     machine was the just-loaded machine are rescanned (same fused pass as minmin).
 *   sufferage_rescan  Sufferage, textbook O(n^2 m).
 *   low3              Low_3 (Mean-Max-Min), 11-value lambda sweep lambda = k/10, k = 0..10; keeps the
 *                     minimum-makespan schedule (smaller lambda on ties). Literal Eq. 3.1:
 *                     SF_j = lam*C_j/sum_k C_k + (1-lam)*ETC_j/sum_k ETC_k, one pass per lambda.
 *   low3_fast         Same heuristic with the rescaled score that skylease uses: SF divided by
 *                     lam/sum_k C_k (> 0, same argmin in exact arithmetic) is ready_j + w*ETC_j with
 *                     w = 1 + (1-lam)/lam * (R + sum_k ETC_k)/sum_k ETC_k, R = sum of ready times;
 *                     lam = 0 is MET. All 11 lambdas in one pass over the tasks, no division in the
 *                     inner loop. Rounding differs from the literal form, so near-ties may break
 *                     differently (the benchmark reports it).
 * Ties: lowest machine index, then lowest task index (strict comparisons, scans in index order).
 *
 * usage: mapping_ref ALGO N M REPS MIN_MS ETC.bin [OUT.bin]
 *   ETC.bin: N*M little-endian float64, row-major (task i, machine j at i*M + j).
 *   Runs ALGO at least REPS times, and more until the runs add up to MIN_MS (at most 10000 runs);
 *   times each run with clock_gettime(CLOCK_MONOTONIC) around the algorithm only (buffers are
 *   allocated and the file is read before; the algorithm initialises them) and keeps the best.
 *   Prints one line:  best_ms=<ms> runs=<int> makespan=<%.17g> checksum=<u64> extra=<int>
 *     checksum = sum_i (i+1)*(assignment[i]+1) (uint64), extra = best lambda index for low3, else -1.
 *   OUT.bin (optional): assignment (N int64) then order (N int64) of the last run.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int64_t i64;

/* Buffers, allocated once by main (outside the timed region); every algorithm initialises what it uses. */
typedef struct {
    i64 n, m;
    const double *etc; /* n*m */
    double *ready;     /* m */
    double *cbuf;      /* m */
    double *best;      /* n */
    double *second;    /* n */
    double *suff;      /* n */
    i64 *bj, *sj;      /* n */
    i64 *alive;        /* n */
    i64 *assign;       /* n: result */
    i64 *order;        /* n: result (mapping order; priority order for low3) */
    i64 *tmp;          /* n */
    char *done;        /* n */
    double *lready;    /* 11*m (low3_fast) */
    i64 *lassign;      /* 11*n (low3_fast) */
    double makespan;   /* result */
    int extra;         /* result: best lambda index for low3, else -1 */
} Work;

static double max_of(const double *x, i64 m) {
    double mk = 0.0;
    for (i64 j = 0; j < m; j++)
        if (x[j] > mk) mk = x[j];
    return mk;
}

/* best completion time of a task and its machine (lowest index on ties) */
static inline double best_ct(const double *restrict row, const double *restrict ready, i64 m,
                             i64 *restrict bj_out) {
    double b = INFINITY;
    i64 bj = -1;
    for (i64 j = 0; j < m; j++) {
        double v = ready[j] + row[j];
        if (v < b) { b = v; bj = j; }
    }
    *bj_out = bj;
    return b;
}

/* best and second-best completion times, (value, index) lexicographic: lowest index on ties;
 * second = +inf and sj = -1 when m == 1 */
static inline void best2_ct(const double *restrict row, const double *restrict ready, i64 m,
                            double *restrict b_out, i64 *restrict bj_out, double *restrict s_out,
                            i64 *restrict sj_out) {
    double b = INFINITY, s = INFINITY;
    i64 bj = -1, sj = -1;
    for (i64 j = 0; j < m; j++) {
        double v = ready[j] + row[j];
        if (v < b) { s = b; sj = bj; b = v; bj = j; }
        else if (v < s) { s = v; sj = j; }
    }
    *b_out = b; *bj_out = bj; *s_out = s; *sj_out = sj;
}

static void minmin_rescan(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict ready = w->ready;
    char *restrict done = w->done;
    for (i64 j = 0; j < m; j++) ready[j] = 0.0;
    memset(done, 0, (size_t)n);
    for (i64 step = 0; step < n; step++) {
        double cv = INFINITY;
        i64 k = -1, kj = -1;
        for (i64 i = 0; i < n; i++) {
            if (done[i]) continue;
            i64 j;
            double c = best_ct(etc + i * m, ready, m, &j);
            if (c < cv || k < 0) { cv = c; k = i; kj = j; }
        }
        done[k] = 1;
        w->assign[k] = kj;
        w->order[step] = k;
        ready[kj] = cv;
    }
    w->makespan = max_of(ready, m);
    w->extra = -1;
}

static void minmin(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict ready = w->ready, *restrict best = w->best;
    i64 *restrict bj = w->bj, *restrict alive = w->alive;
    for (i64 j = 0; j < m; j++) ready[j] = 0.0;
    for (i64 i = 0; i < n; i++) {
        best[i] = best_ct(etc + i * m, ready, m, &bj[i]);
        alive[i] = i;
    }
    i64 lastj = -1, prev = -1, cnt = n; /* machine loaded and task mapped by the previous step */
    for (i64 step = 0; step < n; step++) {
        /* one fused pass over the unassigned tasks: drop the task mapped last step (in-order
         * compaction, so ties still go to the lowest index), refresh the tasks whose best machine
         * was lastj, and find the minimum */
        double cv = INFINITY;
        i64 k = -1, cnt2 = 0;
        for (i64 p = 0; p < cnt; p++) {
            const i64 i = alive[p];
            if (i == prev) continue;
            alive[cnt2++] = i;
            if (bj[i] == lastj) best[i] = best_ct(etc + i * m, ready, m, &bj[i]);
            if (best[i] < cv) { cv = best[i]; k = i; }
        }
        cnt = cnt2;
        if (k < 0) abort(); /* only with non-finite ETC entries; the driver rejects those */
        const i64 j = bj[k];
        w->assign[k] = j;
        w->order[step] = k;
        ready[j] = cv;
        lastj = j;
        prev = k;
    }
    w->makespan = max_of(ready, m);
    w->extra = -1;
}

static void sufferage_rescan(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict ready = w->ready;
    char *restrict done = w->done;
    for (i64 j = 0; j < m; j++) ready[j] = 0.0;
    memset(done, 0, (size_t)n);
    for (i64 step = 0; step < n; step++) {
        double sv = -INFINITY, kb = 0.0;
        i64 k = -1, kj = -1;
        for (i64 i = 0; i < n; i++) {
            if (done[i]) continue;
            double b, s;
            i64 bj, sj;
            best2_ct(etc + i * m, ready, m, &b, &bj, &s, &sj);
            double su = s - b;
            if (su > sv || k < 0) { sv = su; k = i; kj = bj; kb = b; }
        }
        done[k] = 1;
        w->assign[k] = kj;
        w->order[step] = k;
        ready[kj] = kb;
    }
    w->makespan = max_of(ready, m);
    w->extra = -1;
}

static void sufferage(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict ready = w->ready, *restrict best = w->best, *restrict second = w->second;
    double *restrict suff = w->suff;
    i64 *restrict bj = w->bj, *restrict sj = w->sj, *restrict alive = w->alive;
    for (i64 j = 0; j < m; j++) ready[j] = 0.0;
    for (i64 i = 0; i < n; i++) {
        best2_ct(etc + i * m, ready, m, &best[i], &bj[i], &second[i], &sj[i]);
        suff[i] = second[i] - best[i];
        alive[i] = i;
    }
    i64 lastj = -1, prev = -1, cnt = n;
    for (i64 step = 0; step < n; step++) {
        double sv = -INFINITY;
        i64 k = -1, cnt2 = 0;
        for (i64 p = 0; p < cnt; p++) { /* fused pass, as in minmin */
            const i64 i = alive[p];
            if (i == prev) continue;
            alive[cnt2++] = i;
            if (bj[i] == lastj || sj[i] == lastj) {
                best2_ct(etc + i * m, ready, m, &best[i], &bj[i], &second[i], &sj[i]);
                suff[i] = second[i] - best[i];
            }
            if (suff[i] > sv) { sv = suff[i]; k = i; }
        }
        cnt = cnt2;
        if (k < 0) abort();
        const i64 j = bj[k];
        w->assign[k] = j;
        w->order[step] = k;
        ready[j] = best[k];
        lastj = j;
        prev = k;
    }
    w->makespan = max_of(ready, m);
    w->extra = -1;
}

static const double *g_prio; /* for the qsort comparator */

static int cmp_prio_desc(const void *pa, const void *pb) {
    i64 a = *(const i64 *)pa, b = *(const i64 *)pb;
    if (g_prio[a] > g_prio[b]) return -1;
    if (g_prio[a] < g_prio[b]) return 1;
    return (a > b) - (a < b); /* equal priorities keep ascending index = stable sort on -prio */
}

/* Low_3 priority order: row mean (sequential row sum / m), decreasing, stable; row sums kept */
static void low3_order(Work *w, double *restrict rowsum) {
    const i64 n = w->n, m = w->m;
    double *restrict prio = w->best;
    for (i64 i = 0; i < n; i++) {
        const double *restrict row = w->etc + i * m;
        double se = 0.0;
        for (i64 j = 0; j < m; j++) se += row[j];
        rowsum[i] = se;
        prio[i] = se / (double)m;
        w->order[i] = i;
    }
    g_prio = prio;
    qsort(w->order, (size_t)n, sizeof(i64), cmp_prio_desc);
}

static void low3(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict rowsum = w->second;
    low3_order(w, rowsum);
    const i64 *restrict order = w->order;
    double *restrict c = w->cbuf, *restrict ready = w->ready;
    i64 *restrict tmp = w->tmp;
    double best_mk = INFINITY;
    int best_l = -1;
    for (int l = 0; l <= 10; l++) {
        const double lam = (double)l / 10.0;
        const double oml = 1.0 - lam;
        for (i64 j = 0; j < m; j++) ready[j] = 0.0;
        for (i64 t = 0; t < n; t++) {
            const i64 i = order[t];
            const double *restrict row = etc + i * m;
            const double se = rowsum[i];
            double sc = 0.0;
            for (i64 j = 0; j < m; j++) { c[j] = ready[j] + row[j]; sc += c[j]; }
            double bsf = INFINITY;
            i64 bj = -1;
            for (i64 j = 0; j < m; j++) {
                double sf = lam * c[j] / sc + oml * row[j] / se; /* Eq. 3.1, left to right */
                if (sf < bsf) { bsf = sf; bj = j; }
            }
            ready[bj] = c[bj];
            tmp[i] = bj;
        }
        double mk = max_of(ready, m);
        if (mk < best_mk) {
            best_mk = mk;
            best_l = l;
            memcpy(w->assign, tmp, (size_t)n * sizeof(i64));
        }
    }
    w->makespan = best_mk;
    w->extra = best_l;
}

static void low3_fast(Work *w) {
    const i64 n = w->n, m = w->m;
    const double *restrict etc = w->etc;
    double *restrict rowsum = w->second;
    low3_order(w, rowsum);
    const i64 *restrict order = w->order;
    double ratio[11], rsum[11];
    for (int l = 0; l <= 10; l++) {
        const double lam = (double)l / 10.0;
        ratio[l] = l > 0 ? (1.0 - lam) / lam : 0.0;
        rsum[l] = 0.0;
    }
    double *restrict ready = w->lready;
    i64 *restrict A = w->lassign;
    for (i64 j = 0; j < 11 * m; j++) ready[j] = 0.0;
    for (i64 t = 0; t < n; t++) {
        const i64 i = order[t];
        const double *restrict row = etc + i * m;
        const double se = rowsum[i]; /* same sequential sum as the priority */
        i64 met = 0;
        for (i64 j = 1; j < m; j++)
            if (row[j] < row[met]) met = j;
        for (int l = 0; l <= 10; l++) {
            double *restrict r = ready + l * m;
            i64 bj = met; /* lambda = 0: MET */
            if (l > 0) {
                const double wt = 1.0 + ratio[l] * (rsum[l] + se) / se;
                double bs = r[0] + wt * row[0];
                bj = 0;
                for (i64 j = 1; j < m; j++) {
                    double s = r[j] + wt * row[j];
                    if (s < bs) { bs = s; bj = j; }
                }
            }
            r[bj] += row[bj];
            rsum[l] += row[bj];
            A[l * n + i] = bj;
        }
    }
    double best_mk = INFINITY;
    int best_l = -1;
    for (int l = 0; l <= 10; l++) {
        double mk = max_of(ready + l * m, m);
        if (mk < best_mk) { best_mk = mk; best_l = l; }
    }
    memcpy(w->assign, A + best_l * n, (size_t)n * sizeof(i64));
    w->makespan = best_mk;
    w->extra = best_l;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s ALGO N M REPS MIN_MS ETC.bin [OUT.bin]\n", argv[0]);
        return 2;
    }
    const char *algo = argv[1];
    const i64 n = atoll(argv[2]), m = atoll(argv[3]);
    const int reps = atoi(argv[4]);
    const double min_ms = atof(argv[5]);
    void (*fn)(Work *) = NULL;
    if (!strcmp(algo, "minmin")) fn = minmin;
    else if (!strcmp(algo, "minmin_rescan")) fn = minmin_rescan;
    else if (!strcmp(algo, "sufferage")) fn = sufferage;
    else if (!strcmp(algo, "sufferage_rescan")) fn = sufferage_rescan;
    else if (!strcmp(algo, "low3")) fn = low3;
    else if (!strcmp(algo, "low3_fast")) fn = low3_fast;
    if (!fn || n <= 0 || m <= 0 || reps <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    const size_t N = (size_t)n, M = (size_t)m;
    double *etc = xmalloc(N * M * sizeof(double));
    FILE *f = fopen(argv[6], "rb");
    if (!f || fread(etc, sizeof(double), N * M, f) != N * M) {
        fprintf(stderr, "cannot read %s\n", argv[6]);
        return 1;
    }
    fclose(f);
    Work w = {0};
    w.n = n;
    w.m = m;
    w.etc = etc;
    w.ready = xmalloc(M * sizeof(double));
    w.cbuf = xmalloc(M * sizeof(double));
    w.best = xmalloc(N * sizeof(double));
    w.second = xmalloc(N * sizeof(double));
    w.suff = xmalloc(N * sizeof(double));
    w.bj = xmalloc(N * sizeof(i64));
    w.sj = xmalloc(N * sizeof(i64));
    w.alive = xmalloc(N * sizeof(i64));
    w.assign = xmalloc(N * sizeof(i64));
    w.order = xmalloc(N * sizeof(i64));
    w.tmp = xmalloc(N * sizeof(i64));
    w.done = xmalloc(N);
    w.lready = xmalloc(11 * M * sizeof(double));
    w.lassign = xmalloc(11 * N * sizeof(i64));
    double best = INFINITY, total = 0.0;
    int runs = 0;
    while (runs < reps || (total < min_ms && runs < 10000)) {
        double t0 = now_ms();
        fn(&w);
        double dt = now_ms() - t0;
        if (dt < best) best = dt;
        total += dt;
        runs++;
    }
    uint64_t checksum = 0;
    for (i64 i = 0; i < n; i++) checksum += (uint64_t)(i + 1) * (uint64_t)(w.assign[i] + 1);
    printf("best_ms=%.6f runs=%d makespan=%.17g checksum=%llu extra=%d\n", best, runs, w.makespan,
           (unsigned long long)checksum, w.extra);
    if (argc > 7) {
        FILE *o = fopen(argv[7], "wb");
        if (!o) { fprintf(stderr, "cannot write %s\n", argv[7]); return 1; }
        fwrite(w.assign, sizeof(i64), N, o);
        fwrite(w.order, sizeof(i64), N, o);
        fclose(o);
    }
    return 0;
}
