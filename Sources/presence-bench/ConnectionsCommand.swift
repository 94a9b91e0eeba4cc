import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// Options shared by the scenarios that talk to presence-server.
struct ServerOptions: ParsableArguments {
    @Option(help: "Server URL (ws://127.x.x.x:port). With no path, /.ws?v=5&ns=<namespace> is used.")
    var url = "ws://127.0.0.1:9000"
    @Option(help: "Database namespace (ns=) when the URL has no path.")
    var namespace = "presence-bench"
    @Option(help: "Spread connections over this many local source addresses 127.0.0.1...127.0.0.N (more ephemeral ports).")
    var sourceAddresses = 1
    @Option(help: "PID of the server: report its RSS and CPU.")
    var serverPid: Int32?
    @Option(help: "Handshakes in flight at most.")
    var maxInFlight = 200
    @Option(help: "Client per-connection lws rx buffer (bytes).")
    var rxBuffer = 1024

    func endpoint() throws -> WebSocketURL {
        guard let u = Wire.endpoint(url, namespace: namespace) else { throw ValidationError("bad --url \(url)") }
        guard u.host.hasPrefix("127.") || u.host == "localhost" else {
            throw ValidationError("only loopback targets (127.x.x.x) are allowed")
        }
        return u
    }

    /// Source address for connection number `i` (nil = let the kernel choose, i.e. 127.0.0.1).
    func source(_ i: Int) -> String? {
        sourceAddresses > 1 ? "127.0.0.\(1 + i % min(sourceAddresses, 254))" : nil
    }

    func clientConfiguration(tickMicros: UInt64 = 0) -> WebSocketClientConfiguration {
        var c = WebSocketClientConfiguration()
        c.maxHandshakesInFlight = maxInFlight
        c.rxBufferSize = rxBuffer
        c.tickIntervalMicroseconds = tickMicros
        c.connectTimeoutSeconds = 30
        return c
    }
}

/// Loop-confined state of the connections scenario.
private final class ConnState: @unchecked Sendable {
    var index: [WebSocketConnectionID: Int] = [:]
    var handshakeAt: [UInt64]
    var requestedAt: UInt64 = 0
    var handshakeLatency = LatencySamples()
    var listenLatency = LatencySamples()
    var failureReasons: [String: Int] = [:]
    var statusCounts: [String: Int] = [:]
    var pushes = 0
    var hellos = 0
    var unexpectedClose = 0
    var lastListenOK: UInt64 = 0
    let connected = Atomic<Int>(0)
    let listening = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let closedCount = Atomic<Int>(0)
    var holding = false

    init(count: Int) { handshakeAt = [UInt64](repeating: 0, count: count) }
}

/// `presence-bench connections`: many authenticated listeners, time and memory.
struct ConnectionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "Open N connections; each authenticates as userK and listens to /users/userK/presence. Reports connect time, failures and server RSS per connection."
    )

    @OptionGroup var server: ServerOptions
    @Option(help: "Number of connections.") var count = 1000
    @Option(help: "Seconds to hold all connections open before measuring RSS and closing.") var hold: Double = 3
    @Option(help: "Give up on the connect phase after this many seconds.") var timeout: Double = 120
    @Option(help: "Server RSS (bytes) before the run; measured now when omitted.") var baselineRss: Int?
    @Flag(help: "End with abrupt disconnects (no close frame) instead of clean closes.") var abortAtEnd = false

    func run() throws {
        let endpoint = try server.endpoint()
        guard count > 0, count < 20_000 else { throw ValidationError("--count must be in 1..<20000 (fd limit)") }
        let st = ConnState(count: count)
        let rssBefore = baselineRss ?? server.serverPid.flatMap(processRSS)
        let client = try WebSocketClient(configuration: server.clientConfiguration()) { client, event in
            switch event {
            case .connected(let id):
                guard let k = st.index[id] else { return }
                let now = monotonicMicros()
                st.handshakeAt[k] = now
                st.handshakeLatency.add(now - st.requestedAt)
                st.connected.wrappingAdd(1, ordering: .relaxed)
                client.send(id, text: Wire.auth(r: 1, uid: "user\(k)"))
                client.send(id, text: Wire.listen(r: 2, path: "/users/user\(k)/presence"))
            case .connectFailed(_, let reason):
                st.failureReasons["connect: " + reason, default: 0] += 1
                st.failed.wrappingAdd(1, ordering: .relaxed)
            case .message(let id, let m):
                let scan = FrameScan(bytes: m.bytes)
                if let r = scan.requestNumber {
                    let s = scan.status ?? "?"
                    st.statusCounts["r\(r):\(s)", default: 0] += 1
                    if s != "ok" {
                        st.failureReasons["r\(r) status \(s)", default: 0] += 1
                        if r == 2 { st.failed.wrappingAdd(1, ordering: .relaxed) }
                    } else if r == 2, let k = st.index[id] {
                        let now = monotonicMicros()
                        st.listenLatency.add(now - st.handshakeAt[k])
                        st.lastListenOK = now
                        st.listening.wrappingAdd(1, ordering: .relaxed)
                    }
                } else if scan.find(#""t":"h""#) != nil {
                    st.hellos += 1
                } else if scan.isDataPush {
                    st.pushes += 1
                }
            case .closed(_, let info):
                st.closedCount.wrappingAdd(1, ordering: .relaxed)
                if !info.closedLocally && !info.aborted && !info.byShutdown { st.unexpectedClose += 1 }
            case .tick:
                break
            }
        }
        try client.start()
        let sem = DispatchSemaphore(value: 0)
        let t0 = monotonicMicros()
        // Register ids on the loop before any event for them can arrive.
        let sources = (0..<count).map { server.source($0) }
        client.perform {
            st.requestedAt = monotonicMicros()
            for k in 0..<count {
                let id = client.connect(to: endpoint, sourceAddress: sources[k])
                st.index[id] = k
            }
            sem.signal()
        }
        sem.wait()
        let deadline = t0 + UInt64(timeout * 1e6)
        var lastLog = t0
        while st.listening.load(ordering: .relaxed) + st.failed.load(ordering: .relaxed) < count,
              monotonicMicros() < deadline {
            usleep(10_000)
            if monotonicMicros() - lastLog > 2_000_000 {
                lastLog = monotonicMicros()
                log("connected \(st.connected.load(ordering: .relaxed)) listening \(st.listening.load(ordering: .relaxed)) failed \(st.failed.load(ordering: .relaxed))")
            }
        }
        let tAll = monotonicMicros()
        let listening = st.listening.load(ordering: .relaxed)
        let connectPhase = Double(tAll - t0) / 1e6
        sleepSeconds(hold)
        let rssAfter = server.serverPid.flatMap(processRSS)
        let serverCPU = server.serverPid.flatMap(processCPU)
        let openBeforeClose = client.statistics.open
        // Snapshot loop-confined numbers on the loop.
        let snapshot = Box<[(String, ReportJSON)]>([])
        client.perform {
            snapshot.value = [
                ("handshake_since_start", st.handshakeLatency.summary()),
                ("listen_ok_after_handshake", st.listenLatency.summary()),
                ("failure_reasons", .object(st.failureReasons.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                ("reply_status_counts", .object(st.statusCounts.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                ("hellos", .int(st.hellos)),
                ("data_pushes", .int(st.pushes)),
                ("closed_by_server_during_run", .int(st.unexpectedClose)),
                ("all_listening_s", .double(st.lastListenOK > t0 ? Double(st.lastListenOK - t0) / 1e6 : 0)),
            ]
            sem.signal()
        }
        sem.wait()
        // Close.
        let tc = monotonicMicros()
        if abortAtEnd {
            client.perform { for id in st.index.keys { client.abort(id) } }
        } else {
            client.closeAll()
        }
        let closeDeadline = tc + 15_000_000
        while client.statistics.open > 0, monotonicMicros() < closeDeadline { usleep(10_000) }
        let closeSeconds = Double(monotonicMicros() - tc) / 1e6
        let stillOpen = client.statistics.open
        client.shutdown()
        let cpu = selfCPU()
        var fields: [(String, ReportJSON)] = [
            ("scenario", .string("connections")),
            ("url", .string(endpoint.description)),
            ("count", .int(count)),
            ("source_addresses", .int(server.sourceAddresses)),
            ("connected", .int(st.connected.load(ordering: .relaxed))),
            ("listening", .int(listening)),
            ("failures", .int(count - listening)),
            ("connect_phase_s", .double(connectPhase)),
            ("connections_per_s", .double(Double(listening) / max(connectPhase, 1e-6))),
            ("open_after_hold", .int(openBeforeClose)),
        ]
        fields += snapshot.value
        fields += [
            ("close_mode", .string(abortAtEnd ? "abort" : "close-frame")),
            ("close_s", .double(closeSeconds)),
            ("still_open_after_close", .int(stillOpen)),
            ("client_cpu_user_s", .double(cpu.user)),
            ("client_cpu_system_s", .double(cpu.system)),
        ]
        if server.serverPid != nil {
            fields.append(("server_rss_before", rssBefore.map { .int($0) } ?? .null))
            fields.append(("server_rss_after", rssAfter.map { .int($0) } ?? .null))
            if let b = rssBefore, let a = rssAfter, listening > 0 {
                fields.append(("server_bytes_per_connection", .double(Double(a - b) / Double(listening))))
            }
            fields.append(("server_cpu_total_s", serverCPU.map { .double($0) } ?? .null))
        }
        printResult(fields)
    }
}
