/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_workloads: the control plane. Rank 0 listens on a loopback TCP port,
 * every other rank connects and says its rank; gather, broadcast and
 * barrier go through rank 0. While waiting for a control message a rank
 * keeps its UCP worker progressing, and a closed control socket (a peer
 * that exited) fails the run at once instead of letting it hang.
 */
#define _GNU_SOURCE
#include "wl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int g_sock[WL_MAX_RANKS];   /* rank 0: per rank; others: [0] */

static int peer_sock(int peer)
{
    return g_sock[wl.rank == 0 ? peer : 0];
}

static void sock_write(int peer, const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = send(peer_sock(peer), p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            wl_die("control socket to rank %d: send: %s", peer,
                   strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

/* Reads len bytes from peer, progressing the UCP worker until they come */
static void sock_read(int peer, void *buf, size_t len)
{
    struct pollfd pfd = { .fd = peer_sock(peer), .events = POLLIN };
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        while (poll(&pfd, 1, 0) == 0) {
            if (!wl_progress()) {
                poll(&pfd, 1, 1);
            }
        }
        n = recv(pfd.fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n == 0) {
            wl_die("control connection to rank %d closed: rank %d exited",
                   peer, peer);
        }
        if (n < 0) {
            wl_die("control socket to rank %d: recv: %s", peer,
                   strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

static void setup_root(void)
{
    struct sockaddr_in addr;
    int fd, one = 1, s, got, peer;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        wl_die("socket: %s", strerror(errno));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port   = htons(wl.port);
    if (inet_pton(AF_INET, wl.host, &addr.sin_addr) != 1) {
        wl_die("bad control address '%s' (an IPv4 address)", wl.host);
    }
    if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0) {
        wl_die("bind to %s:%d: %s", wl.host, wl.port, strerror(errno));
    }
    if (listen(fd, WL_MAX_RANKS) < 0) {
        wl_die("listen: %s", strerror(errno));
    }
    for (got = 1; got < wl.nranks; ++got) {
        wl_where("control setup: waiting for %d more rank(s)",
                 wl.nranks - got);
        s = accept(fd, NULL, NULL);
        if (s < 0) {
            wl_die("accept: %s", strerror(errno));
        }
        g_sock[0] = s;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sock_read(0, &peer, sizeof(peer));
        if (peer <= 0 || peer >= wl.nranks || g_sock[peer] >= 0) {
            wl_die("control setup: a rank says it is rank %d (of %d)", peer,
                   wl.nranks);
        }
        g_sock[peer] = s;
    }
    g_sock[0] = -1;
    close(fd);
}

static void setup_leaf(void)
{
    struct sockaddr_in addr;
    int fd, one = 1;
    double deadline = wl_now() + 60;

    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port   = htons(wl.port);
    if (inet_pton(AF_INET, wl.host, &addr.sin_addr) != 1) {
        wl_die("bad control address '%s' (an IPv4 address)", wl.host);
    }
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            wl_die("socket: %s", strerror(errno));
        }
        if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0) {
            break;
        }
        close(fd);
        if (wl_now() > deadline) {
            wl_die("could not connect to rank 0 at %s:%d within 60 s",
                   wl.host, wl.port);
        }
        usleep(100000);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    g_sock[0] = fd;
    sock_write(0, &wl.rank, sizeof(wl.rank));
}

void wl_ctl_setup(void)
{
    int i;

    for (i = 0; i < WL_MAX_RANKS; ++i) {
        g_sock[i] = -1;
    }
    wl_where("control setup");
    if (wl.rank == 0) {
        setup_root();
    } else {
        setup_leaf();
    }
}

void wl_ctl_close(void)
{
    int i;

    for (i = 0; i < WL_MAX_RANKS; ++i) {
        if (g_sock[i] >= 0) {
            close(g_sock[i]);
            g_sock[i] = -1;
        }
    }
}

void wl_ctl_gather(const void *mine, size_t len, void *all)
{
    int r;

    if (wl.rank != 0) {
        sock_write(0, mine, len);
        return;
    }
    memcpy(all, mine, len);
    for (r = 1; r < wl.nranks; ++r) {
        sock_read(r, (char*)all + r * len, len);
    }
}

void wl_ctl_bcast(void *buf, size_t len)
{
    int r;

    if (wl.rank != 0) {
        sock_read(0, buf, len);
        return;
    }
    for (r = 1; r < wl.nranks; ++r) {
        sock_write(r, buf, len);
    }
}

void wl_ctl_allgather(const void *mine, size_t len, void *all)
{
    wl_ctl_gather(mine, len, all);
    wl_ctl_bcast(all, len * wl.nranks);
}

void wl_ctl_barrier(const char *name)
{
    char c = 'B', all[WL_MAX_RANKS];

    wl_where("barrier %s", name);
    wl_ctl_gather(&c, 1, all);
    wl_ctl_bcast(&c, 1);
}

int wl_ctl_fds(int *fds, int max)
{
    int i, n = 0;

    for (i = 0; i < WL_MAX_RANKS && n < max; ++i) {
        if (g_sock[i] >= 0) {
            fds[n++] = g_sock[i];
        }
    }
    return n;
}

void wl_ctl_check_peers(void)
{
    static unsigned calls;
    char c;
    int i;

    if ((++calls % 4096) != 0) {
        return;
    }
    for (i = 0; i < WL_MAX_RANKS; ++i) {
        if (g_sock[i] >= 0 &&
            recv(g_sock[i], &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
            wl_die("rank %d exited (its control connection closed)",
                   wl.rank == 0 ? i : 0);
        }
    }
}
