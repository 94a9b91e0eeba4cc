"""presence-client's database commands, auth options and errors against the real server."""
import json

import pytest

from conftest import CLIENT, run_client


def run(server, *args, auth=("--uid", "alice"), timeout=15):
    argv = [CLIENT, *args, "--server", f"ws://{server.host}:{server.port}", "--ns", "demo", *auth]
    return run_client(argv, timeout=timeout)


def test_set_get_update_remove_with_server_values(presence_server):
    s = run(presence_server, "set", "users/alice/presence", '{"online":true,"lastSeen":".sv:timestamp"}')
    assert s.returncode == 0 and s.stdout.strip() == "ok", s.stderr
    g = run(presence_server, "get", "users/alice/presence", auth=("--uid", "bob"))
    value = json.loads(g.stdout)
    assert g.returncode == 0 and value["online"] is True and isinstance(value["lastSeen"], int)
    u = run(presence_server, "update", "users/alice/presence", '{"online":false}')
    assert u.returncode == 0, u.stderr
    assert json.loads(run(presence_server, "get", "users/alice/presence").stdout)["online"] is False
    r = run(presence_server, "remove", "users/alice/presence")
    assert r.returncode == 0, r.stderr
    assert run(presence_server, "get", "users/alice/presence").stdout.strip() == "null"


def test_push_and_listen_as_admin(presence_server):
    p = run(presence_server, "push", "users", '{"presence":{"online":true,"lastSeen":1}}', auth=("--admin",))
    key = p.stdout.strip()
    assert p.returncode == 0 and len(key) == 20, p.stderr
    listen = run(presence_server, "listen", f"users/{key}/presence", "--count", "1", "--json", auth=("--uid", "bob"))
    line = json.loads(listen.stdout.splitlines()[0])
    assert listen.returncode == 0 and line["value"] == {"online": True, "lastSeen": 1}


def test_permission_denied_exits_3(presence_server):
    r = run(presence_server, "set", "users/bob/presence", '{"online":true,"lastSeen":1}')
    assert r.returncode == 3 and "permission_denied" in r.stderr


def test_bad_token_exits_4(presence_server):
    r = run(presence_server, "get", "users", auth=("--token", "not.a.jwt"))
    assert r.returncode == 4 and "invalid_token" in r.stderr


def test_refused_connection_exits_2():
    r = run_client([CLIENT, "get", "users", "--uid", "alice", "--server", "ws://127.0.0.1:1"], timeout=15)
    assert r.returncode == 2 and "cannot connect" in r.stderr


def test_bad_arguments_exit_64():
    for argv in (["get", "users", "--server", "http://x"], ["simulate"], ["watch"], ["set", "a..b", "1"],
                 ["get", "x", "--secret-file", "/nonexistent"]):
        r = run_client([CLIENT, *argv], timeout=10)
        assert r.returncode == 64, (argv, r.returncode, r.stderr)


def test_hs256_secret_file_mints_a_token(tmp_path):
    from conftest import Server
    (tmp_path / "secret").write_bytes(b"0123456789abcdef0123456789abcdef-test-secret")
    server = Server("--rules", "open", "--auth", "hs256", "--secret-file", str(tmp_path / "secret"))
    try:
        ok = run(server, "set", "notes/a", "1", auth=("--uid", "alice", "--secret-file", str(tmp_path / "secret")))
        assert ok.returncode == 0, ok.stderr
        unsigned = run(server, "set", "notes/a", "2", auth=("--uid", "alice"))
        assert unsigned.returncode == 4, unsigned.stderr
    finally:
        server.stop()


def test_help_has_examples_for_every_command():
    for command in ["simulate", "watch", "get", "set", "update", "push", "remove", "listen", "token"]:
        r = run_client([CLIENT, command, "--help"], timeout=10)
        assert r.returncode == 0 and "Examples:" in r.stdout, command


def test_max_message_bytes_bounds_what_the_client_takes_and_sends(open_server):
    big = "x" * 5000
    assert run(open_server, "set", "big", json.dumps(big), auth=("--admin",)).returncode == 0
    # A reply over the limit ends the command with a clear error (exit 2), not a silent drop.
    g = run(open_server, "get", "big", "--max-message-bytes", "2048", auth=("--admin",))
    assert g.returncode == 2 and "larger than this client's limit of 2048 bytes" in g.stderr, (g.returncode, g.stderr)
    assert run(open_server, "get", "big", auth=("--admin",)).stdout.strip() == json.dumps(big)
    # A write over the limit is refused before it is sent (exit 3): nothing reaches the server.
    s = run(open_server, "set", "other", json.dumps(big), "--max-message-bytes", "2048", auth=("--admin",))
    assert s.returncode == 3 and "limit of 2048 bytes" in s.stderr, (s.returncode, s.stderr)
    assert run(open_server, "get", "other", auth=("--admin",)).stdout.strip() == "null"
    bad = run(open_server, "get", "big", "--max-message-bytes", "10", auth=("--admin",))
    assert bad.returncode == 64 and "--max-message-bytes" in bad.stderr


def test_a_write_over_the_servers_limit_is_refused_not_resent_forever():
    # The server takes 64 KiB; the client sends up to 1 MiB (a presence server's default). The
    # server closes with 1009 stating its limit: the client adopts it and refuses the write, naming
    # the limit. When the server's reset beats its close frame, the client cannot learn the limit;
    # it then refuses the write after three losses in a row. Either way it exits with an error
    # instead of reconnecting and resending for ever (as it did before).
    from conftest import Server
    server = Server("--rules", "open", "--storage", "memory", "--max-message-bytes", "65536")
    try:
        big = json.dumps("x" * 100_000)
        for extra in [(), ("--max-message-bytes", "4194304")]:
            s = run(server, "set", "big", big, *extra, auth=("--admin",), timeout=30)
            assert s.returncode == 3, (extra, s.returncode, s.stderr)
            assert ("larger than the server's limit of 65536 bytes" in s.stderr
                    or "not resending it (it may be larger than the server takes" in s.stderr), s.stderr
        assert run(server, "get", "big", auth=("--admin",)).stdout.strip() == "null"
        # At most three refusals per attempt, not a loop; the server is fine.
        assert 2 <= server.read_log().count("reason=1009") <= 6, server.read_log()
        assert run(server, "set", "small", '"ok"', auth=("--admin",)).returncode == 0
    finally:
        server.stop()
