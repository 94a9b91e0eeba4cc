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

/// The MQTT 3.1.1 side of the fan-out (loop-confined): each writer connects with a retained QoS 1
/// offline Will and publishes retained QoS 1 `{online, lastSeen: ms, …}` to `users/userI/presence`;
/// each watcher subscribes to its users' topics.
private final class MQTTFanout: @unchecked Sendable {
    let load: FanoutLoad
    let keepAlive: Int
    let subscribeQoS: UInt8
    let will: Bool
    private var writerReader: [MQTT.Reader]
    private var watcherReader: [MQTT.Reader]
    private var writerNextPID: [Int]
    private var lastPing: UInt64 = 0

    init(load: FanoutLoad, keepAlive: Int, subscribeQoS: UInt8, will: Bool) {
        self.load = load
        self.keepAlive = keepAlive
        self.subscribeQoS = subscribeQoS
        self.will = will
        writerReader = .init(repeating: .init(), count: load.users)
        watcherReader = .init(repeating: .init(), count: load.watchers)
        writerNextPID = .init(repeating: 1, count: load.users)
    }

    static func topic(_ u: Int) -> String { "users/user\(u)/presence" }

    func connected(_ client: any FanoutClient, _ id: WebSocketConnectionID) {
        guard let role = load.roles[id] else { return }
        let packet: [UInt8]
        switch role {
        case .writer(let u):
            load.writerConn[u] = id
            let offline = MQTT.Will(topic: Self.topic(u), payload: MQTT.presencePayload(online: false, lastSeenMillis: wallClockMillis()),
                                    qos: 1, retain: true)
            packet = MQTT.connect(clientID: "user\(u)", keepAlive: keepAlive, will: will ? offline : nil)
        case .watcher(let w):
            packet = MQTT.connect(clientID: "watcher\(w)", keepAlive: keepAlive)
        }
        packet.withUnsafeBytes { client.send(id, binary: $0) }
    }

    func tick(_ client: any FanoutClient, now: UInt64) {
        if lastPing == 0 { lastPing = now }
        if keepAlive > 0, now > lastPing + UInt64(keepAlive) * 500_000 {
            lastPing = now
            for id in load.roles.keys { MQTT.pingreq.withUnsafeBytes { client.send(id, binary: $0) } }
        }
        load.pace(now: now) { u, t in
            let n = load.seq[u]
            let ms = wallClockMillis()
            load.lastSeenSent[u] = ms
            let pid = writerNextPID[u]
            writerNextPID[u] = pid == 65535 ? 1 : pid + 1
            let payload = Array((#"{"online":\#(FanoutLoad.online(seq: n)),"lastSeen":\#(ms)"# + load.extraFields(sentAt: t, seq: n) + "}").utf8)
            MQTT.publish(topic: Self.topic(u), payload: payload, qos: 1, retain: true, packetID: pid)
                .withUnsafeBytes { client.send(load.writerConn[u], binary: $0) }
        }
    }

    func message(_ client: any FanoutClient, _ id: WebSocketConnectionID, _ bytes: UnsafeRawBufferPointer) {
        guard let role = load.roles[id] else { return }
        let now = monotonicMicros()
        do {
            switch role {
            case .writer(let u):
                try writerReader[u].feed(bytes) { p in writerPacket(u, p, now) }
            case .watcher(let w):
                try watcherReader[w].feed(bytes) { p in watcherPacket(client, id, w, p, now) }
            }
        } catch {
            load.failures["decode \(error)", default: 0] += 1
        }
    }

    private func writerPacket(_ u: Int, _ p: MQTT.Packet, _ now: UInt64) {
        switch p.packetType {
        case .connack:
            if p.connackCode == 0 { load.ready.add(1, ordering: .relaxed) } else { load.failures["writer connack \(p.connackCode ?? -1)", default: 0] += 1 }
        case .puback: load.acked(u, .ok, now: now)
        case .pingresp: break
        default: load.failures["writer got packet type \(p.type)", default: 0] += 1
        }
    }

    private func watcherPacket(_ client: any FanoutClient, _ id: WebSocketConnectionID, _ w: Int, _ p: MQTT.Packet, _ now: UInt64) {
        switch p.packetType {
        case .connack:
            if p.connackCode == 0 {
                let topics = (0..<load.subs).map { (Self.topic(load.user(w, $0)), subscribeQoS) }
                MQTT.subscribe(packetID: 1, topics: topics).withUnsafeBytes { client.send(id, binary: $0) }
            } else {
                load.failures["watcher connack \(p.connackCode ?? -1)", default: 0] += 1
            }
        case .suback:
            var ok = 0
            for c in p.subackCodes { if c == 0x80 { load.failures["suback failure", default: 0] += 1 } else { ok += 1 } }
            load.ready.add(ok, ordering: .relaxed)
        case .publish:
            guard let pub = p.publish else { load.failures["bad publish", default: 0] += 1; return }
            if p.qos == 1 {
                // PUBACK: 0x40, remaining length 2, packet id (no allocation on this path).
                var ack: (UInt8, UInt8, UInt8, UInt8) = (0x40, 2, UInt8(pub.packetID >> 8), UInt8(pub.packetID & 0xFF))
                withUnsafeBytes(of: &ack) { client.send(id, binary: $0) }
            }
            guard let u = MQTT.userIndex(topic: pub.topic) else { return }
            load.pushed(watcher: w, user: u, value: FrameScan(bytes: pub.payload), now: now)
        case .pingresp: break
        default: load.failures["watcher got packet type \(p.type)", default: 0] += 1
        }
    }
}

/// `presence-bench mqtt-fanout`: the `fanout` shape against an MQTT 3.1.1 broker over WebSockets.
struct MQTTFanoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mqtt-fanout",
        abstract: "The fanout shape over MQTT 3.1.1 on WebSockets (e.g. Mosquitto): U writers (each with a retained QoS 1 offline Will) publish retained QoS 1 {online,lastSeen} to users/userI/presence at a total rate R; W watchers each subscribe to S users' topics."
    )

    @OptionGroup var server: ServerOptions
    @OptionGroup var shape: FanoutShapeOptions
    @Option(help: "MQTT keep-alive in seconds (PINGREQ every half of it); 0 = off.") var keepAlive = 60
    @Option(help: "QoS the watchers subscribe with: 0 (as our server pushes: no per-push ack) or 1 (the broker waits for a PUBACK per push).")
    var subscribeQos: UInt8 = 0
    @Option(help: "Give each writer a retained QoS 1 offline Last Will (true/false).") var will = true

    func validate() throws {
        guard subscribeQos <= 1 else { throw ValidationError("--subscribe-qos is 0 or 1") }
    }

    func run() throws {
        let endpoint = try server.mqttEndpoint()
        let load = shape.makeLoad()
        let mqtt = MQTTFanout(load: load, keepAlive: keepAlive, subscribeQoS: subscribeQos, will: will)
        let client = try server.fanoutClient(shape.transport, subprotocol: "mqtt") { client, event in
            switch event {
            case .connected(let id): mqtt.connected(client, id)
            case .connectFailed(_, let reason): load.connectFailed(reason: reason)
            case .message(let id, let bytes): mqtt.message(client, id, bytes)
            case .closed(let id, let unexpected): load.closed(id, unexpected: unexpected)
            case .tick(let now): mqtt.tick(client, now: now)
            }
        }
        let sources = (0..<(load.users + load.watchers)).map { server.source($0) }
        let m = runFanoutPhases(
            client: client, load: load, serverPid: server.serverPid, readyName: "connacks+subacks",
            timeout: shape.timeout, warmup: shape.warmup, duration: shape.duration, settle: shape.settle, lastSeenIsWriters: true,
            connectAll: { load.connectAll(client, to: endpoint, sources: sources) },
            beforeClose: {
                // A clean MQTT goodbye before the WebSocket close (so no Will fires).
                for id in load.roles.keys { MQTT.disconnect.withUnsafeBytes { client.send(id, binary: $0) } }
            })
        printResult(FanoutMeasurement.headerFields(scenario: "mqtt-fanout", url: endpoint, load: load, transport: shape.transport, m: m)
            + [("publish", .string("QoS 1, retained\(will ? ", offline Will (QoS 1, retained)" : ""); watchers subscribe QoS \(subscribeQos)"))]
            + m.stateFields + m.finalStateFields)
        if !m.ok { throw ExitCode(2) }
    }
}
