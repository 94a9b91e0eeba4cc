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
