"""A connection's share of a turn of the loop (issue 16): once its messages have taken
--slice-microseconds of one turn, it is not read again before the turn ends, so other clients'
messages that arrived meanwhile are handled between its messages rather than after all of them
(a client that sends many costly messages at once held everyone else for as long as they took,
within its message budget)."""
from conftest import Server
from wsraw import TEXT, frame, request


def order_of_writes(server_args, costly=50):
    """A flooder sends `costly` writes at once, each pushed to 100 listeners; a bystander writes
    right after. Where the bystander's write falls among the flooder's, as a watcher sees them."""
    server = Server("--rules", "open", "--disconnect-grace", "0", "--storage", "memory",
                    "--max-messages-per-second", "0", "--rx-buffer", "65536", *server_args)
    try:
        listeners = [server.client() for _ in range(100)]
        for listener in listeners:
            assert listener.listen("/order") is None
        watcher = server.client()
        assert watcher.listen("/order") is None
        flooder, bystander = server.client(), server.client()
        batch = b"".join(frame(TEXT, request(r, "p", {"p": f"/order/a{r:03d}", "d": r})) for r in range(1, costly + 1))
        assert len(batch) < 4096  # one TCP send, read by lws in one go (its service buffer is 4 KiB)
        flooder.ws.sock.sendall(batch)
        r = bystander.request("p", {"p": "/order/b", "d": "bystander"})
        assert bystander.reply(r, timeout=30)["s"] == "ok"
        seen = []
        while len(seen) < costly + 1:
            message = watcher.recv(timeout=30)
            if message.get("t") == "d" and message["d"].get("a") == "d":
                seen.append(message["d"]["b"]["p"])
        assert sorted(seen) == sorted([f"order/a{r:03d}" for r in range(1, costly + 1)] + ["order/b"])
        assert server.alive()
        return seen.index("order/b")
    finally:
        server.stop()


def test_a_client_sending_many_costly_messages_at_once_lets_others_go_between_them():
    position = order_of_writes([])
    assert position < 25, f"the bystander's write waited behind {position} of the flooder's 50"


def test_without_a_share_of_the_turn_the_bystander_waits_behind_the_whole_batch():
    # The control: with a share far longer than the batch takes, the same run puts the bystander's
    # write behind every write the flooder sent at once (so the test above measures the share).
    assert order_of_writes(["--slice-microseconds", "100000"]) == 50
