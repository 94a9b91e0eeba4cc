"""Too few file descriptors (`ulimit -n`): both binaries refuse to start with one line that says how
many they need and how to raise the limit, instead of aborting in libuv, crashing while closing a
loop that never opened, or hanging on a connection whose socket could not be opened."""
import resource
import subprocess
import tempfile

import pytest

from conftest import CLIENT, SERVER, Server, exit_text


def limited(n):
    """preexec_fn: soft and hard RLIMIT_NOFILE set to n, as `ulimit -n n` does."""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


@pytest.mark.parametrize("n", [5, 8, 11, 14, 24, 31])
def test_the_server_refuses_to_start_with_too_few_descriptors_and_says_why(n):
    command = [SERVER, "--port", "0", "--rules", "open", "--data-dir", tempfile.mkdtemp(prefix="presence-fd-")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limited(n))
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"ulimit -n {n}: the server kept running: {out} {err}")
    assert proc.returncode == 1, f"ulimit -n {n}: {exit_text(proc.returncode)}\n{err}"
    assert "listening on" not in out
    assert "needs at least 32 open file descriptors" in err, err
    assert f"may open only {n} (ulimit -n" in err, err


def test_the_server_starts_at_its_stated_minimum_and_serves():
    server = Server("--rules", "open", preexec_fn=limited(32))
    try:
        writer, watcher = server.client(), server.client()
        assert watcher.listen("/a") is None
        assert writer.call("p", {"p": "/a", "d": 1})["s"] == "ok"
        assert watcher.push("a") == 1
        writer.close()
        watcher.close()
        assert server.alive()
    finally:
        server.stop()


@pytest.mark.parametrize("n", [5, 7, 8, 10, 12, 14])
def test_the_client_refuses_to_start_with_too_few_descriptors_and_says_why(n):
    # No server is needed: the check comes before anything is opened (at 10 to 12 descriptors the
    # client used to hang forever on a socket lws could not open; at 5 to 8 it aborted or crashed).
    command = [CLIENT, "get", "/x", "--server", "ws://127.0.0.1:9", "--uid", "alice"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=20, preexec_fn=limited(n))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"ulimit -n {n}: presence-client hung")
    assert result.returncode == 2, f"ulimit -n {n}: {exit_text(result.returncode)}\n{result.stderr}"
    assert "presence-client needs at least 16 open file descriptors" in result.stderr, result.stderr
    assert f"may open only {n} (ulimit -n" in result.stderr, result.stderr


def fd_table_slots(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("FDSize:"))


@pytest.mark.parametrize("n", [4096, 20000])
def test_the_server_reserves_its_descriptor_table_at_start(n):
    # A table grown on demand doubles as connections arrive, and in a threaded process each doubling
    # waits for an RCU grace period: the loop stopped 10-30 ms when 1,000 connections came at once.
    n = min(n, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    server = Server("--rules", "open", preexec_fn=limited(n))
    try:
        assert fd_table_slots(server.proc.pid) >= n  # without the reservation: 64 or 256 slots
        client = server.client()
        assert client.call("p", {"p": "/a", "d": 1})["s"] == "ok"
        client.close()
    finally:
        server.stop()


def soft_fd_limit(pid):
    with open(f"/proc/{pid}/limits") as limits:
        return int(next(line for line in limits if line.startswith("Max open files")).split()[3])


def test_max_fds_sets_the_servers_descriptor_limit_above_and_below_ulimit():
    # lws walks a table of this size per connection it accepts or closes: a server raised to a hard
    # limit of a million would pay for it on every handshake.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for start, wanted in [(64, 3000), (hard, 2000)]:
        server = Server("--rules", "open", "--max-fds", str(wanted),
                        preexec_fn=lambda start=start: resource.setrlimit(resource.RLIMIT_NOFILE, (start, hard)))
        try:
            assert soft_fd_limit(server.proc.pid) == min(wanted, hard)
            assert fd_table_slots(server.proc.pid) >= min(wanted, hard)
            clients = [server.client() for _ in range(3)]
            assert clients[0].call("p", {"p": "/a", "d": 1})["s"] == "ok"
            for client in clients:
                client.close()
        finally:
            server.stop()
    proc = subprocess.run([SERVER, "--max-fds", "31", "--port", "0"], capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "--max-fds must be between 32 and 16777216" in proc.stderr, proc.stderr
