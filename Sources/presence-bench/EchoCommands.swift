import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// `presence-bench echo-server`: the reference lws echo server.
struct EchoServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-server",
        abstract: "Minimal lws echo server (libuv, one thread, queue + WRITEABLE). Prints its counters as JSON on exit."
    )

    @Option(help: "TCP port to listen on.") var port: Int32 = 9100
    @Option(help: "Stop by itself after this many seconds.") var duration: Double = 300
    @Option(help: "Server validity policy: seconds idle before lws PINGs (0 = off).") var ping: UInt16 = 0
    @Option(help: "Server validity policy: seconds idle before lws hangs up (0 = off).") var hangup: UInt16 = 0

    func run() throws {
        var o = EchoServer.Options()
        o.port = port
        o.stopOnSignals = true
        o.pingSeconds = ping
        o.hangupSeconds = hangup
        let server = try EchoServer(options: o)
        let t0 = monotonicMicros()
        guard server.startOnThread() else { throw ValidationError("could not listen on port \(port)") }
        log("echo-server listening on port \(server.port) (libuv)")
        DispatchQueue.global().asyncAfter(deadline: .now() + duration) { server.requestStop() }
        server.waitStopped()
        let cpu = selfCPU()
        printResult([
            ("scenario", .string("echo-server")),
            ("port", .int(server.port)),
            ("ran_s", .double(Double(monotonicMicros() - t0) / 1e6)),
            ("cpu_user_s", .double(cpu.user)),
            ("cpu_system_s", .double(cpu.system)),
            ("counters", server.counters.json()),
        ])
    }
}

/// Loop-confined state of the echo-ceiling client.
private final class CeilingState: @unchecked Sendable {
    var payload: [UInt8]
    var sendTime: [UInt64]
    var sending = true
    var measuring = false
    var measured = 0
    var samples = LatencySamples(reserve: 1 << 20)
    var mismatches = 0
    let connected = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let received = Atomic<Int>(0)

    init(connections: Int, size: Int) {
        payload = [UInt8](repeating: UInt8(ascii: "x"), count: max(1, size))
        sendTime = [UInt64](repeating: 0, count: connections + 1)
    }
}

/// `presence-bench echo-ceiling`: K connections, one message in flight each, against echo-server.
struct EchoCeilingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-ceiling",
        abstract: "Request-response load (one message in flight per connection) against echo-server: the transport's ceiling."
    )

    @Option(help: "Echo server URL.") var url = "ws://127.0.0.1:9100"
    @Option(help: "Number of connections (K).") var connections = 50
    @Option(help: "Measurement seconds (after warm-up).") var duration: Double = 5
    @Option(help: "Warm-up seconds (not measured).") var warmup: Double = 1
    @Option(help: "Message size in bytes.") var size = 64
    @Option(help: "PID of the server, to report its CPU per message.") var serverPid: Int32?

    func run() throws {
        guard let endpoint = WebSocketURL(url) else { throw ValidationError("bad --url \(url)") }
        guard connections > 0, connections < 20_000 else { throw ValidationError("--connections out of range") }
        let st = CeilingState(connections: connections, size: size)
        let client = try WebSocketClient { client, event in
            switch event {
            case .connected(let id):
                st.connected.wrappingAdd(1, ordering: .relaxed)
                st.sendTime[Int(id)] = monotonicMicros()
                client.send(id, bytes: st.payload)
            case .connectFailed(_, let reason):
                st.failed.wrappingAdd(1, ordering: .relaxed)
                log("connect failed: \(reason)")
            case .message(let id, let m):
                let now = monotonicMicros()
                st.received.wrappingAdd(1, ordering: .relaxed)
                if m.bytes.count != st.payload.count { st.mismatches += 1 }
                if st.measuring {
                    st.measured += 1
                    st.samples.add(now - st.sendTime[Int(id)])
                }
                if st.sending {
                    st.sendTime[Int(id)] = now
                    client.send(id, bytes: st.payload)
                }
            default:
                break
            }
        }
        try client.start()
        let t0 = monotonicMicros()
        for _ in 0..<connections { client.connect(to: endpoint) }
        let deadline = t0 + 30_000_000
        while st.connected.load(ordering: .relaxed) + st.failed.load(ordering: .relaxed) < connections,
              monotonicMicros() < deadline {
            usleep(5000)
        }
        let connectSeconds = Double(monotonicMicros() - t0) / 1e6
        sleepSeconds(warmup)
        let sem = DispatchSemaphore(value: 0)
        let cpu0 = selfCPU()
        let srv0 = serverPid.flatMap(processCPU)
        client.perform { st.measuring = true; sem.signal() }
        sem.wait()
        let m0 = monotonicMicros()
        sleepSeconds(duration)
        client.perform { st.measuring = false; st.sending = false; sem.signal() }
        sem.wait()
        let elapsed = Double(monotonicMicros() - m0) / 1e6
        let cpu1 = selfCPU()
        let srv1 = serverPid.flatMap(processCPU)
        client.closeAll()
        let closeDeadline = monotonicMicros() + 3_000_000
        while client.statistics.open > 0, monotonicMicros() < closeDeadline { usleep(5000) }
        client.shutdown()
        let measured = st.measured
        let rate = Double(measured) / elapsed
        var fields: [(String, ReportJSON)] = [
            ("scenario", .string("echo-ceiling")),
            ("url", .string(url)),
            ("connections", .int(connections)),
            ("connected", .int(st.connected.load(ordering: .relaxed))),
            ("connect_failures", .int(st.failed.load(ordering: .relaxed))),
            ("connect_s", .double(connectSeconds)),
            ("message_bytes", .int(size)),
            ("measured_s", .double(elapsed)),
            ("messages", .int(measured)),
            ("msg_per_s", .double(rate)),
            ("rtt", st.samples.summary()),
            ("size_mismatches", .int(st.mismatches)),
            ("client_cpu_s", .double(cpu1.user + cpu1.system - cpu0.user - cpu0.system)),
            ("client_cpu_us_per_msg", .double(measured > 0 ? (cpu1.user + cpu1.system - cpu0.user - cpu0.system) * 1e6 / Double(measured) : 0)),
        ]
        if let s0 = srv0, let s1 = srv1 {
            fields.append(("server_cpu_s", .double(s1 - s0)))
            fields.append(("server_cpu_us_per_msg", .double(measured > 0 ? (s1 - s0) * 1e6 / Double(measured) : 0)))
        }
        printResult(fields)
    }
}
