"""A damaged data directory stops the server at start-up, with a message on stderr that names the file,
says what is wrong and how to recover, and a non-zero exit: it is never served as an empty database."""
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time

import pytest
import requests

from conftest import SERVER, Server

OWNER = {"Authorization": "Bearer owner"}


def start(data_dir, *args, user=None):
    """Runs the server on data_dir; returns (exit code, stderr), or kills it if it starts listening."""
    command = [SERVER, "--port", "0", "--rules", "open", "--data-dir", data_dir, *args]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the server kept running on a damaged directory: {out} {err}")
    assert "listening on" not in out, f"the server started: {out} {err}"
    return proc.returncode, err


def populated_directory():
    """A data directory with some data written through REST, after a clean stop."""
    data_dir = tempfile.mkdtemp(prefix="presence-faults-")
    server = Server("--rules", "open", data_dir=data_dir)
    try:
        big = {f"user{i}": {"online": i % 2 == 0, "lastSeen": i, "name": "x" * 300} for i in range(300)}
        assert requests.put(f"http://{server.host}:{server.port}/users.json", params={"ns": "demo"}, json=big,
                            headers=OWNER, timeout=10).status_code == 200
    finally:
        assert server.stop() == 0
    return data_dir


def database(data_dir):
    return os.path.join(data_dir, "presence.sqlite")


def expect_refused(data_dir, *words, user=None):
    before = {name: open(os.path.join(data_dir, name), "rb").read() for name in os.listdir(data_dir)
              if os.path.isfile(os.path.join(data_dir, name))}
    code, err = start(data_dir, user=user)
    assert code != 0, err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert "Fatal error" not in err and "Illegal instruction" not in err, err
    after = {name: open(os.path.join(data_dir, name), "rb").read() for name in os.listdir(data_dir)
             if os.path.isfile(os.path.join(data_dir, name))}
    assert after == before, "a refused directory must be left as it was found"
    return err


def test_a_new_directory_starts_empty_and_an_existing_one_keeps_its_data():
    data_dir = tempfile.mkdtemp(prefix="presence-new-")
    os.rmdir(data_dir)
    server = Server("--rules", "open", data_dir=data_dir)
    try:
        url = f"http://{server.host}:{server.port}/users.json"
        assert requests.get(url, params={"ns": "demo"}, headers=OWNER, timeout=5).json() is None
        assert requests.put(url, params={"ns": "demo"}, json={"a": 1}, headers=OWNER, timeout=5).status_code == 200
    finally:
        assert server.stop() == 0
    again = Server("--rules", "open", data_dir=data_dir)
    try:
        url = f"http://{again.host}:{again.port}/users.json"
        assert requests.get(url, params={"ns": "demo"}, headers=OWNER, timeout=5).json() == {"a": 1}
    finally:
        again.stop()


def test_a_zero_byte_database_is_refused_with_what_to_do():
    data_dir = tempfile.mkdtemp(prefix="presence-empty-")
    open(database(data_dir), "wb").close()
    err = expect_refused(data_dir, database(data_dir), "empty (0 bytes)", "backup", "presence-server import",
                         "move it away")
    assert os.path.getsize(database(data_dir)) == 0


def test_a_garbage_file_is_refused():
    data_dir = tempfile.mkdtemp(prefix="presence-garbage-")
    with open(database(data_dir), "wb") as file:
        file.write(os.urandom(8192))
    expect_refused(data_dir, database(data_dir), "not a SQLite database")


def test_a_truncated_database_is_refused():
    data_dir = populated_directory()
    size = os.path.getsize(database(data_dir))
    os.truncate(database(data_dir), size // 2)
    expect_refused(data_dir, database(data_dir), "truncated")


def test_a_newer_schema_is_refused():
    data_dir = populated_directory()
    connection = sqlite3.connect(database(data_dir))
    connection.execute("PRAGMA user_version = 99")
    connection.commit()
    connection.close()
    expect_refused(data_dir, "schema version 99", "newer presence-server")


def test_a_damaged_wal_is_refused_and_a_whole_one_is_replayed():
    data_dir = tempfile.mkdtemp(prefix="presence-wal-")
    server = Server("--rules", "open", data_dir=data_dir)
    assert requests.put(f"http://{server.host}:{server.port}/kept.json", params={"ns": "demo"}, json={"v": 1},
                        headers=OWNER, timeout=5).status_code == 200
    server.kill()  # SIGKILL: the acknowledged write is only in the WAL
    wal = database(data_dir) + "-wal"
    assert os.path.getsize(wal) > 32

    whole = tempfile.mkdtemp(prefix="presence-wal-whole-")
    for name in ("presence.sqlite", "presence.sqlite-wal"):
        shutil.copy(os.path.join(data_dir, name), os.path.join(whole, name))
    again = Server("--rules", "open", data_dir=whole)
    try:
        assert requests.get(f"http://{again.host}:{again.port}/kept.json", params={"ns": "demo"},
                            headers=OWNER, timeout=5).json() == {"v": 1}
    finally:
        again.stop()

    with open(wal, "r+b") as file:
        file.seek(16)
        file.write(b"\xff\xff\xff\xff")
    expect_refused(data_dir, wal, "WAL", "last checkpoint")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to run the server as another user")
def test_a_database_the_server_cannot_write_is_refused():
    data_dir = populated_directory()
    os.chmod(data_dir, 0o755)
    os.chmod(database(data_dir), 0o644)  # owned by root: readable, not writable, by nobody
    expect_refused(data_dir, "not writable", user=65534)
    os.chmod(data_dir, 0o777)
    expect_refused(data_dir, database(data_dir), "read and write", user=65534)
