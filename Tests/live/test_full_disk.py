"""A full disk at run time (issue 16), on a real small filesystem (a 4 MiB tmpfs; the test is
skipped where mounting one is not allowed): a write that cannot be stored is never acknowledged
until it is, new writes are refused with `unavailable` (REST 503), reads go on, one line is
logged each way, and the server recovers by itself when space returns."""
import json
import os
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import Server


@pytest.fixture
def small_disk():
    directory = tempfile.mkdtemp(prefix="presence-full-disk-")
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", directory],
                                           capture_output=True).returncode != 0:
        os.rmdir(directory)
        pytest.skip("mounting a small tmpfs needs root (CI containers may not allow it)")
    yield directory
    subprocess.run(["umount", "-l", directory], capture_output=True)
    os.rmdir(directory)


def fill(directory, leave):
    """Fills the filesystem, then frees `leave` bytes; returns the filler's path."""
    filler = os.path.join(directory, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    size = os.path.getsize(filler)
    os.truncate(filler, max(0, size - leave))
    return filler


def wait_for_log(server, text, timeout=10):
    deadline = time.time() + timeout
    while text not in server.read_log():
        assert time.time() < deadline, f"{text!r} never logged"
        time.sleep(0.05)


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(small_disk):
    server = Server("--rules", "open", "--disconnect-grace", "0", "--data-dir", small_disk)
    base = f"http://{server.host}:{server.port}"
    try:
        client = server.client()
        assert client.call("p", {"p": "/kept", "d": "before"})["s"] == "ok"
        filler = fill(small_disk, leave=200_000)
        # A write larger than the room left: applied, but its commit fails, so no acknowledgement.
        big = "b" * 700_000
        r_big = client.request("p", {"p": "/big", "d": big})
        wait_for_log(server, "storage failed")
        assert server.read_log().count("storage failed") == 1
        # Writes are now refused, with a reason, on both protocols; nothing of them is applied.
        # (The writer of the held write hears nothing more until it is acknowledged: whatever is
        # sent to a connection waits behind its held acknowledgement, as always.)
        other = server.client()
        refused = other.call("p", {"p": "/kept", "d": "during"})
        assert refused["s"] == "unavailable" and "retry later" in refused["d"], refused
        assert other.call("o", {"p": "/kept", "d": "gone"})["s"] == "unavailable"
        r_refused = client.request("p", {"p": "/kept", "d": "also refused"})
        rest = requests.put(f"{base}/kept.json", params={"ns": "demo"}, data=json.dumps("rest"), headers={"Authorization": "Bearer owner"}, timeout=5)
        assert rest.status_code == 503 and rest.headers.get("Retry-After") == "5", rest.text
        # Reads go on, over both protocols.
        assert other.call("g", {"p": "/kept", "q": {}})["d"] == "before"
        assert requests.get(f"{base}/kept.json", params={"ns": "demo"}, timeout=5).json() == "before"
        assert 'presence_storage_failing 1' in requests.get(f"{base}/metrics", timeout=5).text
        # The big write is still not acknowledged while the disk stays full.
        time.sleep(1)
        assert not any(m.get("d", {}).get("r") == r_big for m in client.pending)
        # Room again: the retried commit succeeds, the held acknowledgement goes out, writes work.
        os.remove(filler)
        assert client.reply(r_big, timeout=15) == {"s": "ok", "d": ""}
        assert client.reply(r_refused)["s"] == "unavailable"
        wait_for_log(server, "storage recovered")
        assert client.call("p", {"p": "/kept", "d": "after"})["s"] == "ok"
        assert requests.put(f"{base}/rest.json", params={"ns": "demo"}, data="1", headers={"Authorization": "Bearer owner"}, timeout=5).status_code == 200
        # Everything acknowledged is durable: a crash and a restart keep it.
        server.kill()
        server = Server("--rules", "open", "--disconnect-grace", "0", "--data-dir", small_disk)
        reader = server.client()
        assert reader.call("g", {"p": "/kept", "q": {}})["d"] == "after"
        assert reader.call("g", {"p": "/big", "q": {}})["d"] == big
        assert reader.call("g", {"p": "/rest", "q": {}})["d"] == 1
    finally:
        assert server.alive()
        server.stop()
