"""Big reads answered in slices (issue 16): a `g` whose answer passes --slice-reads-over is computed
and serialized a slice at a time between other clients' messages, so a bystander is answered while
it is being built; what the reader is sent meanwhile waits behind it, in order; the read budget
still refuses what is too big."""
import select
import time

import requests

from conftest import Server

OWNER = {"Authorization": "Bearer owner"}
CHILDREN = 100_000


def preload(server, path, count):
    for base in range(0, count, 20_000):
        batch = {f"k{i:06d}": {"name": f"user {i}", "score": i % 97} for i in range(base, min(count, base + 20_000))}
        response = requests.patch(f"http://{server.host}:{server.port}{path}.json", params={"ns": "demo"}, json=batch,
                                  headers=OWNER, timeout=60)
        assert response.status_code == 200, response.text


def readable(client):
    """Whether the server has sent the client anything not yet read."""
    return bool(select.select([client.ws.sock], [], [], 0)[0])


def test_a_bystander_is_answered_while_a_big_read_is_built_and_the_reader_gets_it_whole():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", CHILDREN)
        reader, writer, watcher = server.client(), server.client(), server.client()
        watcher.listen("/x")
        r = reader.request("g", {"p": "/big", "q": {}})
        time.sleep(0.05)  # the server is at work on the read
        # Answered at once, the read held the loop until its whole answer was written (seconds in a
        # debug build): the reader had its first bytes before the writer's ack. In slices, the
        # write is handled between two slices, while nothing of the answer has been sent yet.
        assert writer.call("p", {"p": "/x", "d": 1}, timeout=30)["s"] == "ok"
        assert watcher.push("x") == 1
        assert not readable(reader), "the big answer was sent before the bystander was served"
        answer = reader.reply(r, timeout=120)
        assert answer["s"] == "ok" and len(answer["d"]) == CHILDREN
        assert answer["d"]["k012345"] == {"name": "user 12345", "score": 12345 % 97}
        # A limited query through the slices: the window, as a read at once gives it.
        window = reader.call("g", {"p": "/big", "q": {"i": "score", "l": 3, "vf": "r"}}, timeout=60)
        expected = sorted((i % 97, f"k{i:06d}") for i in range(CHILDREN))[-3:]
        assert window["s"] == "ok" and sorted(window["d"]) == sorted(key for _, key in expected), window
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_what_the_reader_is_sent_meanwhile_waits_behind_its_big_answer():
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)
        reader = server.client()
        assert reader.listen("/x") is None
        # Pipelined: the write's push and ack are made while the read is still in slices.
        get = reader.request("g", {"p": "/big", "q": {}})
        write = reader.request("p", {"p": "/x", "d": "after"})
        seen = []
        while len(seen) < 3:
            message = reader.recv(timeout=60)
            body = message["d"]
            seen.append(("reply", body["r"]) if "r" in body else ("push", body["b"]["p"]))
        assert seen == [("reply", get), ("push", "x"), ("reply", write)], seen
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_many_readers_at_once_each_get_their_whole_answer_and_a_bystander_is_served():
    # More readers than are built at once (4): the others wait their turn, none is starved.
    server = Server("--rules", "open", "--storage", "memory", "--max-messages-per-second", "0")
    try:
        preload(server, "/big", 20_000)
        readers = [server.client() for _ in range(10)]
        writer, watcher = server.client(), server.client()
        watcher.listen("/x")
        numbers = [reader.request("g", {"p": "/big", "q": {"i": ".key", "l": 1 + index * 2_000, "vf": "l"}})
                   for index, reader in enumerate(readers)]
        assert writer.call("p", {"p": "/x", "d": 1}, timeout=30)["s"] == "ok"
        assert watcher.push("x") == 1
        for index, (reader, number) in enumerate(zip(readers, numbers)):
            answer = reader.reply(number, timeout=120)
            assert answer["s"] == "ok" and sorted(answer["d"]) == [f"k{i:06d}" for i in range(1 + index * 2_000)], index
    finally:
        assert server.alive(), "the server died"
        server.stop()


def test_a_sliced_read_over_the_budget_is_refused_with_what_to_do():
    server = Server("--rules", "open", "--storage", "memory", "--max-read-bytes", "1000000")
    try:
        preload(server, "/big", 40_000)  # about 1.3 MB of JSON
        client = server.client()
        reply = client.call("g", {"p": "/big", "q": {}}, timeout=60)
        assert reply["s"] == "too_big" and "--max-read-bytes" in reply["d"] and "limitToLast" in reply["d"], reply
        window = client.call("g", {"p": "/big", "q": {"i": ".key", "l": 2, "vf": "l"}}, timeout=60)
        assert window == {"s": "ok", "d": {"k000000": {"name": "user 0", "score": 0},
                                           "k000001": {"name": "user 1", "score": 1}}}, window
    finally:
        assert server.alive(), "the server died"
        server.stop()
    assert server.stderr.count("--max-read-bytes") == 1, "logged once per connection"
