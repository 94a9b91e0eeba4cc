// Linux and GNU declarations that Swift's Glibc module does not export, for presence-bench's epoll
// WebSocket client (Sources/presence-bench/EpollWebSocketClient.swift) and its frame scanner.
// Nothing to link: the functions are libc's.
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>

// GNU extensions (string.h and sched.h declare them only under _GNU_SOURCE). The affinity mask is
// passed as bytes (a cpu_set_t: one bit per CPU).
void *memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen);
int sched_setaffinity(int pid, size_t cpusetsize, const void *mask);
