/* vblogfloor: the floor of the log-throughput figure ("logs into the ring").
 *
 * Runs the same producer the vigil benchmark gives a container (bench/logflood.c) with its
 * stdout on a default pipe, and reads that pipe the way vigil's loop does and no slower:
 * non-blocking, edge-triggered epoll, reads of 64 KiB, at most 64 KiB per wake-up before
 * asking epoll again (vigil's per-turn budget), each read copied on into a 4 MiB byte ring;
 * like vigil, it grows the pipe to 256 KiB (F_SETPIPE_SZ) the first time a read finds a whole
 * default pipe's worth waiting (src/runtime/shell/capture.rs, GROWN_PIPE_BYTES).
 * It does nothing else, so its MB/s is what this machine's pipe hand-off allows a
 * single-threaded reader with that budget: the figure vigil's ring row is read against (a
 * supervisor cannot beat it, and how close it comes is its own overhead).
 *
 *   vblogfloor PRODUCER BYTES
 *
 * Prints one JSON line: {"mb_per_s": ..., "cpu_s_per_gb": ..., "wakeups": ...}; MB/s is from
 * the fork to the pipe's EOF.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_BYTES (64 * 1024)
#define TURN_BYTES (64 * 1024)
#define RING_BYTES (4 * 1024 * 1024)
#define GROWN_PIPE_BYTES (256 * 1024)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_self(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: vblogfloor PRODUCER BYTES\n");
        return 2;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        perror("vblogfloor: pipe2");
        return 1;
    }
    double t0 = now();
    pid_t child = fork();
    if (child < 0) {
        perror("vblogfloor: fork");
        return 1;
    }
    if (child == 0) {
        dup2(p[1], 1);
        execl(argv[1], argv[1], argv[2], (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    if (fcntl(p[0], F_SETFL, O_NONBLOCK) != 0) {
        perror("vblogfloor: fcntl");
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = p[0]};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0) {
        perror("vblogfloor: epoll");
        return 1;
    }
    char *buf = malloc(READ_BYTES), *ring = malloc(RING_BYTES);
    if (!buf || !ring) return 1;
    size_t pos = 0;
    long long total = 0, wakeups = 0;
    int more = 0, eof = 0, grown = 0;
    while (!eof) {
        struct epoll_event got;
        /* data left after a full turn: ask epoll without sleeping, as vigil's loop does */
        if (epoll_wait(ep, &got, 1, more ? 0 : -1) < 0 && errno != EINTR) {
            perror("vblogfloor: epoll_wait");
            return 1;
        }
        wakeups++;
        more = 0;
        size_t turn = 0;
        while (turn < TURN_BYTES) {
            ssize_t n = read(p[0], buf, READ_BYTES);
            if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN) break;
                perror("vblogfloor: read");
                return 1;
            }
            if (n == 0) {
                eof = 1;
                break;
            }
            total += n;
            turn += (size_t)n;
            if (!grown && n == READ_BYTES) {
                grown = 1;
                if (fcntl(p[0], F_SETPIPE_SZ, GROWN_PIPE_BYTES) < 0) perror("vblogfloor: F_SETPIPE_SZ");
            }
            for (size_t off = 0; off < (size_t)n;) {
                size_t k = RING_BYTES - pos;
                if (k > (size_t)n - off) k = (size_t)n - off;
                memcpy(ring + pos, buf + off, k);
                pos = (pos + k) % RING_BYTES;
                off += k;
            }
        }
        if (turn >= TURN_BYTES) more = 1;
    }
    double secs = now() - t0;
    double cpu = cpu_self();
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "vblogfloor: producer failed (status %d)\n", status);
        return 1;
    }
    printf("{\"mb_per_s\": %.1f, \"cpu_s_per_gb\": %.3f, \"wakeups\": %lld, \"bytes\": %lld}\n",
           (double)total / secs / 1e6, cpu / ((double)total / 1e9), wakeups, total);
    return 0;
}
