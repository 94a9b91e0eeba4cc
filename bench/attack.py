#!/usr/bin/env python3
"""Attack harness (issue 16, floods and slow clients): runs one attack at a time against a fresh
presence-server (release build) while a well-behaved bystander keeps writing and listening, and
reports, per scenario:

- the bystander's write->push latency (p50, p99, max, lost pushes) without the attack (baseline
  phase) and during it, and their p99 ratio (the bound is 2x);
- the server's RSS over time from /proc/PID/status (baseline median, peak, end), its open fds and
  its CPU use (/proc/PID/stat) alone and under attack;
- what happened to the offender (closed, throttled, refused, with the server's log lines);
- the machine's load average (it is shared: say so when quoting numbers).

The run fails (exit code 1, "FAILED" on stderr) if the server stops or the bystander is starved
during an attack (a push lost, fewer than half its writes made, or a p99 over --starved-ms);
with --strict also if its p99 more than doubles. A table of all scenarios ends the run.

The bystander (its own process) writes {"seq": n} to /bystander/v over one WebSocket and times the
push of each on another that listens to /bystander. Attackers run in their own processes under
`nice 10` (an attacker elsewhere on the network), the server at normal priority.

The bystander stands for a client on another machine, but here it shares a core with the server
(with --pin, CPU 0). At the server's priority, it waited for that core whenever the server was busy:
a woken thread does not preempt one inside its time slice, and the next scheduler tick is 4 ms away
on this kernel (HZ 250), so its p99 measured its own wait for a CPU (up to the tick) as much as the
server's. So by default (--bystander-slice-us) it asks for a 100 µs slice and nice 0, which lets it
preempt the server when it wakes, as a client with a core of its own would not wait; root is needed
for nice 0 (otherwise the slice alone). --bystander-slice-us 0 measures it the old way.

    python3 bench/attack.py --scenario all --json attack.json
    python3 bench/attack.py --scenario message-storm --baseline 20 --duration 20

Scenarios are in bench/attack_scenarios.py; `--list` names them. Output: one JSON object per
scenario on stdout (and all of them in --json), progress on stderr.
"""
import argparse
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "Tests", "live"))
sys.path.insert(0, HERE)

import websocket  # noqa: E402

import attack_scenarios  # noqa: E402

# The presence rules, plus an open /bystander and, for signed-in users, everything else: the
# attackers are ordinary signed-in users (or anonymous ones, refused by these rules).
RULES = {"rules": {
    "bystander": {".read": True, ".write": True},
    "online-users": {".read": "auth != null"},
    "users": {"$userId": {"presence": {
        ".read": "auth != null", ".write": "auth != null && auth.uid == $userId",
        ".validate": "newData.hasChildren(['online', 'lastSeen'])"}}},
    "$other": {".read": "auth != null", ".write": "auth != null"},
}}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Server:
    """A fresh release server on a free port, with its own data directory."""

    def __init__(self, binary, extra, cpus=None):
        self.dir = tempfile.mkdtemp(prefix="presence-attack-")
        rules = os.path.join(self.dir, "rules.json")
        with open(rules, "w") as f:
            json.dump(RULES, f)
        self.args = [binary, "--port", "0", "--data-dir", os.path.join(self.dir, "data"), "--rules", rules,
                     "--disconnect-grace", "0", "--limits", "none", *extra]
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "wb")
        # With --pin the server (all its threads) gets its own core, as in the fan-out benchmarks.
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.log, text=True, preexec_fn=pin)
        line = self.proc.stdout.readline()
        match = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not match:
            raise RuntimeError(f"server did not start: {line!r}")
        self.host, self.port = match.group(1), int(match.group(2))
        self.pid = self.proc.pid

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    """User plus system CPU time the process has used (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sampler(pid, phase, samples, stop):
    """(seconds, phase, RSS KiB, fds, CPU seconds) every 0.25 s."""
    started = time.time()
    while not stop.is_set():
        try:
            samples.append((round(time.time() - started, 2), phase.value, rss_kib(pid), fd_count(pid), cpu_seconds(pid)))
        except (FileNotFoundError, ProcessLookupError):
            return
        stop.wait(0.25)


def cpu_percent(samples, phase):
    """The server's CPU use during a phase, in percent of one core."""
    inside = [s for s in samples if s[1] == phase]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return None
    return round(100 * (inside[-1][4] - inside[0][4]) / (inside[-1][0] - inside[0][0]), 1)


def prefer_latency(slice_us, nice=0):
    """The calling process's threads made from now on ask for a `slice_us` time slice (Linux 6.12+:
    a woken thread with a shorter slice preempts the one running) at `nice`. Returns what failed."""
    import ctypes
    failed = []
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as error:
        failed.append(f"nice {nice}: {error.strerror}")
    # struct sched_attr (VER0): size, policy, flags, nice, priority, runtime, deadline, period.
    attr = ctypes.create_string_buffer(48)
    ctypes.memmove(attr, (48).to_bytes(4, "little") + (0).to_bytes(4, "little") + (0).to_bytes(8, "little")
                   + os.getpriority(os.PRIO_PROCESS, 0).to_bytes(4, "little", signed=True) + (0).to_bytes(4, "little")
                   + (slice_us * 1000).to_bytes(8, "little") + bytes(16), 48)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(314, 0, attr, 0) != 0:  # SYS_sched_setattr on x86-64
        failed.append(f"sched_setattr: errno {ctypes.get_errno()}")
    return failed


def bystander(url, rate, phase, results, slice_us=0):
    """Writes {"seq": n} at `rate`/s and times each push; sends [(phase, latency or None)]."""
    if slice_us:
        for failure in prefer_latency(slice_us):
            log(f"   the bystander keeps part of its default scheduling ({failure})")
    watcher = websocket.create_connection(url, timeout=10)
    writer = websocket.create_connection(url, timeout=10)
    watcher.recv()
    writer.recv()
    watcher.send(json.dumps({"t": "d", "d": {"r": 1, "a": "q", "b": {"p": "/bystander", "h": ""}}}))
    sent, seen, lock = {}, {}, threading.Lock()
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                message = json.loads(watcher.recv())
            except Exception:
                return
            body = message.get("d", {}).get("b", {})
            value = body.get("d")
            if body.get("p") == "bystander" and isinstance(value, dict):
                value = value.get("v")
            if isinstance(value, dict) and "seq" in value:
                with lock:
                    seen.setdefault(value["seq"], time.monotonic())

    def drain():
        while not done.is_set():
            try:
                writer.recv()
            except Exception:
                return

    threads = [threading.Thread(target=watch, daemon=True), threading.Thread(target=drain, daemon=True)]
    for thread in threads:
        thread.start()
    seq, interval, next_at = 0, 1.0 / rate, time.monotonic()
    while phase.value != 3:
        current = phase.value
        seq += 1
        with lock:
            sent[seq] = (current, time.monotonic())
        writer.send(json.dumps({"t": "d", "d": {"r": seq, "a": "p", "b": {"p": "/bystander/v", "d": {"seq": seq}}}}))
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    time.sleep(5)  # late pushes still count; later than 5 s after the end is "lost"
    done.set()
    with lock:
        results.put([(p, (seen[s] - t) if s in seen else None, t) for s, (p, t) in sent.items()])
    watcher.close()
    writer.close()


def latency_summary(pairs, phase):
    """p50/p99/max of one phase, and its ten slowest pushes with when they were sent (seconds into
    the phase): a burst at the attack's start and steady work look alike in a p99."""
    timed = [(v * 1000, t) for p, v, t in pairs if p == phase and v is not None]
    values = sorted(v for v, _ in timed)
    lost = sum(1 for p, v, _ in pairs if p == phase and v is None)
    if not values:
        return {"samples": 0, "lost": lost}
    start = min(t for p, _, t in pairs if p == phase)
    slowest = sorted(timed, reverse=True)[:10]
    return {"samples": len(values), "lost": lost, "p50_ms": round(values[len(values) // 2], 2),
            "p99_ms": round(values[min(len(values) - 1, int(len(values) * 0.99))], 2), "max_ms": round(values[-1], 2),
            "slowest_ms_at_s": [[round(v, 2), round(t - start, 2)] for v, t in slowest]}


def starvation(attack, seconds, args):
    """Why the bystander counts as starved during the attack's `seconds` (None if it was served): a
    push lost (not seen 5 s after the attack), fewer than half its writes made, or a p99 over
    --starved-ms."""
    expected = args.rate * seconds
    if attack.get("lost"):
        return f"{attack['lost']} pushes lost"
    if attack.get("samples", 0) < expected / 2:
        return f"{attack.get('samples', 0)} writes pushed of about {expected:.0f}"
    if attack["p99_ms"] > args.starved_ms:
        return f"p99 {attack['p99_ms']} ms over {args.starved_ms} ms"
    return None


def summary(reports):
    """A table for the terminal (and docs/robustness.md)."""
    lines = ["| scenario | bystander p99 ms (alone -> attack) | ratio | lost | server RSS MiB (base -> peak) | server CPU % | verdict |",
             "|---|---|---|---|---|---|---|"]
    for r in reports:
        base, attack, rss = r["bystander_baseline"], r["bystander_attack"], r["rss_kib"]
        verdict = ("SERVER STOPPED" if not r["server_alive"] else "STARVED" if r["bystander_starved"]
                   else "ATTACK FAILED" if "error" in r["offender"]
                   else "ok" if r["within_2x"] else "over 2x")
        mib = lambda kib: f"{kib / 1024:.0f}" if kib else "?"  # noqa: E731
        lines.append(f"| {r['scenario']} | {base.get('p99_ms')} -> {attack.get('p99_ms')} | {r['p99_ratio']} | {attack.get('lost')} "
                     f"| {mib(rss['baseline_median'])} -> {mib(rss['attack_peak'])} | {r['server_cpu_percent']['attack']} | {verdict} |")
    return "\n".join(lines)


def run(name, args):
    scenario = attack_scenarios.SCENARIOS[name]
    server = Server(args.server, scenario.get("server_args", []) + args.server_args.split(), {0} if args.pin else None)
    log(f"== {name}: server pid {server.pid} on {server.host}:{server.port}")
    load_start = os.getloadavg()
    context = {"host": server.host, "port": server.port, "duration": args.duration}
    if "setup" in scenario:
        started = time.time()
        scenario["setup"](context)
        log(f"   setup done in {time.time() - started:.1f} s")
    phase = multiprocessing.Value("i", 0)
    samples, stop = [], threading.Event()
    threading.Thread(target=sampler, args=(server.pid, phase, samples, stop), daemon=True).start()
    results = multiprocessing.Queue()
    url = f"ws://{server.host}:{server.port}/.ws?v=5&ns=demo"
    watcher = multiprocessing.Process(target=bystander, args=(url, args.rate, phase, results, args.bystander_slice_us))
    watcher.start()
    if args.pin:  # the well-behaved client does not share its machine with the attacker either
        os.sched_setaffinity(watcher.pid, {0})
    time.sleep(1)  # connections up; the first second is not measured
    phase.value = 1
    time.sleep(args.baseline)
    phase.value = 2
    attack_started = time.time()
    outcome_queue = multiprocessing.Queue()
    attacker = multiprocessing.Process(target=attack_scenarios.run_attacker, args=(name, context, outcome_queue))
    attacker.start()
    attacker.join(args.duration + 120)
    if attacker.is_alive():
        attacker.kill()
    outcome = outcome_queue.get() if not outcome_queue.empty() else {"error": "the attacker reported nothing"}
    phase.value = 3
    attack_seconds = time.time() - attack_started
    pairs = results.get(timeout=60)
    watcher.join(10)
    time.sleep(0.5)
    stop.set()
    alive = server.proc.poll() is None
    server_log = server.read_log()
    end_rss = rss_kib(server.pid) if alive else None
    end_fds = fd_count(server.pid) if alive else None
    server.stop()
    baseline_rss = statistics.median(s[2] for s in samples if s[1] == 1) if any(s[1] == 1 for s in samples) else None
    base, attack = latency_summary(pairs, 1), latency_summary(pairs, 2)
    ratio = round(attack["p99_ms"] / base["p99_ms"], 2) if base.get("p99_ms") and attack.get("p99_ms") else None
    starved = starvation(attack, attack_seconds, args)
    report = {
        "scenario": name,
        "what": scenario["what"],
        "command": f"python3 bench/attack.py --scenario {name} --baseline {args.baseline} --duration {args.duration} --rate {args.rate}"
                   + (" --pin" if args.pin else "") + f" --bystander-slice-us {args.bystander_slice_us}"
                   + (f" --server-args='{args.server_args}'" if args.server_args else ""),
        "server_args": scenario.get("server_args", []) + args.server_args.split(),
        "server_alive": alive,
        "bystander_baseline": base,
        "bystander_attack": attack,
        "p99_ratio": ratio,
        "within_2x": ratio is not None and ratio <= 2,
        "bystander_starved": starved,
        "attack_seconds": round(attack_seconds, 1),
        "rss_kib": {"baseline_median": baseline_rss, "attack_peak": max((s[2] for s in samples if s[1] == 2), default=None),
                    "end": end_rss},
        "fds": {"baseline": next((s[3] for s in samples if s[1] == 1), None),
                "attack_peak": max((s[3] for s in samples if s[1] == 2), default=None), "end": end_fds},
        "server_cpu_percent": {"baseline": cpu_percent(samples, 1), "attack": cpu_percent(samples, 2)},
        "rss_series_kib": [(s[0], s[2]) for s in samples[::8]],
        "offender": outcome,
        "server_log_lines": attack_scenarios.log_evidence(server_log, scenario.get("evidence", [])),
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]},
    }
    log(f"   bystander p99 {base.get('p99_ms')} -> {attack.get('p99_ms')} ms (x{ratio}), "
        f"RSS {baseline_rss} -> peak {report['rss_kib']['attack_peak']} KiB, server CPU {report['server_cpu_percent']} %, "
        f"offender: {json.dumps(outcome)[:300]}")
    if not alive:
        log(f"   FAILED: the server stopped (exit code {server.proc.returncode}); its log: {server.log_path}")
    if starved:
        log(f"   FAILED: the bystander was starved: {starved}")
    if "error" in outcome:
        log(f"   FAILED: the attack did not run as meant: {outcome['error']}")
    if alive and not starved and "error" not in outcome:
        shutil.rmtree(server.dir, ignore_errors=True)  # kept (log and data) when something failed
    else:
        log(f"   server log and data kept in {server.dir}")
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.path.join(ROOT, ".build", "release", "presence-server"))
    parser.add_argument("--scenario", default="all", help="a name from --list, a comma-separated list, or all")
    parser.add_argument("--baseline", type=float, default=20, help="seconds of bystander alone (as long as the attack: both p99s on as many samples)")
    parser.add_argument("--duration", type=float, default=20, help="seconds of attack")
    parser.add_argument("--rate", type=float, default=50, help="bystander writes per second")
    parser.add_argument("--starved-ms", type=float, default=1000, help="a bystander p99 over this during an attack fails the run")
    parser.add_argument("--strict", action="store_true", help="also fail when a bystander's p99 more than doubles")
    parser.add_argument("--json", help="also write all reports to this file")
    parser.add_argument("--server-args", default="", help="extra flags for every server (e.g. '--slice-reads-over 0')")
    parser.add_argument("--pin", action="store_true",
                        help="the server and the bystander on CPU 0, the attackers on CPU 1: an attacker elsewhere "
                             "on the network takes neither the server's CPU nor the well-behaved client's")
    parser.add_argument("--bystander-slice-us", type=int, default=100,
                        help="the bystander's time slice at nice 0, so that it preempts the server on the core they share "
                             "as a client with its own machine would not wait for it (0: the default slice, at nice 10)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {1})  # inherited by the attackers' processes (the bystander moves to CPU 0)
    if args.list:
        for name, scenario in attack_scenarios.SCENARIOS.items():
            print(f"{name:20} {scenario['what']}")
        return 0
    names = list(attack_scenarios.SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    unknown = [n for n in names if n not in attack_scenarios.SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; --list names them")
    reports = []
    for name in names:
        report = run(name, args)
        print(json.dumps(report), flush=True)
        reports.append(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    log(summary(reports))
    failed = [r["scenario"] for r in reports if not r["server_alive"] or r["bystander_starved"] or "error" in r["offender"]
              or (args.strict and not r["within_2x"])]
    if failed:
        log(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
