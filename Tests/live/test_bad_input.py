"""Bad input gets a clear error for that client, loses nothing and never disturbs others."""
import json

import pytest
import websocket

from conftest import Server


def closed_with(client):
    """Reads until the server closes; returns (messages, close code)."""
    messages = []
    client.ws.settimeout(5)
    while True:
        opcode, data = client.ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return messages, int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        if opcode == websocket.ABNF.OPCODE_TEXT:
            messages.append(json.loads(data))


@pytest.fixture
def bystander(open_server):
    """Another user whose data and connection must survive every bad client."""
    client = open_server.client()
    assert client.call("p", {"p": "/kept", "d": {"value": 1}})["s"] == "ok"
    yield client
    assert client.call("g", {"p": "/kept", "q": {}})["d"] == {"value": 1}


def test_malformed_json_closes_with_a_reason(open_server, bystander):
    bad = open_server.client()
    bad.ws.send('{"t":"d","d":{"r":1,"a":"p",')
    messages, code = closed_with(bad)
    assert code == 1007
    assert messages and messages[0]["d"]["t"] == "e" and "invalid" in messages[0]["d"]["d"].lower()


def test_binary_frame_closes_with_1003(open_server, bystander):
    bad = open_server.client()
    bad.ws.send_binary(b"\x00\x01\x02")
    _, code = closed_with(bad)
    assert code == 1003


@pytest.mark.parametrize("fragmented", [False, True])
def test_oversized_message_closes_with_1009(fragmented):
    server = Server("--rules", "open", "--disconnect-grace", "0", "--max-message-bytes", "20000")
    try:
        ok = server.client()
        bad = server.client()
        text = json.dumps({"t": "d", "d": {"r": 1, "a": "p", "b": {"p": "/x", "d": "z" * 30000}}})
        if fragmented:
            bad.ws.send_frame(websocket.ABNF(fin=0, opcode=websocket.ABNF.OPCODE_TEXT, data=text[:15000].encode()))
            bad.ws.send_frame(websocket.ABNF(fin=1, opcode=websocket.ABNF.OPCODE_CONT, data=text[15000:].encode()))
        else:
            bad.ws.send(text)
        _, code = closed_with(bad)
        assert code == 1009
        assert ok.call("g", {"p": "/x", "q": {}}) == {"s": "ok", "d": None}
    finally:
        assert server.alive()
        server.stop()


def test_unknown_action_and_invalid_paths_get_an_error_reply(open_server, bystander):
    client = open_server.client()
    unknown = client.call("zz", {"p": "/x"})
    assert unknown["s"] != "ok" and "unknown action" in unknown["d"]
    bad_key = client.call("p", {"p": "/a/b.c", "d": 1})
    assert bad_key["s"] != "ok" and isinstance(bad_key["d"], str) and "b.c" in bad_key["d"]
    bad_data_key = client.call("p", {"p": "/a", "d": {"ok": 1, "not#ok": 2}})
    assert bad_data_key["s"] != "ok" and "not#ok" in bad_data_key["d"]
    too_deep = client.call("p", {"p": "/" + "/".join(["k"] * 33), "d": 1})
    assert too_deep["s"] != "ok"
    bad_sv = client.call("p", {"p": "/a", "d": {".sv": "nonsense"}})
    assert bad_sv["s"] != "ok"
    # Nothing was half-applied: the valid sibling "ok" of the refused write is absent.
    assert client.call("g", {"p": "/a", "q": {}})["d"] is None
    # The connection still works.
    assert client.call("p", {"p": "/a", "d": 2})["s"] == "ok"


def test_multi_path_update_is_all_or_nothing(open_server, bystander):
    client = open_server.client()
    reply = client.call("m", {"p": "/multi", "d": {"good": 1, "bad]key": 2}})
    assert reply["s"] != "ok"
    assert client.call("g", {"p": "/multi", "q": {}})["d"] is None


def test_garbage_envelope_closes_but_others_continue(open_server, bystander):
    bad = open_server.client()
    bad.ws.send('{"hello":"world"}')
    _, code = closed_with(bad)
    assert code == 1007


def test_invalid_query_gets_a_clear_error_not_a_hang(open_server, bystander):
    client = open_server.client()
    reply = client.call("q", {"p": "/users", "q": {"l": 0, "vf": "l", "i": "age"}, "t": 1, "h": ""})
    assert reply["s"] != "ok" and isinstance(reply["d"], str)
    reply = client.call("q", {"p": "/users", "q": "not an object", "t": 2, "h": ""})
    assert reply["s"] != "ok" and isinstance(reply["d"], str)


def test_other_websocket_paths_are_refused(open_server):
    with pytest.raises(websocket.WebSocketBadStatusException):
        websocket.create_connection(f"ws://{open_server.host}:{open_server.port}/elsewhere", timeout=5)
