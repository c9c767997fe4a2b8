/* vbspawnfloor: the start-up floor of the vigil benchmarks' idle workload.
 *
 * Starts N copies of PROG ARGS... one after another as fast as a small process can
 * (fork(2) + execv(3), no supervision, no cgroups, no logs), then waits. The bench times it
 * from launch until all N children run, exactly as it times a supervisor, so the figure is
 * what this machine needs to start N such processes at all.
 *
 *   vbspawnfloor N PROG [ARGS...]   on SIGTERM: SIGKILLs its children, reaps them, exits 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig) {
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: vbspawnfloor N PROG [ARGS...]\n");
        return 2;
    }
    long n = strtol(argv[1], NULL, 10);
    if (n <= 0) {
        fprintf(stderr, "vbspawnfloor: N must be a positive number: %s\n", argv[1]);
        return 2;
    }
    pid_t *kids = calloc((size_t)n, sizeof *kids);
    if (!kids) {
        perror("vbspawnfloor: calloc");
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    for (long i = 0; i < n && !stop; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            execv(argv[2], argv + 2);
            _exit(127);
        }
        if (pid < 0) {
            perror("vbspawnfloor: fork");
            break;
        }
        kids[i] = pid;
    }
    while (!stop)
        pause();
    for (long i = 0; i < n; i++)
        if (kids[i] > 0)
            kill(kids[i], SIGKILL);
    while (wait(NULL) > 0)
        ;
    return 0;
}
