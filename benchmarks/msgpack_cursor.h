/* Reading MessagePack values in place, for benchmarks/tcpload.c: a cursor over one frame, the strings and
 * the headers of maps and arrays the load generator looks at, and skipping any other value. Nothing is
 * copied; every read checks the frame's bounds. */
#ifndef BENCHMARKS_MSGPACK_CURSOR_H
#define BENCHMARKS_MSGPACK_CURSOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p, *end;
} cursor_t;

static int need(cursor_t *c, size_t n) { return (size_t)(c->end - c->p) >= n; }

static uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* A string at the cursor: 1 and its bytes, or 0 (cursor unmoved) when the value is not a string. */
static int read_str(cursor_t *c, const char **s, size_t *n) {
    if (!need(c, 1))
        return 0;
    uint8_t t = *c->p;
    size_t head, len;
    if ((t & 0xe0) == 0xa0)
        head = 1, len = t & 0x1f;
    else if (t == 0xd9 && need(c, 2))
        head = 2, len = c->p[1];
    else if (t == 0xda && need(c, 3))
        head = 3, len = (size_t)be(c->p + 1, 2);
    else if (t == 0xdb && need(c, 5))
        head = 5, len = (size_t)be(c->p + 1, 4);
    else
        return 0;
    if (!need(c, head + len))
        return 0;
    *s = (const char *)c->p + head;
    *n = len;
    c->p += head + len;
    return 1;
}

/* Length of a map or array header at the cursor, -1 when it is neither of `kind` ('m' or 'a'). */
static long read_len(cursor_t *c, char kind) {
    if (!need(c, 1))
        return -1;
    uint8_t t = *c->p;
    uint8_t fix = kind == 'm' ? 0x80 : 0x90, w16 = kind == 'm' ? 0xde : 0xdc, w32 = kind == 'm' ? 0xdf : 0xdd;
    if ((t & 0xf0) == fix) {
        c->p += 1;
        return t & 0x0f;
    }
    if (t == w16 && need(c, 3)) {
        c->p += 3;
        return (long)be(c->p - 2, 2);
    }
    if (t == w32 && need(c, 5)) {
        c->p += 5;
        return (long)be(c->p - 4, 4);
    }
    return -1;
}

static int skip(cursor_t *c);

static int skip_n(cursor_t *c, long n) {
    while (n-- > 0)
        if (skip(c) < 0)
            return -1;
    return 0;
}

static int advance(cursor_t *c, size_t n) {
    if (!need(c, n))
        return -1;
    c->p += n;
    return 0;
}

static int skip(cursor_t *c) {
    if (!need(c, 1))
        return -1;
    uint8_t t = *c->p;
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3)
        return advance(c, 1);
    if ((t & 0xe0) == 0xa0 || t == 0xd9 || t == 0xda || t == 0xdb) {
        const char *s;
        size_t n;
        return read_str(c, &s, &n) ? 0 : -1;
    }
    if ((t & 0xf0) == 0x80 || t == 0xde || t == 0xdf) {
        long n = read_len(c, 'm');
        return n < 0 ? -1 : skip_n(c, 2 * n);
    }
    if ((t & 0xf0) == 0x90 || t == 0xdc || t == 0xdd) {
        long n = read_len(c, 'a');
        return n < 0 ? -1 : skip_n(c, n);
    }
    switch (t) {
    case 0xcc: case 0xd0: return advance(c, 2);
    case 0xcd: case 0xd1: return advance(c, 3);
    case 0xca: case 0xce: case 0xd2: return advance(c, 5);
    case 0xcb: case 0xcf: case 0xd3: return advance(c, 9);
    case 0xd4: return advance(c, 3);
    case 0xd5: return advance(c, 4);
    case 0xd6: return advance(c, 6);
    case 0xd7: return advance(c, 10);
    case 0xd8: return advance(c, 18);
    case 0xc4: case 0xc7: return need(c, 2) ? advance(c, 2 + c->p[1] + (t == 0xc7)) : -1;
    case 0xc5: case 0xc8: return need(c, 3) ? advance(c, 3 + (size_t)be(c->p + 1, 2) + (t == 0xc8)) : -1;
    case 0xc6: case 0xc9: return need(c, 5) ? advance(c, 5 + (size_t)be(c->p + 1, 4) + (t == 0xc9)) : -1;
    }
    return -1;
}

#endif
