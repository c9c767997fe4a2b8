/* vbstamp: the restart-reaction probe of the vigil benchmarks.
 *
 * Records when it started and when it is about to exit, then exits 1 so that the supervisor
 * under test restarts it. The gap between one run's exit stamp and the next run's start stamp
 * is the supervisor's exit-to-respawn time (plus fork/exec of this small static binary).
 *
 *   vbstamp OUT [LIVE_MS]   append "START_NS END_NS\n" (CLOCK_REALTIME) to OUT,
 *                           after living LIVE_MS milliseconds (default 0)
 *   If ./stamp.args exists it wins: "OUT [LIVE_MS]" (for supervisors that run a service's
 *   `run` file with arguments of their own, e.g. s6-supervise passes the service name).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long long started = now_ns();
    char out[4096] = "stamps";
    long live_ms = 0;
    FILE *f = fopen("stamp.args", "r");
    if (f) {
        if (fscanf(f, "%4095s %ld", out, &live_ms) < 1) strcpy(out, "stamps");
        fclose(f);
    } else if (argc > 1) {
        snprintf(out, sizeof out, "%s", argv[1]);
        if (argc > 2) live_ms = strtol(argv[2], NULL, 10);
    }
    if (live_ms > 0) {
        struct timespec d = {live_ms / 1000, (live_ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
    char line[64];
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return 2;
    int n = snprintf(line, sizeof line, "%lld %lld\n", started, now_ns());
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    return ok ? 1 : 3;
}
