// See presence_tap.h. `recv` and `SSL_read` defined here take precedence over libc's and
// libssl's for libwebsockets (the executable's symbols come first in the dynamic lookup); each
// calls the real one and, for a registered socket, follows what it returned.
#define _GNU_SOURCE
#include "presence_tap.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

enum mode { UNWATCHED = 0, HTTP_HEAD, WEBSOCKET };
enum stage { FIRST_BYTE = 0, LENGTH_BYTE, EXTENDED_LENGTH, MASK_KEY, PAYLOAD };

typedef struct {
    uint8_t mode;
    uint8_t unmasked;
    uint8_t stage;
    uint8_t need;          // bytes still to read in this stage
    uint8_t matched;       // HTTP_HEAD: bytes of "\r\n\r\n" matched so far
    uint8_t head_ended;    // HTTP_HEAD: the head ended; `tail` holds what followed in that read
    uint64_t length;       // payload bytes left (or the extended length being read)
    uint8_t *tail;
    size_t tail_length;
} tap_t;

static tap_t *taps;
static int tap_count;

static tap_t *tap_for(int fd) {
    return fd >= 0 && fd < tap_count ? &taps[fd] : NULL;
}

static void release_tail(tap_t *t) {
    free(t->tail);
    t->tail = NULL;
    t->tail_length = 0;
}

static void follow_frames(tap_t *t, const uint8_t *p, size_t n) {
    while (n && !t->unmasked) {
        switch (t->stage) {
        case FIRST_BYTE:
            p++, n--;
            t->stage = LENGTH_BYTE;
            break;
        case LENGTH_BYTE: {
            uint8_t byte = *p++;
            n--;
            if (!(byte & 0x80)) {
                t->unmasked = 1;
                return;
            }
            uint8_t length = byte & 0x7F;
            t->length = 0;
            if (length >= 126) {
                t->stage = EXTENDED_LENGTH;
                t->need = length == 126 ? 2 : 8;
            } else {
                t->length = length;
                t->stage = MASK_KEY;
                t->need = 4;
            }
            break;
        }
        case EXTENDED_LENGTH:
            t->length = (t->length << 8) | *p++;
            n--;
            if (--t->need == 0) {
                t->stage = MASK_KEY;
                t->need = 4;
            }
            break;
        case MASK_KEY: {
            size_t skip = n < t->need ? n : t->need;
            p += skip, n -= skip;
            t->need -= (uint8_t)skip;
            if (t->need == 0) t->stage = t->length ? PAYLOAD : FIRST_BYTE;
            break;
        }
        case PAYLOAD: {
            size_t skip = (uint64_t)n < t->length ? n : (size_t)t->length;
            p += skip, n -= skip;
            t->length -= skip;
            if (t->length == 0) t->stage = FIRST_BYTE;
            break;
        }
        }
    }
}

/// Before the upgrade: find the end of the first request's head; keep what follows it in the
/// same read (frames a client sent without waiting for the 101).
static void follow_head(tap_t *t, const uint8_t *p, size_t n) {
    static const uint8_t end[4] = {'\r', '\n', '\r', '\n'};
    if (t->head_ended) return;
    for (size_t i = 0; i < n; i++) {
        t->matched = p[i] == end[t->matched] ? t->matched + 1 : (p[i] == '\r' ? 1 : 0);
        if (t->matched == 4) {
            t->head_ended = 1;
            size_t rest = n - i - 1;
            if (rest && (t->tail = malloc(rest))) {
                memcpy(t->tail, p + i + 1, rest);
                t->tail_length = rest;
            }
            return;
        }
    }
}

void presence_tap_feed(int fd, const void *bytes, size_t length) {
    tap_t *t = tap_for(fd);
    if (!t || !length) return;
    if (t->mode == WEBSOCKET) follow_frames(t, bytes, length);
    else if (t->mode == HTTP_HEAD) follow_head(t, bytes, length);
}

void presence_tap_accepted(int fd) {
    if (!taps) {
        // One slot per possible descriptor, allocated once (untouched pages cost nothing), so the
        // table never moves under a read on another thread.
        struct rlimit limit;
        rlim_t count = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
        if (count > (1 << 20)) count = 1 << 20;
        taps = calloc((size_t)count, sizeof(tap_t));
        if (!taps) return;
        tap_count = (int)count;
    }
    tap_t *t = tap_for(fd);
    if (!t) return;
    release_tail(t);
    memset(t, 0, sizeof(*t));
    t->mode = HTTP_HEAD;
}

void presence_tap_established(int fd) {
    tap_t *t = tap_for(fd);
    if (!t || t->mode != HTTP_HEAD) return;
    t->mode = WEBSOCKET;
    t->stage = FIRST_BYTE;
    if (t->tail) follow_frames(t, t->tail, t->tail_length);
    release_tail(t);
}

void presence_tap_forget(int fd) {
    tap_t *t = tap_for(fd);
    if (!t) return;
    release_tail(t);
    memset(t, 0, sizeof(*t));
}

int presence_tap_unmasked(int fd) {
    tap_t *t = tap_for(fd);
    return t && t->unmasked;
}

typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef int (*ssl_read_fn)(void *, void *, int);
typedef int (*ssl_get_fd_fn)(const void *);

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    static recv_fn real;
    if (!real) real = (recv_fn)dlsym(RTLD_NEXT, "recv");
    ssize_t n = real(fd, buffer, length, flags);
    if (n > 0 && !(flags & MSG_PEEK) && tap_for(fd) && taps[fd].mode != UNWATCHED) presence_tap_feed(fd, buffer, (size_t)n);
    return n;
}

int SSL_read(void *ssl, void *buffer, int length) {
    static ssl_read_fn real;
    static ssl_get_fd_fn get_fd;
    if (!real) real = (ssl_read_fn)dlsym(RTLD_NEXT, "SSL_read");
    if (!get_fd) get_fd = (ssl_get_fd_fn)dlsym(RTLD_DEFAULT, "SSL_get_fd");
    int n = real(ssl, buffer, length);
    if (n > 0 && taps && get_fd) {
        int fd = get_fd(ssl);
        if (tap_for(fd) && taps[fd].mode != UNWATCHED) presence_tap_feed(fd, buffer, (size_t)n);
    }
    return n;
}
