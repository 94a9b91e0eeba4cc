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

/// Incremental UTF-8 validation (RFC 3629: no overlongs, surrogates or code points above U+10FFFF).
typedef struct {
    uint8_t need;          // continuation bytes still expected
    uint8_t low, high;     // the range the next continuation byte must fall in
} utf8_t;

/// What followed the head in the read that ended it (frames sent before the 101 arrived).
typedef struct {
    size_t length;
    uint8_t bytes[];
} tail_t;

/// The frame-level violations lws 4.1.6 drops a connection for without a close frame.
static const struct { uint16_t code; const char *why; } violations[] = {
    {0, NULL},
    {1002, "control frame longer than 125 bytes"},
    {1002, "close frame with a 1-byte payload"},
    {1002, "frame length with its most significant bit set"},
    {1007, "close reason is not valid UTF-8"},
};
enum violation { NONE = 0, LONG_CONTROL, ONE_BYTE_CLOSE, LENGTH_TOP_BIT, CLOSE_REASON_UTF8 };

/// One slot per descriptor: its pages are touched as descriptors are used, so its size is paid by
/// every connection (32 bytes: keep it so).
typedef struct {
    union {
        uint64_t length;   // WEBSOCKET: payload bytes left (or the extended length being read)
        tail_t *tail;      // HTTP_HEAD, once the head ended: what followed it in that read
    } u;
    uint64_t owner;        // the server's id for the connection (presence_tap_set_owner), 0: none
    uint8_t mode;
    union {
        struct {
            uint8_t stage;
            uint8_t need;  // bytes still to read in this stage
        };
        uint16_t head_bytes; // HTTP_HEAD: bytes of the first head read so far (WEBSOCKET: stage and need)
    };
    uint8_t matched;       // HTTP_HEAD: bytes of "\r\n\r\n" matched so far
    uint8_t opcode;        // of the frame being read
    uint8_t unmasked : 1;
    uint8_t head_ended : 1; // HTTP_HEAD: the head ended; `u.tail` holds what followed in that read
    uint8_t reported : 1;  // the violation was handed to the handler
    uint8_t head_too_big : 1;  // HTTP_HEAD: it passed PRESENCE_TAP_MAX_HEAD_BYTES before its end
    uint8_t head_answered : 1; // the 431 was sent
    uint8_t offset;        // close frames: payload bytes read so far (at most 125)
    uint8_t violation;     // a frame lws 4.1.6 would drop silently (enum violation; 0: none)
    uint8_t mask[4];
    utf8_t reason;         // close frames: the reason's UTF-8 so far
} tap_t;

_Static_assert(sizeof(tap_t) == 32, "a tap slot is paid per descriptor");

static presence_tap_handler handler;
static void *handler_context;

static tap_t *taps;
static int tap_count;

static tap_t *tap_for(int fd) {
    return fd >= 0 && fd < tap_count ? &taps[fd] : NULL;
}

static void release_tail(tap_t *t) {
    if (t->mode != HTTP_HEAD) return;
    free(t->u.tail);
    t->u.tail = NULL;
}

static int utf8_accepts(utf8_t *u, uint8_t byte) {
    if (u->need) {
        if (byte < u->low || byte > u->high) return 0;
        u->need--;
        u->low = 0x80, u->high = 0xBF;
        return 1;
    }
    u->low = 0x80, u->high = 0xBF;
    if (byte < 0x80) return 1;
    if (byte >= 0xC2 && byte <= 0xDF) u->need = 1;
    else if (byte == 0xE0) u->need = 2, u->low = 0xA0;
    else if (byte == 0xED) u->need = 2, u->high = 0x9F;
    else if (byte >= 0xE1 && byte <= 0xEF) u->need = 2;
    else if (byte == 0xF0) u->need = 3, u->low = 0x90;
    else if (byte >= 0xF1 && byte <= 0xF3) u->need = 3;
    else if (byte == 0xF4) u->need = 3, u->high = 0x8F;
    else return 0;
    return 1;
}

static void violate(tap_t *t, enum violation which) {
    t->violation = (uint8_t)which;
}

/// The end of a frame's header or payload: the next byte starts a frame. A close frame's reason
/// must have ended on a whole character.
static void frame_ended(tap_t *t) {
    if (t->opcode == 0x8 && t->reason.need) violate(t, CLOSE_REASON_UTF8);
    t->stage = FIRST_BYTE;
}

static void follow_frames(tap_t *t, const uint8_t *p, size_t n) {
    while (n && !t->unmasked && !t->violation) {
        switch (t->stage) {
        case FIRST_BYTE:
            t->opcode = *p & 0x0F;
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
            // lws 4.1.6 drops these without a close frame: the shell sends one first.
            if ((t->opcode & 0x8) && length > 125) {
                violate(t, LONG_CONTROL);
                return;
            }
            if (t->opcode == 0x8 && length == 1) {
                violate(t, ONE_BYTE_CLOSE);
                return;
            }
            t->u.length = 0;
            t->offset = 0;
            memset(&t->reason, 0, sizeof(t->reason));
            if (length >= 126) {
                t->stage = EXTENDED_LENGTH;
                t->need = length == 126 ? 2 : 8;
            } else {
                t->u.length = length;
                t->stage = MASK_KEY;
                t->need = 4;
            }
            break;
        }
        case EXTENDED_LENGTH:
            if (t->need == 8 && (*p & 0x80)) {
                violate(t, LENGTH_TOP_BIT);
                return;
            }
            t->u.length = (t->u.length << 8) | *p++;
            n--;
            if (--t->need == 0) {
                t->stage = MASK_KEY;
                t->need = 4;
            }
            break;
        case MASK_KEY:
            t->mask[4 - t->need] = *p++;
            n--;
            if (--t->need == 0) {
                if (t->u.length) t->stage = PAYLOAD;
                else frame_ended(t);
            }
            break;
        case PAYLOAD: {
            if (t->opcode == 0x8) {
                // A close frame (at most 125 bytes): its reason, after the 2-byte code, is UTF-8.
                uint8_t byte = *p++ ^ t->mask[t->offset & 3];
                n--;
                if (t->offset++ >= 2 && !utf8_accepts(&t->reason, byte)) {
                    violate(t, CLOSE_REASON_UTF8);
                    return;
                }
                if (--t->u.length == 0) frame_ended(t);
                break;
            }
            size_t skip = (uint64_t)n < t->u.length ? n : (size_t)t->u.length;
            p += skip, n -= skip;
            t->u.length -= skip;
            if (t->u.length == 0) frame_ended(t);
            break;
        }
        }
    }
}

/// Before the upgrade: find the end of the first request's head; keep what follows it in the
/// same read (frames a client sent without waiting for the 101).
static void follow_head(tap_t *t, const uint8_t *p, size_t n) {
    static const uint8_t end[4] = {'\r', '\n', '\r', '\n'};
    if (t->head_ended || t->head_too_big) return;
    for (size_t i = 0; i < n; i++) {
        if (++t->head_bytes > PRESENCE_TAP_MAX_HEAD_BYTES) {
            t->head_too_big = 1;
            return;
        }
        t->matched = p[i] == end[t->matched] ? t->matched + 1 : (p[i] == '\r' ? 1 : 0);
        if (t->matched == 4) {
            t->head_ended = 1;
            size_t rest = n - i - 1;
            if (rest && (t->u.tail = malloc(sizeof(tail_t) + rest))) {
                t->u.tail->length = rest;
                memcpy(t->u.tail->bytes, p + i + 1, rest);
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

/// One slot per descriptor the process may ever hold (the hard limit: the server raises its soft
/// limit up to it at start, `--max-fds`), allocated before `main` (untouched pages cost nothing).
/// Made before any thread exists, the table is never written or moved while `recv` on another
/// thread reads it: allocated lazily by the first accepted connection, it raced every other
/// thread's `recv` (ThreadSanitizer saw a test's first accept against Foundation's socket thread).
__attribute__((constructor)) static void allocate_taps(void) {
    struct rlimit limit;
    rlim_t count = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_max : 1024;
    if (count == RLIM_INFINITY || count > (1 << 20)) count = 1 << 20;
    taps = calloc((size_t)count, sizeof(tap_t));
    tap_count = taps ? (int)count : 0;
}

void presence_tap_accepted(int fd) {
    tap_t *t = tap_for(fd);
    if (!t) return;
    release_tail(t);
    memset(t, 0, sizeof(*t));
    t->mode = HTTP_HEAD;
}

void presence_tap_established(int fd) {
    tap_t *t = tap_for(fd);
    if (!t || t->mode != HTTP_HEAD) return;
    tail_t *tail = t->u.tail;
    t->u.length = 0;
    t->mode = WEBSOCKET;
    t->head_bytes = 0;
    t->stage = FIRST_BYTE;
    if (tail) follow_frames(t, tail->bytes, tail->length);
    free(tail);
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

int presence_tap_violation(int fd, const char **why) {
    tap_t *t = tap_for(fd);
    if (!t || !t->violation) return 0;
    if (why) *why = violations[t->violation].why;
    return violations[t->violation].code;
}

void presence_tap_set_owner(int fd, uint64_t owner) {
    tap_t *t = tap_for(fd);
    if (t) t->owner = owner;
}

uint64_t presence_tap_owner(int fd) {
    tap_t *t = tap_for(fd);
    return t ? t->owner : 0;
}

void presence_tap_on_violation(presence_tap_handler function, void *context) {
    handler = function;
    handler_context = context;
}

/// After lws's read on `fd` was followed: hand a new violation to the server, before lws parses
/// the bytes (and drops the connection without a close frame).
static void report(int fd) {
    tap_t *t = tap_for(fd);
    if (t && t->violation && !t->reported) {
        t->reported = 1;
        if (handler) handler(handler_context, fd);
    }
}

int presence_tap_head_too_big(int fd) {
    tap_t *t = tap_for(fd);
    return t && t->head_too_big;
}

/// A plain (not TLS) connection whose first head passed the cap: answer 431 ourselves, since lws
/// 4.1.6 would drop it without a word when the head outgrows its header table. The answer goes
/// straight to the socket (a few hundred bytes into an empty send buffer), followed by a FIN; lws
/// is then told the peer closed (the caller returns 0), so it never parses the head and closes.
static void answer_head_too_big(int fd, tap_t *t) {
    static const char answer[] =
        "HTTP/1.1 431 Request Header Fields Too Large\r\n"
        "Content-Type: application/json\r\n"
        "Connection: close\r\n"
        "Content-Length: 116\r\n"
        "\r\n"
        "{\"error\": \"the request's head (request line and headers) is over 4096 bytes, the most this server reads; send less\"}";
    t->head_answered = 1;
    (void)send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}

typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef int (*ssl_read_fn)(void *, void *, int);
typedef int (*ssl_get_fd_fn)(const void *);

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
    static recv_fn real;
    if (!real) real = (recv_fn)dlsym(RTLD_NEXT, "recv");
    ssize_t n = real(fd, buffer, length, flags);
    if (n > 0 && !(flags & MSG_PEEK) && tap_for(fd) && taps[fd].mode != UNWATCHED) {
        tap_t *t = &taps[fd];
        if (t->head_answered) return 0;
        presence_tap_feed(fd, buffer, (size_t)n);
        if (t->mode == HTTP_HEAD && t->head_too_big) {
            answer_head_too_big(fd, t);
            return 0;
        }
        report(fd);
    }
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
        if (tap_for(fd) && taps[fd].mode != UNWATCHED) {
            presence_tap_feed(fd, buffer, (size_t)n);
            report(fd);
        }
    }
    return n;
}
