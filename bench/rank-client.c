/* A compiled varlink client for bench/rank.py: calls io.placed.Places.Rank (limit 20) at positions read
 * from a file, one call in flight, and prints the round trip per call (p50, p99, mean, microseconds).
 *
 * Usage: rank-client SOCKET POSITIONS CALLS
 *   POSITIONS: lines "latitude longitude"; calls cycle through them.
 * Exit status 1 with a message when a reply is an error or the socket fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: rank-client SOCKET POSITIONS CALLS\n");
        return 2;
    }
    FILE *positions = fopen(argv[2], "r");
    if (!positions) { perror(argv[2]); return 1; }
    size_t count = 0, capacity = 1024;
    double *latitudes = malloc(capacity * sizeof(double)), *longitudes = malloc(capacity * sizeof(double));
    double lat, lon;
    while (fscanf(positions, "%lf %lf", &lat, &lon) == 2) {
        if (count == capacity) {
            capacity *= 2;
            latitudes = realloc(latitudes, capacity * sizeof(double));
            longitudes = realloc(longitudes, capacity * sizeof(double));
        }
        latitudes[count] = lat;
        longitudes[count++] = lon;
    }
    fclose(positions);
    if (count == 0) { fprintf(stderr, "no positions in %s\n", argv[2]); return 1; }
    long calls = atol(argv[3]);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }

    double *times = malloc(calls * sizeof(double));
    static char request[512], reply[1 << 20];
    size_t replyBytes = 0;
    for (long i = 0; i < calls; i++) {
        int n = snprintf(request, sizeof request,
                         "{\"method\":\"io.placed.Places.Rank\",\"parameters\":{\"latitude\":%.7f,\"longitude\":%.7f,"
                         "\"limit\":20}}",
                         latitudes[i % count], longitudes[i % count]);
        double start = now_us();
        if (write(fd, request, n + 1) != n + 1) { perror("write"); return 1; }
        size_t got = 0;
        for (;;) {
            ssize_t r = read(fd, reply + got, sizeof reply - got);
            if (r <= 0) { fprintf(stderr, "read: %s\n", r == 0 ? "closed" : strerror(errno)); return 1; }
            got += r;
            if (reply[got - 1] == 0) break;
        }
        times[i] = now_us() - start;
        if (strstr(reply, "\"error\"")) { fprintf(stderr, "error reply: %.300s\n", reply); return 1; }
        replyBytes += got;
    }
    double total = 0;
    for (long i = 0; i < calls; i++) total += times[i];
    qsort(times, calls, sizeof(double), compare);
    printf("calls %ld p50 %.1f p99 %.1f mean %.1f us reply %.0f bytes\n", calls, times[calls / 2],
           times[(long)(calls * 0.99)], total / calls, (double)replyBytes / calls);
    return 0;
}
