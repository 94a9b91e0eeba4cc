"""Queries over WebSocket (tagged listens, g) and REST, transactions and ETags."""
import json

import requests

OWNER = {"Authorization": "Bearer owner"}
SCORES = {"a": {"score": 5, "name": "ann"}, "b": {"score": 1, "name": "bob"}, "c": {"score": 9, "name": "cy"},
          "d": {"score": 3, "name": "di"}}


def seed(server, path, value):
    r = requests.put(f"http://{server.host}:{server.port}{path}.json", params={"ns": "demo"}, data=json.dumps(value),
                     headers=OWNER, timeout=5)
    assert r.status_code == 200, r.text


def rest_get(server, path, **params):
    params.setdefault("ns", "demo")
    return requests.get(f"http://{server.host}:{server.port}{path}.json", params=params, timeout=5)


def test_tagged_listen_keeps_the_limit_window_right(open_server):
    seed(open_server, "/scores", SCORES)
    client = open_server.client()
    query = {"i": "score", "l": 2, "vf": "r"}  # orderByChild('score').limitToLast(2)
    r = client.request("q", {"p": "/scores", "q": query, "t": 7, "h": ""})
    first = client.wait_for(lambda m: m.get("t") == "d" and m["d"].get("a") == "d")
    assert first["d"]["b"]["t"] == 7 and first["d"]["b"]["d"] == {"a": SCORES["a"], "c": SCORES["c"]}
    assert client.reply(r) == {"s": "ok", "d": {}}
    # A child enters the window (score 7 beats 5): the whole window is pushed again, tagged.
    writer = open_server.client()
    assert writer.call("p", {"p": "/scores/e", "d": {"score": 7, "name": "eve"}})["s"] == "ok"
    pushed = client.wait_for(lambda m: m.get("t") == "d" and m["d"].get("a") == "d" and m["d"]["b"].get("t") == 7)
    assert pushed["d"]["b"]["d"] == {"c": SCORES["c"], "e": {"score": 7, "name": "eve"}}
    # Unlisten with the same query stops the pushes.
    client.send({"t": "d", "d": {"r": 99, "a": "n", "b": {"p": "/scores", "q": query, "t": 7}}})
    assert writer.call("p", {"p": "/scores/f", "d": {"score": 100}})["s"] == "ok"
    assert client.call("s", {})["s"] == "ok"
    assert not any(m["d"].get("a") == "d" for m in client.pending if m.get("t") == "d")


def test_get_with_a_query_returns_the_filtered_result(open_server):
    seed(open_server, "/scores", SCORES)
    client = open_server.client()
    reply = client.call("g", {"p": "/scores", "q": {"i": "score", "sp": 3, "ep": 5}})
    assert reply == {"s": "ok", "d": {"a": SCORES["a"], "d": SCORES["d"]}}
    bad = client.call("g", {"p": "/scores", "q": {"i": "score", "l": -1}})
    assert bad["s"] != "ok" and isinstance(bad["d"], str)


def test_rest_query_forms(open_server):
    seed(open_server, "/scores", SCORES)
    by_child = rest_get(open_server, "/scores", orderBy='"score"', limitToFirst="2").json()
    assert by_child == {"b": SCORES["b"], "d": SCORES["d"]}
    assert rest_get(open_server, "/scores", orderBy='"$key"', startAt='"b"', endAt='"c"').json() == {"b": SCORES["b"], "c": SCORES["c"]}
    assert rest_get(open_server, "/scores", orderBy='"score"', equalTo="9").json() == {"c": SCORES["c"]}
    assert rest_get(open_server, "/scores", orderBy='"score"', startAfter="5").json() == {"c": SCORES["c"]}
    assert rest_get(open_server, "/scores", orderBy='"score"', endBefore="3").json() == {"b": SCORES["b"]}
    seed(open_server, "/values", {"x": 3, "y": 1, "z": 2})
    assert rest_get(open_server, "/values", orderBy='"$value"', limitToLast="2").json() == {"x": 3, "z": 2}
    missing = rest_get(open_server, "/scores", limitToFirst="2")
    assert missing.status_code == 400 and "orderBy" in missing.json()["error"]


def test_etags_and_conditional_requests(open_server):
    seed(open_server, "/counter", 1)
    base = f"http://{open_server.host}:{open_server.port}/counter.json"
    got = requests.get(base, params={"ns": "demo"}, headers={"X-Firebase-ETag": "true"}, timeout=5)
    etag = got.headers["ETag"]
    assert len(etag) == 28 and got.json() == 1
    assert requests.get(base, params={"ns": "demo"}, headers={"if-none-match": etag}, timeout=5).status_code == 304
    ok = requests.put(base, params={"ns": "demo"}, headers={"if-match": etag}, data="2", timeout=5)
    assert ok.status_code == 200 and ok.headers["ETag"] != etag
    stale = requests.put(base, params={"ns": "demo"}, headers={"if-match": etag}, data="3", timeout=5)
    assert stale.status_code == 412 and stale.json() == 2 and stale.headers["ETag"] == ok.headers["ETag"]
    absent = f"http://{open_server.host}:{open_server.port}/fresh.json"
    assert requests.get(absent, params={"ns": "demo"}, headers={"X-Firebase-ETag": "true"}, timeout=5).headers["ETag"] == "null_etag"
    assert requests.put(absent, params={"ns": "demo"}, headers={"if-match": "null_etag"}, data="1", timeout=5).status_code == 200
    assert requests.put(absent, params={"ns": "demo"}, headers={"if-match": "null_etag"}, data="1", timeout=5).status_code == 412


def test_websocket_transaction_answers_datastale_on_a_changed_value(open_server):
    seed(open_server, "/tx", {"n": 1})
    etag = rest_get(open_server, "/tx").headers.get("ETag") or requests.get(
        f"http://{open_server.host}:{open_server.port}/tx.json", params={"ns": "demo"},
        headers={"X-Firebase-ETag": "true"}, timeout=5).headers["ETag"]
    client = open_server.client()
    assert client.call("p", {"p": "/tx", "d": {"n": 2}, "h": etag}) == {"s": "ok", "d": ""}
    stale = client.call("p", {"p": "/tx", "d": {"n": 3}, "h": etag})
    assert stale["s"] == "datastale"
    assert client.call("g", {"p": "/tx", "q": {}})["d"] == {"n": 2}
