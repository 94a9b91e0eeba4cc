// The storage thread gives the core back to the loop every 100 µs (the bulk slice) of its
// own work, even in the middle of a SQLite call (a checkpoint copies megabytes in one call).
//
// Why: the server and its storage thread may share one core. The kernel enforces a thread's slice
// only at its tick (4 ms at HZ 250) or at a wake-up, so a storage thread that got the CPU while the
// loop was runnable kept it for up to 1.5 ms of page copying (docs/robustness.md, "The storage
// thread yields"), and every client's push waited as long. The unix VFS lets a program replace the
// system calls SQLite makes (`xSetSystemCall`): ours call the original, then `sched_yield()` when
// the calling thread has asked for it and has worked past its quantum since it last yielded or
// started its current piece of work (a commit).
// Threads that did not ask (the loop's reads at start-up, tests) pass straight through.
#ifndef STORAGE_YIELD_H
#define STORAGE_YIELD_H

#include <stdint.h>

/// Wraps the unix VFS's read and write calls (once per process; later calls change nothing).
/// 0, or the SQLite error code that refused it.
int presence_storage_yield_install(void);

/// The calling thread yields after `nanoseconds` of work since it last yielded (0: never).
void presence_storage_yield_every(uint64_t nanoseconds);

/// The calling thread starts working now (it slept until now): its quantum counts from here.
void presence_storage_yield_restart(void);

/// How many times the calling thread yielded.
uint64_t presence_storage_yield_count(void);

#endif
