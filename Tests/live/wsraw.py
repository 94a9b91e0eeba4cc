"""Raw WebSocket frames for the live tests: what the client libraries will not send (bad opcodes,
reserved bits, unmasked or oversized control frames, bad close codes), and a reader of the
server's frames. Plain sockets, no library."""
import json
import os
import socket
import time


def upgrade(host, port, path="/.ws?v=5&ns=demo", wrap=None, timeout=5, rcvbuf=None):
    """A raw WebSocket connection (upgrade done): (socket, bytes read after the 101). `rcvbuf`
    sets SO_RCVBUF before connecting (a client that reads slowly)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect((host, port))
    if wrap:
        sock = wrap(sock)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during the upgrade: {data!r}")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock, rest


def read_to_close(sock, timeout=15):
    """Everything the server sends until it closes: (bytes, True when closed, "reset" when reset,
    False when still open after `timeout`)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, "reset"
        if not chunk:
            return data, True
        data += chunk


def frame(opcode, payload=b"", fin=True, rsv=0, masked=True, length=None):
    """One client frame. `rsv` is the 3 reserved bits (0-7); `length` overrides the encoded
    payload length (e.g. a 64-bit length with its top bit set)."""
    if isinstance(payload, str):
        payload = payload.encode()
    first = (0x80 if fin else 0) | ((rsv & 7) << 4) | (opcode & 0x0F)
    n = len(payload) if length is None else length
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head = bytes([first, mask_bit | n])
    elif n < 65536:
        head = bytes([first, mask_bit | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([first, mask_bit | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


TEXT, BINARY, CONT, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10


def close_payload(code, reason=b""):
    return code.to_bytes(2, "big") + (reason.encode() if isinstance(reason, str) else reason)


class Reader:
    """Reads server frames from a raw socket: (opcode, payload, fin)."""

    def __init__(self, sock, pending=b""):
        self.sock = sock
        self.data = pending
        self.closed = False

    def next(self, timeout=5):
        """The next frame, or None when the socket closed or nothing came in `timeout`."""
        deadline = time.time() + timeout
        while True:
            parsed = self._parse()
            if parsed:
                return parsed
            remaining = deadline - time.time()
            if remaining <= 0 or self.closed:
                return None
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                self.closed = True
                continue
            self.data += chunk

    def _parse(self):
        data = self.data
        if len(data) < 2:
            return None
        length, offset = data[1] & 0x7F, 2
        if length == 126:
            if len(data) < 4:
                return None
            length, offset = int.from_bytes(data[2:4], "big"), 4
        elif length == 127:
            if len(data) < 10:
                return None
            length, offset = int.from_bytes(data[2:10], "big"), 10
        if len(data) < offset + length:
            return None
        self.data = data[offset + length:]
        return data[0] & 0x0F, data[offset:offset + length], bool(data[0] & 0x80)

    def until(self, opcode, timeout=5):
        """Frames up to and including the first with `opcode` (None last when none came)."""
        frames = []
        while True:
            got = self.next(timeout)
            frames.append(got)
            if got is None or got[0] == opcode:
                return frames

    def close_code(self, timeout=5):
        """The code of the server's close frame (None: closed without one; 'none': empty)."""
        frames = self.until(CLOSE, timeout)
        last = frames[-1]
        if last is None:
            return None
        return int.from_bytes(last[1][:2], "big") if len(last[1]) >= 2 else "none"

    def texts(self, frames):
        return [json.loads(payload) for opcode, payload, _ in (f for f in frames if f) if opcode == TEXT]

    def wait_closed(self, timeout=5):
        """True when the server closed the TCP connection within `timeout`."""
        deadline = time.time() + timeout
        while not self.closed and time.time() < deadline:
            if self.next(deadline - time.time()) is None and not self.closed:
                return False
        return self.closed


def request(r, action, body):
    return json.dumps({"t": "d", "d": {"r": r, "a": action, "b": body}})
