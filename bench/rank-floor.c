/* The floor under bench/rank-client.c's figure: a trivial server on a Unix stream socket that answers
 * every NUL-terminated request with one fixed reply of REPLY_BYTES bytes (NUL included), so a round
 * trip costs only the kernel's socket work and the two processes' wake-ups. No daemon can be faster on
 * the same machine; bench/big.py prints it beside placed's Rank round trip.
 *
 * Usage: rank-floor blocking|epoll SOCKET REPLY_BYTES
 *   blocking: one client at a time, read() and write() only (2 system calls a call)
 *   epoll:    a non-blocking event loop as a daemon's (epoll_wait, recv, send: 3 a call)
 * Runs until killed; creates SOCKET (removing a stale one) and prints "ready" once listening. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char input[1 << 16];

/* Whether the bytes just read end a request. One call in flight: a request's NUL is its last byte. */
static int ends_request(const char *bytes, ssize_t count) { return count > 0 && bytes[count - 1] == 0; }

static int send_all(int fd, const char *reply, size_t size) {
    size_t sent = 0;
    while (sent < size) {
        ssize_t n = send(fd, reply + sent, size - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) continue; /* a 5 kB reply fits the socket buffer; never taken */
        if (n <= 0) return -1;
        sent += n;
    }
    return 0;
}

static void serve_blocking(int listener, const char *reply, size_t size) {
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        for (;;) {
            ssize_t n = read(fd, input, sizeof input);
            if (n <= 0) break;
            if (ends_request(input, n) && send_all(fd, reply, size) != 0) break;
        }
        close(fd);
    }
}

static void serve_epoll(int listener, const char *reply, size_t size) {
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event ready[16];
    for (;;) {
        int count = epoll_wait(poller, ready, 16, -1);
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (client < 0) continue;
                struct epoll_event added = {.events = EPOLLIN, .data.fd = client};
                epoll_ctl(poller, EPOLL_CTL_ADD, client, &added);
                continue;
            }
            ssize_t n = recv(fd, input, sizeof input, 0);
            if (n < 0 && errno == EAGAIN) continue;
            if (n <= 0 || (ends_request(input, n) && send_all(fd, reply, size) != 0)) {
                epoll_ctl(poller, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "blocking") != 0 && strcmp(argv[1], "epoll") != 0)) {
        fprintf(stderr, "usage: rank-floor blocking|epoll SOCKET REPLY_BYTES\n");
        return 2;
    }
    size_t size = (size_t)atol(argv[3]);
    if (size < 32) { fprintf(stderr, "REPLY_BYTES must be at least 32\n"); return 2; }
    /* A reply the client accepts: {"parameters":{"pad":"xxx...x"}} and the NUL. */
    char *reply = malloc(size);
    const char *head = "{\"parameters\":{\"pad\":\"", *tail = "\"}}";
    memset(reply, 'x', size);
    memcpy(reply, head, strlen(head));
    memcpy(reply + size - 1 - strlen(tail), tail, strlen(tail));
    reply[size - 1] = 0;

    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[2], sizeof address.sun_path - 1);
    unlink(argv[2]);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 16) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    if (strcmp(argv[1], "blocking") == 0) serve_blocking(listener, reply, size);
    else serve_epoll(listener, reply, size);
    return 0;
}
