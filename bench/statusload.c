/* vbstatusload: the concurrent status clients of the vigil benchmarks.
 *
 * Opens CLIENTS connections to vigil's control socket, one thread each; every thread sends
 * the full `status` request ({"id":N,"cmd":"status"}), reads the whole reply line, and sends
 * the next, for SECS seconds. Prints the replies counted, the seconds and the bytes read as
 * one JSON line. Compiled, so the clients are not what limits the figure (Python clients
 * spend more CPU reading a 140 KiB reply than the supervisor spends building it).
 *
 *   vbstatusload SOCKET CLIENTS SECS
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *sock_path;
static double secs;

struct result {
    long replies;
    long long bytes;
    int failed;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *client(void *arg) {
    struct result *r = arg;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("vbstatusload: connect");
        r->failed = 1;
        return NULL;
    }
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    double end = now_s() + secs;
    long id = 0;
    while (now_s() < end) {
        char req[64];
        int len = snprintf(req, sizeof req, "{\"id\":%ld,\"cmd\":\"status\"}\n", ++id);
        if (write(fd, req, len) != len) {
            perror("vbstatusload: write");
            r->failed = 1;
            break;
        }
        /* One reply is one line: read until a newline ends what came in. */
        for (;;) {
            ssize_t n = read(fd, buf, cap);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fprintf(stderr, "vbstatusload: connection closed\n");
                r->failed = 1;
                goto out;
            }
            r->bytes += n;
            if (buf[n - 1] == '\n') break;
        }
        r->replies++;
    }
out:
    free(buf);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: vbstatusload SOCKET CLIENTS SECS\n");
        return 2;
    }
    sock_path = argv[1];
    int n = atoi(argv[2]);
    secs = atof(argv[3]);
    if (n < 1 || n > 1024 || secs <= 0) {
        fprintf(stderr, "vbstatusload: CLIENTS 1..1024, SECS > 0\n");
        return 2;
    }
    pthread_t *t = calloc(n, sizeof *t);
    struct result *r = calloc(n, sizeof *r);
    double t0 = now_s();
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, client, &r[i]);
    long total = 0;
    long long bytes = 0;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        total += r[i].replies;
        bytes += r[i].bytes;
        failed |= r[i].failed;
    }
    double el = now_s() - t0;
    printf("{\"clients\": %d, \"replies\": %ld, \"seconds\": %.3f, \"bytes\": %lld, \"req_per_s\": %.1f}\n",
           n, total, el, bytes, total / el);
    return failed;
}
