import ArgumentParser
import CHiredis
import Foundation
import PresenceRedis

/// The SEQ round trip through our client at fixed rates, with the append -> tail delivery time
/// and Redis's CPU per write. One JSON object per rate on stdout.
@main
struct RedisSeqBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence-redis-bench",
        abstract: "SEQ round trip p50/p99 and Redis CPU per write through PresenceRedis, at fixed rates.")

    @Option(help: "Redis to use (numeric HOST:PORT); its data is not touched outside the bench namespace.")
    var redis: String

    @Option(help: "Redis's pid, to read its CPU time from /proc.")
    var redisPid: Int32?

    @Option(help: "Writes per second, comma-separated; one run each.")
    var rates: String = "1000,5000,10000"

    @Option(help: "Seconds per rate.")
    var duration: Double = 5

    @Option(help: "Payload bytes per entry (the brief measured 120).")
    var payloadBytes: Int = 120

    mutating func run() throws {
        let endpoint = try RedisEndpoint(parsing: redis)
        let loop = prs_loop_create()!
        let harness = SeqBenchHarness(loop: loop, endpoint: endpoint, payloadBytes: payloadBytes)
        try harness.prepare()
        for rate in rates.split(separator: ",").compactMap({ Int($0.trimmingCharacters(in: .whitespaces)) }) where rate > 0 {
            let result = harness.measure(rate: rate, seconds: duration, redisPid: redisPid)
            print(result)
        }
        harness.close()
        _ = prs_loop_destroy(loop)
    }
}

/// Drives the loop: one command connection (SEQ, beats), one tail connection (XREAD BLOCK).
final class SeqBenchHarness {
    let loop: UnsafeMutablePointer<uv_loop_t>
    let commands: RedisConnection
    let tailConnection: RedisConnection
    let tail: RedisLogTail
    let keys: RedisKeys
    let log: RedisLog
    let node: NodeIdentity
    let epoch = NodeIdentity.randomEpoch()
    let payload: [UInt8]
    let clock = RedisMonotonicClock()
    var lease: NodeLease!
    var sentAt: [UInt64: UInt64] = [:] // rev -> send time (ns), filled on the SEQ reply
    var pendingDelivery: [UInt64: UInt64] = [:] // rev -> delivery time (ns), when delivery beats the reply
    var roundTrips: [Double] = []
    var deliveries: [Double] = []
    var failures = 0

    init(loop: UnsafeMutablePointer<uv_loop_t>, endpoint: RedisEndpoint, payloadBytes: Int) {
        self.loop = loop
        commands = RedisConnection(loop: loop, endpoint: endpoint, options: .init(clientName: "presence-redis-bench"))
        tailConnection = RedisConnection(loop: loop, endpoint: endpoint, options: .init(clientName: "presence-redis-bench-tail"))
        tail = RedisLogTail(connection: tailConnection, blockMilliseconds: 1000)
        keys = try! RedisKeys(prefix: "presence-bench", namespace: "bench-\(NodeIdentity.randomIncarnation())")
        log = RedisLog(connection: commands, keys: keys)
        node = try! NodeIdentity(name: "bench")
        payload = Array(repeating: UInt8(ascii: "x"), count: max(1, payloadBytes))
    }

    static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    func runLoop(until done: () -> Bool, seconds: Double) {
        let deadline = SeqBenchHarness.nanoseconds() + UInt64(seconds * 1e9)
        let tick = prs_timer_create(loop, { _ in }, nil, nil)!
        while !done() && SeqBenchHarness.nanoseconds() < deadline {
            prs_timer_arm(tick, 1)
            uv_run(loop, UV_RUN_ONCE)
        }
        prs_timer_close(tick)
        uv_run(loop, UV_RUN_NOWAIT)
    }

    func prepare() throws {
        for script in RedisScripts.all { commands.register(script) }
        commands.start()
        tailConnection.start()
        var ready = false
        log.create(epoch: epoch, leaseMilliseconds: 5000) { _ in ready = true }
        runLoop(until: { ready }, seconds: 10)
        lease = NodeLease(connection: commands, keys: keys, node: node, epoch: epoch)
        var joined = false
        lease.join { result in joined = (try? result.get()).map { if case .joined = $0 { true } else { false } } ?? false }
        runLoop(until: { joined }, seconds: 10)
        guard joined else { throw ValidationError("could not create the bench log or join it (is Redis up?)") }
        tail.onEvent = { [unowned self] event in
            guard case .entries(_, let entries) = event else { return }
            let now = SeqBenchHarness.nanoseconds()
            for entry in entries {
                if let sent = sentAt.removeValue(forKey: entry.rev) {
                    deliveries.append(Double(now - sent) / 1000)
                } else {
                    pendingDelivery[entry.rev] = now
                }
            }
        }
        tail.follow(keys, after: 0)
    }

    func redisCPUSeconds(_ pid: Int32?) -> Double? {
        guard let pid, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Calls per command from INFO commandstats (commands run by scripts count under their own names).
    func commandCalls() -> [String: Int] {
        var calls: [String: Int]?
        commands.send(RedisCommand("INFO", "commandstats")) { result in
            var parsed: [String: Int] = [:]
            for line in ((try? result.get())?.string ?? "").split(separator: "\r\n") where line.hasPrefix("cmdstat_") {
                let parts = line.dropFirst(8).split(separator: ":", maxSplits: 1)
                guard parts.count == 2, let field = parts[1].split(separator: ",").first,
                      field.hasPrefix("calls=") else { continue }
                parsed[String(parts[0])] = Int(field.dropFirst(6))
            }
            calls = parsed
        }
        runLoop(until: { calls != nil }, seconds: 5)
        return calls ?? [:]
    }

    func measure(rate: Int, seconds: Double, redisPid: Int32?) -> String {
        roundTrips.removeAll(keepingCapacity: true)
        deliveries.removeAll(keepingCapacity: true)
        failures = 0
        let cpuBefore = redisCPUSeconds(redisPid)
        let callsBefore = commandCalls()
        let start = SeqBenchHarness.nanoseconds()
        var issued = 0, answered = 0, lastBeat = start
        let total = Int(Double(rate) * seconds)
        let tick = prs_timer_create(loop, { _ in }, nil, nil)!
        while answered < total && SeqBenchHarness.nanoseconds() < start + UInt64((seconds + 5) * 1e9) {
            let now = SeqBenchHarness.nanoseconds()
            let due = min(total, Int(Double(now - start) / 1e9 * Double(rate)))
            while issued < due {
                issued += 1
                let sent = SeqBenchHarness.nanoseconds()
                log.append(node: node.id, epoch: epoch, payload: payload) { [unowned self] result in
                    answered += 1
                    guard case .success(.appended(let rev, _)) = result else { failures += 1; return }
                    let replied = SeqBenchHarness.nanoseconds()
                    roundTrips.append(Double(replied - sent) / 1000)
                    if let delivered = pendingDelivery.removeValue(forKey: rev) {
                        deliveries.append(Double(delivered > sent ? delivered - sent : 0) / 1000)
                    } else {
                        sentAt[rev] = sent
                    }
                }
            }
            if now - lastBeat > 1_000_000_000 {
                lastBeat = now
                lease.beat { _ in }
            }
            prs_timer_arm(tick, 1)
            uv_run(loop, UV_RUN_ONCE)
        }
        let elapsed = Double(SeqBenchHarness.nanoseconds() - start) / 1e9
        runLoop(until: { sentAt.isEmpty }, seconds: 2)
        prs_timer_close(tick)
        let cpuAfter = redisCPUSeconds(redisPid)
        let callsAfter = commandCalls()
        let written = Double(max(1, answered - failures))
        var fields: [String] = [
            "\"rate\": \(rate)", "\"writes\": \(answered - failures)", "\"failures\": \(failures)",
            String(format: "\"achieved_per_s\": %.0f", Double(answered) / elapsed),
            "\"seq_rtt_us\": \(SeqBenchHarness.percentiles(roundTrips))",
            "\"append_to_tail_us\": \(SeqBenchHarness.percentiles(deliveries))",
        ]
        if let before = cpuBefore, let after = cpuAfter {
            fields.append(String(format: "\"redis_cpu_us_per_write\": %.1f", (after - before) * 1e6 / written))
        }
        // What the node sends per write: EVALSHA (SEQ, plus one beat a second) and the tail's XREADs.
        for name in ["evalsha", "xread"] {
            let delta = (callsAfter[name] ?? 0) - (callsBefore[name] ?? 0)
            fields.append(String(format: "\"\(name)_per_write\": %.3f", Double(delta) / written))
        }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    static func percentiles(_ samples: [Double]) -> String {
        guard !samples.isEmpty else { return "null" }
        let sorted = samples.sorted()
        func at(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        return String(format: "{\"p50\": %.0f, \"p90\": %.0f, \"p99\": %.0f, \"max\": %.0f}", at(0.5), at(0.9), at(0.99), sorted.last!)
    }

    func close() {
        tail.stop()
        tailConnection.close()
        commands.send(RedisCommand("UNLINK", keys.head, keys.log, keys.nodes)) { _ in }
        runLoop(until: { false }, seconds: 0.2)
        commands.close()
    }
}
