/* vbprobesrv: the listeners of the vigil probe benchmark, and the clock that times the probes.
 *
 *   vbprobesrv N OUT   listen on N ephemeral ports of 127.0.0.1 (even index: TCP probes, the
 *                      connection is closed at once; odd index: HTTP probes, answered
 *                      "200 OK"), print the ports as one JSON line on stdout, serve until
 *                      SIGTERM/SIGINT, then write OUT: one line per event,
 *                        "S PORT NS"  a SYN to PORT seen on lo (kernel timestamp)
 *                        "A PORT NS"  a connection to PORT accepted (CLOCK_REALTIME after
 *                                     accept returned, so it includes this process's wake-up)
 *                      and a first line "# sniff on|off (reason)".
 *   vbprobesrv N OUT P1,P2,…   the same, and also stamp SYNs to the listed ports, which other
 *                      processes serve (the HTTPS and gRPC listeners of the mixed workload).
 *
 * The SYN stamps are the trustworthy ones: a packet socket on lo with SO_TIMESTAMPNS gets the
 * time the kernel took when the loopback device queued the SYN — inside the prober's connect()
 * call, in the prober's own context — so they do not depend on when this process gets the
 * CPU. That needs CAP_NET_RAW (root); without it only the accept stamps are written.
 * Single-threaded, epoll, no allocation on the hot path beyond a growing stamp array.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct stamp {
    char kind;
    uint16_t port;
    long long ns;
};

static struct stamp *stamps;
static size_t nstamps, capstamps;
static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static void add(char kind, uint16_t port, long long ns) {
    if (nstamps == capstamps) {
        capstamps = capstamps ? capstamps * 2 : 65536;
        stamps = realloc(stamps, capstamps * sizeof *stamps);
        if (!stamps) {
            perror("realloc");
            exit(2);
        }
    }
    stamps[nstamps++] = (struct stamp){kind, port, ns};
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* epoll data: the fd in the low 32 bits, a tag in the high bits. */
enum { TAG_TCP = 1, TAG_HTTP = 2, TAG_CONN = 3, TAG_SNIFF = 4 };
#define DATA(tag, fd) (((uint64_t)(tag) << 32) | (uint32_t)(fd))

/* cBPF on a SOCK_DGRAM packet socket (data starts at the IP header): keep IPv4 TCP segments
 * with SYN set and ACK clear. */
static struct sock_filter syn_filter[] = {
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),             /* A = ip protocol */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 4),
    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0),            /* X = ip header length */
    BPF_STMT(BPF_LD | BPF_B | BPF_IND, 13),            /* A = tcp flags */
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x12),         /* SYN | ACK */
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x02, 1, 0),   /* SYN only */
    BPF_STMT(BPF_RET | BPF_K, 0),
    BPF_STMT(BPF_RET | BPF_K, 256),
};

static int open_sniffer(char *why, size_t whylen) {
    int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
    if (fd < 0) {
        snprintf(why, whylen, "packet socket: %s", strerror(errno));
        return -1;
    }
    struct sock_fprog prog = {sizeof syn_filter / sizeof syn_filter[0], syn_filter};
    int one = 1, buf = 8 << 20;
    struct sockaddr_ll sll = {0};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_IP);
    sll.sll_ifindex = (int)if_nametoindex("lo");
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) {
        snprintf(why, whylen, "packet socket setup: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    return fd;
}

/* Read every queued SYN. On lo the tap sees each packet once, as received (PACKET_HOST):
 * loopback_xmit hands it to netif_rx, which stamps it right there — still inside the sender's
 * connect() — when a socket asked for timestamps. */
static void drain_sniffer(int fd, const uint16_t *ports, int n, uint16_t lo_port, uint16_t hi_port) {
    for (;;) {
        unsigned char pkt[256];
        char ctl[256];
        struct sockaddr_ll from;
        struct iovec iov = {pkt, sizeof pkt};
        struct msghdr m = {0};
        m.msg_name = &from;
        m.msg_namelen = sizeof from;
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        ssize_t got = recvmsg(fd, &m, MSG_DONTWAIT);
        if (got < 0)
            return;
        if (from.sll_pkttype != PACKET_HOST || got < 24)
            continue;
        size_t ihl = (size_t)(pkt[0] & 0x0f) * 4;
        if ((size_t)got < ihl + 4)
            continue;
        uint16_t dport = (uint16_t)(pkt[ihl + 2] << 8 | pkt[ihl + 3]);
        if (dport < lo_port || dport > hi_port)
            continue;
        int ours = 0;
        for (int i = 0; i < n && !ours; i++)
            ours = ports[i] == dport;
        if (!ours)
            continue;
        long long ns = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
            }
        if (ns)
            add('S', dport, ns);
    }
}

static const char RESP[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s N OUT [EXTRA_PORT,...]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[1]);
    if (n <= 0 || n > 60000) {
        fprintf(stderr, "bad N\n");
        return 2;
    }
    int extra = 0;
    if (argc == 4 && argv[3][0]) {
        extra = 1;
        for (const char *c = argv[3]; *c; c++)
            extra += *c == ',';
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    uint16_t *ports = calloc((size_t)(n + extra), sizeof *ports);
    uint16_t lo_port = 0xffff, hi_port = 0;
    if (ep < 0 || !ports) {
        perror("setup");
        return 2;
    }
    for (int i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t al = sizeof a;
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 128) < 0 ||
            getsockname(s, (struct sockaddr *)&a, &al) < 0) {
            perror("listen");
            return 2;
        }
        ports[i] = ntohs(a.sin_port);
        if (ports[i] < lo_port) lo_port = ports[i];
        if (ports[i] > hi_port) hi_port = ports[i];
        struct epoll_event ev = {EPOLLIN, {.u64 = DATA(i % 2 ? TAG_HTTP : TAG_TCP, s)}};
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
    }
    if (extra) {
        char *list = argv[3], *tok, *save = NULL;
        int i = n;
        for (tok = strtok_r(list, ",", &save); tok && i < n + extra; tok = strtok_r(NULL, ",", &save)) {
            ports[i] = (uint16_t)atoi(tok);
            if (ports[i] < lo_port) lo_port = ports[i];
            if (ports[i] > hi_port) hi_port = ports[i];
            i++;
        }
        extra = i - n;
    }
    char why[160] = "";
    int sniff = open_sniffer(why, sizeof why);
    if (sniff >= 0) {
        struct epoll_event ev = {EPOLLIN, {.u64 = DATA(TAG_SNIFF, sniff)}};
        epoll_ctl(ep, EPOLL_CTL_ADD, sniff, &ev);
    }

    printf("[");
    for (int i = 0; i < n; i++)
        printf("%s%u", i ? ", " : "", ports[i]);
    printf("]\n");
    fflush(stdout);

    struct epoll_event evs[256];
    while (!stop) {
        int k = epoll_wait(ep, evs, 256, 200);
        for (int e = 0; e < k; e++) {
            int tag = (int)(evs[e].data.u64 >> 32);
            int fd = (int)(uint32_t)evs[e].data.u64;
            if (tag == TAG_SNIFF) {
                drain_sniffer(fd, ports, n + extra, lo_port, hi_port);
            } else if (tag == TAG_TCP || tag == TAG_HTTP) {
                for (;;) {
                    struct sockaddr_in peer;
                    socklen_t pl = sizeof peer;
                    int c = accept4(fd, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0)
                        break;
                    long long t = now_ns();
                    struct sockaddr_in me;
                    socklen_t ml = sizeof me;
                    getsockname(c, (struct sockaddr *)&me, &ml);
                    add('A', ntohs(me.sin_port), t);
                    if (tag == TAG_TCP) {
                        close(c);
                    } else {
                        struct epoll_event ev = {EPOLLIN | EPOLLRDHUP, {.u64 = DATA(TAG_CONN, c)}};
                        epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                    }
                }
            } else {
                /* An HTTP probe: answer once the request's blank line (or EOF) is in. A probe
                 * request fits one read; a partial one is answered when the rest comes. */
                char buf[4096];
                ssize_t r = read(fd, buf, sizeof buf);
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                if (r > 0 && !memmem(buf, (size_t)r, "\r\n\r\n", 4) && !(evs[e].events & EPOLLRDHUP))
                    continue;
                if (r > 0) {
                    ssize_t w = write(fd, RESP, sizeof RESP - 1);
                    (void)w;
                }
                close(fd);
            }
        }
    }

    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 2;
    }
    fprintf(out, "# sniff %s%s%s%s\n", sniff >= 0 ? "on" : "off", why[0] ? " (" : "", why,
            why[0] ? ")" : "");
    for (size_t i = 0; i < nstamps; i++)
        fprintf(out, "%c %u %lld\n", stamps[i].kind, stamps[i].port, stamps[i].ns);
    fclose(out);
    return 0;
}
