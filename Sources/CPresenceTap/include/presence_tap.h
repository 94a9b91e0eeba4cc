// A tap on the bytes libwebsockets reads, to see what lws 4.1.6 does not show: whether a client's
// WebSocket frame had its mask bit set (RFC 6455 §5.1: a server must close the connection when
// not). lws parses the bit but exposes it neither in its API nor as an option (upstream added the
// check only in 2026), so the tap follows the frame headers of each WebSocket connection in the
// bytes `recv` (plain) and `SSL_read` (TLS) return to lws.
//
// Only sockets the server registered are followed; every other call passes straight through.
// All functions below run on the loop thread.
#ifndef PRESENCE_TAP_H
#define PRESENCE_TAP_H

#include <stddef.h>

/// A connection was accepted on `fd`: find where its first request's head ends.
void presence_tap_accepted(int fd);

/// The connection on `fd` became a WebSocket: follow its frames from the end of the upgrade
/// request (including frames that came in the same read).
void presence_tap_established(int fd);

/// The connection on `fd` closed.
void presence_tap_forget(int fd);

/// 1 when a frame without the mask bit arrived on `fd`.
int presence_tap_unmasked(int fd);

/// Feeds bytes as if lws had read them from `fd` (tests).
void presence_tap_feed(int fd, const void *bytes, size_t length);

#endif
