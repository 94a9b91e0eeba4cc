// libuv, for the loop runtime (PresenceLoop): the server creates the uv loop itself and hands it
// to libwebsockets as a foreign loop, so other event sources (hiredis) can share it.
#ifndef PRESENCE_UV_SHIM_H
#define PRESENCE_UV_SHIM_H

#include <uv.h>
#include <pthread.h>

// Names the calling thread (at most 15 bytes show), as a loop thread started with pthread_create
// (PresenceLoop's startThread). pthread_setname_np is a GNU extension Swift's Glibc does not export.
int pthread_setname_np(pthread_t thread, const char *name);
static inline void presence_name_this_thread(const char *name) { (void)pthread_setname_np(pthread_self(), name); }

// uv_loop_configure is variadic, which Swift cannot call: this turns on the loop's idle-time
// accounting (time blocked in epoll_wait), read with uv_metrics_idle_time (write shedding).
static inline int presence_uv_measure_idle_time(uv_loop_t *loop) { return uv_loop_configure(loop, UV_METRICS_IDLE_TIME); }

#endif
