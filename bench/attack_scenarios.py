"""The attacks of bench/attack.py, one function each. An attacker gets the server's host and port
and the attack's duration, runs (in its own process, under nice 10) and returns what happened to
it, from its side; the harness adds the server's log lines named in `evidence`."""
import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request

from conftest import unsigned_token
from wsraw import CLOSE, TEXT, Reader, frame, request, upgrade


def run_attacker(name, context, queue):
    os.nice(10)
    try:
        queue.put(SCENARIOS[name]["attack"](context))
    except Exception as error:  # report, do not hang the harness
        queue.put({"error": repr(error)})


def log_evidence(server_log, patterns):
    """For each pattern: how many log lines contain it, and the first one."""
    found = {}
    for pattern in patterns:
        lines = [line for line in server_log.splitlines() if pattern in line]
        found[pattern] = {"count": len(lines), "first": lines[0][-300:] if lines else None}
    return found


def signed_in(context, uid, ns="demo", rcvbuf=None):
    """A raw WebSocket connection signed in as `uid`: (socket, reader)."""
    sock, pending = upgrade(context["host"], context["port"], path=f"/.ws?v=5&ns={ns}", rcvbuf=rcvbuf, timeout=10)
    reader = Reader(sock, pending)
    reader.next(10)  # hello
    sock.sendall(frame(TEXT, request(1, "auth", {"cred": unsigned_token(uid)})))
    while True:
        got = reader.next(10)
        if got is None or (got[0] == TEXT and b'"r":1' in got[1]):
            return sock, reader


def count_replies(reader, until, counts, expected=None):
    """Reads replies until `until` (a time) or `expected` replies; counts them by status."""
    while time.time() < until and (expected is None or sum(counts.values()) < expected):
        got = reader.next(max(0.05, min(1.0, until - time.time())))
        if got is None:
            if reader.closed:
                counts["connection closed"] = counts.get("connection closed", 0) + 1
                return
            continue
        if got[0] == CLOSE:
            code = int.from_bytes(got[1][:2], "big") if len(got[1]) >= 2 else None
            counts[f"closed {code}: {got[1][2:].decode(errors='replace')}"] = 1
            return
        if got[0] == TEXT:
            payload = got[1]
            if payload.isdigit():  # a large message comes as a count frame, then that many frames
                parts = [reader.next(30) for _ in range(int(payload))]
                if any(part is None for part in parts):
                    counts["connection closed"] = counts.get("connection closed", 0) + 1
                    return
                payload = b"".join(part[1] for part in parts)
            body = json.loads(payload).get("d", {})
            if "r" in body:
                status = body.get("b", {}).get("s")
                counts[status] = counts.get(status, 0) + 1


def rest(context, method, path, body=None, token="owner"):
    request_ = urllib.request.Request(f"http://{context['host']}:{context['port']}{path}", method=method,
                                      data=None if body is None else json.dumps(body).encode(),
                                      headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request_, timeout=120) as response:
        return response.status


def slow_readers(context, kind):
    """Clients that never read, listening to /feed, while four signed-in feeders write 256 KB to
    it, each write as soon as the feeder's last one is acknowledged."""
    host, port, end = context["host"], context["port"], time.time() + context["duration"]
    readers = []
    for _ in range(20):
        if kind == "ws":
            sock, _ = signed_in(context, "reader", rcvbuf=4096)
            sock.sendall(frame(TEXT, request(2, "q", {"p": "/feed", "h": ""})))
        else:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((host, port))
            sock.sendall(f"GET /feed.json?ns=demo&auth={unsigned_token('reader')} HTTP/1.1\r\nHost: x\r\n"
                         "Accept: text/event-stream\r\n\r\n".encode())
        readers.append(sock)
    started, counts, lock = time.time(), {}, threading.Lock()

    def feed_from(index):
        # Several feeders: each connection's message budget covers the server's work for its own
        # writes (serializing a 256 KB event per stream), so one feeder alone fills the queues slowly.
        feeder, feed = signed_in(context, f"feeder{index}")
        blob, r, mine = "f" * 262_144, 10, {}
        while time.time() < end:
            r += 1
            feeder.sendall(frame(TEXT, request(r, "p", {"p": "/feed", "d": blob + str(r)})))
            count_replies(feed, time.time() + 5, mine, expected=sum(mine.values()) + 1)
        with lock:
            for status, n in mine.items():
                counts[status] = counts.get(status, 0) + n
        feeder.close()

    feeders = [threading.Thread(target=feed_from, args=(i,)) for i in range(4)]
    for thread in feeders:
        thread.start()
    for thread in feeders:
        thread.join()
    closed = 0
    for sock in readers:  # did the server close them? (read what they never read, to the end)
        sock.settimeout(0.2)
        try:
            while sock.recv(1 << 20):
                pass
            closed += 1
        except socket.timeout:
            pass
        except OSError:
            closed += 1
        sock.close()
    return {"readers": len(readers), "readers_closed_by_server": closed, "feeders": len(feeders), "feeder_writes": counts,
            "feed_rate_bytes_per_s": round(sum(counts.values()) * 262_144 / (time.time() - started))}


def message_storm(context):
    """One signed-in client sends writes as fast as it can, reading its acks on another thread."""
    sock, reader = signed_in(context, "storm")
    counts, end = {}, time.time() + context["duration"]
    thread = threading.Thread(target=count_replies, args=(reader, end + 5, counts), daemon=True)
    thread.start()
    sent, r, started = 0, 1, time.time()
    while time.time() < end:
        chunk = b"".join(frame(TEXT, request(r + i, "p", {"p": f"/storm/{(r + i) % 100}", "d": r + i})) for i in range(100))
        r += 100
        try:
            sock.settimeout(max(0.1, end - time.time()))
            sock.sendall(chunk)
            sent += 100
        except (socket.timeout, OSError):
            break
    time.sleep(max(0, end - time.time()))
    acked = counts.get("ok", 0)  # during the attack
    elapsed = time.time() - started
    thread.join(10)
    return {"sent": sent, "acked_during_attack": acked, "acked_per_s": round(acked / elapsed), "replies_with_5_s_more": counts,
            "note": "the rest of what was sent waits in the kernel's buffers (the server stops reading over budget); nothing is lost"}


def connection_storm(context):
    """Full handshakes opened and dropped as fast as possible, plus 1,000 half-open TCP
    connections and 300 unfinished upgrade requests, reopened whenever the server drops them."""
    host, port, end = context["host"], context["port"], time.time() + context["duration"]
    stats = {"handshakes": 0, "handshake_errors": 0, "half_open_dropped": 0, "half_open_lifetimes_s": []}
    lock = threading.Lock()

    def churn():
        while time.time() < end:
            try:
                sock, _ = upgrade(host, port, timeout=5)
                sock.close()
                with lock:
                    stats["handshakes"] += 1
            except OSError:
                with lock:
                    stats["handshake_errors"] += 1

    def half_open(count, greeting):
        opened = {}
        while time.time() < end:
            while len(opened) < count and time.time() < end:
                try:
                    sock = socket.create_connection((host, port), timeout=5)
                    sock.setblocking(False)
                    if greeting:
                        sock.sendall(greeting)
                    opened[sock] = time.time()
                except OSError:
                    time.sleep(0.05)
            time.sleep(0.5)
            for sock, since in list(opened.items()):
                try:
                    if sock.recv(1) != b"":
                        continue
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                with lock:
                    stats["half_open_dropped"] += 1
                    stats["half_open_lifetimes_s"].append(round(time.time() - since, 1))
                del opened[sock]
                sock.close()
        for sock in opened:
            sock.close()

    threads = [threading.Thread(target=churn) for _ in range(3)]
    threads.append(threading.Thread(target=half_open, args=(1000, b"")))
    threads.append(threading.Thread(target=half_open, args=(300, b"GET /.ws?v=5&ns=demo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n")))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lifetimes = sorted(stats.pop("half_open_lifetimes_s"))
    stats["handshakes_per_s"] = round(stats["handshakes"] / context["duration"])
    stats["half_open_lifetime_s_median"] = lifetimes[len(lifetimes) // 2] if lifetimes else None
    return stats


def slow_headers(context):
    """1,000 connections each sending its request head one byte a second, reconnecting when dropped."""
    host, port, end = context["host"], context["port"], time.time() + context["duration"]
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: " + b"s" * 200 + b"\r\n\r\n"
    conns, dropped, lifetimes = {}, 0, []
    while time.time() < end:
        while len(conns) < 1000:
            try:
                conns[socket.create_connection((host, port), timeout=5)] = (time.time(), 0)
            except OSError:
                break
        for sock, (since, sent) in list(conns.items()):
            try:
                sock.send(head[sent:sent + 1])
                conns[sock] = (since, sent + 1)
            except OSError:
                dropped += 1
                lifetimes.append(time.time() - since)
                del conns[sock]
                sock.close()
        time.sleep(1)
    for sock in conns:
        sock.close()
    lifetimes.sort()
    return {"connections": 1000, "dropped_by_server": dropped,
            "lifetime_s_median": round(lifetimes[len(lifetimes) // 2], 1) if lifetimes else None}


def huge_headers(context):
    """Requests with a 64 KiB head, as fast as possible."""
    host, port, end = context["host"], context["port"], time.time() + context["duration"]
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"h" * 65_536 + b"\r\n\r\n"
    outcomes = {}
    while time.time() < end:
        try:
            sock = socket.create_connection((host, port), timeout=5)
            sock.sendall(head)
            answer = sock.recv(64)
            key = answer.split(b"\r\n")[0].decode() or "closed without an answer"
        except OSError as error:
            key = f"closed without an answer ({type(error).__name__})"
        outcomes[key] = outcomes.get(key, 0) + 1
        sock.close()
    return {"requests": outcomes}


def pipelined(context, uid, count, make, keep_open=True):
    """Sends `count` requests made by make(r) at once on one signed-in connection; counts replies."""
    sock, reader = signed_in(context, uid)
    started = time.time()
    for base in range(0, count, 500):
        sock.sendall(b"".join(frame(TEXT, make(r)) for r in range(base + 2, min(count, base + 500) + 2)))
    counts = {}
    count_replies(reader, started + context["duration"], counts, expected=count)
    result = {"sent": count, "replies": counts, "seconds_to_all_replies": round(time.time() - started, 1)}
    if not keep_open:
        sock.close()
    else:
        time.sleep(max(0, started + context["duration"] - time.time()))
        sock.close()
    return result


def many_listens(context):
    return pipelined(context, "lister", 20_000, lambda r: request(r, "q", {"p": f"/l/{r}", "h": ""}))


def many_ondisconnect(context):
    result = pipelined(context, "ops", 5_000, lambda r: request(r, "o", {"p": f"/od/{r}", "d": {"gone": r}}), keep_open=False)
    result["note"] = "the connection is closed at the end: its accepted ops run then"
    return result


def tagged_window(context):
    """5,000 distinct tagged queries (limitToLast k by ts) on one location, then writes that move
    every window, as fast as the budget lets them."""
    sock, reader = signed_in(context, "tagger")
    started = time.time()
    for base in range(0, 5_000, 500):
        sock.sendall(b"".join(
            frame(TEXT, request(k + 1, "q", {"p": "/tagger/items", "q": {"i": "ts", "l": k, "vf": "r"}, "t": k, "h": ""}))
            for k in range(base + 1, base + 501)))
    listens = {}
    count_replies(reader, time.time() + 60, listens, expected=5_000)
    setup = round(time.time() - started, 1)
    counts, end = {}, time.time() + context["duration"]
    thread = threading.Thread(target=count_replies, args=(reader, end + 5, counts), daemon=True)
    thread.start()
    r, sent = 10_000, 0
    while time.time() < end:
        chunk = b"".join(frame(TEXT, request(r + i, "p", {"p": f"/tagger/items/k{(r + i) % 50}", "d": {"ts": r + i}}))
                         for i in range(50))
        r += 50
        try:
            sock.settimeout(max(0.1, end - time.time()))
            sock.sendall(chunk)
            sent += 50
        except OSError:
            break
    thread.join(10)
    return {"queries": listens, "seconds_to_set_up": setup, "writes_sent": sent, "writes_acked": counts.get("ok", 0),
            "writes_acked_per_s": round(counts.get("ok", 0) / context["duration"])}


def preload_children(context, path, count, value):
    for base in range(0, count, 20_000):
        rest(context, "PATCH", f"{path}.json?ns=demo", {f"k{i:07d}": value(i) for i in range(base, min(count, base + 20_000))})


def huge_read_setup(context):
    preload_children(context, "/big", 300_000, lambda i: f"value {i}")


def huge_read(context):
    """Reads of a 300,000-child subtree, whole and limitToLast 3, in a loop."""
    sock, reader = signed_in(context, "reader")
    end, r, counts = time.time() + context["duration"], 1, {}
    while time.time() < end:
        r += 1
        query = {} if r % 2 else {"i": ".key", "l": 3, "vf": "r"}
        sock.sendall(frame(TEXT, request(r, "g", {"p": "/big", "q": query})))
        kind = {}
        count_replies(reader, time.time() + 30, kind, expected=1)
        for status in kind:
            key = f"{'limitToLast 3' if query else 'whole'}: {status}"
            counts[key] = counts.get(key, 0) + 1
    return {"reads": counts}


def huge_listen(context):
    """Listens on a 300,000-child subtree (whole, then limitToLast 3 with a tag), each unlistened
    once its data and ok have come, in a loop."""
    sock, reader = signed_in(context, "listener")
    end, r, counts = time.time() + context["duration"], 1, {}
    while time.time() < end:
        r += 2
        query = {} if r % 4 == 1 else {"i": ".key", "l": 3, "vf": "r"}
        tag = {"t": r} if query else {}
        sock.sendall(frame(TEXT, request(r, "q", {"p": "/big", "q": query, "h": "", **tag})))
        sock.sendall(frame(TEXT, request(r + 1, "n", {"p": "/big", "q": query, **tag})))
        kind = {}
        count_replies(reader, time.time() + 30, kind, expected=2)
        for status in kind:
            key = f"{'limitToLast 3' if query else 'whole'}: {status}"
            counts[key] = counts.get(key, 0) + kind[status]
    return {"listen and unlisten replies": counts}


def huge_rest(context):
    """REST GETs of a 300,000-child subtree (whole, limitToLast 3, shallow) and streams of it (each
    closed once its first event has come whole), in a loop."""
    base = f"http://{context['host']}:{context['port']}/big.json?ns=demo"
    kinds = [("whole", ""), ("limitToLast 3", '&orderBy="$key"&limitToLast=3'), ("shallow", "&shallow=true"), ("stream", "")]
    end, n, counts = time.time() + context["duration"], 0, {}
    while time.time() < end:
        name, query = kinds[n % len(kinds)]
        n += 1
        headers = {"Authorization": "Bearer owner"}
        if name == "stream":
            headers["Accept"] = "text/event-stream"
        try:
            with urllib.request.urlopen(urllib.request.Request(base + query, headers=headers), timeout=120) as response:
                if name == "stream":
                    line = b"-"
                    while line and not line.startswith(b"data: "):
                        line = response.readline()  # b"": the server ended the stream
                else:
                    line = response.read()
                status = response.status if line else "ended without its data"
        except urllib.error.HTTPError as error:
            status = error.code
        except OSError as error:
            status = type(error).__name__
        counts[f"{name}: {status}"] = counts.get(f"{name}: {status}", 0) + 1
    return {"requests": counts}


def hashes_setup(context):
    huge_read_setup(context)
    preload_children(context, "/mid", 600, lambda i: f"value {i}")  # about 14 KB: within --max-hash-bytes


def hashes(context):
    """What needs a hash of a whole location, in a loop: transactions (`p` with a stale `h`) and
    REST ETag reads and if-match writes, on a 300,000-child subtree (past --max-hash-bytes) and on
    one of 600 children (within it), one at a time."""
    sock, reader = signed_in(context, "hasher")
    base = f"http://{context['host']}:{context['port']}"
    end, r, counts = time.time() + context["duration"], 1, {}
    while time.time() < end:
        r += 1
        where = "/big" if r % 2 else "/mid"
        kind = ["transaction", "ETag read", "if-match write"][(r // 2) % 3]
        if kind == "transaction":
            sock.sendall(frame(TEXT, request(r, "p", {"p": where, "d": "replaced", "h": "stale"})))
            replies = {}
            count_replies(reader, time.time() + 30, replies, expected=1)
            statuses = list(replies)
        else:
            headers = {"Authorization": "Bearer owner"}
            headers.update({"X-Firebase-ETag": "true"} if kind == "ETag read" else {"If-Match": "stale"})
            request_ = urllib.request.Request(f"{base}{where}.json?ns=demo", headers=headers, method="GET" if kind == "ETag read" else "PUT",
                                              data=None if kind == "ETag read" else b'"replaced"')
            try:
                with urllib.request.urlopen(request_, timeout=120) as response:
                    response.read()
                    statuses = [response.status]
            except urllib.error.HTTPError as error:
                statuses = [error.code]
            except OSError as error:
                statuses = [type(error).__name__]
        for status in statuses:
            key = f"{kind} {where}: {status}"
            counts[key] = counts.get(key, 0) + 1
    return {"requests": counts}


def online_list_setup(context):
    for base in range(0, 50_000, 10_000):
        rest(context, "PATCH", "/users.json?ns=demo",
             {f"u{i:05d}/presence": {"online": True, "lastSeen": 1} for i in range(base, base + 10_000)})


def online_list(context):
    """Refreshes of /online-users with 50,000 users online, in a loop."""
    sock, reader = signed_in(context, "refresher")
    end, r, counts = time.time() + context["duration"], 1, {}
    while time.time() < end:
        r += 1
        sock.sendall(frame(TEXT, request(r, "g", {"p": "/online-users", "q": {}})))
        count_replies(reader, time.time() + 30, counts, expected=sum(counts.values()) + 1)
    return {"refreshes": counts, "refreshes_per_s": round(sum(counts.values()) / context["duration"], 1)}


def new_namespaces(context):
    """Connections each naming a new namespace, listening, and (one in ten) writing, then leaving."""
    end, made, writes, errors = time.time() + context["duration"], 0, {}, 0
    while time.time() < end:
        made += 1
        try:
            sock, reader = signed_in(context, "nomad", ns=f"ns{made}-{random.randrange(1 << 30)}")
            sock.sendall(frame(TEXT, request(2, "q", {"p": "/x", "h": ""})))
            if made % 10 == 0:
                sock.sendall(frame(TEXT, request(3, "p", {"p": "/x", "d": made})))
                replies = {}
                count_replies(reader, time.time() + 5, replies, expected=2)
                for status, n in replies.items():
                    writes[status] = writes.get(status, 0) + n
            sock.close()
        except OSError:
            errors += 1
    with urllib.request.urlopen(urllib.request.Request(
            f"http://{context['host']}:{context['port']}/.admin/stats", headers={"Authorization": "Bearer owner"}), timeout=10) as r:
        stats = json.load(r)
    return {"namespaces_named": made, "errors": errors, "replies_to_listen_and_write": writes,
            "namespaces_in_memory_after": stats["namespaces"]}


def rest_bodies(context):
    """300 anonymous 800 KB bodies (each sent 100 KB, then stalled) and 60 signed-in ones: the
    anonymous ones are refused from their heads, the signed-in ones fill --max-pending-body-bytes
    (41 of them) and the rest are told to come back (503)."""
    host, port = context["host"], context["port"]
    outcomes, held = {}, []
    token = unsigned_token("uploader")
    for i in range(360):
        anonymous = i < 300
        sock = socket.create_connection((host, port), timeout=10)
        auth = b"" if anonymous else f"Authorization: Bearer {token}\r\n".encode()
        path = f"/users/u{i}/presence.json" if anonymous else f"/uploads/u{i}.json"
        sock.sendall(f"PUT {path}?ns=demo HTTP/1.1\r\nHost: x\r\n".encode() + auth + b"Content-Length: 800000\r\n\r\n" + b"x" * 100_000)
        held.append((sock, time.time()))
    time.sleep(1)  # all sent before any answer is read (lws drops a body idle for --http-timeout)
    for i, (sock, _) in enumerate(held):
        sock.settimeout(0.05)
        try:
            status = sock.recv(64).split(b"\r\n")[0].decode() or "closed"
        except socket.timeout:
            status = "no answer yet (body being read)"
        except OSError:
            status = "connection reset"
        key = f"{'anonymous' if i < 300 else 'signed in'}: {status}"
        outcomes[key] = outcomes.get(key, 0) + 1
    end, lifetimes = time.time() + context["duration"], []
    while time.time() < end and held:
        for sock, since in list(held):
            sock.settimeout(0.01)
            try:
                if sock.recv(65536) == b"":
                    raise OSError
            except socket.timeout:
                continue
            except OSError:
                lifetimes.append(round(time.time() - since, 1))
                held.remove((sock, since))
                sock.close()
        time.sleep(0.2)
    for sock, _ in held:
        sock.close()
    lifetimes.sort()
    return {"requests": outcomes, "closed_by_server_within_attack": len(lifetimes),
            "lifetime_s_median": lifetimes[len(lifetimes) // 2] if lifetimes else None}


SCENARIOS = {
    "slow-reader-ws": {"what": "20 WebSocket clients that never read while 4 feeders write 256 KB values to what they listen to",
                       "attack": lambda c: slow_readers(c, "ws"), "evidence": ["does not read fast enough", "past saturation"]},
    "slow-reader-sse": {"what": "20 REST streams that never read while 4 feeders write 256 KB values to what they stream",
                        "attack": lambda c: slow_readers(c, "sse"), "evidence": ["closing stream", "stream closed", "past saturation"]},
    "message-storm": {"what": "one client writing as fast as it can", "attack": message_storm,
                      "evidence": ["messages a second"]},
    "connection-storm": {"what": "handshakes opened and dropped as fast as possible, 1,000 silent TCP connections, 300 unfinished upgrades",
                         "attack": connection_storm, "evidence": []},
    "slow-headers": {"what": "1,000 connections sending their request head a byte a second", "attack": slow_headers, "evidence": []},
    "huge-headers": {"what": "requests with a 64 KiB head, as fast as possible", "attack": huge_headers, "evidence": []},
    "many-listens": {"what": "20,000 listens on one connection, at once", "attack": many_listens,
                     "evidence": ["listens per connection", "max-listens-per-connection"]},
    "many-ondisconnect": {"what": "5,000 onDisconnect sets on one connection, at once, then it leaves",
                          "attack": many_ondisconnect, "evidence": ["max-ondisconnect-ops"]},
    "tagged-window": {"what": "5,000 distinct tagged limitToLast queries on one location, then writes moving every window",
                      "attack": tagged_window, "evidence": ["max-queries-per-location", "messages a second"]},
    "huge-read": {"what": "reads of a 300,000-child subtree (whole, and limitToLast 3), in a loop",
                  "setup": huge_read_setup, "attack": huge_read, "evidence": ["max-read-bytes"]},
    "huge-listen": {"what": "listens on a 300,000-child subtree (whole, and limitToLast 3), each then unlistened, in a loop",
                    "setup": huge_read_setup, "attack": huge_listen, "evidence": ["max-read-bytes"]},
    "huge-rest": {"what": "REST GETs (whole, limitToLast 3, shallow) and streams of a 300,000-child subtree, in a loop",
                  "setup": huge_read_setup, "attack": huge_rest, "evidence": ["max-read-bytes", "left during a big read"]},
    "hashes": {"what": "transactions, ETag reads and if-match writes on a 300,000-child subtree and on a 600-child one, in a loop",
               "setup": hashes_setup, "attack": hashes, "evidence": ["max-hash-bytes"]},
    "online-list": {"what": "refreshes of /online-users with 50,000 users online, in a loop",
                    "setup": online_list_setup, "attack": online_list, "evidence": []},
    "new-namespaces": {"what": "connections each naming a new namespace (one in ten writing there), as fast as possible",
                       "attack": new_namespaces, "evidence": ["max-namespaces"]},
    "rest-bodies": {"what": "300 anonymous and 60 signed-in REST PUTs of 800 KB, each stalled after 100 KB",
                    "attack": rest_bodies, "evidence": ["from its head", "not received in time"]},
}
