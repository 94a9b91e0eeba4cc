"""Framing (protocol doc section 2): control ping, keepalive, count-prefixed messages,
WebSocket fragments, and splitting of large outgoing messages."""
import json

import websocket


def test_control_ping_gets_pong(open_server):
    client = open_server.client()
    client.send({"t": "c", "d": {"t": "p", "d": {}}})
    assert client.recv() == {"t": "c", "d": {"t": "o", "d": {}}}


def test_keepalive_zero_is_ignored(open_server):
    client = open_server.client()
    client.ws.send("0")
    # Nothing answers the keepalive: the next message is the reply to the next request.
    r = client.request("s", {"c": {}})
    assert client.recv() == {"t": "d", "d": {"r": r, "b": {"s": "ok", "d": ""}}}


def test_count_prefixed_multi_frame_message(open_server):
    client = open_server.client()
    text = json.dumps({"t": "d", "d": {"r": 7, "a": "p", "b": {"p": "/big", "d": "x" * 40000}}})
    pieces = [text[i:i + 16384] for i in range(0, len(text), 16384)]
    client.ws.send(str(len(pieces)))
    for piece in pieces:
        client.ws.send(piece)
    assert client.reply(7) == {"s": "ok", "d": ""}
    # The read back is longer than 16384 characters, so the server splits it the same way.
    client.ws.settimeout(5)
    r = client.request("g", {"p": "/big", "q": {}})
    count = client.ws.recv()
    assert count.isdigit() and int(count) >= 3
    joined = "".join(client.ws.recv() for _ in range(int(count)))
    assert json.loads(joined) == {"t": "d", "d": {"r": r, "b": {"s": "ok", "d": "x" * 40000}}}


def test_split_messages_cut_on_utf8_boundaries(open_server):
    client = open_server.client()
    value = "é€😀" * 6000  # multi-byte characters across every 16 KiB boundary
    assert client.call("p", {"p": "/unicode", "d": value})["s"] == "ok"
    assert client.call("g", {"p": "/unicode", "q": {}})["d"] == value


def test_fragmented_websocket_message_is_reassembled(open_server):
    client = open_server.client()
    text = json.dumps({"t": "d", "d": {"r": 3, "a": "p", "b": {"p": "/frag", "d": "y" * 3000}}}).encode()
    chunks = [text[i:i + 1000] for i in range(0, len(text), 1000)]
    client.ws.send_frame(websocket.ABNF(fin=0, opcode=websocket.ABNF.OPCODE_TEXT, data=chunks[0]))
    for chunk in chunks[1:-1]:
        client.ws.send_frame(websocket.ABNF(fin=0, opcode=websocket.ABNF.OPCODE_CONT, data=chunk))
    client.ws.send_frame(websocket.ABNF(fin=1, opcode=websocket.ABNF.OPCODE_CONT, data=chunks[-1]))
    assert client.reply(3) == {"s": "ok", "d": ""}
    assert client.call("g", {"p": "/frag", "q": {}})["d"] == "y" * 3000


def test_hello_names_the_host_and_a_unique_session(open_server):
    one = open_server.client()
    two = open_server.client()
    assert one.hello["v"] == "5"
    assert one.hello["h"] == f"{open_server.host}:{open_server.port}"
    assert isinstance(one.hello["ts"], int)
    assert one.session != two.session
