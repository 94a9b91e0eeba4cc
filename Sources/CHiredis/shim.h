// hiredis 0.14.1 (Debian's libhiredis-dev) on a libuv loop, with our own event adapter.
//
// Why not hiredis's adapters/libuv.h: in 0.14.1 its poll callback returns early when libuv reports
// an error status. libuv reports a refused or reset socket exactly that way (POLLERR becomes
// UV_EBADF and the poll handle is stopped), so hiredis never learns of the error: a connect to a
// Redis that is down never calls the connect callback, and the connection hangs for good. Upstream
// fixed it in 1.0 (commit 9ce15c4b). This adapter is written fresh: on an error status it runs
// hiredis's read/write handlers for the events hiredis was waiting for, and hiredis then finds the
// socket error itself (SO_ERROR while connecting, a failed read or write after), reports it and
// frees the context.
//
// Lifetimes: hiredis frees the context itself (after an error, or on redisAsyncFree) and calls the
// adapter's cleanup hook while doing so. The watch struct must outlive that moment, because the
// poll callback that triggered the free still holds it: cleanup only forgets the context and asks
// libuv to close the poll handle; the struct is freed in the close callback, a later loop
// iteration, which is also when `released(owner)` runs. After `released`, nothing of this
// connection is left in hiredis or libuv.
//
// SwiftPM does not notice edits to this header: touch the Swift files that import CHiredis
// (Sources/PresenceRedis, its tests, the bench) to rebuild them.
#ifndef PRESENCE_HIREDIS_SHIM_H
#define PRESENCE_HIREDIS_SHIM_H

#include <uv.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <stdint.h>
#include <stdlib.h>

/// One per hiredis context: the poll handle its socket is watched with.
typedef struct prs_redis_watch {
    uv_poll_t poll;
    redisAsyncContext *context; /* NULL once hiredis has let go of it */
    int events;                 /* UV_READABLE | UV_WRITABLE, as hiredis last asked */
    void (*released)(void *owner);
    void *owner;
} prs_redis_watch;

/// Frees a handle's memory (libuv is done with it), then tells its owner.
static void prs_free_and_release(void *memory, void (*released)(void *owner), void *owner) {
    free(memory);
    if (released) released(owner);
}

static void prs_redis_watch_closed(uv_handle_t *handle) {
    prs_redis_watch *watch = (prs_redis_watch *)handle->data;
    prs_free_and_release(watch, watch->released, watch->owner);
}

static void prs_redis_watch_ready(uv_poll_t *poll, int status, int events) {
    prs_redis_watch *watch = (prs_redis_watch *)poll->data;
    /* On an error status, let hiredis run what it was waiting for: it finds the error itself. */
    int ready = status < 0 ? watch->events : events;
    if (watch->context != NULL && (ready & UV_READABLE)) redisAsyncHandleRead(watch->context);
    /* The read may have freed the context (cleanup sets it to NULL), hence the second check. */
    if (watch->context != NULL && (ready & UV_WRITABLE)) redisAsyncHandleWrite(watch->context);
}

static void prs_redis_watch_update(prs_redis_watch *watch, int add, int remove) {
    watch->events = (watch->events | add) & ~remove;
    /* Always (re)start: libuv stops the handle after reporting an error, and starting an
       active handle with the same events costs nothing (the epoll update is deferred). */
    if (watch->events != 0) {
        uv_poll_start(&watch->poll, watch->events, prs_redis_watch_ready);
    } else {
        uv_poll_stop(&watch->poll);
    }
}

static void prs_redis_add_read(void *data) { prs_redis_watch_update((prs_redis_watch *)data, UV_READABLE, 0); }
static void prs_redis_del_read(void *data) { prs_redis_watch_update((prs_redis_watch *)data, 0, UV_READABLE); }
static void prs_redis_add_write(void *data) { prs_redis_watch_update((prs_redis_watch *)data, UV_WRITABLE, 0); }
static void prs_redis_del_write(void *data) { prs_redis_watch_update((prs_redis_watch *)data, 0, UV_WRITABLE); }

static void prs_redis_cleanup(void *data) {
    prs_redis_watch *watch = (prs_redis_watch *)data;
    watch->context = NULL;
    uv_close((uv_handle_t *)&watch->poll, prs_redis_watch_closed);
}

/// Attaches a fresh context (from redisAsyncConnect, without error) to `loop`. Returns REDIS_OK,
/// or REDIS_ERR with nothing attached (then the caller frees the context and `released` never
/// runs). Call before redisAsyncSetConnectCallback, which already asks for the first write event.
static inline int prs_redis_attach(redisAsyncContext *context, uv_loop_t *loop,
                                   void (*released)(void *owner), void *owner) {
    if (context->ev.data != NULL || context->c.fd < 0) return REDIS_ERR;
    prs_redis_watch *watch = (prs_redis_watch *)calloc(1, sizeof(*watch));
    if (watch == NULL) return REDIS_ERR;
    if (uv_poll_init(loop, &watch->poll, context->c.fd) != 0) {
        free(watch);
        return REDIS_ERR;
    }
    watch->poll.data = watch;
    watch->context = context;
    watch->released = released;
    watch->owner = owner;
    context->ev.data = watch;
    context->ev.addRead = prs_redis_add_read;
    context->ev.delRead = prs_redis_del_read;
    context->ev.addWrite = prs_redis_add_write;
    context->ev.delWrite = prs_redis_del_write;
    context->ev.cleanup = prs_redis_cleanup;
    return REDIS_OK;
}

/// The context's error text, or NULL. Read from the inner context: hiredis copies it to the
/// async context's `errstr` only after the connect callback has run.
static inline const char *prs_redis_error(const redisAsyncContext *context) {
    return context->c.err != 0 && context->c.errstr[0] != 0 ? context->c.errstr : NULL;
}

/// A one-shot libuv timer whose owner is told when the handle is gone, as for the watch above.
typedef struct prs_timer {
    uv_timer_t timer;
    void (*fire)(void *owner);
    void (*released)(void *owner);
    void *owner;
} prs_timer;

static void prs_timer_fired(uv_timer_t *timer) {
    prs_timer *t = (prs_timer *)timer->data;
    t->fire(t->owner);
}

static void prs_timer_closed(uv_handle_t *handle) {
    prs_timer *t = (prs_timer *)handle->data;
    prs_free_and_release(t, t->released, t->owner);
}

static inline prs_timer *prs_timer_create(uv_loop_t *loop, void (*fire)(void *owner),
                                          void (*released)(void *owner), void *owner) {
    prs_timer *t = (prs_timer *)calloc(1, sizeof(*t));
    if (t == NULL) return NULL;
    if (uv_timer_init(loop, &t->timer) != 0) {
        free(t);
        return NULL;
    }
    t->timer.data = t;
    t->fire = fire;
    t->released = released;
    t->owner = owner;
    return t;
}

static inline void prs_timer_arm(prs_timer *t, uint64_t milliseconds) {
    uv_timer_start(&t->timer, prs_timer_fired, milliseconds, 0);
}

static inline void prs_timer_disarm(prs_timer *t) { uv_timer_stop(&t->timer); }

/// Stops the timer and frees it from the loop; `released(owner)` runs once it is gone.
static inline void prs_timer_close(prs_timer *t) {
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, prs_timer_closed);
}

/// Loop helpers for code that owns a loop (tests, benchmarks): a heap loop, and its teardown.
static inline uv_loop_t *prs_loop_create(void) {
    uv_loop_t *loop = (uv_loop_t *)malloc(sizeof(uv_loop_t));
    if (loop != NULL && uv_loop_init(loop) != 0) {
        free(loop);
        return NULL;
    }
    return loop;
}

/// Runs the loop until every handle is closed, then closes and frees it. Returns uv_loop_close's
/// result (0, or UV_EBUSY if something still holds a handle open: the loop is then not freed).
static inline int prs_loop_destroy(uv_loop_t *loop) {
    uv_run(loop, UV_RUN_DEFAULT);
    int result = uv_loop_close(loop);
    if (result == 0) free(loop);
    return result;
}

#endif
