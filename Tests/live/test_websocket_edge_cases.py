"""WebSocket edge cases by category, as the Autobahn testsuite groups them: framing, reserved bits,
opcodes, fragmentation, control frames, ping/pong, invalid UTF-8, close codes and size limits.
Each is answered as RFC 6455 says, and none disturbs anyone else: after every case a bystander
still gets its pushes (and the server is still alive)."""
import itertools
import ssl

import pytest

from conftest import Server
from test_tls_and_config import pki  # noqa: F401 (a fixture)
from wsraw import BINARY, CLOSE, CONT, PING, PONG, TEXT, Reader, close_payload, frame, request, upgrade

MAX_MESSAGE = 20_000
_beacons = itertools.count(1)


@pytest.fixture(scope="module")
def server():
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory",
                    "--max-message-bytes", str(MAX_MESSAGE))
    yield server
    assert server.alive(), "the server died"
    server.stop()


@pytest.fixture(scope="module")
def bystander(server):
    watcher = server.client()
    watcher.listen("/beacon")
    writer = server.client()
    return watcher, writer


@pytest.fixture
def ws(server, bystander):
    """A raw connection past its hello; afterwards the bystander must still get a push."""
    sock, pending = upgrade(server.host, server.port)
    reader = Reader(sock, pending)
    hello = reader.next()
    assert hello and hello[0] == TEXT and b'"h"' in hello[1]
    yield sock, reader
    sock.close()
    assert server.alive()
    watcher, writer = bystander
    beacon = next(_beacons)
    assert writer.call("p", {"p": "/beacon", "d": beacon})["s"] == "ok"
    assert watcher.push("beacon") == beacon


def served(sock, reader, r=900):
    """The connection still answers a request."""
    sock.sendall(frame(TEXT, request(r, "g", {"p": "/nothing", "q": {}})))
    for opcode, payload, _ in filter(None, iter(lambda: reader.next(), None)):
        if opcode == TEXT and f'"r":{r}'.encode() in payload:
            return True
    return False


def refused(reader, code, ends_within=1):
    """The server's close frame has `code`; answered with ours, the server ends the connection
    within `ends_within` s. `ends_within=None`: lws failed the connection itself, mid-frame; it
    then waits (up to its 5 s close timeout) for a close it cannot find in the rest of the bad
    frame, which RFC 6455 allows, so only the close code is checked."""
    got = reader.close_code()
    assert got == code, f"expected close {code}, got {got}"
    try:
        reader.sock.sendall(frame(CLOSE, close_payload(code)))
    except OSError:
        pass  # it may have dropped the socket already (RFC 6455 7.1.7 allows it)
    if ends_within:
        assert reader.wait_closed(ends_within), "the server kept the TCP connection open"


# Framing


def test_a_frame_sent_byte_by_byte_is_assembled(ws):
    sock, reader = ws
    for byte in frame(TEXT, request(1, "p", {"p": "/bytes", "d": 1})):
        sock.sendall(bytes([byte]))
    assert any(b'"r":1' in f[1] for f in reader.until(TEXT) if f)


def test_many_frames_in_one_packet_are_all_answered(ws):
    sock, reader = ws
    sock.sendall(b"".join(frame(TEXT, request(r, "g", {"p": "/x", "q": {}})) for r in range(1, 51)))
    seen = set()
    while len(seen) < 50:
        got = reader.next()
        assert got, f"only {len(seen)} replies"
        seen.update(r for r in range(1, 51) if f'"r":{r},'.encode() in got[1])


def test_an_empty_text_message_is_refused_as_invalid(ws):
    sock, reader = ws
    sock.sendall(frame(TEXT, b""))
    refused(reader, 1007)


# Reserved bits: no extension is negotiated, so any RSV bit fails the connection.


@pytest.mark.parametrize("rsv", [1, 2, 4, 7])
@pytest.mark.parametrize("opcode", [TEXT, PING])
def test_reserved_bits_close_with_1002(ws, rsv, opcode):
    sock, reader = ws
    sock.sendall(frame(opcode, request(1, "p", {"p": "/rsv", "d": 1}) if opcode == TEXT else b"x", rsv=rsv))
    refused(reader, 1002, ends_within=None)


# Opcodes


@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF])
def test_reserved_opcodes_close_with_1002(ws, opcode):
    sock, reader = ws
    sock.sendall(frame(opcode, b"payload"))
    refused(reader, 1002, ends_within=None)


def test_a_binary_frame_closes_with_1003(ws):
    sock, reader = ws
    sock.sendall(frame(BINARY, b"\x00\x01"))
    refused(reader, 1003)


# Fragmentation


def test_a_continuation_without_a_start_closes_with_1002(ws):
    sock, reader = ws
    sock.sendall(frame(CONT, request(1, "p", {"p": "/c", "d": 1})))
    refused(reader, 1002, ends_within=None)


def test_a_new_message_inside_a_fragmented_one_closes_with_1002(ws):
    sock, reader = ws
    text = request(1, "p", {"p": "/f", "d": 1})
    sock.sendall(frame(TEXT, text[:10], fin=False) + frame(TEXT, text))
    refused(reader, 1002, ends_within=None)


def test_control_frames_inside_a_fragmented_message_are_answered(ws):
    sock, reader = ws
    text = request(1, "p", {"p": "/interleaved", "d": 1})
    sock.sendall(frame(TEXT, text[:10], fin=False) + frame(PING, b"inside") + frame(CONT, text[10:20], fin=False)
                 + frame(PONG, b"unsolicited") + frame(CONT, text[20:]))
    frames = [f for f in (reader.next() for _ in range(2)) if f]
    assert (PONG, b"inside", True) in frames
    assert any(opcode == TEXT and b'"r":1' in payload for opcode, payload, _ in frames)


def test_a_character_split_across_fragments_is_accepted(ws):
    sock, reader = ws
    text = request(1, "p", {"p": "/utf8", "d": "\u00e9\u20ac\U0001F600"}).encode()
    # ensure_ascii escapes; build the raw UTF-8 message instead and cut inside the emoji.
    text = text.replace(b"\\u00e9\\u20ac\\ud83d\\ude00", "\u00e9\u20ac\U0001F600".encode())
    cut = text.index("\U0001F600".encode()) + 2
    sock.sendall(frame(TEXT, text[:cut], fin=False) + frame(CONT, text[cut:]))
    assert any(b'"r":1' in f[1] for f in reader.until(TEXT) if f)
    assert served(sock, reader)


@pytest.mark.parametrize("pieces", [
    [b'{"t":"d","d":{"r":1,"a":"p","b":{"p":"/u","d":"\xce', b'\xa9\xff"}}}'],  # bad byte after a good character
    [b'{"t":"d","d":{"r":1,"a":"p","b":{"p":"/u","d":"\xf4\x90', b'\x80\x80"}}}'],  # above U+10FFFF, split
    [b'{"t":"d","d":{"r":1,"a":"p","b":{"p":"/u","d":"\xe2\x82'],  # a message that ends inside a character
])
def test_invalid_utf8_across_fragments_closes_with_1007(ws, pieces):
    sock, reader = ws
    frames = [frame(TEXT if i == 0 else CONT, piece, fin=i == len(pieces) - 1) for i, piece in enumerate(pieces)]
    sock.sendall(b"".join(frames))
    refused(reader, 1007, ends_within=None)


# Control frames


@pytest.mark.parametrize("payload", [b"", b"hello", bytes(range(125))])
def test_a_ping_is_answered_with_its_payload(ws, payload):
    sock, reader = ws
    sock.sendall(frame(PING, payload))
    assert reader.until(PONG)[-1] == (PONG, payload, True)
    assert served(sock, reader)


def test_a_ping_over_125_bytes_closes_with_1002(ws):
    sock, reader = ws
    sock.sendall(frame(PING, b"x" * 126))
    refused(reader, 1002)


@pytest.mark.parametrize("opcode", [PING, PONG, CLOSE])
def test_a_fragmented_control_frame_closes_with_1002(ws, opcode):
    sock, reader = ws
    sock.sendall(frame(opcode, close_payload(1000) if opcode == CLOSE else b"part", fin=False))
    refused(reader, 1002, ends_within=None)


# Ping/pong


def test_an_unsolicited_pong_is_ignored(ws):
    sock, reader = ws
    sock.sendall(frame(PONG, b"") + frame(PONG, b"nobody asked"))
    assert served(sock, reader)


# Invalid UTF-8


@pytest.mark.parametrize("payload", [b"\xff", b'{"t":"d","d":"\xc0\xaf"}', b"\xed\xa0\x80", b'"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"'])
def test_invalid_utf8_closes_with_1007(ws, payload):
    sock, reader = ws
    sock.sendall(frame(TEXT, payload))
    refused(reader, 1007, ends_within=None)


# Close codes


@pytest.mark.parametrize("code", [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999])
def test_a_valid_close_code_is_echoed(ws, code):
    sock, reader = ws
    sock.sendall(frame(CLOSE, close_payload(code, "bye")))
    assert reader.close_code() == code
    assert reader.wait_closed()


def test_a_close_without_payload_is_answered(ws):
    sock, reader = ws
    sock.sendall(frame(CLOSE, b""))
    assert reader.close_code() in ("none", 1000)
    assert reader.wait_closed()


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999])
def test_an_invalid_close_code_is_answered_with_1002(ws, code):
    sock, reader = ws
    sock.sendall(frame(CLOSE, close_payload(code)))
    refused(reader, 1002)


def test_a_one_byte_close_payload_is_answered_with_1002(ws):
    sock, reader = ws
    sock.sendall(frame(CLOSE, b"\x03"))
    refused(reader, 1002)


def test_invalid_utf8_in_a_close_reason_is_answered_with_1007(ws):
    sock, reader = ws
    sock.sendall(frame(CLOSE, close_payload(1000, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80")))
    refused(reader, 1007)


# Size limits


def test_a_message_over_the_limit_closes_with_1009(ws):
    sock, reader = ws
    sock.sendall(frame(TEXT, request(1, "p", {"p": "/big", "d": "z" * MAX_MESSAGE})))
    refused(reader, 1009)


def test_fragments_adding_up_over_the_limit_close_with_1009(ws):
    sock, reader = ws
    text = request(1, "p", {"p": "/big", "d": "z" * MAX_MESSAGE})
    sock.sendall(frame(TEXT, text[:MAX_MESSAGE // 2], fin=False) + frame(CONT, text[MAX_MESSAGE // 2:MAX_MESSAGE], fin=False)
                 + frame(CONT, text[MAX_MESSAGE:]))
    refused(reader, 1009)


def test_a_frame_length_with_the_top_bit_set_is_refused(ws):
    sock, reader = ws
    sock.sendall(frame(TEXT, b"", length=(1 << 63) + 5)[:10] + b"\x00\x00\x00\x00" + b"x" * 16)
    assert reader.close_code() in (1002, 1009)
    assert reader.wait_closed()


def test_a_frame_announcing_more_than_the_limit_is_refused_before_its_payload(ws):
    sock, reader = ws
    # 1 GiB announced, only a few bytes sent: the server refuses from the header alone.
    sock.sendall(frame(TEXT, b"", length=1 << 30)[:10] + b"\x00\x00\x00\x00" + b"x" * 16)
    # Our close is read as more of the announced payload: the server drops the connection after
    # its closing handshake's wait (2 s, checked once a second).
    refused(reader, 1009, ends_within=4)


def test_a_connection_failed_by_libwebsockets_ends_even_if_the_client_never_answers(ws):
    sock, reader = ws
    sock.sendall(frame(3, b"payload"))
    assert reader.close_code() == 1002
    assert reader.wait_closed(7), "the connection outlived lws's 5 s close timeout"


@pytest.mark.parametrize("bad", [frame(PING, b"x" * 126), frame(CLOSE, close_payload(1000, b"\xc3\x28"))])
def test_frames_libwebsockets_drops_silently_get_a_close_frame_over_tls_too(pki, bad):
    tmp, issue = pki
    cert, key = issue("server", 1)
    server = Server("--rules", "open", "--storage", "memory", "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        context = ssl.create_default_context(cafile=str(tmp / "ca.pem"))
        context.check_hostname = False
        sock, pending = upgrade(server.host, server.port, wrap=lambda raw: context.wrap_socket(raw, server_hostname="localhost"))
        reader = Reader(sock, pending)
        assert reader.next()[0] == TEXT  # hello
        sock.sendall(bad)
        assert reader.close_code() in (1002, 1007)
        assert reader.wait_closed(1)
        sock.close()
    finally:
        assert server.alive()
        server.stop()
