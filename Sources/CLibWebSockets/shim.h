// Header-only helpers for what Swift cannot import from libwebsockets 4.1:
// function-like macros, C varargs and OR-ed enum flags. Keep this file small.
#ifndef PRESENCE_LWS_SHIM_H
#define PRESENCE_LWS_SHIM_H

#include <libwebsockets.h>
#include <stdint.h>

/// LWS_PRE is `_LWS_PAD(...)`, a function-like macro Swift cannot see.
static inline size_t lwss_pre(void) { return LWS_PRE; }

/// Logging through lws without C varargs.
static inline void lwss_log(int level, const char *msg) { _lws_log(level, "%s\n", msg); }

/// lws_write with an int write-protocol so flags can be OR-ed from Swift.
static inline int lwss_write(struct lws *wsi, unsigned char *buf, size_t len, int wp) {
    return lws_write(wsi, buf, len, (enum lws_write_protocol)wp);
}

/// A timer whose sul sits first, so the callback can recover its owner (lws_container_of).
typedef struct lwss_timer {
    lws_sorted_usec_list_t sul;
    void *owner;
    uint64_t id;
} lwss_timer_t;

static inline lwss_timer_t *lwss_timer_from_sul(lws_sorted_usec_list_t *sul) {
    return lws_container_of(sul, lwss_timer_t, sul);
}

/// Header lengths and copies by token, so Swift does not need the enum casts.
static inline int lwss_hdr_copy(struct lws *wsi, char *dst, int len, int token) {
    return lws_hdr_copy(wsi, dst, len, (enum lws_token_indexes)token);
}
static inline int lwss_hdr_total_length(struct lws *wsi, int token) {
    return lws_hdr_total_length(wsi, (enum lws_token_indexes)token);
}
static inline int lwss_hdr_copy_fragment(struct lws *wsi, char *dst, int len, int token, int frag) {
    return lws_hdr_copy_fragment(wsi, dst, len, (enum lws_token_indexes)token, frag);
}

#endif
