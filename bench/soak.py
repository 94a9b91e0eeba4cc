#!/usr/bin/env python3
"""Soak (issue 16): CLIENTS presence clients flap for DURATION seconds against one server (release
build), with reconnects, clean closes, abrupt drops and SIGKILLs of whole client processes, while
watchers follow every user's presence. Reports the server's RSS and open fds over time and checks
that every watcher's final view is exact.

- Clients are spread over WORKERS processes (asyncio, our own WebSocket framing, under nice 10).
  Client i signs in as user u<i>, registers onDisconnect {online: false, lastSeen: server time},
  writes {online: true, lastSeen: server time}, stays 2-20 s, then leaves: a close frame, a FIN
  without one, or a reset (a third each), and comes back 0.5-5 s later.
- Every KILL_EVERY seconds the driver SIGKILLs one worker process (all its clients drop at once,
  no close frames) and starts it again 2 s later.
- WATCHERS connections (one process) listen to /users and apply every push to their own copy.
- At the end: no more kills; every even user is made online and stays connected, every odd user
  connects (if it was not), is acknowledged online, then leaves. After the disconnect grace and a
  settle time, each watcher's copy, the server's own answer (REST GET /users as admin) and the
  expected state (even online, odd offline) must agree for every user.

    python3 bench/soak.py --server .build/release/presence-server --clients 5000 --duration 600

One JSON object on stdout; progress on stderr; exit 1 if a check failed.
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "Tests", "live"))

from conftest import unsigned_token  # noqa: E402
from wsraw import CLOSE, PING, PONG, TEXT, close_payload, frame  # noqa: E402


# asyncio keeps only weak references to tasks: a task nobody holds can be collected mid-await.
TASKS = set()


def spawn_task(coroutine):
    task = asyncio.ensure_future(coroutine)
    TASKS.add(task)
    task.add_done_callback(TASKS.discard)
    return task


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


class Connection:
    """A minimal asyncio WebSocket client: handshake, masked frames out, text frames in."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host, port, path):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head[:40])
        return cls(reader, writer)

    def send(self, text):
        self.writer.write(frame(TEXT, text))

    async def recv(self):
        """The next message: (opcode, payload). PINGs are answered (as every client library does)."""
        while True:
            head = await self.reader.readexactly(2)
            length = head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(await self.reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await self.reader.readexactly(8), "big")
            opcode, payload = head[0] & 0x0F, await self.reader.readexactly(length)
            if opcode != PING:
                return opcode, payload
            self.writer.write(frame(PONG, payload))

    async def reply(self, r):
        while True:
            opcode, payload = await self.recv()
            if opcode == CLOSE:
                raise ConnectionError("closed by the server")
            if opcode == TEXT:
                message = json.loads(payload)
                if message.get("d", {}).get("r") == r:
                    return message["d"]["b"]

    async def drop(self, how):
        if how == "clean":
            self.writer.write(frame(CLOSE, close_payload(1000)))
            try:
                await asyncio.wait_for(self.recv(), 2)
            except Exception:
                pass
            self.writer.close()
        elif how == "reset":
            sock = self.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.writer.transport.abort()
        else:
            self.writer.transport.abort()  # FIN, no close frame


async def go_online(host, port, uid):
    conn = await Connection.open(host, port, "/.ws?v=5&ns=soak")
    await conn.recv()  # hello
    presence = f"/users/{uid}/presence"
    conn.send(json.dumps({"t": "d", "d": {"r": 1, "a": "auth", "b": {"cred": unsigned_token(uid)}}}))
    conn.send(json.dumps({"t": "d", "d": {"r": 2, "a": "o", "b": {"p": presence, "d": {"online": False, "lastSeen": {".sv": "timestamp"}}}}}))
    conn.send(json.dumps({"t": "d", "d": {"r": 3, "a": "p", "b": {"p": presence, "d": {"online": True, "lastSeen": {".sv": "timestamp"}}}}}))
    if (await conn.reply(3)).get("s") != "ok":
        raise ConnectionError("online write refused")
    return conn


async def drain(conn):
    """Reads (and ignores) whatever the server sends while the client holds its connection."""
    try:
        while True:
            await conn.recv()
    except Exception:
        pass


async def flapper(host, port, uid, stats, final):
    conn = None
    while not final.is_set():
        try:
            conn = await go_online(host, port, uid)
            stats["online"] += 1
            reading = spawn_task(drain(conn))
            try:
                await asyncio.wait_for(final.wait(), random.uniform(2, 20))
            except asyncio.TimeoutError:
                pass
            if final.is_set():
                reading.cancel()
                break
            reading.cancel()
            await conn.drop(random.choice(["clean", "fin", "reset"]))
            conn = None
            stats["drops"] += 1
            await asyncio.sleep(random.uniform(0.5, 5))
        except Exception:
            stats["errors"] += 1
            conn = None
            await asyncio.sleep(1)
    # Final state: even users online and connected, odd users acknowledged online, then gone.
    index = int(uid[1:])
    for _ in range(10):
        try:
            if conn is None:
                conn = await go_online(host, port, uid)
            if index % 2:
                await conn.drop(random.choice(["clean", "fin", "reset"]))
                conn = None
            else:
                spawn_task(drain(conn))
            return conn
        except Exception:
            stats["errors"] += 1
            conn = None
            await asyncio.sleep(1)
    stats["final_failed"] += 1


def worker(host, port, first, count, final_flag, ready_path):
    os.nice(10)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    async def main():
        stats = {"online": 0, "drops": 0, "errors": 0, "final_failed": 0}
        final = asyncio.Event()

        async def watch_flag():
            while not os.path.exists(final_flag):
                await asyncio.sleep(0.5)
            final.set()

        spawn_task(watch_flag())
        tasks = []
        for i in range(first, first + count):
            tasks.append(spawn_task(flapper(host, port, f"u{i}", stats, final)))
            await asyncio.sleep(0.002)
        kept = await asyncio.gather(*tasks)
        with open(ready_path, "w") as f:
            json.dump({**stats, "connected": sum(1 for c in kept if c is not None)}, f)
        await asyncio.sleep(3600)  # hold the even users' connections until the driver ends us

    asyncio.run(main())


def apply(tree, path, value):
    parts = [p for p in path.split("/") if p]
    if not parts:
        return value if isinstance(value, dict) else {}
    node = tree
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return tree


def watcher(host, port, count, report_path, stop_flag):
    async def one(index, views):
        conn = await Connection.open(host, port, "/.ws?v=5&ns=soak")
        await conn.recv()
        conn.send(json.dumps({"t": "d", "d": {"r": 1, "a": "auth", "b": {"cred": unsigned_token(f"watcher{index}")}}}))
        conn.send(json.dumps({"t": "d", "d": {"r": 2, "a": "q", "b": {"p": "/users", "h": ""}}}))
        tree, pushes = {}, 0
        views[index] = {"tree": tree, "pushes": 0, "closed": False}
        try:
            while True:
                opcode, payload = await conn.recv()
                if opcode == CLOSE:
                    break
                if opcode != TEXT:
                    continue
                d = json.loads(payload).get("d", {})
                body = d.get("b", {})
                if d.get("a") == "d":
                    tree = apply(tree, body["p"][len("users"):], body["d"])
                elif d.get("a") == "m":
                    for key, value in body["d"].items():
                        tree = apply(tree, body["p"][len("users"):] + "/" + key, value)
                pushes += 1
                views[index] = {"tree": tree, "pushes": pushes, "closed": False}
        except Exception as error:
            views[index]["error"] = repr(error)
        views[index]["closed"] = True

    async def main():
        views = {}
        for index in range(count):
            spawn_task(one(index, views))
        while not os.path.exists(stop_flag):
            await asyncio.sleep(0.5)
        with open(report_path, "w") as f:
            json.dump(views, f)

    asyncio.run(main())


def status(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1])
    values["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return values


def online_map(tree):
    return {uid: bool(node.get("presence", {}).get("online")) for uid, node in tree.items() if isinstance(node, dict)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.path.join(os.path.dirname(HERE), ".build", "release", "presence-server"))
    parser.add_argument("--clients", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--kill-every", type=float, default=45)
    parser.add_argument("--grace", type=float, default=3)
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="presence-soak-")
    server_log = open(os.path.join(scratch, "server.log"), "wb")
    server = subprocess.Popen([args.server, "--port", "0", "--data-dir", os.path.join(scratch, "data"), "--rules", "open",
                               "--disconnect-grace", str(args.grace), "--limits", "none"],
                              stdout=subprocess.PIPE, stderr=server_log, text=True)
    match = re.search(r"listening on ([\d.]+):(\d+)", server.stdout.readline())
    host, port = match.group(1), int(match.group(2))
    log(f"server pid {server.pid} on {host}:{port}; scratch {scratch}")
    samples = [{"t": 0, **status(server.pid), "load": os.getloadavg()[0]}]
    final_flag, stop_flag = os.path.join(scratch, "final"), os.path.join(scratch, "stop")
    views_path = os.path.join(scratch, "views.json")
    watchers = multiprocessing.Process(target=watcher, args=(host, port, args.watchers, views_path, stop_flag))
    watchers.start()
    time.sleep(2)
    per = args.clients // args.workers

    def spawn(index):
        process = multiprocessing.Process(target=worker, args=(host, port, index * per, per, final_flag,
                                                               os.path.join(scratch, f"ready{index}.json")))
        process.start()
        return process

    workers = [spawn(i) for i in range(args.workers)]
    started, kills, next_kill, next_sample = time.time(), 0, time.time() + args.kill_every, time.time() + 10
    while time.time() - started < args.duration:
        now = time.time()
        if now >= next_sample:
            samples.append({"t": round(now - started), **status(server.pid), "load": round(os.getloadavg()[0], 2)})
            log(f"t={samples[-1]['t']}s RSS {samples[-1]['VmRSS']} KiB, fds {samples[-1]['fds']}, load {samples[-1]['load']}")
            next_sample += 10
        if now >= next_kill and now - started < args.duration - 30:
            victim = random.randrange(args.workers)
            os.kill(workers[victim].pid, signal.SIGKILL)
            workers[victim].join()
            kills += 1
            time.sleep(2)
            workers[victim] = spawn(victim)
            next_kill += args.kill_every
        time.sleep(0.5)
    log("final phase: even users stay online, odd users leave")
    open(final_flag, "w").close()
    deadline = time.time() + 120
    while time.time() < deadline and not all(os.path.exists(os.path.join(scratch, f"ready{i}.json")) for i in range(args.workers)):
        time.sleep(1)
    worker_stats = [json.load(open(os.path.join(scratch, f"ready{i}.json"))) for i in range(args.workers)
                    if os.path.exists(os.path.join(scratch, f"ready{i}.json"))]
    time.sleep(args.grace + 5)
    open(stop_flag, "w").close()
    watchers.join(30)
    views = json.load(open(views_path))
    request = urllib.request.Request(f"http://{host}:{port}/users.json?ns=soak", headers={"Authorization": "Bearer owner"})
    truth = online_map(json.load(urllib.request.urlopen(request, timeout=60)) or {})
    expected = {f"u{i}": i % 2 == 0 for i in range(per * args.workers)}
    watcher_checks = {}
    for index, view in sorted(views.items()):
        seen = online_map(view["tree"])
        watcher_checks[index] = {"pushes": view["pushes"], "closed_early": view["closed"], "error": view.get("error"),
                                 "differs_from_expected": sum(1 for u in expected if seen.get(u) != expected[u]),
                                 "differs_from_server": sum(1 for u in set(seen) | set(truth) if seen.get(u) != truth.get(u))}
    at_end = status(server.pid)
    for process in workers:
        process.terminate()
    time.sleep(args.grace + 5)
    after_clients_left = status(server.pid)
    server.terminate()
    server.wait(30)
    warm = [s for s in samples if s["t"] >= 120]
    report = {
        "clients": per * args.workers, "workers": args.workers, "watchers": args.watchers, "duration_s": args.duration,
        "worker_kills": kills, "grace_s": args.grace,
        "client_stats": {k: sum(s[k] for s in worker_stats) for k in ("online", "drops", "errors", "final_failed", "connected")},
        "rss_kib": {"start": samples[0]["VmRSS"], "at_2_min": warm[0]["VmRSS"] if warm else None,
                    "max_after_2_min": max((s["VmRSS"] for s in warm), default=None), "end": at_end["VmRSS"],
                    "after_clients_left": after_clients_left["VmRSS"], "peak_hwm": at_end["VmHWM"]},
        "fds": {"start": samples[0]["fds"], "max": max(s["fds"] for s in samples), "end_with_even_users": at_end["fds"],
                "after_clients_left": after_clients_left["fds"]},
        "server_truth_differs_from_expected": sum(1 for u in expected if truth.get(u) != expected[u]),
        "watchers": watcher_checks,
        "load_average": {"max": max(s["load"] for s in samples), "end": round(os.getloadavg()[0], 2)},
        "samples": [{"t": s["t"], "rss_kib": s["VmRSS"], "fds": s["fds"], "load": s["load"]} for s in samples],
    }
    print(json.dumps(report))
    exact = report["server_truth_differs_from_expected"] == 0 and all(
        c["differs_from_expected"] == 0 and c["differs_from_server"] == 0 and not c["closed_early"] for c in watcher_checks.values())
    if exact:
        log("final views exact")
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        log(f"FINAL VIEWS DIFFER; server log, data and views kept in {scratch}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
