#!/usr/bin/env python3
"""Markdown tables from bench/fanout-vs-mosquitto.sh's JSON lines (issue 17's table, then one
row per run with everything the generator measured).

    python3 bench/fanout-table.py results.jsonl
"""
import json
import sys

NAMES = {
    "memory": "ours, `--storage memory`",
    "durable": "ours, default durable",
    "mosquitto": "Mosquitto",
}


def events(v):
    return f"{v / 1000:.1f}k" if v >= 999.5 else f"{v:.0f}"


def num(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def ms(us):
    if us is None:
        return "–"
    v = us / 1000
    if v >= 1000:
        return f"{v / 1000:.1f} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 10:
        return f"{v:.1f} ms"
    return f"{v:.2f} ms"


def pct(summary, key):
    return summary.get(key) if summary and summary.get("count") else None


def window(r):
    """Per-second delivered counts while writing (the settle seconds left out)."""
    seconds = max(1, round(r.get("duration_s", 0)))
    return r.get("events_per_s_by_second", [])[:seconds]


def verdict(r):
    f = r.get("final_state", {})
    if f.get("ok"):
        return "right"
    parts = []
    if f.get("wrong"):
        parts.append(f"{f['wrong']} of {f.get('checked', 0)} wrong")
    if f.get("lastSeen_disagreements"):
        parts.append(f"{f['lastSeen_disagreements']} lastSeen disagree")
    if not f.get("all_acked", True):
        parts.append("not all acked")
    return "**" + (", ".join(parts) or "failed") + "**"


def main(path):
    meta, runs = {}, []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            if "meta" in row:
                meta = row["meta"]
            elif row.get("result"):
                runs.append(row)
    servers = [s for s in ("memory", "durable", "mosquitto") if any(r["server"] == s for r in runs)]
    rates = sorted({r["rate"] for r in runs})
    by = {(r["server"], r["rate"]): r["result"] for r in runs}
    if meta:
        print(f"Shape: {meta.get('shape')}, {meta.get('duration_s')} s per rate, settle {meta.get('settle_s')} s; "
              f"server on CPU {meta.get('server_cpu')}, generator ({meta.get('transport')} transport) on CPU "
              f"{meta.get('generator_cpu')}; {meta.get('mosquitto')}; commit {meta.get('commit')}; {meta.get('date')}; "
              f"at start: {meta.get('uptime')}")
        print()
    if meta.get("mosquitto", "").startswith("mosquitto version "):
        NAMES["mosquitto"] = "Mosquitto " + meta["mosquitto"].split()[-1] + " (WS, retained QoS 1, Will)"
    head = ["R writes/s"]
    for s in servers:
        head.append(NAMES[s] + (": events/s, p99, acks/s" if s == "durable" else ": events/s, p99"))
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for rate in rates:
        cells = [f"{rate:,}"]
        for s in servers:
            r = by.get((s, rate))
            if not r:
                cells.append("–")
                continue
            cell = f"{events(r['events_per_s_in_window'])}, {ms(pct(r.get('latency'), 'p99_us'))}"
            if s == "durable":
                cell += f", {events(r['acks_per_s_in_window'])}"
            if r.get("writes_refused_unavailable"):
                cell += f" ({r['writes_refused_unavailable'] / max(1, r['writes_measured']):.0%} of writes refused)"
            if not r.get("final_state", {}).get("ok"):
                cell += " (final state " + verdict(r).strip("*") + ")"
            cells.append(cell)
        print("| " + " | ".join(cells) + " |")
    print()
    print("Events/s are those delivered while writing (per-second mean over the window); p99 is write→watcher over "
          "every measured push, including those delivered while settling. Writes refused with `unavailable` (the server "
          "shedding load past saturation) are left out of latency and acks; the final state is checked against each user's "
          "last acknowledged write.")
    print()
    cols = ["R", "server", "events/s in window (overall)", "per second min–max", "write→watcher p50 / p99 / p999 / max",
            "p99 by second (first → last)", "acks/s, write→ack p50 / p99", "server µs/event user + sys", "server cores",
            "generator cores, µs/event", "writes sent / offered", "writes refused (unavailable)", "final state"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for rate in rates:
        for s in servers:
            r = by.get((s, rate))
            if not r:
                continue
            lat, ack = r.get("latency", {}), r.get("ack_latency", {})
            w = window(r)
            by_second = [v for v in r.get("latency_p99_us_by_second", []) if v is not None]
            scpu = r.get("server_cpu_us_per_event", {})
            gcpu = r.get("generator_cpu_us_per_event", {})
            pace = "" if r.get("pace_kept") else " **(pace not kept)**"
            print("| " + " | ".join([
                f"{rate:,}", s,
                f"{r['events_per_s_in_window']:,.0f} ({r['events_per_s']:,.0f})",
                f"{min(w):,}–{max(w):,}" if w else "–",
                " / ".join(ms(pct(lat, k)) for k in ("p50_us", "p99_us", "p999_us", "max_us")),
                f"{ms(by_second[0])} → {ms(by_second[-1])}" if by_second else "–",
                f"{r['acks_per_s_in_window']:,.0f}, {ms(pct(ack, 'p50_us'))} / {ms(pct(ack, 'p99_us'))}",
                f"{num(scpu.get('user'))} + {num(scpu.get('system'))} = {num(scpu.get('total'))}",
                num(r.get("server_cpu_fraction_of_one_core")),
                f"{num(r.get('generator_cpu_fraction_of_one_core'))}, {num(gcpu.get('total'))}",
                f"{r['writes_measured']:,} / {r['writes_offered']:,}{pace}",
                f"{r.get('writes_refused_unavailable', 0):,}",
                verdict(r),
            ]) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
