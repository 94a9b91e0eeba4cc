// A tap on the bytes libwebsockets reads, to see what lws 4.1.6 does not show: whether a client's
// WebSocket frame had its mask bit set (RFC 6455 §5.1: a server must close the connection when
// not). lws parses the bit but exposes it neither in its API nor as an option (upstream added the
// check only in 2026), so the tap follows the frame headers of each WebSocket connection in the
// bytes `recv` (plain) and `SSL_read` (TLS) return to lws.
//
// It also spots the frames lws 4.1.6 answers by dropping the TCP connection without a close frame
// (a control frame over 125 bytes, a 64-bit length with its top bit set, a close frame with a
// 1-byte payload or a reason that is not UTF-8), and hands them to the server before lws parses
// them, so the server can send the close frame RFC 6455 §7.1.7 asks for.
//
// Only sockets the server registered are followed; every other call passes straight through.
// All functions below run on the loop thread.
#ifndef PRESENCE_TAP_H
#define PRESENCE_TAP_H

#include <stddef.h>
#include <stdint.h>

/// A connection was accepted on `fd`: find where its first request's head ends.
void presence_tap_accepted(int fd);

/// The connection on `fd` became a WebSocket: follow its frames from the end of the upgrade
/// request (including frames that came in the same read).
void presence_tap_established(int fd);

/// The server's id for the WebSocket on `fd` (kept with the tap's state, which exists per
/// descriptor anyway, rather than in a table of its own); 0 when none was set.
void presence_tap_set_owner(int fd, uint64_t owner);
uint64_t presence_tap_owner(int fd);

/// The connection on `fd` closed.
void presence_tap_forget(int fd);

/// 1 when a frame without the mask bit arrived on `fd`.
int presence_tap_unmasked(int fd);

/// The close code a frame on `fd` deserves that lws would drop silently (1002 or 1007), and why;
/// 0 when none.
int presence_tap_violation(int fd, const char **why);

/// Called on the loop thread, inside lws's read of `fd`, the first time a frame on it violates
/// the protocol in a way `presence_tap_violation` reports.
typedef void (*presence_tap_handler)(void *context, int fd);
void presence_tap_on_violation(presence_tap_handler handler, void *context);

/// The most bytes a connection's first request head (request line, headers, the blank line) may
/// take: lws 4.1.6's header table (`max_http_header_data`) holds 4096, and drops a longer head
/// without an answer. Over it, on a plain connection, the tap answers
/// `431 Request Header Fields Too Large` itself and tells lws the peer closed (TLS: lws drops it).
#define PRESENCE_TAP_MAX_HEAD_BYTES 4096

/// 1 when the first head on `fd` passed PRESENCE_TAP_MAX_HEAD_BYTES.
int presence_tap_head_too_big(int fd);

/// Feeds bytes as if lws had read them from `fd` (tests).
void presence_tap_feed(int fd, const void *bytes, size_t length);

#endif
