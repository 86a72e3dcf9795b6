/* The floor under placed-bench own's dense ranking (issue 35): what a trivial program takes to rank
 * the own sites near a fix when it does nothing else. 10,000 circles of 5 to 50 m over 2 km by 1 km
 * (R set so that about as many are in reach as in the dense layout), a grid of 50 m cells to find those
 * within R of a fix, then the
 * local-plane distance to each edge, its Gaussian density, the sum with "none", a sort of the
 * scores and the top 5. No places file, no opening hours, no ids, no allocation in the loop.
 *
 *   bench/run own (beside placed-bench own), or: cc -O2 -o /tmp/f bench/own-rank-floor.c -lm && /tmp/f
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SITES 10000
#define FIXES 20000
#define WIDTH 2000.0
#define HEIGHT 1000.0
#define CELL 50.0
#define COLUMNS 40 /* WIDTH / CELL */
#define ROWS 20 /* HEIGHT / CELL */

static double x[SITES], y[SITES], radius[SITES];
static int cellStart[COLUMNS * ROWS + 1], cellSites[SITES];

static int descending(const void *a, const void *b) {
    double d = *(const double *)b - *(const double *)a;
    return (d > 0) - (d < 0);
}

static int ascending(const void *a, const void *b) {
    double d = *(const double *)a - *(const double *)b;
    return (d > 0) - (d < 0);
}

static int cellOf(double px, double py) {
    int c = (int)(px / CELL), r = (int)(py / CELL);
    c = c < 0 ? 0 : c >= COLUMNS ? COLUMNS - 1 : c;
    r = r < 0 ? 0 : r >= ROWS ? ROWS - 1 : r;
    return r * COLUMNS + c;
}

int main(void) {
    srand(35);
    int counts[COLUMNS * ROWS] = {0};
    for (int i = 0; i < SITES; i++) {
        x[i] = WIDTH * rand() / RAND_MAX;
        y[i] = HEIGHT * rand() / RAND_MAX;
        radius[i] = 5 + 45.0 * rand() / RAND_MAX;
        counts[cellOf(x[i], y[i])]++;
    }
    for (int c = 0; c < COLUMNS * ROWS; c++) cellStart[c + 1] = cellStart[c] + counts[c];
    int fill[COLUMNS * ROWS];
    for (int c = 0; c < COLUMNS * ROWS; c++) fill[c] = cellStart[c];
    for (int i = 0; i < SITES; i++) cellSites[fill[cellOf(x[i], y[i])]++] = i;

    /* 15 m at 95 %; R wide enough for as many sites in reach as the dense layout has (about 360) */
    const double sigma = 15 / 2.4477, R = 125;
    static double scores[SITES], micros[FIXES];
    long inReach = 0;
    double sink = 0;
    for (int f = 0; f < FIXES; f++) {
        double fx = WIDTH * rand() / RAND_MAX, fy = HEIGHT * rand() / RAND_MAX;
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int n = 0, reach = (int)ceil((R + 50) / CELL);
        int c0 = (int)(fx / CELL), r0 = (int)(fy / CELL);
        for (int r = r0 - reach; r <= r0 + reach; r++) {
            if (r < 0 || r >= ROWS) continue;
            for (int c = c0 - reach; c <= c0 + reach; c++) {
                if (c < 0 || c >= COLUMNS) continue;
                int cell = r * COLUMNS + c;
                for (int k = cellStart[cell]; k < cellStart[cell + 1]; k++) {
                    int i = cellSites[k];
                    double d = hypot(x[i] - fx, y[i] - fy) - radius[i];
                    if (d < 0) d = 0;
                    if (d > R) continue;
                    double s2 = sigma * sigma + radius[i] * radius[i] / 4;
                    scores[n++] = 1.25 * exp(-d * d / (2 * s2)) / (2 * M_PI * s2);
                }
            }
        }
        qsort(scores, n, sizeof scores[0], descending);
        double total = 0.01 / (M_PI * R * R);
        for (int i = 0; i < n; i++) total += scores[i];
        for (int i = 0; i < n && i < 5; i++) sink += scores[i] / total;
        clock_gettime(CLOCK_MONOTONIC, &end);
        micros[f] = (end.tv_sec - start.tv_sec) * 1e6 + (end.tv_nsec - start.tv_nsec) / 1e3;
        inReach += n;
    }
    qsort(micros, FIXES, sizeof micros[0], ascending);
    printf("own ranking floor (C, %d sites, %d fixes): p50 %.1f us p99 %.1f us; in reach a fix %.1f (%g)\n",
           SITES, FIXES, micros[FIXES / 2], micros[FIXES * 99 / 100], (double)inReach / FIXES, sink > 0 ? 1.0 : 0.0);
    return 0;
}
