/* HTTP/1.1 load generator for benchmarks.http_load: one thread, epoll, keep-alive connections each with
 * one request in flight, the same request every time.
 *
 *   httpload HOST PORT CONNECTIONS TOTAL METHOD PATH [BODY [BEARER]]
 *
 * Sends TOTAL requests over CONNECTIONS connections and reads every response (Content-Length framed).
 * With ID_FIELD set in the environment, prints the value of that JSON string field of every response
 * body on stdout, one per line. The last line on stderr is a JSON summary:
 * {"responses":N,"ok":N,"seconds":S} where ok counts the 2xx responses and seconds spans the first send
 * to the last response. Exit status 0 when every response arrived, 1 otherwise.
 *
 * Compiled on demand by benchmarks.http_load: a Python client spends more CPU per request than the
 * servers it measures, and would set the pace instead of them.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (256 * 1024)

typedef struct {
    int fd;
    size_t used;     /* bytes of the response being read */
    size_t sent;     /* bytes of the current request already written */
    int busy;        /* a request is in flight */
    char buf[BUF_SIZE];
} conn_t;

static char *request;
static size_t request_len;
static const char *id_field;
static long total, issued, answered, ok_count;
static char *out;
static size_t out_used, out_cap;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void emit_id(const char *body, size_t len) {
    char key[128];
    int klen = snprintf(key, sizeof key, "\"%s\":\"", id_field);
    const char *p = memmem(body, len, key, (size_t)klen);
    if (p == NULL)
        return;
    p += klen;
    const char *end = memchr(p, '"', len - (size_t)(p - body));
    if (end == NULL)
        return;
    size_t n = (size_t)(end - p) + 1;
    if (out_used + n > out_cap) {
        out_cap = (out_cap + n) * 2;
        out = realloc(out, out_cap);
        if (out == NULL)
            die("realloc");
    }
    memcpy(out + out_used, p, n - 1);
    out[out_used + n - 1] = '\n';
    out_used += n;
}

/* Write what is left of the current request; 0 when it is all out (or must wait for EPOLLOUT). */
static int send_request(conn_t *c) {
    while (c->sent < request_len) {
        ssize_t n = write(c->fd, request + c->sent, request_len - c->sent);
        if (n < 0) {
            if (errno == EAGAIN)
                return 0;
            die("write");
        }
        c->sent += (size_t)n;
    }
    return 0;
}

static void start_next(conn_t *c) {
    if (issued >= total) {
        c->busy = 0;
        return;
    }
    issued++;
    c->busy = 1;
    c->sent = 0;
    send_request(c);
}

/* Consume complete responses from the buffer; returns -1 on a malformed response. */
static int parse(conn_t *c) {
    for (;;) {
        char *head_end = memmem(c->buf, c->used, "\r\n\r\n", 4);
        if (head_end == NULL)
            return 0;
        size_t head_len = (size_t)(head_end - c->buf) + 4;
        if (c->used < 12)
            return 0;
        int status = atoi(c->buf + 9);
        long body_len = -1;
        for (char *line = memchr(c->buf, '\n', head_len); line && line < head_end;
             line = memchr(line + 1, '\n', (size_t)(head_end - line))) {
            if (strncasecmp(line + 1, "content-length:", 15) == 0) {
                body_len = strtol(line + 16, NULL, 10);
                break;
            }
        }
        if (body_len < 0) {
            fprintf(stderr, "response without Content-Length\n");
            return -1;
        }
        size_t whole = head_len + (size_t)body_len;
        if (whole > BUF_SIZE) {
            fprintf(stderr, "response too large\n");
            return -1;
        }
        if (c->used < whole)
            return 0;
        answered++;
        if (status >= 200 && status < 300)
            ok_count++;
        if (id_field != NULL)
            emit_id(c->buf + head_len, (size_t)body_len);
        memmove(c->buf, c->buf + whole, c->used - whole);
        c->used -= whole;
        start_next(c);
    }
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: httpload HOST PORT CONNECTIONS TOTAL METHOD PATH [BODY [BEARER]]\n");
        return 2;
    }
    const char *host = argv[1], *port = argv[2], *method = argv[5], *path = argv[6];
    int nconn = atoi(argv[3]);
    total = atol(argv[4]);
    const char *body = argc > 7 ? argv[7] : "";
    const char *bearer = argc > 8 ? argv[8] : NULL;
    id_field = getenv("ID_FIELD");
    if (nconn < 1 || total < 0)
        return 2;

    size_t cap = strlen(path) + strlen(body) + strlen(host) + (bearer ? strlen(bearer) : 0) + 256;
    request = malloc(cap);
    int head = snprintf(request, cap, "%s %s HTTP/1.1\r\nHost: %s:%s\r\n", method, path, host, port);
    if (bearer != NULL)
        head += snprintf(request + head, cap - (size_t)head, "Authorization: Bearer %s\r\n", bearer);
    if (*body)
        head += snprintf(request + head, cap - (size_t)head,
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n", strlen(body));
    head += snprintf(request + head, cap - (size_t)head, "\r\n%s", body);
    request_len = (size_t)head;

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        die("getaddrinfo");
    int ep = epoll_create1(0);
    conn_t *conns = calloc((size_t)nconn, sizeof(conn_t));
    if (conns == NULL)
        die("calloc");
    for (int i = 0; i < nconn; i++) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0)
            die("socket");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
            die("connect");
        conns[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &conns[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    freeaddrinfo(ai);

    double started = now_s();
    for (int i = 0; i < nconn; i++)
        start_next(&conns[i]);
    struct epoll_event events[256];
    int failed = 0;
    while (answered < total && !failed) {
        int n = epoll_wait(ep, events, 256, 30000);
        if (n == 0) {
            fprintf(stderr, "no response for 30 s\n");
            failed = 1;
            break;
        }
        for (int i = 0; i < n && !failed; i++) {
            conn_t *c = events[i].data.ptr;
            if (events[i].events & EPOLLOUT && c->busy)
                send_request(c);
            if (!(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            for (;;) {
                ssize_t r = read(c->fd, c->buf + c->used, BUF_SIZE - c->used);
                if (r < 0) {
                    if (errno == EAGAIN)
                        break;
                    perror("read");
                    failed = 1;
                    break;
                }
                if (r == 0) {
                    if (c->busy) {
                        fprintf(stderr, "server closed a connection with a request in flight\n");
                        failed = 1;
                    }
                    break;
                }
                c->used += (size_t)r;
                if (parse(c) < 0) {
                    failed = 1;
                    break;
                }
            }
        }
    }
    double seconds = now_s() - started;
    if (out_used)
        fwrite(out, 1, out_used, stdout);
    fflush(stdout);
    fprintf(stderr, "{\"responses\":%ld,\"ok\":%ld,\"seconds\":%.6f}\n", answered, ok_count, seconds);
    return answered == total ? 0 : 1;
}
