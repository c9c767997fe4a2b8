/* vblogflood: the log-throughput producer of the vigil benchmarks.
 *
 * Writes BYTES bytes of 100-byte lines (99 'x' and a newline) to stdout in blocks of BLOCK
 * bytes (default 1 MiB), as fast as write(2) takes them, then exits 0. A shell pipeline
 * (`yes | head -c`) moves every byte through an extra pipe and two processes of its own and
 * tops out near the supervisor's speed; this producer costs one write(2) per block, so the
 * figure is the supervisor's reading side, not the producer's.
 *
 *   vblogflood BYTES [BLOCK]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: vblogflood BYTES [BLOCK]\n");
        return 2;
    }
    long long total = atoll(argv[1]);
    long block = argc > 2 ? atol(argv[2]) : 1 << 20;
    if (total < 0 || block < 100) {
        fprintf(stderr, "vblogflood: bad BYTES or BLOCK (BLOCK >= 100)\n");
        return 2;
    }
    block -= block % 100; /* whole lines per block: each block starts a line */
    char *buf = malloc(block);
    if (!buf) return 1;
    for (long i = 0; i < block; i += 100) {
        memset(buf + i, 'x', 99);
        buf[i + 99] = '\n';
    }
    long long left = total;
    while (left > 0) {
        size_t want = left < block ? (size_t)left : (size_t)block;
        const char *p = buf;
        while (want > 0) {
            ssize_t n = write(1, p, want);
            if (n < 0) {
                if (errno == EINTR) continue;
                perror("vblogflood: write");
                return 1;
            }
            p += n;
            want -= (size_t)n;
            left -= n;
        }
    }
    return 0;
}
