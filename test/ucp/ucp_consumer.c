/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * ucp_consumer: a UCP application's view of a transport. Two processes
 * (server: -l PORT, client: HOST -p PORT) exchange UCP worker addresses over
 * a TCP socket, then run phases that move checksummed data both ways:
 *
 *   tag-blocking  tag send then wait, 1 B .. 8 MB
 *   tag-nb        64 tag messages of mixed sizes in flight, sent in a
 *                 shuffled order, completed out of order
 *   tag-unexp     a burst of messages sent before the receives are posted;
 *                 the last one is received first
 *   stream        ucp_stream_send_nbx / ucp_stream_recv_nbx (WAITALL)
 *   am            ucp_am_send_nbx: eager ones checked in the handler,
 *                 rendezvous ones received with ucp_am_recv_data_nbx
 *   rma           ucp_mem_map, rkeys, ucp_put_nbx / ucp_get_nbx up to 4 MB,
 *                 ucp_worker_flush_nbx, checked on both sides
 *   loop          a long two-way transfer (--count N, or --loop: forever)
 *   wakeup        (--wakeup N) the server sleeps in the worker's event fd
 *                 until each of N messages the client sends at random
 *                 intervals of 0-200 ms arrives
 *
 * Every message carries a seeded pattern; its FNV-1a checksum travels with
 * it (in the tag, the stream/AM header or an RMA descriptor) and the
 * receiver checks length, checksum and every byte against the regenerated
 * pattern. Any mismatch exits 1 with a message naming the phase, size and
 * index; each phase that passes prints one "ok:" line.
 *
 * --err-mode peer creates the endpoint with UCP_ERR_HANDLING_MODE_PEER; its
 * error callback prints "peer failure: <status>", and the program then
 * cancels what is in flight, closes the endpoint with
 * UCP_EP_CLOSE_FLAG_FORCE, releases everything and exits 0.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MiB             (1024UL * 1024UL)
#define MAX_MSG         (8 * MiB)
#define NB_INFLIGHT     64
#define NB_ROUNDS       3
#define UNEXP_COUNT     256
#define AM_ID           7
#define AM_MAGIC        0x48504d41u          /* "AMPH" */
#define STREAM_MAGIC    0x48505354u          /* "TSPH" */
#define CONFIG_MAGIC    0x48504331u
#define MAX_TRACKED     4096
#define LOOP_WINDOW     8
#define RMA_REGION      (8 * MiB)
#define RMA_MAX_ITEMS   16

/* Tag: phase (8 bits) | direction (1) | index (23) | FNV-1a of the data (32) */
#define TAG_INDEX_MASK  0xffffffff00000000ull
#define TAG_MAX_INDEX   ((1u << 23) - 1)

enum {
    PH_TAG_BLOCKING = 1,
    PH_TAG_NB,
    PH_TAG_UNEXP,
    PH_STREAM,
    PH_AM,
    PH_RMA,
    PH_LOOP,
    PH_WAKEUP,
    PH_RMA_KEY,
    PH_RMA_DONE,
    PH_LAST
};

static const char *phase_names[PH_LAST] = {
    [PH_TAG_BLOCKING] = "tag-blocking",
    [PH_TAG_NB]       = "tag-nb",
    [PH_TAG_UNEXP]    = "tag-unexp",
    [PH_STREAM]       = "stream",
    [PH_AM]           = "am",
    [PH_RMA]          = "rma",
    [PH_LOOP]         = "loop",
    [PH_WAKEUP]       = "wakeup",
};

#define DEFAULT_PHASES ((1u << PH_TAG_BLOCKING) | (1u << PH_TAG_NB) | \
                        (1u << PH_TAG_UNEXP) | (1u << PH_STREAM) | \
                        (1u << PH_AM) | (1u << PH_RMA))

/* What both sides must agree on, sent over the socket */
typedef struct {
    uint32_t magic;
    uint32_t phases;
    uint32_t err_peer;
    uint32_t wakeup_n;
    uint64_t count;      /* loop messages per direction, 0 = forever */
    uint64_t seed;       /* the server's */
} run_config_t;

static struct {
    int         is_server;
    const char *host;
    int         port;
    int         err_peer;
    unsigned    wakeup_n;
    uint32_t    phases;
    uint64_t    count;
    int         loop_forever;
    unsigned    timeout;
    int         verbose;
} opt = {
    .port    = 13337,
    .count   = 2000,
    .timeout = 600,
};

static const char   *g_role = "?";
static uint64_t      g_seed;
static int           g_sock = -1;
static ucp_context_h g_ctx;
static ucp_worker_h  g_worker;
static ucp_ep_h      g_ep;
static volatile int  g_peer_failed;
static double        g_peer_failed_at;
static char          g_where[256] = "startup";

/* Requests in flight, so that a peer failure can cancel and free them */
static void         *g_tracked[MAX_TRACKED];
static char          g_tracked_where[MAX_TRACKED][256]; /* what each one is */
static int           g_num_tracked;

/* RMA resources, released on every exit path */
static ucp_mem_h     g_rma_memh;
static void         *g_rma_buf;
static ucp_rkey_h    g_rma_rkey;
static void         *g_rma_rkey_buf;

/* Scratch buffers */
static uint8_t      *g_sbuf, *g_rbuf, *g_ebuf;


/* ---------------------------------------------------------------- utils */

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "FAIL (%s): ", g_role);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void where(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void where(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(g_where, sizeof(g_where), fmt, ap);
    va_end(ap);
}

/* SIGALRM (--timeout) or SIGTERM: say where it was stuck */
static void on_alarm(int sig)
{
    char msg[512];
    int len;

    if (sig == SIGALRM) {
        len = snprintf(msg, sizeof(msg), "FAIL (%s): timed out after %u s "
                       "in %s\n", g_role, opt.timeout, g_where);
    } else {
        len = snprintf(msg, sizeof(msg), "FAIL (%s): terminated by signal %d "
                       "in %s\n", g_role, sig, g_where);
    }
    if (write(2, msg, len) < 0) {
        /* nothing to do */
    }
    _exit(1);
}

static void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);

    if (p == NULL) {
        die("out of memory (%zu bytes)", size);
    }
    return p;
}

/* One buffer per message size */
static void bufs_alloc(uint8_t **bufs, const size_t *sizes, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; ++i) {
        bufs[i] = xmalloc(sizes[i]);
    }
}

static void bufs_free(uint8_t **bufs, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; ++i) {
        free(bufs[i]);
        bufs[i] = NULL;
    }
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x  = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x  = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t msg_seed(int phase, int dir, uint64_t index)
{
    return splitmix64(g_seed ^ ((uint64_t)phase << 56) ^
                      ((uint64_t)dir << 48) ^ index);
}

/* The pattern of a message: xorshift64* from its seed */
static void pattern_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    uint64_t x = seed | 1, v;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        v  = x * 0x2545f4914f6cdd1dull;
        memcpy(p + i, &v, 8);
    }
    if (i < len) {
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        v  = x * 0x2545f4914f6cdd1dull;
        memcpy(p + i, &v, len - i);
    }
}

static uint32_t fnv1a(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t h = 0x811c9dc5u;
    size_t i;

    for (i = 0; i < len; ++i) {
        h ^= p[i];
        h *= 0x01000193u;
    }
    return h;
}

/* Fills buf with the pattern of message (phase, dir, index); returns its
 * checksum */
static uint32_t msg_fill(void *buf, size_t len, int phase, int dir,
                         uint64_t index)
{
    pattern_fill(buf, len, msg_seed(phase, dir, index));
    return fnv1a(buf, len);
}

static uint64_t rand_state = 1;

static uint64_t next_rand(void)
{
    rand_state = splitmix64(rand_state);
    return rand_state;
}

static const char *dir_name(int dir)
{
    return dir == 0 ? "client->server" : "server->client";
}

/* Direction 0 is client -> server */
static int i_send(int dir)
{
    return (dir == 0) != opt.is_server;
}

static int my_dir(void)
{
    return opt.is_server ? 1 : 0;
}

/*
 * Checks a received message against the regenerated pattern of message
 * (phase, dir, index) and the checksum that came with it; exits with details
 * on any difference. name: the phase as the messages name it.
 */
static void check_msg(const char *name, int phase, int dir, uint64_t index,
                      const void *buf, size_t got_len, size_t exp_len,
                      uint32_t sent_fnv)
{
    uint32_t got_fnv, exp_fnv;
    const uint8_t *p = buf;
    size_t off;

    if (got_len != exp_len) {
        die("%s %s size %zu index %" PRIu64 ": received %zu bytes",
            name, dir_name(dir), exp_len, index, got_len);
    }
    pattern_fill(g_ebuf, exp_len, msg_seed(phase, dir, index));
    exp_fnv = fnv1a(g_ebuf, exp_len);
    got_fnv = fnv1a(buf, got_len);
    if (sent_fnv != exp_fnv) {
        die("%s %s size %zu index %" PRIu64 ": the sender's checksum 0x%08x "
            "is not the pattern's 0x%08x (header or tag corrupted)", name,
            dir_name(dir), exp_len, index, sent_fnv, exp_fnv);
    }
    if (got_fnv != sent_fnv || memcmp(buf, g_ebuf, exp_len) != 0) {
        for (off = 0; off < exp_len && p[off] == g_ebuf[off]; ++off) {
        }
        die("%s %s size %zu index %" PRIu64 ": checksum 0x%08x, sent 0x%08x; "
            "first bad byte at offset %zu (0x%02x, expected 0x%02x)", name,
            dir_name(dir), exp_len, index, got_fnv, sent_fnv, off,
            off < exp_len ? p[off] : 0, off < exp_len ? g_ebuf[off] : 0);
    }
}

static ucp_tag_t make_tag(int phase, int dir, uint64_t index, uint32_t fnv)
{
    return ((uint64_t)phase << 56) | ((uint64_t)dir << 55) |
           ((uint64_t)(index & TAG_MAX_INDEX) << 32) | fnv;
}

/* check_msg for a tag message: its length and (in the tag) checksum */
static void check_tag_msg(const char *name, int phase, int dir,
                          uint64_t index, const void *buf,
                          const ucp_tag_recv_info_t *info, size_t exp_len)
{
    check_msg(name, phase, dir, index, buf, info->length, exp_len,
              (uint32_t)info->sender_tag);
}


/* ------------------------------------------------------------- socket */

static void sock_write(const void *buf, size_t len)
{
    const char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = send(g_sock, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            die("control socket send: %s", strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

static void sock_read(void *buf, size_t len)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = recv(g_sock, p, len, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0) {
            die("control socket: the peer closed it (in %s)", g_where);
        }
        if (n < 0) {
            die("control socket recv: %s", strerror(errno));
        }
        p   += n;
        len -= n;
    }
}

static int sock_readable(int timeout_ms)
{
    struct pollfd pfd = { .fd = g_sock, .events = POLLIN };

    return poll(&pfd, 1, timeout_ms) > 0;
}

static void sock_setup(void)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM }, *res, *ai;
    struct sockaddr_in6 addr;
    char port_str[16];
    int fd, one = 1, ret;
    double deadline;

    if (opt.is_server) {
        fd = socket(AF_INET6, SOCK_STREAM, 0);
        if (fd < 0) {
            die("socket: %s", strerror(errno));
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        memset(&addr, 0, sizeof(addr));
        addr.sin6_family = AF_INET6;
        addr.sin6_addr   = in6addr_any;
        addr.sin6_port   = htons(opt.port);
        if (bind(fd, (struct sockaddr*)&addr, sizeof(addr)) < 0) {
            die("bind to port %d: %s", opt.port, strerror(errno));
        }
        if (listen(fd, 1) < 0) {
            die("listen: %s", strerror(errno));
        }
        g_sock = accept(fd, NULL, NULL);
        if (g_sock < 0) {
            die("accept: %s", strerror(errno));
        }
        close(fd);
    } else {
        snprintf(port_str, sizeof(port_str), "%d", opt.port);
        ret = getaddrinfo(opt.host, port_str, &hints, &res);
        if (ret != 0) {
            die("%s: %s", opt.host, gai_strerror(ret));
        }
        deadline = now() + 30;
        for (;;) {
            for (ai = res; ai != NULL; ai = ai->ai_next) {
                fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
                if (fd < 0) {
                    continue;
                }
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                    g_sock = fd;
                    break;
                }
                close(fd);
            }
            if (g_sock >= 0 || now() > deadline) {
                break;
            }
            usleep(100000);
        }
        freeaddrinfo(res);
        if (g_sock < 0) {
            die("could not connect to %s:%d within 30 s", opt.host, opt.port);
        }
    }
    setsockopt(g_sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}


/* ------------------------------------------------- requests and progress */

static void release_all(void);

static void track(void *req)
{
    if (g_num_tracked == MAX_TRACKED) {
        die("more than %d requests in flight", MAX_TRACKED);
    }
    snprintf(g_tracked_where[g_num_tracked], sizeof(g_tracked_where[0]),
             "%s", g_where);
    g_tracked[g_num_tracked++] = req;
}

/* Moves the last tracked request into place i */
static void tracked_remove(int i)
{
    --g_num_tracked;
    g_tracked[i] = g_tracked[g_num_tracked];
    memcpy(g_tracked_where[i], g_tracked_where[g_num_tracked],
           sizeof(g_tracked_where[0]));
}

static void untrack(void *req)
{
    int i;

    for (i = 0; i < g_num_tracked; ++i) {
        if (g_tracked[i] == req) {
            tracked_remove(i);
            return;
        }
    }
    die("internal: request %p is not tracked", req);
}

static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    printf("peer failure: %s\n", ucs_status_string(status));
    fflush(stdout);
    g_peer_failed    = 1;
    g_peer_failed_at = now();
}

/*
 * After a peer failure: cancel receives, close the endpoint by force (which
 * completes its sends with an error), wait for every request, release
 * everything and exit 0.
 */
static void peer_failure_exit(void) __attribute__((noreturn));
static void peer_failure_exit(void)
{
    ucp_request_param_t param = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                  .flags        = UCP_EP_CLOSE_FLAG_FORCE };
    ucs_status_ptr_t close_req = NULL;
    double deadline;
    int i, left;

    alarm(0);
    for (i = 0; i < g_num_tracked; ++i) {
        ucp_request_cancel(g_worker, g_tracked[i]);
    }
    if (g_ep != NULL) {
        close_req = ucp_ep_close_nbx(g_ep, &param);
        g_ep      = NULL;
        if (UCS_PTR_IS_ERR(close_req)) {
            printf("%s: force close: %s\n", g_role,
                   ucs_status_string(UCS_PTR_STATUS(close_req)));
            close_req = NULL;
        }
    }
    deadline = now() + 30;
    for (;;) {
        ucp_worker_progress(g_worker);
        if (close_req != NULL &&
            ucp_request_check_status(close_req) != UCS_INPROGRESS) {
            ucp_request_free(close_req);
            close_req = NULL;
        }
        for (i = 0; i < g_num_tracked;) {
            if (ucp_request_check_status(g_tracked[i]) != UCS_INPROGRESS) {
                ucp_request_free(g_tracked[i]);
                tracked_remove(i);
            } else {
                ++i;
            }
        }
        if (close_req == NULL && g_num_tracked == 0) {
            break;
        }
        if (now() > deadline) {
            left = g_num_tracked + (close_req != NULL);
            if (close_req != NULL) {
                printf("%s: still in flight: the force close of the "
                       "endpoint\n", g_role);
            }
            for (i = 0; i < g_num_tracked; ++i) {
                printf("%s: still in flight: request of '%s'\n", g_role,
                       g_tracked_where[i]);
            }
            ucp_worker_print_info(g_worker, stdout);
            fflush(stdout);
            die("after peer failure: %d request(s) still in flight 30 s after "
                "closing the endpoint by force", left);
        }
    }
    release_all();
    printf("%s: closed the endpoint by force and released everything after "
           "the peer failure (%.1f s after it was reported)\n", g_role,
           now() - g_peer_failed_at);
    fflush(stdout);
    exit(0);
}

/*
 * Without --err-mode peer, a peer that died (e.g. failed a check) would leave
 * this side waiting until its timeout: notice its end of the control socket
 * closing. (With --err-mode peer, only UCP may report the failure.)
 */
static void check_peer_alive(void)
{
    static unsigned calls;
    char c;

    if (opt.err_peer || g_sock < 0 || (++calls % 4096) != 0) {
        return;
    }
    if (recv(g_sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
        die("the peer exited (control socket closed) during %s", g_where);
    }
}

static unsigned progress(void)
{
    unsigned n = ucp_worker_progress(g_worker);

    if (g_peer_failed) {
        peer_failure_exit();
    }
    check_peer_alive();
    return n;
}

/*
 * An operation failed. With --err-mode peer, a peer failure is reported
 * through the error callback too: wait for it (the requests complete first).
 */
static void op_failed(ucs_status_t status, const char *what)
{
    double deadline;

    if (opt.err_peer) {
        deadline = now() + 30;
        while (now() < deadline) {
            progress(); /* exits once the callback has run */
        }
        die("%s failed: %s, and no peer failure was reported within 30 s",
            what, ucs_status_string(status));
    }
    die("%s failed: %s (in %s)", what, ucs_status_string(status), g_where);
}

/* Takes the return value of a *_nbx call: NULL (done) or a tracked request */
static void *submitted(ucs_status_ptr_t sp, const char *what)
{
    if (sp == NULL) {
        return NULL;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        op_failed(UCS_PTR_STATUS(sp), what);
    }
    track(sp);
    return sp;
}

/*
 * Given the status of request *reqp: 0 if in progress; else frees it, sets
 * *reqp to NULL and returns 1 (exits if the request failed)
 */
static int req_finish(void **reqp, ucs_status_t status, const char *what)
{
    if (status == UCS_INPROGRESS) {
        return 0;
    }
    untrack(*reqp);
    ucp_request_free(*reqp);
    *reqp = NULL;
    if (status != UCS_OK) {
        op_failed(status, what);
    }
    return 1;
}

/* 1 if the request is done (and freed), 0 if in progress */
static int req_test(void **reqp, const char *what)
{
    return *reqp == NULL ||
           req_finish(reqp, ucp_request_check_status(*reqp), what);
}

static void req_wait(void **reqp, const char *what)
{
    while (!req_test(reqp, what)) {
        progress();
    }
}

/* Waits for all n requests (NULL ones are done), in whatever order */
static void req_wait_all(void **reqs, unsigned n, const char *what)
{
    unsigned i, done;

    for (done = 0; done < n;) {
        for (i = 0, done = 0; i < n; ++i) {
            done += req_test(&reqs[i], what);
        }
        progress();
    }
}

/* req_test for a tag receive; fills *info once it is done */
static int tag_recv_test(void **reqp, ucp_tag_recv_info_t *info,
                         const char *what)
{
    return *reqp == NULL ||
           req_finish(reqp, ucp_tag_recv_request_test(*reqp, info), what);
}

static void tag_recv_wait(void **reqp, ucp_tag_recv_info_t *info,
                          const char *what)
{
    while (!tag_recv_test(reqp, info, what)) {
        progress();
    }
}

static void *tag_send(const void *buf, size_t len, ucp_tag_t tag,
                      const char *what)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };

    return submitted(ucp_tag_send_nbx(g_ep, buf, len, tag, &param), what);
}

/* Sends message (phase, dir, index): buf filled with its pattern, and its
 * checksum in the tag */
static void *tag_send_msg(void *buf, size_t len, int phase, int dir,
                          uint64_t index, const char *what)
{
    uint32_t fnv = msg_fill(buf, len, phase, dir, index);

    return tag_send(buf, len, make_tag(phase, dir, index, fnv), what);
}

static void *tag_recv(void *buf, size_t len, ucp_tag_t tag,
                      ucp_tag_recv_info_t *info, const char *what)
{
    /* UCX 1.13 does not fill recv_info.tag_info on immediate completion
     * (documented, not implemented): always get a request */
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL
    };

    return submitted(ucp_tag_recv_nbx(g_worker, buf, len, tag, TAG_INDEX_MASK,
                                      &param), what);
}

/* One byte from the control socket; the worker progresses until it comes */
static char sock_read_byte(void)
{
    char c;

    while (!sock_readable(0)) {
        progress();
    }
    sock_read(&c, 1);
    return c;
}

/* Both sides reach this point; the worker keeps progressing meanwhile */
static void barrier(const char *name)
{
    char c = 'B', got;

    where("barrier %s", name);
    sock_write(&c, 1);
    got = sock_read_byte();
    if (got != c) {
        die("control socket: unexpected byte 0x%02x at barrier %s", got, name);
    }
}

static void flush_worker(const char *what)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    void *req = submitted(ucp_worker_flush_nbx(g_worker, &param), what);

    req_wait(&req, what);
}


/* ------------------------------------------------------------ tag phases */

static const size_t blocking_sizes[] = {
    1, 2, 4, 7, 8, 16, 32, 64, 128, 256, 512, 1000, 1024, 2048, 4096, 8191,
    8192, 16384, 32768, 65536, 65537, 131072, 262144, 524288, 1048576,
    2097152, 3000000, 4194304, 8388608
};
#define NUM_BLOCKING_SIZES (sizeof(blocking_sizes) / sizeof(blocking_sizes[0]))

static void phase_tag_blocking(void)
{
    ucp_tag_recv_info_t info;
    unsigned i, count = 0;
    size_t size;
    void *req;
    int dir;

    for (dir = 0; dir < 2; ++dir) {
        for (i = 0; i < NUM_BLOCKING_SIZES; ++i) {
            size = blocking_sizes[i];
            where("tag blocking %s size %zu index %u", dir_name(dir), size, i);
            if (i_send(dir)) {
                req = tag_send_msg(g_sbuf, size, PH_TAG_BLOCKING, dir, i,
                                   g_where);
                req_wait(&req, g_where);
            } else {
                memset(g_rbuf, 0xee, size);
                req = tag_recv(g_rbuf, MAX_MSG,
                               make_tag(PH_TAG_BLOCKING, dir, i, 0), &info,
                               g_where);
                tag_recv_wait(&req, &info, g_where);
                check_tag_msg("tag blocking", PH_TAG_BLOCKING, dir, i, g_rbuf,
                              &info, size);
            }
            ++count;
        }
        barrier("tag blocking");
    }
    printf("ok: tag blocking %zu..%zu B (%u msgs, both directions)\n",
           blocking_sizes[0], blocking_sizes[NUM_BLOCKING_SIZES - 1], count);
}

static const size_t nb_sizes[] = {
    1, 7, 64, 1000, 4096, 8191, 65537, 262144, 1048576, 100, 16384
};
#define NUM_NB_SIZES (sizeof(nb_sizes) / sizeof(nb_sizes[0]))

static void phase_tag_nb(void)
{
    static uint8_t *bufs[NB_INFLIGHT];
    ucp_tag_recv_info_t infos[NB_INFLIGHT];
    void *reqs[NB_INFLIGHT];
    unsigned order[NB_INFLIGHT], perm[NB_INFLIGHT];
    unsigned i, j, k, tmp, round, done, out_of_order = 0, total = 0;
    size_t sizes[NB_INFLIGHT], max_size = 0;
    uint64_t index;
    int dir;

    for (i = 0; i < NUM_NB_SIZES; ++i) {
        max_size = nb_sizes[i] > max_size ? nb_sizes[i] : max_size;
    }
    for (i = 0; i < NB_INFLIGHT; ++i) {
        bufs[i] = xmalloc(max_size);
    }

    for (dir = 0; dir < 2; ++dir) {
        for (round = 0; round < NB_ROUNDS; ++round) {
            for (i = 0; i < NB_INFLIGHT; ++i) {
                sizes[i] = nb_sizes[(i * 7 + round * 3) % NUM_NB_SIZES];
                perm[i]  = i;
            }
            where("tag non-blocking %s round %u", dir_name(dir), round);
            if (i_send(dir)) {
                rand_state = msg_seed(PH_TAG_NB, dir, round);
                for (i = NB_INFLIGHT - 1; i > 0; --i) {
                    j = next_rand() % (i + 1);
                    tmp = perm[i]; perm[i] = perm[j]; perm[j] = tmp;
                }
                for (k = 0; k < NB_INFLIGHT; ++k) {
                    i = perm[k];
                    reqs[i] = tag_send_msg(bufs[i], sizes[i], PH_TAG_NB, dir,
                                           round * NB_INFLIGHT + i, g_where);
                }
                req_wait_all(reqs, NB_INFLIGHT, g_where);
            } else {
                for (i = 0; i < NB_INFLIGHT; ++i) {
                    reqs[i] = tag_recv(bufs[i], sizes[i],
                                       make_tag(PH_TAG_NB, dir,
                                                round * NB_INFLIGHT + i, 0),
                                       &infos[i], g_where);
                }
                done = 0;
                for (i = 0; i < NB_INFLIGHT; ++i) {
                    if (reqs[i] == NULL) {
                        order[done++] = i;
                    }
                }
                while (done < NB_INFLIGHT) {
                    for (i = 0; i < NB_INFLIGHT; ++i) {
                        if (reqs[i] != NULL &&
                            tag_recv_test(&reqs[i], &infos[i], g_where)) {
                            order[done++] = i;
                        }
                    }
                    progress();
                }
                for (k = 0; k < NB_INFLIGHT; ++k) {
                    i = order[k];
                    out_of_order += (i != k);
                    index = round * NB_INFLIGHT + i;
                    check_tag_msg("tag non-blocking", PH_TAG_NB, dir, index,
                                  bufs[i], &infos[i], sizes[i]);
                }
            }
            total += NB_INFLIGHT;
        }
        barrier("tag non-blocking");
    }
    bufs_free(bufs, NB_INFLIGHT);
    printf("ok: tag non-blocking %d in flight of %zu..%zu B, sent shuffled, "
           "%u rounds, both directions (%u msgs; this side received %u out "
           "of posting order)\n", NB_INFLIGHT, nb_sizes[0], max_size,
           NB_ROUNDS, total, out_of_order);
}

static const size_t unexp_sizes[] = {
    1, 8, 64, 512, 1000, 4096, 8191, 16384, 65537
};
#define NUM_UNEXP_SIZES (sizeof(unexp_sizes) / sizeof(unexp_sizes[0]))

static void phase_tag_unexp(void)
{
    static uint8_t *bufs[UNEXP_COUNT];
    static ucp_tag_recv_info_t infos[UNEXP_COUNT];
    static void *reqs[UNEXP_COUNT];
    ucp_tag_recv_info_t probe_info;
    unsigned i, done, last, probed[2] = {0, 0};
    double until;
    char c = 'U', got;
    int dir;

    for (i = 0; i < UNEXP_COUNT; ++i) {
        bufs[i] = xmalloc(65537);
    }
    for (dir = 0; dir < 2; ++dir) {
        where("tag unexpected burst %s", dir_name(dir));
        if (i_send(dir)) {
            for (i = 0; i < UNEXP_COUNT; ++i) {
                reqs[i] = tag_send_msg(bufs[i],
                                       unexp_sizes[i % NUM_UNEXP_SIZES],
                                       PH_TAG_UNEXP, dir, i, g_where);
            }
            sock_write(&c, 1); /* all sent: the receiver may now post */
            req_wait_all(reqs, UNEXP_COUNT, g_where);
        } else {
            /* Let the whole burst arrive before posting any receive */
            got = sock_read_byte();
            if (got != c) {
                die("control socket: unexpected byte 0x%02x", got);
            }
            for (until = now() + 0.3; now() < until;) {
                progress();
            }
            for (i = 0; i < UNEXP_COUNT; ++i) {
                if (ucp_tag_probe_nb(g_worker,
                                     make_tag(PH_TAG_UNEXP, dir, i, 0),
                                     TAG_INDEX_MASK, 0, &probe_info) != NULL) {
                    ++probed[dir];
                }
            }
            if (probed[dir] == 0) {
                die("tag unexpected burst %s: none of the %d messages had "
                    "arrived before the receives were posted", dir_name(dir),
                    UNEXP_COUNT);
            }
            /* The last message first: all the others wait unexpected
             * meanwhile and must not keep it from coming (as they would
             * if the sender had to wait for receive buffers they hold) */
            last       = UNEXP_COUNT - 1;
            reqs[last] = tag_recv(bufs[last], 65537,
                                  make_tag(PH_TAG_UNEXP, dir, last, 0),
                                  &infos[last], g_where);
            for (until = now() + 60;
                 !tag_recv_test(&reqs[last], &infos[last], g_where);) {
                progress();
                if (now() > until) {
                    die("tag unexpected burst %s: the last message did not "
                        "arrive within 60 s while the %d before it waited "
                        "unexpected", dir_name(dir), UNEXP_COUNT - 1);
                }
            }
            for (i = 0; i < last; ++i) {
                reqs[i] = tag_recv(bufs[i], 65537,
                                   make_tag(PH_TAG_UNEXP, dir, i, 0), &infos[i],
                                   g_where);
            }
            for (done = 0; done < UNEXP_COUNT;) {
                for (i = 0, done = 0; i < UNEXP_COUNT; ++i) {
                    done += tag_recv_test(&reqs[i], &infos[i], g_where);
                }
                progress();
            }
            for (i = 0; i < UNEXP_COUNT; ++i) {
                check_tag_msg("tag unexpected burst", PH_TAG_UNEXP, dir, i,
                              bufs[i], &infos[i],
                              unexp_sizes[i % NUM_UNEXP_SIZES]);
            }
        }
        barrier("tag unexpected");
    }
    bufs_free(bufs, UNEXP_COUNT);
    printf("ok: tag unexpected burst of %d msgs of %zu..%zu B, both "
           "directions, the last one received first (%u of them probed as "
           "unexpected before posting)\n",
           UNEXP_COUNT, unexp_sizes[0], unexp_sizes[NUM_UNEXP_SIZES - 1],
           probed[0] + probed[1]);
}


/* --------------------------------------------------------------- stream */

typedef struct {
    uint32_t magic;
    uint32_t index;
    uint32_t size;
    uint32_t fnv;
} stream_hdr_t;

static const size_t stream_sizes[] = {
    1, 7, 64, 1000, 4096, 8191, 65537, 262144, 1048576, 3, 3000000
};
#define NUM_STREAM_SIZES (sizeof(stream_sizes) / sizeof(stream_sizes[0]))

static void stream_recv_all(void *buf, size_t len, const char *what)
{
    ucp_request_param_t param = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags        = UCP_STREAM_RECV_FLAG_WAITALL
    };
    size_t got = 0;
    void *req;

    req = submitted(ucp_stream_recv_nbx(g_ep, buf, len, &got, &param), what);
    while (req != NULL &&
           !req_finish(&req, ucp_stream_recv_request_test(req, &got), what)) {
        progress();
    }
    if (got != len) {
        die("%s: stream receive with WAITALL returned %zu of %zu bytes",
            what, got, len);
    }
}

static void phase_stream(void)
{
    static uint8_t *bufs[NUM_STREAM_SIZES];
    stream_hdr_t hdrs[NUM_STREAM_SIZES], hdr;
    void *reqs[2 * NUM_STREAM_SIZES];
    ucp_request_param_t param = { .op_attr_mask = 0 };
    unsigned i, count = 0;
    size_t size;
    int dir;

    bufs_alloc(bufs, stream_sizes, NUM_STREAM_SIZES);
    for (dir = 0; dir < 2; ++dir) {
        where("stream %s", dir_name(dir));
        if (i_send(dir)) {
            /* All messages queued at once: the stream keeps their order */
            for (i = 0; i < NUM_STREAM_SIZES; ++i) {
                size = stream_sizes[i];
                hdrs[i].magic = STREAM_MAGIC;
                hdrs[i].index = i;
                hdrs[i].size  = size;
                hdrs[i].fnv   = msg_fill(bufs[i], size, PH_STREAM, dir, i);
                reqs[2 * i] = submitted(ucp_stream_send_nbx(g_ep, &hdrs[i],
                                                            sizeof(hdrs[i]),
                                                            &param),
                                        "stream send header");
                reqs[2 * i + 1] = submitted(ucp_stream_send_nbx(g_ep, bufs[i],
                                                                size, &param),
                                            "stream send data");
            }
            req_wait_all(reqs, 2 * NUM_STREAM_SIZES, "stream send");
        } else {
            for (i = 0; i < NUM_STREAM_SIZES; ++i) {
                size = stream_sizes[i];
                where("stream %s size %zu index %u", dir_name(dir), size, i);
                stream_recv_all(&hdr, sizeof(hdr), g_where);
                if (hdr.magic != STREAM_MAGIC || hdr.index != i ||
                    hdr.size != size) {
                    die("stream %s size %zu index %u: bad header (magic 0x%x "
                        "index %u size %u): bytes lost, duplicated or "
                        "reordered", dir_name(dir), size, i, hdr.magic,
                        hdr.index, hdr.size);
                }
                stream_recv_all(g_rbuf, size, g_where);
                check_msg("stream", PH_STREAM, dir, i, g_rbuf, size, size,
                          hdr.fnv);
            }
        }
        count += NUM_STREAM_SIZES;
        barrier("stream");
    }
    bufs_free(bufs, NUM_STREAM_SIZES);
    printf("ok: stream %zu..%zu B (%u msgs, both directions, WAITALL "
           "receives)\n", stream_sizes[0], stream_sizes[NUM_STREAM_SIZES - 1],
           count);
}


/* ----------------------------------------------------- active messages */

typedef struct {
    uint32_t magic;
    uint32_t dir;
    uint32_t index;
    uint32_t fnv;
    uint64_t size;
} am_hdr_t;

static const size_t am_sizes[] = {
    1, 7, 64, 1000, 4096, 8191, 65537, 262144, 1048576, 4194304, 100, 300000
};
#define NUM_AM_SIZES   (sizeof(am_sizes) / sizeof(am_sizes[0]))
#define AM_EAGER_MAX   8191   /* sent with UCP_AM_SEND_FLAG_EAGER */
#define AM_RNDV_MIN    65537  /* sent with UCP_AM_SEND_FLAG_RNDV */

static struct {
    int          dir;                       /* expected direction */
    unsigned     received;
    unsigned     eager, rndv;
    uint8_t      seen[NUM_AM_SIZES];
    void        *rreq[NUM_AM_SIZES];        /* ucp_am_recv_data_nbx */
    uint8_t     *rbuf[NUM_AM_SIZES];
    am_hdr_t     rhdr[NUM_AM_SIZES];
    size_t       rlen[NUM_AM_SIZES]; /* Length UCP announced for it */
} am;

static void am_check(const am_hdr_t *hdr, const void *data, size_t length)
{
    check_msg("am", PH_AM, hdr->dir, hdr->index, data, length, hdr->size,
              hdr->fnv);
    ++am.received;
}

/* Rendezvous message i, received by ucp_am_recv_data_nbx: check, free */
static void am_rndv_done(unsigned i, size_t length)
{
    am_check(&am.rhdr[i], am.rbuf[i], length);
    free(am.rbuf[i]);
    am.rbuf[i] = NULL;
}

static ucs_status_t am_cb(void *arg, const void *header, size_t header_length,
                          void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    ucp_request_param_t rparam = { .op_attr_mask = 0 };
    const am_hdr_t *hdr = header;
    unsigned i;

    if (header_length != sizeof(am_hdr_t) || hdr->magic != AM_MAGIC) {
        die("am: message with a bad user header (length %zu)", header_length);
    }
    i = hdr->index;
    if (hdr->dir != am.dir || i >= NUM_AM_SIZES || am.seen[i]) {
        die("am %s index %u: unexpected or duplicated message (dir %u)",
            dir_name(am.dir), i, hdr->dir);
    }
    am.seen[i] = 1;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        if (hdr->size < AM_RNDV_MIN) {
            die("am %s size %" PRIu64 " index %u: sent eager-only but arrived "
                "as rendezvous", dir_name(hdr->dir), hdr->size, i);
        }
        ++am.rndv;
        am.rbuf[i] = xmalloc(length);
        am.rhdr[i] = *hdr;
        am.rlen[i] = length;
        am.rreq[i] = submitted(ucp_am_recv_data_nbx(g_worker, data, am.rbuf[i],
                                                    length, &rparam),
                               "ucp_am_recv_data_nbx");
        if (am.rreq[i] == NULL) {
            am_rndv_done(i, length);
        }
        return UCS_OK;
    }
    if (hdr->size >= AM_RNDV_MIN) {
        die("am %s size %" PRIu64 " index %u: sent rendezvous-only but arrived "
            "eager", dir_name(hdr->dir), hdr->size, i);
    }
    ++am.eager;
    am_check(hdr, data, length);
    return UCS_OK;
}

static void am_register(void)
{
    ucp_am_handler_param_t param = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                      UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id         = AM_ID,
        .cb         = am_cb,
        .arg        = NULL
    };
    ucs_status_t status = ucp_worker_set_am_recv_handler(g_worker, &param);

    if (status != UCS_OK) {
        die("ucp_worker_set_am_recv_handler: %s", ucs_status_string(status));
    }
}

static void phase_am(void)
{
    static uint8_t *bufs[NUM_AM_SIZES];
    am_hdr_t hdrs[NUM_AM_SIZES];
    void *reqs[NUM_AM_SIZES];
    ucp_request_param_t param;
    unsigned i, total_eager = 0, total_rndv = 0;
    size_t size;
    int dir;

    bufs_alloc(bufs, am_sizes, NUM_AM_SIZES);
    for (dir = 0; dir < 2; ++dir) {
        where("am %s", dir_name(dir));
        if (i_send(dir)) {
            for (i = 0; i < NUM_AM_SIZES; ++i) {
                size = am_sizes[i];
                hdrs[i].magic = AM_MAGIC;
                hdrs[i].dir   = dir;
                hdrs[i].index = i;
                hdrs[i].size  = size;
                hdrs[i].fnv   = msg_fill(bufs[i], size, PH_AM, dir, i);
                memset(&param, 0, sizeof(param));
                param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
                param.flags        = size <= AM_EAGER_MAX ?
                                     UCP_AM_SEND_FLAG_EAGER :
                                     size >= AM_RNDV_MIN ?
                                     UCP_AM_SEND_FLAG_RNDV : 0;
                reqs[i] = submitted(ucp_am_send_nbx(g_ep, AM_ID, &hdrs[i],
                                                    sizeof(hdrs[i]), bufs[i],
                                                    size, &param),
                                    "ucp_am_send_nbx");
            }
            req_wait_all(reqs, NUM_AM_SIZES, "ucp_am_send_nbx");
        } else {
            for (;;) {
                for (i = 0; i < NUM_AM_SIZES; ++i) {
                    if (am.rreq[i] != NULL &&
                        req_test(&am.rreq[i], "ucp_am_recv_data_nbx")) {
                        am_rndv_done(i, am.rlen[i]);
                    }
                }
                if (am.received == NUM_AM_SIZES) {
                    break;
                }
                progress();
            }
            total_eager += am.eager;
            total_rndv  += am.rndv;
        }
        /* Ready for the next direction before the peer may start it */
        memset(&am, 0, sizeof(am));
        am.dir = dir + 1;
        barrier("am");
    }
    bufs_free(bufs, NUM_AM_SIZES);
    printf("ok: am %zu..%zu B (%zu msgs, both directions; this side received "
           "%u in the handler, %u by ucp_am_recv_data_nbx)\n", am_sizes[0],
           (size_t)4194304, 2 * NUM_AM_SIZES, total_eager, total_rndv);
}


/* ------------------------------------------------------------------ RMA */

static const size_t rma_sizes[] = {
    1, 8, 100, 4096, 8191, 65537, 1048576, 4194304, 3
};
#define NUM_RMA_SIZES (sizeof(rma_sizes) / sizeof(rma_sizes[0]))

/* What a side sends the other: where its buffer is, its rkey, and the
 * checksums of what it put into the peer / what the peer may get */
typedef struct {
    uint64_t addr;
    uint64_t rkey_size;
    uint32_t fnv[NUM_RMA_SIZES];
    uint8_t  rkey[4096];
} rma_key_msg_t;

static size_t rma_offset(unsigned i)
{
    size_t off = 0;
    unsigned k;

    for (k = 0; k < i; ++k) {
        off = ((off + rma_sizes[k] + 63) & ~(size_t)63) + 64; /* gap of >=64 */
    }
    return off + (i % 3); /* some unaligned */
}

/*
 * Sends the peer this side's message of one kind (PH_RMA_KEY, PH_RMA_DONE)
 * and receives the peer's into *peer; returns the length received
 */
static size_t rma_msg_exchange(int kind, const rma_key_msg_t *mine,
                               rma_key_msg_t *peer)
{
    ucp_tag_recv_info_t info;
    void *rreq, *sreq;

    rreq = tag_recv(peer, sizeof(*peer), make_tag(kind, !my_dir(), 0, 0),
                    &info, g_where);
    sreq = tag_send(mine, sizeof(*mine), make_tag(kind, my_dir(), 0, 0),
                    g_where);
    req_wait(&sreq, g_where);
    tag_recv_wait(&rreq, &info, g_where);
    return info.length;
}

static void phase_rma(void)
{
    ucp_mem_map_params_t mparams = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                      UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .length     = 2 * RMA_REGION
    };
    ucp_request_param_t param = { .op_attr_mask = 0 };
    static rma_key_msg_t mine, peer;
    uint8_t *put_region, *get_region, *src[NUM_RMA_SIZES], *dst[NUM_RMA_SIZES];
    void *reqs[2 * NUM_RMA_SIZES];
    uint32_t put_fnv[NUM_RMA_SIZES];
    ucs_status_t status;
    size_t rkey_size, off, size, got;
    unsigned i;
    void *rkey_buf;
    int me = my_dir(), other = !my_dir();

    if (rma_offset(NUM_RMA_SIZES) > RMA_REGION) {
        die("internal: RMA items do not fit the region");
    }
    where("rma: setup");
    if (posix_memalign(&g_rma_buf, 4096, 2 * RMA_REGION) != 0) {
        die("out of memory");
    }
    /* [0, 8 MB): the peer puts here; [8 MB, 16 MB): the peer gets from here */
    put_region = g_rma_buf;
    get_region = put_region + RMA_REGION;
    memset(put_region, 0, RMA_REGION);
    memset(get_region, 0, RMA_REGION);
    for (i = 0; i < NUM_RMA_SIZES; ++i) {
        off = rma_offset(i);
        mine.fnv[i] = msg_fill(get_region + off, rma_sizes[i], PH_RMA, me,
                               1000 + i);
    }
    mparams.address = g_rma_buf;
    status = ucp_mem_map(g_ctx, &mparams, &g_rma_memh);
    if (status != UCS_OK) {
        die("ucp_mem_map of %lu bytes: %s", 2 * RMA_REGION,
            ucs_status_string(status));
    }
    status = ucp_rkey_pack(g_ctx, g_rma_memh, &rkey_buf, &rkey_size);
    if (status != UCS_OK) {
        die("ucp_rkey_pack: %s", ucs_status_string(status));
    }
    g_rma_rkey_buf = rkey_buf;
    if (rkey_size > sizeof(mine.rkey)) {
        die("rkey of %zu bytes is too large", rkey_size);
    }
    mine.addr      = (uintptr_t)g_rma_buf;
    mine.rkey_size = rkey_size;
    memcpy(mine.rkey, rkey_buf, rkey_size);

    /* Exchange keys by tag messages */
    where("rma: rkey exchange");
    got = rma_msg_exchange(PH_RMA_KEY, &mine, &peer);
    if (got != sizeof(peer) || peer.rkey_size > sizeof(peer.rkey)) {
        die("rma: bad rkey message (%zu bytes)", got);
    }
    status = ucp_ep_rkey_unpack(g_ep, peer.rkey, &g_rma_rkey);
    if (status != UCS_OK) {
        die("ucp_ep_rkey_unpack: %s", ucs_status_string(status));
    }

    /* Put into the peer's put region, get from its get region */
    for (i = 0; i < NUM_RMA_SIZES; ++i) {
        size   = rma_sizes[i];
        src[i] = xmalloc(size);
        dst[i] = xmalloc(size);
        memset(dst[i], 0xee, size);
        put_fnv[i] = msg_fill(src[i], size, PH_RMA, me, i);
        where("rma: put size %zu index %u", size, i);
        reqs[i] = submitted(ucp_put_nbx(g_ep, src[i], size,
                                        peer.addr + rma_offset(i),
                                        g_rma_rkey, &param), g_where);
        where("rma: get size %zu index %u", size, i);
        reqs[NUM_RMA_SIZES + i] =
                submitted(ucp_get_nbx(g_ep, dst[i], size,
                                      peer.addr + RMA_REGION + rma_offset(i),
                                      g_rma_rkey, &param), g_where);
    }
    where("rma: waiting for puts and gets");
    req_wait_all(reqs, 2 * NUM_RMA_SIZES, "put or get");
    where("rma: worker flush");
    flush_worker(g_where);

    /* Gets: checked here against the peer's pattern and checksum */
    for (i = 0; i < NUM_RMA_SIZES; ++i) {
        check_msg("rma get", PH_RMA, other, 1000 + i, dst[i], rma_sizes[i],
                  rma_sizes[i], peer.fnv[i]);
    }

    /* Puts: the target checks them once told they are complete */
    where("rma: put checksums");
    memcpy(mine.fnv, put_fnv, sizeof(put_fnv));
    rma_msg_exchange(PH_RMA_DONE, &mine, &peer);
    for (i = 0; i < NUM_RMA_SIZES; ++i) {
        off = rma_offset(i);
        check_msg("rma put", PH_RMA, other, i, put_region + off,
                  rma_sizes[i], rma_sizes[i], peer.fnv[i]);
        if (put_region[off + rma_sizes[i]] != 0 ||
            (off > 0 && put_region[off - 1] != 0)) {
            die("rma put %s size %zu index %u: bytes outside the target "
                "range were written", dir_name(other), rma_sizes[i], i);
        }
    }
    barrier("rma");
    for (i = 0; i < NUM_RMA_SIZES; ++i) {
        free(src[i]);
        free(dst[i]);
    }
    printf("ok: rma put and get %zu..%zu B (%zu each way, worker flush; puts "
           "checked by the target, gets by the initiator)\n", (size_t)1,
           (size_t)4194304, NUM_RMA_SIZES);
}


/* ----------------------------------------------------------------- loop */

static const size_t loop_sizes[] = { 64, 4096, 65537, 1048576, 1, 300000 };
#define NUM_LOOP_SIZES (sizeof(loop_sizes) / sizeof(loop_sizes[0]))

/*
 * Both sides send and receive at once, LOOP_WINDOW messages in flight each
 * way, until --count messages have crossed each way (or forever).
 */
static void phase_loop(void)
{
    static uint8_t *sbufs[LOOP_WINDOW], *rbufs[LOOP_WINDOW];
    ucp_tag_recv_info_t infos[LOOP_WINDOW];
    void *sreqs[LOOP_WINDOW] = {NULL}, *rreqs[LOOP_WINDOW] = {NULL};
    uint64_t sent = 0, received = 0, posted = 0, idx, limit;
    uint64_t rx_index[LOOP_WINDOW];
    int me = my_dir(), other = !my_dir(), started = 0, rdone;
    double t0 = now(), last_report = now();
    size_t size, bytes = 0;
    unsigned w;

    for (w = 0; w < LOOP_WINDOW; ++w) {
        sbufs[w] = xmalloc(1048576);
        rbufs[w] = xmalloc(1048576);
    }
    limit = opt.loop_forever ? UINT64_MAX : opt.count;
    while (received < limit || sent < limit) {
        for (w = 0; w < LOOP_WINDOW; ++w) {
            /* Receives: slot w takes messages w, w + WINDOW, ... */
            rdone = 0;
            if (rreqs[w] == NULL && posted < limit &&
                posted % LOOP_WINDOW == w) {
                idx          = posted++;
                rx_index[w]  = idx;
                where("loop: receive index %" PRIu64, idx);
                rreqs[w] = tag_recv(rbufs[w], 1048576,
                                    make_tag(PH_LOOP, other, idx, 0),
                                    &infos[w], g_where);
                rdone    = (rreqs[w] == NULL);
            } else if (rreqs[w] != NULL) {
                rdone = tag_recv_test(&rreqs[w], &infos[w], "loop receive");
            }
            if (rdone) {
                idx  = rx_index[w];
                size = loop_sizes[idx % NUM_LOOP_SIZES];
                check_tag_msg("loop", PH_LOOP, other, idx, rbufs[w], &infos[w],
                              size);
                ++received;
                bytes += size;
            }
            /* Sends */
            if (sreqs[w] != NULL) {
                req_test(&sreqs[w], "loop send");
            }
            if (sreqs[w] == NULL && sent < limit &&
                sent % LOOP_WINDOW == w) {
                idx  = sent++;
                size = loop_sizes[idx % NUM_LOOP_SIZES];
                where("loop: send index %" PRIu64, idx);
                sreqs[w] = tag_send_msg(sbufs[w], size, PH_LOOP, me, idx,
                                        g_where);
            }
        }
        if (!started && received > 0 && sent > LOOP_WINDOW) {
            started = 1;
            printf("loop: transfer started\n");
            fflush(stdout);
        }
        if (now() - last_report > 10) {
            last_report = now();
            printf("loop: %" PRIu64 " msgs received, %" PRIu64 " sent\n",
                   received, sent);
            fflush(stdout);
        }
        progress();
    }
    for (w = 0; w < LOOP_WINDOW; ++w) {
        req_wait(&sreqs[w], "loop send");
    }
    barrier("loop");
    bufs_free(sbufs, LOOP_WINDOW);
    bufs_free(rbufs, LOOP_WINDOW);
    printf("ok: loop %" PRIu64 " msgs of %zu..%zu B each way, %d in flight "
           "each way (%.1f MB received in %.1f s)\n", received, (size_t)1,
           (size_t)1048576, LOOP_WINDOW, bytes / 1e6, now() - t0);
}


/* --------------------------------------------------------------- wakeup */

static const size_t wakeup_sizes[] = { 8, 1000, 64, 8191, 4096, 65537, 100 };
#define NUM_WAKEUP_SIZES (sizeof(wakeup_sizes) / sizeof(wakeup_sizes[0]))

/*
 * The client sends N messages at random intervals of 0-200 ms; the server
 * arms the worker and sleeps in poll() on its event fd whenever it has
 * nothing to do. A wakeup that does not come (the message is there after a
 * 5 s poll timeout) fails the test.
 */
static void phase_wakeup(void)
{
    ucp_tag_recv_info_t info;
    struct pollfd pfd;
    unsigned i, wakeups = 0, woken_msgs = 0, n = opt.wakeup_n;
    double t0, cpu0, wall, cpu, slept = 0, t, deadline, until;
    ucs_status_t status;
    size_t size;
    void *req;
    int efd, asleep_for_this, ret;

    if (opt.is_server) {
        status = ucp_worker_get_efd(g_worker, &efd);
        if (status != UCS_OK) {
            die("ucp_worker_get_efd: %s", ucs_status_string(status));
        }
    }
    barrier("wakeup start");
    t0   = now();
    cpu0 = cpu_seconds();
    rand_state = msg_seed(PH_WAKEUP, 0, 0);
    for (i = 0; i < n; ++i) {
        size = wakeup_sizes[i % NUM_WAKEUP_SIZES];
        where("wakeup: message %u of %u, size %zu", i, n, size);
        if (!opt.is_server) {
            /* Sleep 0-200 ms, progressing now and then */
            for (until = now() + (next_rand() % 201) / 1000.0; now() < until;) {
                progress();
                usleep(1000);
            }
            req = tag_send_msg(g_sbuf, size, PH_WAKEUP, 0, i, g_where);
            req_wait(&req, g_where);
            continue;
        }
        req = tag_recv(g_rbuf, MAX_MSG, make_tag(PH_WAKEUP, 0, i, 0), &info,
                       g_where);
        asleep_for_this = 0;
        deadline        = now() + 60;
        while (!tag_recv_test(&req, &info, g_where)) {
            if (progress()) {
                continue;
            }
            status = ucp_worker_arm(g_worker);
            if (status == UCS_ERR_BUSY) {
                continue;
            } else if (status != UCS_OK) {
                die("ucp_worker_arm: %s", ucs_status_string(status));
            }
            pfd.fd     = efd;
            pfd.events = POLLIN;
            t   = now();
            ret = poll(&pfd, 1, 5000);
            slept += now() - t;
            if (ret < 0 && errno != EINTR) {
                die("poll on the worker's event fd: %s", strerror(errno));
            }
            if (ret == 0) {
                /* No event for 5 s: was a message there all along? */
                while (progress()) {
                }
                if (tag_recv_test(&req, &info, g_where)) {
                    die("wakeup: message %u (%zu B) had arrived but the "
                        "worker's event fd was not signaled within 5 s",
                        i, size);
                }
                if (now() > deadline) {
                    die("wakeup: message %u (%zu B) did not arrive within "
                        "60 s", i, size);
                }
                continue;
            }
            ++wakeups;
            asleep_for_this = 1;
        }
        woken_msgs += asleep_for_this;
        check_tag_msg("wakeup", PH_WAKEUP, 0, i, g_rbuf, &info, size);
    }
    wall = now() - t0;
    cpu  = cpu_seconds() - cpu0;
    barrier("wakeup end");
    if (opt.is_server) {
        printf("ok: wakeup %u msgs verified, %u wakeups, %u msgs arrived "
               "while asleep; cpu %.2f s of %.2f s wall (%.2f s asleep in "
               "poll)\n", n, wakeups, woken_msgs, cpu, wall, slept);
        printf("wakeup: msgs=%u verified=%u wakeups=%u woken_msgs=%u "
               "cpu_ms=%.0f wall_ms=%.0f\n", n, n, wakeups, woken_msgs,
               cpu * 1e3, wall * 1e3);
    } else {
        printf("ok: wakeup sent %u msgs at random intervals of 0-200 ms\n", n);
    }
}


/* The phases, run in this order */
static void (*const phase_funcs[PH_LAST])(void) = {
    [PH_TAG_BLOCKING] = phase_tag_blocking,
    [PH_TAG_NB]       = phase_tag_nb,
    [PH_TAG_UNEXP]    = phase_tag_unexp,
    [PH_STREAM]       = phase_stream,
    [PH_AM]           = phase_am,
    [PH_RMA]          = phase_rma,
    [PH_LOOP]         = phase_loop,
    [PH_WAKEUP]       = phase_wakeup,
};


/* ------------------------------------------------------- setup/teardown */

static void release_all(void)
{
    if (g_rma_rkey != NULL) {
        ucp_rkey_destroy(g_rma_rkey);
        g_rma_rkey = NULL;
    }
    if (g_rma_rkey_buf != NULL) {
        ucp_rkey_buffer_release(g_rma_rkey_buf);
        g_rma_rkey_buf = NULL;
    }
    if (g_rma_memh != NULL) {
        ucp_mem_unmap(g_ctx, g_rma_memh);
        g_rma_memh = NULL;
    }
    free(g_rma_buf);
    g_rma_buf = NULL;
    if (g_worker != NULL) {
        ucp_worker_destroy(g_worker);
        g_worker = NULL;
    }
    if (g_ctx != NULL) {
        ucp_cleanup(g_ctx);
        g_ctx = NULL;
    }
    free(g_sbuf);
    free(g_rbuf);
    free(g_ebuf);
    g_sbuf = g_rbuf = g_ebuf = NULL;
    if (g_sock >= 0) {
        close(g_sock);
        g_sock = -1;
    }
}

static void ucp_setup(void)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features   = UCP_FEATURE_TAG | UCP_FEATURE_STREAM | UCP_FEATURE_AM |
                      UCP_FEATURE_RMA
    };
    ucp_worker_params_t wparams = {
        .field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE
    };
    ucp_ep_params_t eparams = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
    };
    ucp_address_t *addr;
    size_t addr_len;
    uint64_t len64;
    void *peer_addr;
    ucs_status_t status;

    if (opt.wakeup_n > 0) {
        params.features |= UCP_FEATURE_WAKEUP;
    }
    status = ucp_init(&params, NULL, &g_ctx);
    if (status != UCS_OK) {
        die("ucp_init: %s", ucs_status_string(status));
    }
    status = ucp_worker_create(g_ctx, &wparams, &g_worker);
    if (status != UCS_OK) {
        die("ucp_worker_create: %s", ucs_status_string(status));
    }
    status = ucp_worker_get_address(g_worker, &addr, &addr_len);
    if (status != UCS_OK) {
        die("ucp_worker_get_address: %s", ucs_status_string(status));
    }
    len64 = addr_len;
    sock_write(&len64, sizeof(len64));
    sock_write(addr, addr_len);
    ucp_worker_release_address(g_worker, addr);
    sock_read(&len64, sizeof(len64));
    if (len64 == 0 || len64 > 1048576) {
        die("control socket: bad worker address length %" PRIu64, len64);
    }
    peer_addr = xmalloc(len64);
    sock_read(peer_addr, len64);

    am_register();

    eparams.address = peer_addr;
    if (opt.err_peer) {
        eparams.field_mask    |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                 UCP_EP_PARAM_FIELD_ERR_HANDLER;
        eparams.err_mode       = UCP_ERR_HANDLING_MODE_PEER;
        eparams.err_handler.cb = err_cb;
        eparams.err_handler.arg = NULL;
    }
    status = ucp_ep_create(g_worker, &eparams, &g_ep);
    free(peer_addr);
    if (status != UCS_OK) {
        die("ucp_ep_create%s: %s", opt.err_peer ?
            " (UCP_ERR_HANDLING_MODE_PEER)" : "", ucs_status_string(status));
    }
    if (opt.verbose) {
        ucp_ep_print_info(g_ep, stdout);
    }
}

static void ep_close(void)
{
    ucp_request_param_t param = { .op_attr_mask = 0 };
    void *req;

    where("endpoint close (flush)");
    req = submitted(ucp_ep_close_nbx(g_ep, &param), "ucp_ep_close_nbx");
    g_ep = NULL;
    req_wait(&req, "ucp_ep_close_nbx");
}

static void exchange_config(void)
{
    run_config_t mine = {
        .magic    = CONFIG_MAGIC,
        .phases   = opt.phases,
        .err_peer = opt.err_peer,
        .wakeup_n = opt.wakeup_n,
        .count    = opt.loop_forever ? 0 : opt.count,
        .seed     = opt.is_server ? splitmix64(now() * 1e9 + getpid()) : 0
    }, peer;

    sock_write(&mine, sizeof(mine));
    sock_read(&peer, sizeof(peer));
    if (peer.magic != CONFIG_MAGIC) {
        die("control socket: the peer is not ucp_consumer");
    }
    if (peer.phases != mine.phases || peer.wakeup_n != mine.wakeup_n ||
        peer.count != mine.count || peer.err_peer != mine.err_peer) {
        die("the peer runs other options (phases 0x%x/0x%x, wakeup %u/%u, "
            "count %" PRIu64 "/%" PRIu64 ", err-mode %u/%u): give both sides "
            "the same ones", mine.phases, peer.phases, mine.wakeup_n,
            peer.wakeup_n, mine.count, peer.count, mine.err_peer,
            peer.err_peer);
    }
    g_seed = opt.is_server ? mine.seed : peer.seed;
}

static void usage(FILE *f)
{
    fprintf(f,
"usage: ucp_consumer -l PORT [options]          (server)\n"
"       ucp_consumer HOST -p PORT [options]     (client)\n"
"Both sides must be given the same options.\n"
"  -l PORT            listen on PORT (server)\n"
"  -p PORT            connect to PORT (client; default %d)\n"
"  --phases LIST      comma-separated: tag (= tag-blocking,tag-nb,tag-unexp),\n"
"                     stream, am, rma, loop, wakeup, all (default: tag,stream,\n"
"                     am,rma)\n"
"  --err-mode peer    UCP_ERR_HANDLING_MODE_PEER; on a peer failure print\n"
"                     'peer failure: <status>', close by force, exit 0\n"
"  --wakeup N         the server sleeps on the worker's event fd for each of\n"
"                     N messages (UCP_FEATURE_WAKEUP); alone, only this phase\n"
"  --count N          loop phase: N messages each way (default %" PRIu64 ")\n"
"  --loop             loop phase, forever (until killed)\n"
"  --timeout SEC      give up after SEC seconds (default %u, 0 = never)\n"
"  -v                 print the endpoint's lanes (ucp_ep_print_info)\n"
"  -h                 this help\n"
"Environment: UCX_TLS, UCX_NET_DEVICES, ... as for any UCP program.\n",
            opt.port, opt.count, opt.timeout);
}

static uint32_t parse_phases(const char *list)
{
    char *copy = strdup(list), *tok, *save = NULL;
    uint32_t mask = 0;
    int ph, found;

    for (tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        found = 0;
        if (!strcmp(tok, "tag")) {
            mask |= (1u << PH_TAG_BLOCKING) | (1u << PH_TAG_NB) |
                    (1u << PH_TAG_UNEXP);
            found = 1;
        } else if (!strcmp(tok, "all")) {
            mask |= DEFAULT_PHASES;
            found = 1;
        }
        for (ph = 1; ph < PH_LAST && !found; ++ph) {
            if (phase_names[ph] != NULL && !strcmp(tok, phase_names[ph])) {
                mask |= 1u << ph;
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "ucp_consumer: unknown phase '%s'\n", tok);
            usage(stderr);
            exit(2);
        }
    }
    free(copy);
    return mask;
}

int main(int argc, char **argv)
{
    static const struct option long_opts[] = {
        { "phases",   required_argument, NULL, 'P' },
        { "err-mode", required_argument, NULL, 'E' },
        { "wakeup",   required_argument, NULL, 'W' },
        { "count",    required_argument, NULL, 'C' },
        { "loop",     no_argument,       NULL, 'L' },
        { "timeout",  required_argument, NULL, 'T' },
        { "help",     no_argument,       NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    int c, ph, phases_given = 0;
    double t_start;

    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((c = getopt_long(argc, argv, "l:p:vh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'l': opt.is_server = 1; opt.port = atoi(optarg); break;
        case 'p': opt.port = atoi(optarg); break;
        case 'v': opt.verbose = 1; break;
        case 'P': opt.phases = parse_phases(optarg); phases_given = 1; break;
        case 'E':
            if (!strcmp(optarg, "peer")) {
                opt.err_peer = 1;
            } else if (!strcmp(optarg, "none")) {
                opt.err_peer = 0;
            } else {
                fprintf(stderr, "ucp_consumer: --err-mode takes peer or none\n");
                return 2;
            }
            break;
        case 'W': opt.wakeup_n = strtoul(optarg, NULL, 0); break;
        case 'C': opt.count = strtoull(optarg, NULL, 0); break;
        case 'L': opt.loop_forever = 1; break;
        case 'T': opt.timeout = strtoul(optarg, NULL, 0); break;
        case 'h': usage(stdout); return 0;
        default:  usage(stderr); return 2;
        }
    }
    if (!opt.is_server) {
        if (optind != argc - 1) {
            usage(stderr);
            return 2;
        }
        opt.host = argv[optind];
    } else if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (opt.port <= 0 || opt.port > 65535) {
        fprintf(stderr, "ucp_consumer: bad port\n");
        return 2;
    }
    if (!phases_given) {
        opt.phases = DEFAULT_PHASES;
        if (opt.wakeup_n > 0 || opt.loop_forever) {
            opt.phases = 0;
        }
    }
    if (opt.wakeup_n > 0) {
        opt.phases |= 1u << PH_WAKEUP;
    } else if (opt.phases & (1u << PH_WAKEUP)) {
        opt.wakeup_n = 20;
    }
    if (opt.loop_forever) {
        opt.phases |= 1u << PH_LOOP;
    }
    if (opt.phases & (1u << PH_LOOP) && opt.count == 0) {
        opt.loop_forever = 1;
    }

    g_role = opt.is_server ? "server" : "client";
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_alarm);
    signal(SIGTERM, on_alarm);
    alarm(opt.timeout);
    t_start = now();

    g_sbuf = xmalloc(MAX_MSG);
    g_rbuf = xmalloc(MAX_MSG);
    g_ebuf = xmalloc(MAX_MSG);

    where("control socket setup");
    sock_setup();
    exchange_config();
    where("UCP setup");
    ucp_setup();
    barrier("setup");
    printf("connected as %s (err-mode %s, phases 0x%x)\n", g_role,
           opt.err_peer ? "peer" : "none", opt.phases);

    for (ph = 1; ph < PH_LAST; ++ph) {
        if ((opt.phases & (1u << ph)) && phase_funcs[ph] != NULL) {
            phase_funcs[ph]();
        }
    }

    barrier("teardown");
    ep_close();
    barrier("closed");
    release_all();
    alarm(0);
    printf("ok: %s done in %.1f s\n", g_role, now() - t_start);
    return 0;
}
