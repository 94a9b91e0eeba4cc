"""The engine's per-connection limits, read budget and namespace release, against the real binary:
the flags exist and are documented in --help, an offender gets a clear refusal (too_big / 413) that
is logged once, and nobody else is disturbed."""
import json
import subprocess
import time

import requests

from conftest import SERVER, Server

OWNER = {"Authorization": "Bearer owner"}
FLAGS = ["--max-listens-per-connection", "--max-queries-per-location", "--max-ondisconnect-ops", "--max-ondisconnect-bytes", "--max-read-bytes",
         "--max-hash-bytes", "--max-namespaces"]


def rest(server, method, path, headers=None, **kwargs):
    return requests.request(method, f"http://{server.host}:{server.port}{path}.json", headers={**OWNER, **(headers or {})}, timeout=10,
                            **kwargs)


def test_the_limits_are_flags_documented_in_help():
    out = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=30).stdout
    for flag in FLAGS:
        assert flag in out, flag
    bad = subprocess.run([SERVER, "--max-listens-per-connection", "0"], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--max-listens-per-connection" in bad.stderr


def test_distinct_queries_past_the_limit_at_one_location_are_refused_and_logged_once():
    """The tagged-window attack (issue 16): one connection's distinct queries at one location are
    bounded, so a write there costs at most that many windows for it."""
    server = Server("--rules", "open", "--storage", "memory", "--max-queries-per-location", "3")
    try:
        greedy = server.client()
        bystander = server.client()
        assert greedy.call("p", {"p": "/items", "d": {f"k{i}": {"ts": i} for i in range(10)}})["s"] == "ok"
        replies = [greedy.call("q", {"p": "/items", "q": {"i": "ts", "l": k, "vf": "r"}, "t": k, "h": ""})
                   for k in range(1, 7)]
        assert [reply["s"] for reply in replies] == ["ok"] * 3 + ["too_big"] * 3, replies
        assert "--max-queries-per-location" in replies[3]["d"], replies[3]
        assert bystander.call("q", {"p": "/items", "q": {"i": "ts", "l": 5, "vf": "r"}, "t": 1, "h": ""})["s"] == "ok"
        # A write moving every window: the greedy connection gets one merge per query it holds.
        assert greedy.call("p", {"p": "/items/k0", "d": {"ts": 99}})["s"] == "ok"
        merges = [m["d"]["b"] for m in greedy.pending if m.get("t") == "d" and m["d"].get("a") == "m"]
        assert sorted(merge["t"] for merge in merges) == [1, 2, 3], greedy.pending
        merge = bystander.wait_for(lambda m: m.get("d", {}).get("a") == "m")["d"]["b"]
        assert merge["t"] == 1 and merge["d"]["k0"] == {"ts": 99}, merge
        # The same query again is no new one; the plain listen is not a query; unlistening frees a place.
        assert greedy.call("q", {"p": "/items", "q": {"i": "ts", "l": 2, "vf": "r"}, "t": 2, "h": ""})["s"] == "ok"
        assert greedy.call("q", {"p": "/items", "h": ""})["s"] == "ok"
        assert greedy.call("q", {"p": "/items", "q": {"i": "ts", "l": 7, "vf": "r"}, "t": 7, "h": ""})["s"] == "too_big"
        assert greedy.call("n", {"p": "/items", "q": {"i": "ts", "l": 1, "vf": "r"}, "t": 1})["s"] == "ok"
        assert greedy.call("q", {"p": "/items", "q": {"i": "ts", "l": 7, "vf": "r"}, "t": 7, "h": ""})["s"] == "ok"
    finally:
        assert server.alive()
        server.stop()
    assert server.stderr.count("--max-queries-per-location") == 1, server.stderr


def test_the_query_limit_is_a_config_file_key(tmp_path):
    config = tmp_path / "presence.json"
    config.write_text('{"max-queries-per-location": 7}')
    printed = subprocess.run([SERVER, "--config", str(config), "--print-config"], capture_output=True, text=True, timeout=30)
    assert printed.returncode == 0 and json.loads(printed.stdout)["max-queries-per-location"] == 7, printed


def test_listens_and_ondisconnect_ops_past_the_limits_are_refused_and_logged_once():
    server = Server("--rules", "open", "--storage", "memory", "--disconnect-grace", "0",
                    "--max-listens-per-connection", "5", "--max-ondisconnect-ops", "3")
    try:
        greedy = server.client()
        bystander = server.client()
        bystander.listen("/room/r0")
        for index in range(5):
            greedy.listen(f"/room/r{index}")
        for index in range(5, 8):
            reply = greedy.call("q", {"p": f"/room/r{index}", "h": ""})
            assert reply["s"] == "too_big" and "--max-listens-per-connection" in reply["d"], reply
        for index in range(3):
            assert greedy.call("o", {"p": f"/status/s{index}", "d": "offline"})["s"] == "ok"
        reply = greedy.call("o", {"p": "/status/s3", "d": "offline"})
        assert reply["s"] == "too_big" and "--max-ondisconnect-ops" in reply["d"], reply
        # Nothing else is disturbed: the greedy client's own listens and writes, and the bystander.
        assert greedy.call("p", {"p": "/room/r0", "d": "hello"})["s"] == "ok"
        assert bystander.push("room/r0") == "hello"
        assert greedy.push("room/r0") == "hello"
        # The ops it holds run when it leaves.
        watcher = server.client()
        assert watcher.listen("/status") is None
        greedy.close()
        merged = watcher.wait_for(lambda m: m.get("d", {}).get("a") == "m")["d"]["b"]
        assert merged == {"p": "status", "d": {"s0": "offline", "s1": "offline", "s2": "offline"}}
    finally:
        assert server.alive()
        server.stop()
    log = server.stderr
    assert log.count("--max-listens-per-connection") == 1, log
    assert log.count("--max-ondisconnect-ops") == 1, log


def test_a_read_over_the_budget_is_refused_with_what_to_do_and_others_are_served():
    server = Server("--rules", "open", "--storage", "memory", "--max-read-bytes", "100000")
    try:
        big = {f"user{i}": {"online": i % 2 == 0, "lastSeen": i} for i in range(5000)}
        assert rest(server, "PUT", "/users", params={"ns": "demo"}, json=big).status_code == 200
        client = server.client()
        reply = client.call("g", {"p": "/users", "q": {}})
        assert reply["s"] == "too_big" and "--max-read-bytes" in reply["d"] and "limitToLast" in reply["d"], reply
        reply = client.call("q", {"p": "/users", "h": ""})
        assert reply["s"] == "too_big", reply
        # A limited query on the same location is answered, with the right window.
        r = client.request("q", {"p": "/users", "q": {"l": 2, "vf": "r", "i": "lastSeen"}, "t": 1, "h": ""})
        window = client.wait_for(lambda m: m.get("d", {}).get("a") == "d")["d"]["b"]
        assert window["t"] == 1 and sorted(window["d"]) == ["user4998", "user4999"]
        assert client.reply(r)["s"] == "ok"
        # REST: 413 saying what to do; shallow=true and a limited query fit.
        response = rest(server, "GET", "/users", params={"ns": "demo"})
        assert response.status_code == 413, response.text
        assert "shallow=true" in response.json()["error"]
        shallow = rest(server, "GET", "/users", params={"ns": "demo", "shallow": "true"})
        assert shallow.status_code == 200 and len(shallow.json()) == 5000
        limited = rest(server, "GET", "/users", params={"ns": "demo", "orderBy": '"lastSeen"', "limitToLast": "3"})
        assert limited.status_code == 200 and sorted(limited.json()) == ["user4997", "user4998", "user4999"]
        assert client.call("p", {"p": "/users/user1/online", "d": True})["s"] == "ok"
    finally:
        assert server.alive()
        server.stop()


def test_a_hash_over_the_budget_is_refused_at_once_and_others_are_served():
    """A transaction (p with h), an ETag read and an if-match write hash the whole location at once:
    on 20,000 children that held the loop for seconds (issue 16). Past --max-hash-bytes they are
    refused (too_big, REST 413) without hashing; within it they work."""
    server = Server("--rules", "open", "--storage", "memory", "--max-hash-bytes", "100000")
    try:
        big = {f"user{i}": {"online": i % 2 == 0, "lastSeen": i} for i in range(20000)}
        assert rest(server, "PUT", "/users", params={"ns": "demo"}, json=big).status_code == 200
        assert rest(server, "PUT", "/counter", params={"ns": "demo"}, json=1).status_code == 200
        client, bystander = server.client(), server.client()
        for hash_given in ["guess", "AAAAAAAAAAAAAAAAAAAAAAAAAAA="]:
            started = time.monotonic()
            reply = client.call("p", {"p": "/users", "d": None, "h": hash_given})
            assert reply["s"] == "too_big" and "--max-hash-bytes" in reply["d"], reply
            assert time.monotonic() - started < 5
        for headers in [{"X-Firebase-ETag": "true"}, {"If-None-Match": "x"}]:
            response = rest(server, "GET", "/users", params={"ns": "demo"}, headers=headers)
            assert response.status_code == 413 and "--max-hash-bytes" in response.json()["error"], response.text
        response = rest(server, "PUT", "/users", params={"ns": "demo"}, data="null", headers={"If-Match": "x"})
        assert response.status_code == 413, response.text
        assert len(rest(server, "GET", "/users", params={"ns": "demo", "shallow": "true"}).json()) == 20000
        # Within the budget: the counter's ETag, and a transaction on it.
        read = rest(server, "GET", "/counter", params={"ns": "demo"}, headers={"X-Firebase-ETag": "true"})
        assert read.status_code == 200 and read.headers.get("ETag"), read.headers
        assert rest(server, "PUT", "/counter", params={"ns": "demo"}, json=2,
                    headers={"If-Match": read.headers["ETag"]}).status_code == 200
        assert client.call("p", {"p": "/counter", "d": 3, "h": "stale"})["s"] == "datastale"
        assert bystander.call("p", {"p": "/users/user1/online", "d": True})["s"] == "ok"
    finally:
        assert server.alive()
        server.stop()
    assert server.stderr.count("--max-hash-bytes") == 1, server.stderr


def test_namespaces_of_gone_connections_are_released():
    server = Server("--rules", "open", "--storage", "memory")
    try:
        def namespaces():
            return requests.get(f"http://{server.host}:{server.port}/.admin/stats", headers=OWNER, timeout=5).json()["namespaces"]
        before = namespaces()
        for index in range(200):
            client = server.client(ns=f"throwaway{index}")
            client.call("g", {"p": "/x", "q": {}})
            client.close()
        kept = server.client(ns="kept")
        assert kept.call("p", {"p": "/x", "d": 1})["s"] == "ok"
        kept.close()
        deadline = 50
        while namespaces() > before + 1 and deadline > 0:
            deadline -= 1
            time.sleep(0.1)
        assert namespaces() == before + 1
    finally:
        assert server.alive()
        server.stop()
