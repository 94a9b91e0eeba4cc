import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// Loop-confined state of the churn scenario (service thread only).
private final class ChurnState: @unchecked Sendable {
    enum Proto { case rtdb, mqtt }
    enum Role { case user(Int), watcher(Int) }
    enum Phase: UInt8 { case idle, connecting, online, dropped }

    let proto: Proto
    let users: Int
    let watchers: Int
    let subs: Int
    let pattern: WatchPattern
    let rate: Double
    let holdMicros: UInt64
    let abortPercent: Int
    let offlineTimeoutMicros: UInt64
    var roles: [WebSocketConnectionID: Role] = [:]

    var phase: [Phase]
    var conn: [WebSocketConnectionID]
    var tConnect: [UInt64]
    var tDrop: [UInt64]
    var dropAborted: [Bool]
    var pendingOffline: [Int]
    var generation: [Int]
    var userReader: [MQTT.Reader]
    var watcherReader: [MQTT.Reader]
    var watchersOfUser: [Int]
    /// Per watcher × slot: the user generation whose offline this watcher has counted.
    var seenGen: [Int]
    var dropQueue: [(u: Int, due: UInt64)] = []
    var dropHead = 0

    var churning = false
    var startMicros: UInt64 = 0
    var lastPing: UInt64 = 0
    var lastExpiryScan: UInt64 = 0
    var connectsStarted = 0
    var connectsCompleted = 0
    var connectFailures = 0
    var poolExhausted = 0
    var drops = 0
    var dropsAborted = 0
    var offlineExpected = 0
    var offlineDelivered = 0
    var offlineMissed = 0
    var onlineEvents = 0
    var closedUnexpectedly = 0
    var perSecond: [Int] = []
    var connectLatency = LatencySamples(reserve: 1 << 16)
    var offlineLatency = LatencySamples(reserve: 1 << 20)
    var offlineLatencyClean = LatencySamples(reserve: 1 << 19)
    var offlineLatencyAbort = LatencySamples(reserve: 1 << 19)
    var failures: [String: Int] = [:]
    let ready = Atomic<Int>(0)
    let failedConns = Atomic<Int>(0)

    init(proto: Proto, users: Int, watchers: Int, subs: Int, rate: Double, hold: Double, abortFraction: Double, offlineTimeout: Double) {
        self.proto = proto
        self.users = users
        self.watchers = watchers
        self.subs = subs
        self.rate = rate
        holdMicros = UInt64(hold * 1e6)
        abortPercent = Int((abortFraction * 100).rounded())
        offlineTimeoutMicros = UInt64(offlineTimeout * 1e6)
        phase = .init(repeating: .idle, count: users)
        conn = .init(repeating: 0, count: users)
        tConnect = .init(repeating: 0, count: users)
        tDrop = .init(repeating: 0, count: users)
        dropAborted = .init(repeating: false, count: users)
        pendingOffline = .init(repeating: 0, count: users)
        generation = .init(repeating: 0, count: users)
        userReader = .init(repeating: .init(), count: users)
        watcherReader = .init(repeating: .init(), count: watchers)
        pattern = WatchPattern(users: users, subs: subs)
        watchersOfUser = pattern.watchersPerUser(watchers: watchers)
        seenGen = .init(repeating: 0, count: watchers * subs)
    }

    @inline(__always) func user(_ w: Int, _ j: Int) -> Int { pattern.user(w, j) }
    @inline(__always) func slot(_ w: Int, _ u: Int) -> Int? { pattern.slot(w, u) }

    static let topicPrefix = "users/user"
    func topic(_ u: Int) -> String { "users/user\(u)/presence" }
    func mqttPresence(_ online: Bool) -> [UInt8] { MQTT.presencePayload(online: online, lastSeenMillis: wallClockMillis()) }
    static let offlineValue = #"{"online":false,"lastSeen":{".sv":"timestamp"}}"#
    static let onlineValue = #"{"online":true,"lastSeen":{".sv":"timestamp"}}"#

    // MARK: tick: start connects at the rate, drop users whose hold is over, expire lost offlines

    func tick(_ client: WebSocketClient, endpoint: WebSocketURL, sources: [String?], now: UInt64) {
        if proto == .mqtt, now > lastPing + 20_000_000 {
            lastPing = now
            for id in roles.keys { client.send(id, bytes: MQTT.pingreq, binary: true) }
        }
        if churning {
            let due = Int(rate * Double(now - startMicros) / 1e6)
            var budget = 2000
            var cursor = connectsStarted % users
            while connectsStarted + poolExhausted < due, budget > 0 {
                budget -= 1
                // The next idle user, round robin.
                var scanned = 0
                while phase[cursor] != .idle, scanned < users { cursor = (cursor + 1) % users; scanned += 1 }
                guard phase[cursor] == .idle else { poolExhausted += 1; continue }
                let u = cursor
                cursor = (cursor + 1) % users
                phase[u] = .connecting
                generation[u] += 1
                tConnect[u] = monotonicMicros()
                userReader[u] = .init()
                let id = client.connect(to: endpoint, sourceAddress: sources[(watchers + connectsStarted) % sources.count])
                conn[u] = id
                roles[id] = .user(u)
                connectsStarted += 1
            }
        }
        while dropHead < dropQueue.count, dropQueue[dropHead].due <= now {
            let u = dropQueue[dropHead].u
            dropHead += 1
            if dropHead > 4096 { dropQueue.removeFirst(dropHead); dropHead = 0 }
            guard phase[u] == .online else { continue }
            drop(client, u)
        }
        // Offline that never arrived: count as missed, free the user.
        guard now >= lastExpiryScan + 100_000 else { return }
        lastExpiryScan = now
        for u in 0..<users where phase[u] == .dropped && now > tDrop[u] + offlineTimeoutMicros {
            offlineMissed += pendingOffline[u]
            pendingOffline[u] = 0
            phase[u] = .idle
        }
    }

    private func drop(_ client: WebSocketClient, _ u: Int) {
        let id = conn[u]
        let abort = (drops % 100) < abortPercent
        drops += 1
        phase[u] = .dropped
        pendingOffline[u] = watchersOfUser[u]
        offlineExpected += watchersOfUser[u]
        dropAborted[u] = abort
        tDrop[u] = monotonicMicros()
        if abort {
            dropsAborted += 1
            client.abort(id, mode: dropsAborted % 2 == 0 ? .fin : .reset)
        } else {
            switch proto {
            case .rtdb:
                client.close(id)
            case .mqtt:
                // A logging-out MQTT client publishes its offline state, then DISCONNECTs (which
                // discards the will); the broker closes the connection.
                client.send(id, bytes: MQTT.publish(topic: topic(u), payload: mqttPresence(false), qos: 1, retain: true, packetID: 2), binary: true)
                client.send(id, bytes: MQTT.disconnect, binary: true)
            }
        }
        if pendingOffline[u] == 0 { phase[u] = .idle }
    }

    // MARK: events

    func onConnected(_ client: WebSocketClient, _ id: WebSocketConnectionID) {
        guard let role = roles[id] else { return }
        switch (proto, role) {
        case (.rtdb, .user(let u)):
            client.send(id, text: Wire.auth(r: 1, uid: "user\(u)"))
            client.send(id, text: #"{"t":"d","d":{"r":2,"a":"o","b":{"p":"/users/user\#(u)/presence","d":\#(ChurnState.offlineValue)}}}"#)
            client.send(id, text: Wire.put(r: 3, path: "/users/user\(u)/presence", valueJSON: ChurnState.onlineValue))
        case (.rtdb, .watcher(let w)):
            client.send(id, text: Wire.auth(r: 1, uid: "watcher\(w)"))
            for j in 0..<subs { client.send(id, text: Wire.listen(r: 2 + j, path: "/users/user\(user(w, j))/presence")) }
        case (.mqtt, .user(let u)):
            let will = MQTT.Will(topic: topic(u), payload: MQTT.presencePayload(online: false, lastSeenMillis: 0), qos: 1, retain: true)
            client.send(id, bytes: MQTT.connect(clientID: "user\(u)", keepAlive: 60, will: will), binary: true)
        case (.mqtt, .watcher(let w)):
            client.send(id, bytes: MQTT.connect(clientID: "watcher\(w)", keepAlive: 60), binary: true)
        }
    }

    private func userOnline(_ u: Int, now: UInt64) {
        guard phase[u] == .connecting else { return }
        phase[u] = .online
        connectsCompleted += 1
        connectLatency.add(now - tConnect[u])
        let sec = Int((now - startMicros) / 1_000_000)
        while perSecond.count <= sec { perSecond.append(0) }
        perSecond[sec] += 1
        dropQueue.append((u, now + holdMicros))
    }

    private func watcherSaw(_ w: Int, _ u: Int, online: Bool, now: UInt64) {
        guard u >= 0, u < users, let j = slot(w, u) else { return }
        if online { onlineEvents += 1; return }
        guard phase[u] == .dropped else { return }
        let k = w * subs + j
        guard seenGen[k] != generation[u] else { return }
        seenGen[k] = generation[u]
        let lat = now - tDrop[u]
        offlineLatency.add(lat)
        if dropAborted[u] { offlineLatencyAbort.add(lat) } else { offlineLatencyClean.add(lat) }
        offlineDelivered += 1
        pendingOffline[u] -= 1
        if pendingOffline[u] == 0 { phase[u] = .idle }
    }

    func onMessage(_ client: WebSocketClient, _ id: WebSocketConnectionID, _ m: WebSocketMessage) {
        guard let role = roles[id] else { return }
        let now = monotonicMicros()
        switch proto {
        case .rtdb:
            let scan = FrameScan(bytes: m.bytes)
            if let r = scan.requestNumber {
                let ok = scan.status == "ok"
                switch role {
                case .user(let u):
                    if !ok { failures["user r\(r) \(scan.status ?? "?")", default: 0] += 1 } else if r == 3 { userOnline(u, now: now) }
                case .watcher:
                    if !ok { failures["watcher r\(r) \(scan.status ?? "?")", default: 0] += 1 } else if r >= 2 { ready.wrappingAdd(1, ordering: .relaxed) }
                }
                return
            }
            guard case .watcher(let w) = role, scan.isDataPush, let pathStart = scan.find(#""p":""#) else { return }
            var i = pathStart
            if i < m.bytes.count, m.bytes[i] == UInt8(ascii: "/") { i += 1 }
            guard let ui = scan.find("users/user", from: i), ui == i + 10, let u = scan.int(at: ui),
                  let o = scan.find(#""online":"#), o < m.bytes.count else { return }
            watcherSaw(w, u, online: m.bytes[o] == UInt8(ascii: "t"), now: now)
        case .mqtt:
            do {
                switch role {
                case .user(let u):
                    var r = userReader[u]
                    try r.feed(m.bytes) { p in
                        switch p.packetType {
                        case .connack:
                            if p.connackCode == 0 {
                                client.send(id, bytes: MQTT.publish(topic: topic(u), payload: mqttPresence(true), qos: 1, retain: true, packetID: 1), binary: true)
                            } else { failures["user connack \(p.connackCode ?? -1)", default: 0] += 1 }
                        case .puback:
                            if p.packetID == 1 { userOnline(u, now: now) }
                        case .pingresp: break
                        default: failures["user got packet type \(p.type)", default: 0] += 1
                        }
                    }
                    userReader[u] = r
                case .watcher(let w):
                    var r = watcherReader[w]
                    try r.feed(m.bytes) { p in
                        switch p.packetType {
                        case .connack:
                            let topics = (0..<subs).map { (topic(user(w, $0)), UInt8(0)) }
                            client.send(id, bytes: MQTT.subscribe(packetID: 1, topics: topics), binary: true)
                        case .suback:
                            var ok = 0
                            for c in p.subackCodes { if c == 0x80 { failures["suback failure", default: 0] += 1 } else { ok += 1 } }
                            ready.wrappingAdd(ok, ordering: .relaxed)
                        case .publish:
                            guard let pub = p.publish else { failures["bad publish", default: 0] += 1; return }
                            if p.qos == 1 { client.send(id, bytes: MQTT.puback(packetID: pub.packetID), binary: true) }
                            guard let u = MQTT.userIndex(topic: pub.topic) else { return }
                            let scan = FrameScan(bytes: pub.payload)
                            guard let o = scan.find(#""online":"#), o < pub.payload.count else { return }
                            watcherSaw(w, u, online: pub.payload[o] == UInt8(ascii: "t"), now: now)
                        case .pingresp: break
                        default: failures["watcher got packet type \(p.type)", default: 0] += 1
                        }
                    }
                    watcherReader[w] = r
                }
            } catch {
                failures["decode \(error)", default: 0] += 1
            }
        }
    }

    func onClosed(_ id: WebSocketConnectionID, _ info: WebSocketCloseInfo) {
        guard let role = roles.removeValue(forKey: id) else { return }
        if case .user(let u) = role {
            if conn[u] == id { conn[u] = 0 }
            // Expected: our own close/abort, or the broker closing after an MQTT DISCONNECT.
            if phase[u] == .connecting || phase[u] == .online {
                closedUnexpectedly += 1
                failures["user closed while \(phase[u])", default: 0] += 1
                phase[u] = .idle
            }
        } else if !info.byShutdown && !info.closedLocally {
            closedUnexpectedly += 1
        }
    }

    func onConnectFailed(_ id: WebSocketConnectionID, _ reason: String) {
        failures["connect: \(reason)", default: 0] += 1
        connectFailures += 1
        guard let role = roles.removeValue(forKey: id) else { return }
        switch role {
        case .user(let u): phase[u] = .idle; conn[u] = 0
        case .watcher: failedConns.wrappingAdd(1, ordering: .relaxed)
        }
    }
}

/// `presence-bench churn`: users connect and drop continuously; watchers time each drop to offline.
struct ChurnCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "churn",
        abstract: "Users connect at a set rate, set an onDisconnect offline value (RTDB `o`, or an MQTT Last Will), go online, then drop (clean closes and abrupt kills mixed); W watchers listen to S users each. Reports sustained connects/s and drop-to-watcher-offline latency."
    )

    enum ProtocolChoice: String, ExpressibleByArgument { case rtdb, mqtt }

    @OptionGroup var server: ServerOptions
    @Option(help: "rtdb (presence-server, Firebase wire protocol) or mqtt (MQTT 3.1.1 broker over WebSockets, subprotocol mqtt).")
    var `protocol`: ProtocolChoice = .rtdb
    @Option(help: "Pool of churning users (each connects again once every watcher has seen it offline).") var users = 2000
    @Option(help: "Watcher connections (stay connected).") var watchers = 1000
    @Option(help: "Users each watcher listens to.") var subscriptions = 10
    @Option(help: "Connects started per second.") var rate: Double = 200
    @Option(help: "Seconds of churn.") var duration: Double = 10
    @Option(help: "Seconds each user stays online (after its online write is acknowledged) before it drops.") var hold: Double = 0.5
    @Option(help: "Fraction of drops that are abrupt (TCP FIN/RST alternately, no close frame); the rest are clean.") var abortFraction: Double = 0.5
    @Option(help: "The server's disconnect grace window in seconds (subtracted in the *_minus_grace fields; presence-server --disconnect-grace).") var grace: Double = 0
    @Option(help: "Seconds after a drop before the watchers' missing offline events count as lost.") var offlineTimeout: Double = 10
    @Option(help: "Seconds to wait, after churn stops, for the last drops and offline events.") var settle: Double = 15
    @Option(help: "Give up on the watchers' connect phase after this many seconds.") var timeout: Double = 60

    func run() throws {
        let proto: ChurnState.Proto = self.protocol == .rtdb ? .rtdb : .mqtt
        let endpoint = proto == .rtdb ? try server.endpoint() : try server.mqttEndpoint()
        guard users > 0, watchers >= 0, subscriptions > 0, subscriptions <= users else {
            throw ValidationError("need users > 0 and 0 < subscriptions <= users")
        }
        guard users + watchers < 19_000 else { throw ValidationError("users + watchers must stay below the fd limit") }
        guard rate > 0, rate <= 20_000, duration > 0, duration <= 600, hold >= 0, hold <= 60,
              abortFraction >= 0, abortFraction <= 1, offlineTimeout > 0, offlineTimeout <= 120, settle <= 120 else {
            throw ValidationError("bad --rate/--duration/--hold/--abort-fraction/--offline-timeout/--settle")
        }
        let st = ChurnState(proto: proto, users: users, watchers: watchers, subs: subscriptions, rate: rate, hold: hold,
                            abortFraction: abortFraction, offlineTimeout: offlineTimeout + grace)
        let sources = (0..<max(1, server.sourceAddresses)).map { server.source($0) }
        let client = try WebSocketClient(configuration: server.clientConfiguration(tickMicros: 1000).with(subprotocol: proto == .mqtt ? "mqtt" : nil)) { client, event in
            switch event {
            case .connected(let id): st.onConnected(client, id)
            case .connectFailed(let id, let reason): st.onConnectFailed(id, reason)
            case .message(let id, let m): st.onMessage(client, id, m)
            case .closed(let id, let info): st.onClosed(id, info)
            case .tick(let now): st.tick(client, endpoint: endpoint, sources: sources, now: now)
            }
        }
        try client.start()
        let sem = DispatchSemaphore(value: 0)
        let w = watchers
        let t0 = monotonicMicros()
        client.perform {
            st.lastPing = monotonicMicros()
            for i in 0..<w { st.roles[client.connect(to: endpoint, sourceAddress: sources[i % sources.count])] = .watcher(i) }
            sem.signal()
        }
        sem.wait()
        let readyTarget = watchers * subscriptions
        let deadline = t0 + UInt64(timeout * 1e6)
        while st.ready.load(ordering: .relaxed) < readyTarget, st.failedConns.load(ordering: .relaxed) == 0, monotonicMicros() < deadline {
            usleep(10_000)
        }
        let setupSeconds = Double(monotonicMicros() - t0) / 1e6
        let readyCount = st.ready.load(ordering: .relaxed)
        if readyCount < readyTarget { log("only \(readyCount)/\(readyTarget) watcher subscriptions ready after \(setupSeconds) s; churning anyway") }

        let cpu0 = selfCPU()
        let srv0 = server.serverPid.flatMap(processCPU)
        client.perform { st.startMicros = monotonicMicros(); st.churning = true; sem.signal() }
        sem.wait()
        let m0 = monotonicMicros()
        sleepSeconds(duration)
        client.perform { st.churning = false; sem.signal() }
        sem.wait()
        let churnSeconds = Double(monotonicMicros() - m0) / 1e6
        // Settle: every user idle again (dropped and seen offline, or timed out).
        let settleEnd = monotonicMicros() + UInt64(settle * 1e6)
        let busy = Box(0)
        repeat {
            usleep(50_000)
            client.perform { busy.value = st.phase.reduce(0) { $0 + ($1 == .idle ? 0 : 1) }; sem.signal() }
            sem.wait()
        } while busy.value > 0 && monotonicMicros() < settleEnd
        let settleSeconds = Double(monotonicMicros() - m0) / 1e6 - churnSeconds
        let cpu1 = selfCPU()
        let srv1 = server.serverPid.flatMap(processCPU)
        let rss = server.serverPid.flatMap(processRSS)
        let graceMicros = grace * 1e6
        let result = Box<[(String, ReportJSON)]>([])
        client.perform {
            func minusGrace(_ s: inout LatencySamples) -> ReportJSON {
                guard s.count > 0 else { return .null }
                return .object([("p50_us", .double(s.percentile(0.5)! - graceMicros)), ("p99_us", .double(s.percentile(0.99)! - graceMicros)),
                                ("p999_us", .double(s.percentile(0.999)! - graceMicros)), ("max_us", .double(s.percentile(1)! - graceMicros))])
            }
            result.value = [
                ("connects_started", .int(st.connectsStarted)),
                ("connects_completed", .int(st.connectsCompleted)),
                ("connects_per_s", .double(Double(st.connectsCompleted) / churnSeconds)),
                ("connects_per_s_by_second", .array(st.perSecond.map { .int($0) })),
                ("connect_failures", .int(st.connectFailures)),
                ("pool_exhausted", .int(st.poolExhausted)),
                ("connect_to_online_ack", st.connectLatency.summary()),
                ("drops", .int(st.drops)), ("drops_abrupt", .int(st.dropsAborted)), ("drops_clean", .int(st.drops - st.dropsAborted)),
                ("offline_expected", .int(st.offlineExpected)),
                ("offline_delivered", .int(st.offlineDelivered)),
                ("offline_missed", .int(st.offlineMissed)),
                ("offline_still_pending", .int(st.pendingOffline.reduce(0, +))),
                ("online_events", .int(st.onlineEvents)),
                ("drop_to_offline", st.offlineLatency.summary()),
                ("drop_to_offline_clean", st.offlineLatencyClean.summary()),
                ("drop_to_offline_abrupt", st.offlineLatencyAbort.summary()),
                ("drop_to_offline_minus_grace", minusGrace(&st.offlineLatency)),
                ("failures", .object(st.failures.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                ("closed_by_server", .int(st.closedUnexpectedly)),
            ]
            if proto == .mqtt { for id in st.roles.keys { client.send(id, bytes: MQTT.disconnect, binary: true) } }
            sem.signal()
        }
        sem.wait()
        client.closeAll()
        let closeEnd = monotonicMicros() + 10_000_000
        while client.statistics.open > 0, monotonicMicros() < closeEnd { usleep(10_000) }
        client.shutdown()
        let genCPU = cpu1.user + cpu1.system - cpu0.user - cpu0.system
        var fields: [(String, ReportJSON)] = [
            ("scenario", .string(proto == .rtdb ? "churn" : "mqtt-churn")),
            ("url", .string(endpoint.description)),
            ("users", .int(users)), ("watchers", .int(watchers)), ("subscriptions", .int(subscriptions)),
            ("rate", .double(rate)), ("hold_s", .double(hold)), ("abort_fraction", .double(abortFraction)),
            ("grace_s", .double(grace)), ("duration_s", .double(churnSeconds)),
            ("setup_s", .double(setupSeconds)), ("ready", .int(readyCount)), ("ready_target", .int(readyTarget)),
            ("ondisconnect", .string(proto == .rtdb ? "o {online:false,lastSeen:TIMESTAMP}, then p online" : "Last Will (QoS 1, retained, offline), then PUBLISH online QoS 1 retained; clean drop = PUBLISH offline + DISCONNECT")),
        ]
        fields += result.value
        let serverCPU: Double? = if let s0 = srv0, let s1 = srv1 { s1 - s0 } else { nil }
        fields += [("settle_s", .double(settleSeconds))]
            + resourceFields(generatorCPU: genCPU, serverCPU: serverCPU, serverRSS: rss, seconds: churnSeconds + settleSeconds)
        printResult(fields)
    }
}
