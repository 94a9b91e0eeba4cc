#define _GNU_SOURCE
#include "storage_yield.h"

#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/types.h>
#include <time.h>

static __thread uint64_t quantum_ns;
static __thread uint64_t since_ns;
static __thread uint64_t yields;

static uint64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void maybe_yield(void) {
    if (quantum_ns == 0) return;
    uint64_t now = now_ns();
    if (now - since_ns < quantum_ns) return;
    sched_yield();
    yields += 1;
    since_ns = now_ns();
}

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);

static pread_fn original_pread, original_pread64;
static pwrite_fn original_pwrite, original_pwrite64;
static read_fn original_read;
static write_fn original_write;

static ssize_t yielding_pread(int fd, void *buffer, size_t count, off_t offset) {
    ssize_t result = original_pread(fd, buffer, count, offset);
    maybe_yield();
    return result;
}
static ssize_t yielding_pread64(int fd, void *buffer, size_t count, off_t offset) {
    ssize_t result = original_pread64(fd, buffer, count, offset);
    maybe_yield();
    return result;
}
static ssize_t yielding_pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    ssize_t result = original_pwrite(fd, buffer, count, offset);
    maybe_yield();
    return result;
}
static ssize_t yielding_pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    ssize_t result = original_pwrite64(fd, buffer, count, offset);
    maybe_yield();
    return result;
}
static ssize_t yielding_read(int fd, void *buffer, size_t count) {
    ssize_t result = original_read(fd, buffer, count);
    maybe_yield();
    return result;
}
static ssize_t yielding_write(int fd, const void *buffer, size_t count) {
    ssize_t result = original_write(fd, buffer, count);
    maybe_yield();
    return result;
}

/// Replaces one system call of `vfs`, keeping the original in `*original`; a call the VFS does
/// not have (SQLITE_NOTFOUND) is skipped: that build uses another of the read/write family.
static int wrap(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr replacement, sqlite3_syscall_ptr *original) {
    sqlite3_syscall_ptr current = vfs->xGetSystemCall(vfs, name);
    if (current == 0) return SQLITE_OK;
    *original = current;
    int code = vfs->xSetSystemCall(vfs, name, replacement);
    return code == SQLITE_NOTFOUND ? SQLITE_OK : code;
}

static pthread_once_t installed = PTHREAD_ONCE_INIT;
static int install_result = SQLITE_OK;

static void install(void) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (vfs == 0 || vfs->iVersion < 3 || vfs->xSetSystemCall == 0) {
        install_result = SQLITE_ERROR;
        return;
    }
    int codes[] = {
        wrap(vfs, "pread", (sqlite3_syscall_ptr)yielding_pread, (sqlite3_syscall_ptr *)&original_pread),
        wrap(vfs, "pread64", (sqlite3_syscall_ptr)yielding_pread64, (sqlite3_syscall_ptr *)&original_pread64),
        wrap(vfs, "pwrite", (sqlite3_syscall_ptr)yielding_pwrite, (sqlite3_syscall_ptr *)&original_pwrite),
        wrap(vfs, "pwrite64", (sqlite3_syscall_ptr)yielding_pwrite64, (sqlite3_syscall_ptr *)&original_pwrite64),
        wrap(vfs, "read", (sqlite3_syscall_ptr)yielding_read, (sqlite3_syscall_ptr *)&original_read),
        wrap(vfs, "write", (sqlite3_syscall_ptr)yielding_write, (sqlite3_syscall_ptr *)&original_write),
    };
    for (unsigned i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (codes[i] != SQLITE_OK) install_result = codes[i];
    }
}

int presence_storage_yield_install(void) {
    pthread_once(&installed, install);
    return install_result;
}

void presence_storage_yield_every(uint64_t nanoseconds) {
    quantum_ns = nanoseconds;
    since_ns = now_ns();
}

void presence_storage_yield_restart(void) {
    if (quantum_ns != 0) since_ns = now_ns();
}

uint64_t presence_storage_yield_count(void) { return yields; }
