import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

extension ServerOptions {
    /// The broker's MQTT-over-WebSockets endpoint: `--url` as given, `/mqtt` when it has no path.
    func mqttEndpoint() throws -> WebSocketURL {
        guard var u = WebSocketURL(url) else { throw ValidationError("bad --url \(url)") }
        guard u.host.hasPrefix("127.") || u.host == "localhost" else {
            throw ValidationError("only loopback targets (127.x.x.x) are allowed")
        }
        if u.pathAndQuery == "/" { u.pathAndQuery = "/mqtt" }
        return u
    }
}

/// Loop-confined state of the MQTT fan-out scenario: the `fanout` shape against an MQTT broker.
private final class MQTTFanoutState: @unchecked Sendable {
    enum Role { case writer(Int), watcher(Int) }

    let users: Int
    let watchers: Int
    let subs: Int
    let rate: Double
    let keepAlive: Int
    var roles: [WebSocketConnectionID: Role] = [:]
    var writerConn: [WebSocketConnectionID]
    var writerReader: [MQTT.Reader]
    var watcherReader: [MQTT.Reader]
    var writerNextPID: [Int]
    var writerInflight: [[UInt64]]
    var writerInflightHead: [Int]
    var seq: [Int]
    var lastSend: [UInt64]
    var prevSend: [UInt64]
    var lastSeenSent: [Int]
    var watchersOfUser: [Int]
    var stOnline: [Int8]
    var stLastSeen: [Int]
    var failures: [String: Int] = [:]

    var writing = false
    var measuring = false
    var startMicros: UInt64 = 0
    var lastPing: UInt64 = 0
    var writesSent = 0
    var writesAcked = 0
    var measuredWrites = 0
    var expectedEvents = 0
    var events = 0
    var eventsMeasured = 0
    var eventsUnmatched = 0
    var eventsLate = 0
    var perSecond: [Int] = []
    var latency = LatencySamples(reserve: 1 << 20)
    var ackLatency = LatencySamples(reserve: 1 << 18)
    var userCursor = 0
    var closedUnexpectedly = 0
    let ready = Atomic<Int>(0)
    let failedConns = Atomic<Int>(0)

    init(users: Int, watchers: Int, subs: Int, rate: Double, keepAlive: Int) {
        self.users = users
        self.watchers = watchers
        self.subs = subs
        self.rate = rate
        self.keepAlive = keepAlive
        writerConn = .init(repeating: 0, count: users)
        writerReader = .init(repeating: .init(), count: users)
        watcherReader = .init(repeating: .init(), count: watchers)
        writerNextPID = .init(repeating: 1, count: users)
        writerInflight = .init(repeating: [], count: users)
        writerInflightHead = .init(repeating: 0, count: users)
        seq = .init(repeating: 0, count: users)
        lastSend = .init(repeating: 0, count: users)
        prevSend = .init(repeating: 0, count: users)
        lastSeenSent = .init(repeating: 0, count: users)
        watchersOfUser = .init(repeating: 0, count: users)
        stOnline = .init(repeating: -1, count: watchers * subs)
        stLastSeen = .init(repeating: 0, count: watchers * subs)
        for w in 0..<watchers { for j in 0..<subs { watchersOfUser[user(w, j)] += 1 } }
    }

    @inline(__always) func user(_ w: Int, _ j: Int) -> Int { (w * subs + j) % users }
    @inline(__always) func slot(_ w: Int, _ u: Int) -> Int? {
        let j = ((u - (w * subs) % users) + users) % users
        return j < subs ? j : nil
    }

    func tick(_ client: WebSocketClient, now: UInt64) {
        if keepAlive > 0, now > lastPing + UInt64(keepAlive) * 500_000 {
            lastPing = now
            for id in roles.keys { client.send(id, bytes: MQTT.pingreq, binary: true) }
        }
        guard writing else { return }
        let due = Int(rate * Double(now - startMicros) / 1e6)
        var budget = 5000
        while writesSent < due, budget > 0 {
            budget -= 1
            let u = userCursor
            userCursor = (userCursor + 1) % users
            let id = writerConn[u]
            guard id != 0 else { continue }
            seq[u] += 1
            prevSend[u] = lastSend[u]
            let t = monotonicMicros()
            lastSend[u] = t
            let ms = wallClockMillis()
            lastSeenSent[u] = ms
            let pid = writerNextPID[u]
            writerNextPID[u] = pid == 65535 ? 1 : pid + 1
            writerInflight[u].append(t)
            client.send(id, bytes: MQTT.publish(topic: "users/user\(u)/presence",
                                                payload: MQTT.presencePayload(online: seq[u] % 2 == 1, lastSeenMillis: ms),
                                                qos: 1, retain: true, packetID: pid), binary: true)
            writesSent += 1
            if measuring {
                measuredWrites += 1
                expectedEvents += watchersOfUser[u]
            }
        }
    }

    func onMessage(_ client: WebSocketClient, _ id: WebSocketConnectionID, _ m: WebSocketMessage) {
        guard let role = roles[id] else { return }
        let now = monotonicMicros()
        do {
            switch role {
            case .writer(let u):
                var r = writerReader[u]
                try r.feed(m.bytes) { p in onWriterPacket(u, p, now) }
                writerReader[u] = r
            case .watcher(let w):
                var r = watcherReader[w]
                try r.feed(m.bytes) { p in onWatcherPacket(client, id, w, p, now) }
                watcherReader[w] = r
            }
        } catch {
            failures["decode \(error)", default: 0] += 1
        }
    }

    private func onWriterPacket(_ u: Int, _ p: MQTT.Packet, _ now: UInt64) {
        switch p.packetType {
        case .connack:
            if p.connackCode == 0 { ready.wrappingAdd(1, ordering: .relaxed) } else { failures["writer connack \(p.connackCode ?? -1)", default: 0] += 1 }
        case .puback:
            let h = writerInflightHead[u]
            if h < writerInflight[u].count {
                if measuring { ackLatency.add(now - writerInflight[u][h]) }
                writerInflightHead[u] = h + 1
                if h + 1 == writerInflight[u].count { writerInflight[u].removeAll(keepingCapacity: true); writerInflightHead[u] = 0 }
            }
            writesAcked += 1
        case .pingresp: break
        default: failures["writer got packet type \(p.type)", default: 0] += 1
        }
    }

    private func onWatcherPacket(_ client: WebSocketClient, _ id: WebSocketConnectionID, _ w: Int, _ p: MQTT.Packet, _ now: UInt64) {
        switch p.packetType {
        case .connack:
            if p.connackCode == 0 {
                let topics = (0..<subs).map { ("users/user\(user(w, $0))/presence", UInt8(0)) }
                client.send(id, bytes: MQTT.subscribe(packetID: 1, topics: topics), binary: true)
            } else {
                failures["watcher connack \(p.connackCode ?? -1)", default: 0] += 1
            }
        case .suback:
            var ok = 0
            for c in p.subackCodes { if c == 0x80 { failures["suback failure", default: 0] += 1 } else { ok += 1 } }
            ready.wrappingAdd(ok, ordering: .relaxed)
        case .publish:
            guard let pub = p.publish else { failures["bad publish", default: 0] += 1; return }
            if p.qos == 1 { client.send(id, bytes: MQTT.puback(packetID: pub.packetID), binary: true) }
            guard let u = MQTT.userIndex(topic: pub.topic), u < users, let j = slot(w, u) else { return }
            let scan = FrameScan(bytes: pub.payload)
            let k = w * subs + j
            var online: Int8 = -1
            if let o = scan.find(#""online":"#), o < pub.payload.count { online = pub.payload[o] == UInt8(ascii: "t") ? 1 : 0 }
            stOnline[k] = online
            if let ls = scan.find(#""lastSeen":"#) { stLastSeen[k] = scan.int(at: ls) ?? 0 }
            events += 1
            guard measuring, online >= 0 else { return }
            eventsMeasured += 1
            let sec = Int((now - startMicros) / 1_000_000)
            while perSecond.count <= sec { perSecond.append(0) }
            perSecond[sec] += 1
            if seq[u] > 0, (seq[u] % 2 == 1) == (online == 1), lastSend[u] > 0 {
                latency.add(now - lastSend[u])
            } else if seq[u] > 1, prevSend[u] > 0 {
                eventsLate += 1
                latency.add(now - prevSend[u])
            } else {
                eventsUnmatched += 1
            }
        case .pingresp: break
        default: failures["watcher got packet type \(p.type)", default: 0] += 1
        }
    }

    func verify() -> (checked: Int, wrong: Int, lastSeenDisagree: Int, examples: [String]) {
        var wrong = 0, disagree = 0, checked = 0
        var examples: [String] = []
        for w in 0..<watchers {
            for j in 0..<subs {
                let u = user(w, j)
                guard seq[u] > 0 else { continue }
                checked += 1
                let k = w * subs + j
                let wantOnline: Int8 = seq[u] % 2 == 1 ? 1 : 0
                if stOnline[k] != wantOnline {
                    wrong += 1
                    if examples.count < 5 { examples.append("watcher\(w) user\(u): online \(stOnline[k]) want \(wantOnline)") }
                }
                if stLastSeen[k] != lastSeenSent[u] { disagree += 1 }
            }
        }
        return (checked, wrong, disagree, examples)
    }
}

/// `presence-bench mqtt-fanout`: the `fanout` shape against an MQTT 3.1.1 broker over WebSockets.
struct MQTTFanoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mqtt-fanout",
        abstract: "The fanout shape over MQTT 3.1.1 on WebSockets (e.g. Mosquitto): U writers publish retained QoS 1 {online,lastSeen} to users/userI/presence at a total rate R; W watchers each subscribe (QoS 0) to S users' topics."
    )

    @OptionGroup var server: ServerOptions
    @Option(help: "Writer connections (one per user).") var users = 100
    @Option(help: "Watcher connections.") var watchers = 100
    @Option(help: "Users each watcher subscribes to.") var subscriptions = 10
    @Option(help: "Total publishes per second.") var rate: Double = 1000
    @Option(help: "Measured seconds of writing.") var duration: Double = 10
    @Option(help: "Seconds of writing before measuring.") var warmup: Double = 1
    @Option(help: "Seconds to wait for acks and deliveries after writing stops.") var settle: Double = 5
    @Option(help: "Give up on the connect phase after this many seconds.") var timeout: Double = 120
    @Option(help: "MQTT keep-alive in seconds (PINGREQ every half of it); 0 = off.") var keepAlive = 60

    func run() throws {
        let endpoint = try server.mqttEndpoint()
        guard users > 0, watchers >= 0, subscriptions > 0, subscriptions <= users else {
            throw ValidationError("need users > 0 and 0 < subscriptions <= users")
        }
        guard users + watchers < 20_000 else { throw ValidationError("users + watchers must stay below the fd limit (20000)") }
        guard rate > 0, duration > 0, duration <= 3600 else { throw ValidationError("bad --rate/--duration") }
        let st = MQTTFanoutState(users: users, watchers: watchers, subs: subscriptions, rate: rate, keepAlive: keepAlive)
        let ka = keepAlive
        let client = WebSocketClient(configuration: server.clientConfiguration(tickMicros: 1000).with(subprotocol: "mqtt")) { client, event in
            switch event {
            case .connected(let id):
                guard let role = st.roles[id] else { return }
                switch role {
                case .writer(let u):
                    st.writerConn[u] = id
                    client.send(id, bytes: MQTT.connect(clientID: "user\(u)", keepAlive: ka), binary: true)
                case .watcher(let w):
                    client.send(id, bytes: MQTT.connect(clientID: "watcher\(w)", keepAlive: ka), binary: true)
                }
            case .connectFailed(_, let reason):
                st.failures["connect: \(reason)", default: 0] += 1
                st.failedConns.wrappingAdd(1, ordering: .relaxed)
            case .message(let id, let m):
                st.onMessage(client, id, m)
            case .closed(let id, let info):
                if !info.closedLocally && !info.byShutdown && !info.aborted {
                    st.closedUnexpectedly += 1
                    if case .writer(let u) = st.roles[id] { st.writerConn[u] = 0 }
                }
            case .tick(let now):
                st.tick(client, now: now)
            }
        }
        try client.start()
        let sources = (0..<(users + watchers)).map { server.source($0) }
        let (u, w) = (users, watchers)
        let m = runFanoutPhases(
            client: client, state: st, serverPid: server.serverPid, readyTarget: users + watchers * subscriptions,
            readyName: "connacks+subacks", timeout: timeout, warmup: warmup, duration: duration, settle: settle,
            connectAll: {
                st.lastPing = monotonicMicros()
                for i in 0..<u { st.roles[client.connect(to: endpoint, sourceAddress: sources[i])] = .writer(i) }
                for i in 0..<w { st.roles[client.connect(to: endpoint, sourceAddress: sources[u + i])] = .watcher(i) }
            },
            beforeClose: {
                // A clean MQTT goodbye before the WebSocket close.
                for id in st.roles.keys { client.send(id, bytes: MQTT.disconnect, binary: true) }
            })
        var fields: [(String, JSON)] = [
            ("scenario", .string("mqtt-fanout")),
            ("url", .string(endpoint.description)),
            ("users", .int(users)), ("watchers", .int(watchers)), ("subscriptions", .int(subscriptions)),
            ("rate", .double(rate)), ("duration_s", .double(m.writeSeconds)),
            ("setup_s", .double(m.setupSeconds)), ("ready", .int(m.readyCount)),
            ("ready_target", .int(users + watchers * subscriptions)),
            ("publish", .string("QoS 1, retained; watchers subscribe QoS 0")),
        ]
        fields += m.stateFields + m.finalStateFields
        printResult(fields)
        if !m.ok { throw ExitCode(2) }
    }
}

extension MQTTFanoutState: FanoutRunState {
    var readyCount: Int { ready.load(ordering: .relaxed) }
    var failedConnectCount: Int { failedConns.load(ordering: .relaxed) }
    var extraFields: [(String, JSON)] { [] }
    var latencySource: String { "client-side (user, sequence) match" }
}

