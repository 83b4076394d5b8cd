/* Load generator for benchmarks.tcpload: MessagePack frames over TCP, one thread, epoll.
 *
 *   tcpload HOST PORT MODE CONNECTIONS WINDOW TEMPLATE[:COUNT]...
 *
 * A TEMPLATE is a file holding one command packed by the caller, whose last field is `reqId` with the
 * 10-digit placeholder "0000000000": every copy sent gets a number of its own there, and replies are
 * matched by it (a server may answer out of order).
 *
 *   push    sends COUNT copies of each TEMPLATE, in order, WINDOW in flight per connection; prints the ids
 *           of every reply (its "ids" list, or its "id").
 *   pullb   one consumer per connection: the TEMPLATE is a PULLB; the ids of each batch go back in one
 *           ACKB written together with the next PULLB, until a PULLB answers no job. Prints the pulled ids.
 *   worker  WINDOW loops per connection: the TEMPLATE is a PULL; each job is acknowledged with
 *           ACK(id, token) before its loop pulls again, until a PULL answers no job. Prints the pulled ids.
 *
 * With AUTH_FILE set in the environment, that packed Auth command is sent first on each connection (before
 * the clock starts). Ids go to stdout, one per line, after the run. The last line on stderr is a JSON
 * summary: {"replies":N,"errors":N,"seconds":S}, seconds from the first send to the last reply; the first
 * refusal's text, if any, is on the line before it. Exit status 0 when every command was answered ok.
 *
 * Compiled on demand by benchmarks.tcpload: a Python client spends more CPU per job than the servers it
 * measures, and would set the pace instead of them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQID_DIGITS 10
#define MAX_IDS 65536

enum { KIND_SEND = 1, KIND_PULL = 2, KIND_ACK = 3 };

typedef struct {
    char *data;
    size_t used, cap;
} buf_t;

typedef struct {
    char *frame;       /* length prefix and payload */
    size_t len;
    size_t reqid_at;   /* offset of the placeholder's digits */
    long count;
} template_t;

typedef struct {
    int fd;
    buf_t in, out;
    long in_flight;
    long lanes_done;
    int done;
} conn_t;

/* What one reply says; strings point into the connection's input buffer. */
typedef struct {
    int ok;
    long reqid;
    const char *err;
    size_t err_len;
    const char *token;
    size_t token_len;
    int token_is_str;
    int has_job;
    size_t nids;
    const char *ids[MAX_IDS];
    size_t id_lens[MAX_IDS];
} reply_t;

static template_t *templates;
static int ntemplates, next_template;
static long serial, replies, errors;
static int mode_push, mode_pullb, mode_worker;
static long window;
static buf_t ids_out;
static char first_error[300];
static reply_t reply;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void reserve(buf_t *b, size_t more) {
    if (b->used + more <= b->cap)
        return;
    b->cap = (b->used + more) * 2;
    b->data = realloc(b->data, b->cap);
    if (b->data == NULL)
        die("realloc");
}

static void put(buf_t *b, const void *p, size_t n) {
    reserve(b, n);
    memcpy(b->data + b->used, p, n);
    b->used += n;
}

static void put_str(buf_t *b, const char *s, size_t n) {
    uint8_t head[3];
    if (n < 32) {
        head[0] = (uint8_t)(0xa0 | n);
        put(b, head, 1);
    } else if (n < 256) {
        head[0] = 0xd9, head[1] = (uint8_t)n;
        put(b, head, 2);
    } else {
        head[0] = 0xda, head[1] = (uint8_t)(n >> 8), head[2] = (uint8_t)n;
        put(b, head, 3);
    }
    put(b, s, n);
}

/* A reqId: the kind of command, then a number (a lane, or a serial). */
static void reqid_digits(char digits[REQID_DIGITS + 2], int kind, long n) {
    snprintf(digits, REQID_DIGITS + 2, "%01d%09ld", kind % 10, n % 1000000000L);
}

static void put_reqid(buf_t *b, int kind, long n) {
    char digits[REQID_DIGITS + 2];
    reqid_digits(digits, kind, n);
    put_str(b, "reqId", 5);
    put_str(b, digits, REQID_DIGITS);
}

/* Frame header: reserve 4 bytes, return where they are; end_frame fills them with the payload length. */
static size_t begin_frame(buf_t *b) {
    reserve(b, 4);
    b->used += 4;
    return b->used - 4;
}

static void end_frame(buf_t *b, size_t at) {
    uint32_t len = (uint32_t)(b->used - at - 4);
    uint8_t *p = (uint8_t *)b->data + at;
    p[0] = (uint8_t)(len >> 24), p[1] = (uint8_t)(len >> 16), p[2] = (uint8_t)(len >> 8), p[3] = (uint8_t)len;
}

static void put_template(buf_t *b, const template_t *t, int kind, long n) {
    reserve(b, t->len);
    char *at = b->data + b->used;
    memcpy(at, t->frame, t->len);
    char digits[REQID_DIGITS + 2];
    reqid_digits(digits, kind, n);
    memcpy(at + t->reqid_at, digits, REQID_DIGITS);
    b->used += t->len;
}

static void load_template(template_t *t, const char *spec) {
    char path[4096];
    const char *colon = strrchr(spec, ':');
    size_t plen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (plen >= sizeof path)
        die("template path");
    memcpy(path, spec, plen);
    path[plen] = 0;
    t->count = colon ? atol(colon + 1) : 1;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die(path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    t->len = (size_t)size + 4;
    t->frame = malloc(t->len);
    if (t->frame == NULL || fread(t->frame + 4, 1, (size_t)size, f) != (size_t)size)
        die("read template");
    fclose(f);
    buf_t b = {t->frame, t->len, t->len};
    end_frame(&b, 0);
    static const char mark[] = "\xa5reqId\xaa" "0000000000";
    char *found = memmem(t->frame + 4, (size_t)size, mark, sizeof mark - 1);
    if (found == NULL) {
        fprintf(stderr, "%s: the last field must be reqId \"0000000000\"\n", path);
        exit(2);
    }
    t->reqid_at = (size_t)(found - t->frame) + 7;
}

/* -- reading replies ---------------------------------------------------------------------------------- */

#include "msgpack_cursor.h"

static int key_is(const char *k, size_t n, const char *name) { return strlen(name) == n && memcmp(k, name, n) == 0; }

static int add_id(const char *s, size_t n) {
    if (reply.nids >= MAX_IDS)
        return -1;
    reply.ids[reply.nids] = s;
    reply.id_lens[reply.nids++] = n;
    return 0;
}

/* The "id" of a job map at the cursor. */
static int read_job(cursor_t *c) {
    long fields = read_len(c, 'm');
    if (fields < 0)
        return -1;
    for (long i = 0; i < fields; i++) {
        const char *k, *s;
        size_t kn, n;
        if (!read_str(c, &k, &kn))
            return -1;
        if (key_is(k, kn, "id") && read_str(c, &s, &n)) {
            if (add_id(s, n) < 0)
                return -1;
        } else if (skip(c) < 0) {
            return -1;
        }
    }
    return 0;
}

/* One of ours (ten digits), or -1. */
static long read_reqid(const char *s, size_t n) {
    if (n != REQID_DIGITS)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static int read_reply(const uint8_t *p, size_t len) {
    cursor_t c = {p, p + len};
    memset(&reply, 0, offsetof(reply_t, ids));
    reply.reqid = -1;
    long fields = read_len(&c, 'm');
    if (fields < 0)
        return -1;
    for (long i = 0; i < fields; i++) {
        const char *k, *s;
        size_t kn, n;
        if (!read_str(&c, &k, &kn))
            return -1;
        if (key_is(k, kn, "ok") && need(&c, 1) && (*c.p == 0xc2 || *c.p == 0xc3)) {
            reply.ok = *c.p++ == 0xc3;
        } else if (key_is(k, kn, "reqId") && read_str(&c, &s, &n)) {
            reply.reqid = read_reqid(s, n);
        } else if (key_is(k, kn, "error") && read_str(&c, &s, &n)) {
            reply.err = s, reply.err_len = n;
        } else if (key_is(k, kn, "token") && read_str(&c, &s, &n)) {
            reply.token = s, reply.token_len = n, reply.token_is_str = 1;
        } else if ((key_is(k, kn, "id")) && read_str(&c, &s, &n)) {
            if (add_id(s, n) < 0)
                return -1;
        } else if (key_is(k, kn, "ids") || key_is(k, kn, "jobs")) {
            long items = read_len(&c, 'a');
            if (items < 0)
                return -1;
            for (long j = 0; j < items; j++) {
                int got = key_is(k, kn, "ids") ? (read_str(&c, &s, &n) ? add_id(s, n) : -1) : read_job(&c);
                if (got < 0)
                    return -1;
            }
        } else if (key_is(k, kn, "job") && need(&c, 1) && *c.p != 0xc0) {
            reply.has_job = 1;
            if (read_job(&c) < 0)
                return -1;
        } else if (skip(&c) < 0) {
            return -1;
        }
    }
    return 0;
}

/* -- the workloads ------------------------------------------------------------------------------------ */

static void emit_ids(void) {
    for (size_t i = 0; i < reply.nids; i++) {
        put(&ids_out, reply.ids[i], reply.id_lens[i]);
        put(&ids_out, "\n", 1);
    }
}

static void refused(void) {
    errors++;
    if (!first_error[0])
        snprintf(first_error, sizeof first_error, "%.*s", (int)(reply.err_len < 250 ? reply.err_len : 250),
                 reply.err ? reply.err : "a reply without ok: true");
}

static void send_more(conn_t *c) {
    while (c->in_flight < window && next_template < ntemplates) {
        template_t *t = &templates[next_template];
        put_template(&c->out, t, KIND_SEND, serial++);
        c->in_flight++;
        if (--t->count <= 0)
            next_template++;
    }
    if (c->in_flight == 0)
        c->done = 1;
}

static void send_ackb_and_pull(conn_t *c) {
    size_t at = begin_frame(&c->out);
    static const uint8_t head[] = {0x83, 0xa3, 'c', 'm', 'd', 0xa4, 'A', 'C', 'K', 'B', 0xa3, 'i', 'd', 's'};
    put(&c->out, head, sizeof head);
    uint8_t arr[5];
    size_t n = reply.nids;
    if (n < 16)
        arr[0] = (uint8_t)(0x90 | n), put(&c->out, arr, 1);
    else if (n < 65536)
        arr[0] = 0xdc, arr[1] = (uint8_t)(n >> 8), arr[2] = (uint8_t)n, put(&c->out, arr, 3);
    else
        arr[0] = 0xdd, arr[1] = (uint8_t)(n >> 24), arr[2] = (uint8_t)(n >> 16), arr[3] = (uint8_t)(n >> 8),
        arr[4] = (uint8_t)n, put(&c->out, arr, 5);
    for (size_t i = 0; i < n; i++)
        put_str(&c->out, reply.ids[i], reply.id_lens[i]);
    put_reqid(&c->out, KIND_ACK, serial++);
    end_frame(&c->out, at);
    put_template(&c->out, &templates[0], KIND_PULL, serial++);
    c->in_flight += 2;
}

static void send_ack(conn_t *c, long lane) {
    size_t at = begin_frame(&c->out);
    static const uint8_t head[] = {0x84, 0xa3, 'c', 'm', 'd', 0xa3, 'A', 'C', 'K', 0xa2, 'i', 'd'};
    put(&c->out, head, sizeof head);
    put_str(&c->out, reply.ids[0], reply.id_lens[0]);
    put_str(&c->out, "token", 5);
    if (reply.token_is_str)
        put_str(&c->out, reply.token, reply.token_len);
    else
        put(&c->out, "\xc0", 1);
    put_reqid(&c->out, KIND_ACK, lane);
    end_frame(&c->out, at);
}

static void on_reply(conn_t *c) {
    replies++;
    c->in_flight--;
    int kind = (int)(reply.reqid / 1000000000L);
    long lane = reply.reqid % 1000000000L;
    if (!reply.ok) {
        refused();
        /* A refused pull or ack ends its loop: the run reports the refusal instead of spinning on it. */
        if (mode_worker)
            c->lanes_done++;
        if (mode_pullb && kind == KIND_PULL)
            c->lanes_done = 1;
    } else if (mode_push) {
        emit_ids();
    } else if (mode_pullb && kind == KIND_PULL) {
        if (reply.nids == 0)
            c->lanes_done = 1;
        else
            emit_ids(), send_ackb_and_pull(c);
    } else if (mode_worker && kind == KIND_PULL) {
        if (!reply.has_job || reply.nids != 1) {
            c->lanes_done++;
        } else {
            emit_ids();
            send_ack(c, lane);
            c->in_flight++;
        }
    } else if (mode_worker && kind == KIND_ACK) {
        put_template(&c->out, &templates[0], KIND_PULL, lane);
        c->in_flight++;
    }
    if (mode_push)
        send_more(c);
    else if (c->in_flight == 0 && c->lanes_done >= (mode_worker ? window : 1))
        c->done = 1;
}

/* Consume the complete frames in the input buffer; -1 on a malformed one. */
static int parse(conn_t *c) {
    size_t at = 0;
    while (c->in.used - at >= 4) {
        size_t len = (size_t)be((const uint8_t *)c->in.data + at, 4);
        if (c->in.used - at - 4 < len) {
            reserve(&c->in, len + 4);
            break;
        }
        if (read_reply((const uint8_t *)c->in.data + at + 4, len) < 0) {
            fprintf(stderr, "a reply that could not be read\n");
            return -1;
        }
        if (reply.reqid >= 0)  /* events and other unsolicited frames carry no reqId */
            on_reply(c);
        at += 4 + len;
    }
    memmove(c->in.data, c->in.data + at, c->in.used - at);
    c->in.used -= at;
    return 0;
}

static int flush(conn_t *c) {
    size_t sent = 0;
    while (sent < c->out.used) {
        ssize_t n = write(c->fd, c->out.data + sent, c->out.used - sent);
        if (n < 0) {
            if (errno == EAGAIN)
                break;
            perror("write");
            return -1;
        }
        sent += (size_t)n;
    }
    memmove(c->out.data, c->out.data + sent, c->out.used - sent);
    c->out.used -= sent;
    return 0;
}

static void authenticate(int fd, const template_t *auth) {
    if (write(fd, auth->frame, auth->len) != (ssize_t)auth->len)
        die("write auth");
    uint8_t head[4];
    if (recv(fd, head, 4, MSG_WAITALL) != 4)
        die("read auth reply");
    size_t len = (size_t)be(head, 4);
    uint8_t *body = malloc(len);
    if (body == NULL || recv(fd, body, len, MSG_WAITALL) != (ssize_t)len)
        die("read auth reply");
    if (read_reply(body, len) < 0 || !reply.ok) {
        fprintf(stderr, "Auth refused\n");
        exit(2);
    }
    free(body);
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: tcpload HOST PORT push|pullb|worker CONNECTIONS WINDOW TEMPLATE[:COUNT]...\n");
        return 2;
    }
    const char *host = argv[1], *port = argv[2], *mode = argv[3];
    int nconn = atoi(argv[4]);
    window = atol(argv[5]);
    mode_push = strcmp(mode, "push") == 0, mode_pullb = strcmp(mode, "pullb") == 0;
    mode_worker = strcmp(mode, "worker") == 0;
    if (nconn < 1 || window < 1 || !(mode_push || mode_pullb || mode_worker))
        return 2;
    ntemplates = argc - 6;
    templates = calloc((size_t)ntemplates, sizeof(template_t));
    for (int i = 0; i < ntemplates; i++)
        load_template(&templates[i], argv[6 + i]);
    template_t auth = {0};
    const char *auth_file = getenv("AUTH_FILE");
    if (auth_file != NULL && *auth_file) {
        load_template(&auth, auth_file);
    }

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        die("getaddrinfo");
    int ep = epoll_create1(0);
    conn_t *conns = calloc((size_t)nconn, sizeof(conn_t));
    if (conns == NULL)
        die("calloc");
    for (int i = 0; i < nconn; i++) {
        int fd = socket(ai->ai_family, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
            die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (auth.frame != NULL)
            authenticate(fd, &auth);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        conns[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &conns[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    freeaddrinfo(ai);

    double started = now_s();
    int open = nconn;
    for (int i = 0; i < nconn; i++) {
        conn_t *c = &conns[i];
        if (mode_push)
            send_more(c);
        for (long lane = 0; !mode_push && lane < (mode_worker ? window : 1); lane++) {
            put_template(&c->out, &templates[0], KIND_PULL, mode_worker ? (long)i * window + lane : serial++);
            c->in_flight++;
        }
        if (c->done)
            open--;
        else if (flush(c) < 0)
            return 2;
    }
    struct epoll_event events[256];
    int failed = 0;
    while (open > 0 && !failed) {
        int n = epoll_wait(ep, events, 256, 30000);
        if (n == 0) {
            fprintf(stderr, "no reply for 30 s\n");
            failed = 1;
        }
        for (int i = 0; i < n && !failed; i++) {
            conn_t *c = events[i].data.ptr;
            if (c->done)
                continue;
            for (;;) {
                reserve(&c->in, 65536);
                ssize_t r = read(c->fd, c->in.data + c->in.used, c->in.cap - c->in.used);
                if (r < 0) {
                    if (errno != EAGAIN)
                        perror("read"), failed = 1;
                    break;
                }
                if (r == 0) {
                    fprintf(stderr, "the server closed a connection with commands in flight\n");
                    failed = 1;
                    break;
                }
                c->in.used += (size_t)r;
                if (parse(c) < 0) {
                    failed = 1;
                    break;
                }
            }
            if (!failed && flush(c) < 0)
                failed = 1;
            if (c->done)
                open--;
        }
    }
    double seconds = now_s() - started;
    fwrite(ids_out.data, 1, ids_out.used, stdout);
    fflush(stdout);
    if (first_error[0])
        fprintf(stderr, "%s\n", first_error);
    fprintf(stderr, "{\"replies\":%ld,\"errors\":%ld,\"seconds\":%.6f}\n", replies, errors, seconds);
    return failed || errors ? 1 : 0;
}
