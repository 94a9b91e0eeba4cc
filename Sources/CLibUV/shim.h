// libuv, for the loop runtime (PresenceLoop): the server creates the uv loop itself and hands it
// to libwebsockets as a foreign loop, so other event sources (hiredis) can share it.
#ifndef PRESENCE_UV_SHIM_H
#define PRESENCE_UV_SHIM_H

#include <uv.h>
#include <pthread.h>
#include <errno.h>

// Names the calling thread (at most 15 bytes show), as a loop thread started with pthread_create
// (PresenceLoop's startThread). pthread_setname_np is a GNU extension Swift's Glibc does not export.
int pthread_setname_np(pthread_t thread, const char *name);
static inline void presence_name_this_thread(const char *name) { (void)pthread_setname_np(pthread_self(), name); }

// uv_loop_configure is variadic, which Swift cannot call: this turns on the loop's idle-time
// accounting (time blocked in epoll_wait), read with uv_metrics_idle_time (write shedding).
static inline int presence_uv_measure_idle_time(uv_loop_t *loop) { return uv_loop_configure(loop, UV_METRICS_IDLE_TIME); }

// --- lws's timer without the busy wait (PresenceLoop's LWSTimerGuard) ---------------------------
//
// lws 4.1 keeps its timers (`lws_sul`: ours, its timeouts) in a µs-sorted list and arms one libuv
// timer for the first, rounding to the nearest millisecond. A timer due within 0.5 ms is armed for
// 0 ms, and libuv 1.44 runs a timer re-armed for 0 ms again within the same pass (`uv__run_timers`
// reads the loop's time once): lws's callback runs back to back, finds nothing ripe, re-arms for
// 0 ms, ... until the timer is due. The loop burns up to half a millisecond per timer without
// polling for I/O, and every client waits (issue 16: a fifth of the server's CPU in `clock_gettime` during
// `/online-users` refreshes). The guard wraps lws's callback: when lws re-arms for 0 ms from it,
// the timer is re-armed for 1 ms instead (lws's timers fire up to a millisecond late).

// lws's callback (the same function for every context), kept once seen. (A static inside a
// function: Swift's importer emits a header's functions, not its variables.)
static inline uv_timer_cb *presence_lws_timer_cb_slot(void) {
    static uv_timer_cb slot;
    return &slot;
}

static inline uv_timer_cb presence_lws_timer_cb_load(void) { return __atomic_load_n(presence_lws_timer_cb_slot(), __ATOMIC_ACQUIRE); }

static void presence_lws_timer_guarded(uv_timer_t *timer) {
    uv_timer_cb lws = presence_lws_timer_cb_load();
    if (lws == NULL) return;
    lws(timer);
    if (!uv_is_active((uv_handle_t *)timer)) return;
    if (timer->timeout <= uv_now(timer->loop)) {
        // Due again in this pass: it would spin. A millisecond from now the loop has polled.
        uv_timer_start(timer, presence_lws_timer_guarded, 1, 0);
    } else {
        timer->timer_cb = presence_lws_timer_guarded;
    }
}

// Puts the guard around lws's callback if lws armed its timer with its own since the last look
// (from its idle handler or elsewhere outside its callback). Call once per turn, before the poll.
static inline void presence_lws_timer_guard(uv_timer_t *timer) {
    uv_timer_cb current = timer->timer_cb;
    if (current == NULL || current == presence_lws_timer_guarded) return;
    __atomic_store_n(presence_lws_timer_cb_slot(), current, __ATOMIC_RELEASE);
    timer->timer_cb = presence_lws_timer_guarded;
}

// The loop's handles of one type (`listening`: only poll handles on listening sockets, lws's
// listeners), up to `capacity`, into `found`; returns how many there are.
#include <sys/socket.h>
struct presence_handle_walk { uv_handle_type type; int listening; uv_handle_t **found; int capacity; int count; };
static void presence_collect_handle(uv_handle_t *handle, void *arg) {
    struct presence_handle_walk *walk = (struct presence_handle_walk *)arg;
    if (handle->type != walk->type) return;
    if (walk->listening) {
        uv_os_fd_t fd;
        int listening = 0;
        socklen_t length = sizeof listening;
        if (uv_fileno(handle, &fd) != 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening) return;
    }
    if (walk->count < walk->capacity) walk->found[walk->count] = handle;
    walk->count++;
}
static inline int presence_uv_handles(uv_loop_t *loop, uv_handle_type type, int listening, uv_handle_t **found, int capacity) {
    struct presence_handle_walk walk = { type, listening, found, capacity, 0 };
    uv_walk(loop, presence_collect_handle, &walk);
    return walk.count;
}

// --- How the kernel schedules the server's threads (PresenceLoop's ThreadScheduling) -------------
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SCHED_BATCH
#define SCHED_BATCH 3  // <sched.h> names it only under _GNU_SOURCE
#endif

// struct sched_attr (SCHED_ATTR_SIZE_VER0): glibc 2.36 has no sched_setattr wrapper.
struct presence_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

// sched_setattr for the calling thread: a fair `policy` with a time slice of `nanoseconds`
// (Linux 6.12+, EEVDF; clamped to 0.1-100 ms; older kernels ignore it), keeping its nice value.
// Returns 0 or an errno.
static inline int presence_set_fair_slice(uint32_t policy, uint64_t nanoseconds) {
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (nice == -1 && errno != 0) return errno;
    struct presence_sched_attr attr = {0};
    attr.size = sizeof attr;
    attr.sched_policy = policy;
    attr.sched_nice = nice;
    attr.sched_runtime = nanoseconds;
    return syscall(SYS_sched_setattr, 0, &attr, 0) == 0 ? 0 : errno;
}

// The calling thread asks for a time slice of `nanoseconds` (a task with a shorter slice than the
// running one preempts it when it wakes). Returns 0 or an errno.
static inline int presence_request_slice(uint64_t nanoseconds) {
    return presence_set_fair_slice(SCHED_OTHER, nanoseconds);
}

// The calling thread becomes SCHED_BATCH (the same share of the CPU, but its wake-ups do not
// preempt the thread running: the loop) with a time slice of `nanoseconds`. Where sched_setattr
// is refused (a seccomp filter), SCHED_BATCH alone. Returns 0 or an errno.
static inline int presence_become_batch(uint64_t nanoseconds) {
    if (presence_set_fair_slice(SCHED_BATCH, nanoseconds) == 0) return 0;
    struct sched_param param = {0};
    return sched_setscheduler(0, SCHED_BATCH, &param) == 0 ? 0 : errno;
}

#include <sys/prctl.h>

// Names the calling thread (what top -H, perf and /proc show; Linux keeps 15 bytes). 0 or an errno.
static inline int presence_name_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0) == 0 ? 0 : errno;
}

#endif
