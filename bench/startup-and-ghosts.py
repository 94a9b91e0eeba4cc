#!/usr/bin/env python3
"""Issue 5's recovery numbers, measured against the release server:

  startup  — server start-up time (process start to listening) with N stored leaf nodes
  ghosts   — after a SIGKILL with U users online, the time from restart to the last of them shown
             offline (no one comes back, so all U are ghosts to clear; grace window included)

Usage: bench/startup-and-ghosts.py startup [--leaves 1000000]
       bench/startup-and-ghosts.py ghosts  [--users 10000] [--grace 3]
Prints one JSON object. Loopback only; bounded in time.
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "live"))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVER = os.environ.get("PRESENCE_SERVER", os.path.join(ROOT, ".build", "release", "presence-server"))


def start(data_dir, *args):
    begun = time.time()
    proc = subprocess.Popen([SERVER, "--port", "0", "--data-dir", data_dir, "--log-level", "warning", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    host, port = re.search(r"listening on ([\d.]+):(\d+)", line).groups()
    return proc, host, int(port), time.time() - begun


def startup(leaves):
    users = leaves // 4
    data_dir = tempfile.mkdtemp(prefix="presence-startup-")
    dump = os.path.join(data_dir, "dump.json")
    with open(dump, "w") as f:
        json.dump({"format": "presence-database", "version": 1, "rules": {},
                   "namespaces": {"bench": {"users": {f"user{i}": {"presence": {"online": i % 2 == 0, "lastSeen": 1700000000000 + i},
                                                                   "name": f"User {i}", "score": i}
                                                    for i in range(users)}}}}, f)
    t = time.time()
    subprocess.run([SERVER, "import", data_dir, dump], check=True, capture_output=True)
    imported = time.time() - t
    proc, host, port, ready = start(data_dir, "--rules", "open")
    proc.terminate()
    proc.wait()
    print(json.dumps({"scenario": "startup", "leaves": users * 4, "import_s": round(imported, 3),
                      "startup_to_listening_s": round(ready, 3)}))


def ghosts(count, grace):
    import websocket
    from conftest import unsigned_token, Client
    data_dir = tempfile.mkdtemp(prefix="presence-ghosts-")
    rules = os.path.join(ROOT, "rules", "presence.rules.json")
    proc, host, port, _ = start(data_dir, "--rules", rules, "--disconnect-grace", str(grace))
    sockets = []
    for i in range(count):
        ws = websocket.create_connection(f"ws://{host}:{port}/.ws?v=5&ns=demo", timeout=20)
        ws.recv()
        path = f"/users/user{i}/presence"
        for r, a, b in [(1, "auth", {"cred": unsigned_token(f"user{i}")}),
                        (2, "o", {"p": path, "d": {"online": False, "lastSeen": {".sv": "timestamp"}}}),
                        (3, "p", {"p": path, "d": {"online": True, "lastSeen": {".sv": "timestamp"}}})]:
            ws.send(json.dumps({"t": "d", "d": {"r": r, "a": a, "b": b}}))
        sockets.append(ws)
    for ws in sockets:  # wait for every ack (durable)
        while json.loads(ws.recv()).get("d", {}).get("r") != 3:
            pass
    proc.kill()
    proc.wait()
    crashed = time.time()
    for ws in sockets:
        ws.sock.close()
    proc, host, port, ready = start(data_dir, "--rules", rules, "--disconnect-grace", str(grace))
    restarted = crashed + 0  # measured from the restart command
    watcher = Client(f"ws://{host}:{port}/.ws?v=5&ns=demo", timeout=30)
    assert watcher.call("gauth", {"cred": "owner"})["s"] == "ok"
    value = watcher.listen("/users") or {}
    online = {uid for uid, v in value.items() if v["presence"]["online"]}
    t0 = time.time() - ready  # when the restarted process was started
    deadline = time.time() + grace + 60
    while online and time.time() < deadline:
        message = watcher.recv(timeout=max(0.1, deadline - time.time()))
        body = message.get("d", {}).get("b", {})
        action = message.get("d", {}).get("a")
        changes = {}
        if action == "d" and body.get("p", "").startswith("users/"):
            changes = {body["p"][len("users/"):]: body["d"]}
        elif action == "m":
            base = body["p"][len("users"):].strip("/")
            changes = {(base + "/" + k).strip("/"): v for k, v in body["d"].items()}
        for key, v in changes.items():
            uid = key.split("/")[0]
            rest = key.split("/")[1:]
            node = v
            for part in rest:
                node = {part: node}
            presence = node.get("presence") if isinstance(node, dict) else None
            if isinstance(presence, dict) and presence.get("online") is False:
                online.discard(uid)
    cleared = time.time() - t0
    proc.terminate()
    proc.wait()
    print(json.dumps({"scenario": "ghosts", "users": count, "grace_s": grace, "restart_to_listening_s": round(ready, 3),
                      "restart_to_last_ghost_cleared_s": round(cleared, 3), "still_online": len(online)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["startup", "ghosts"])
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--grace", type=float, default=3)
    args = parser.parse_args()
    startup(args.leaves) if args.scenario == "startup" else ghosts(args.users, args.grace)
