"""A burst of new connections is accepted a few per turn of the loop (--max-accepts-per-turn,
issue 16's connection storm), and every one of them is served: none refused, none lost, over
plain TCP and TLS. The burst is made while the server is stopped (SIGSTOP), so that all of it waits
in the kernel's queue at once, where lws alone would accept it all in one turn."""
import concurrent.futures
import json
import os
import re
import signal
import socket
import ssl
import time

import requests
import websocket

from conftest import Server
from test_tls_and_config import pki  # noqa: F401 (a fixture)
from wsraw import Reader

UPGRADE = ("GET /.ws?v=5&ns=demo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


def metrics(server, **request):
    scheme = "https" if request else "http"
    text = requests.get(f"{scheme}://{server.host}:{server.port}/metrics", timeout=5, **request).text
    found = dict(re.findall(r"^(presence_accepts_\w+) (\d+(?:\.\d+)?)$", text, re.M))
    return {name: float(value) for name, value in found.items()}


def hello_after_upgrade(sock, timeout=20):
    """Reads the 101 and the server's hello frame on a raw connection; returns the hello."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed during the upgrade: {data!r}"
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    reader = Reader(sock, rest)
    return json.loads(reader.next(timeout)[1])


def test_a_burst_of_connections_is_accepted_a_few_a_turn_and_every_one_is_served():
    server = Server("--rules", "open", "--storage", "memory", "--max-accepts-per-turn", "2")
    try:
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            burst = []
            for _ in range(300):
                sock = socket.create_connection((server.host, server.port), timeout=5)
                sock.sendall(UPGRADE)
                burst.append(sock)
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        hellos = [hello_after_upgrade(sock) for sock in burst]
        assert all(hello["t"] == "c" and hello["d"]["t"] == "h" for hello in hellos)
        counted = metrics(server)
        # lws alone takes all 300 in the first turn; governed, two a turn, and each turn's third
        # waits (parked) for the next.
        assert counted["presence_accepts_most_in_one_turn"] <= 2, counted
        assert counted["presence_accepts_deferred_total"] >= 100, counted
        # Every connection of the burst is a working client.
        client = server.client()
        assert client.call("p", {"p": "/ok", "d": 1})["s"] == "ok"
        for sock in burst:
            sock.close()
        assert server.alive()
    finally:
        server.stop()


def test_a_burst_of_tls_connections_is_accepted_a_few_a_turn_and_every_one_is_served(pki):  # noqa: F811
    tmp, issue = pki
    cert, key = issue("server", 1)
    server = Server("--rules", "open", "--storage", "memory", "--tls-cert", str(cert), "--tls-key", str(key),
                    "--max-accepts-per-turn", "1")
    trust = {"sslopt": {"ca_certs": str(tmp / "ca.pem"), "check_hostname": False}}

    def connect_and_hear_hello(_):
        ws = websocket.create_connection(f"wss://{server.host}:{server.port}/.ws?v=5&ns=demo", timeout=20, **trust)
        try:
            return json.loads(ws.recv())
        finally:
            ws.close()

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=30) as pool:
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                futures = [pool.submit(connect_and_hear_hello, n) for n in range(30)]
                time.sleep(1)  # every connect done by the kernel, every ClientHello waiting
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            hellos = [future.result(timeout=30) for future in futures]
        assert all(hello["d"]["t"] == "h" for hello in hellos)
        counted = metrics(server, verify=str(tmp / "ca.pem"))
        assert counted["presence_accepts_most_in_one_turn"] <= 1, counted
        assert counted["presence_accepts_deferred_total"] >= 10, counted
        assert server.alive()
    finally:
        server.stop()
