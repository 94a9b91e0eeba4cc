import ArgumentParser
import Foundation
import Glibc
import PresenceClient

/// The RTDB v5 side of the fan-out (loop-confined): auth with an unsigned token, `q` listens,
/// `p` writes of `{online, lastSeen: TIMESTAMP, …}`, acks and `d` pushes.
private final class RTDBFanout: @unchecked Sendable {
    let load: FanoutLoad
    /// Count-prefixed multi-frame messages being joined, per connection (§2.2; rare here).
    private var joining: [WebSocketConnectionID: (pieces: Int, bytes: [UInt8])] = [:]

    init(load: FanoutLoad) { self.load = load }

    func connected(_ client: any FanoutClient, _ id: WebSocketConnectionID) {
        guard let role = load.roles[id] else { return }
        switch role {
        case .writer(let u):
            load.writerConn[u] = id
            client.send(id, text: Wire.auth(r: 1, uid: "user\(u)"))
        case .watcher(let w):
            client.send(id, text: Wire.auth(r: 1, uid: "watcher\(w)"))
            for j in 0..<load.subs {
                client.send(id, text: Wire.listen(r: 2 + j, path: "/users/user\(load.user(w, j))/presence"))
            }
        }
    }

    /// Sends the writes that are due at `now`. Request numbers: 1 is the auth, then one per write.
    func tick(_ client: any FanoutClient, now: UInt64) {
        load.pace(now: now) { u, t in
            let n = load.seq[u]
            let value = #"{"online":\#(FanoutLoad.online(seq: n)),"lastSeen":{".sv":"timestamp"}"#
                + load.extraFields(sentAt: t, seq: n) + "}"
            client.send(load.writerConn[u], text: Wire.put(r: n + 1, path: "/users/user\(u)/presence", valueJSON: value))
        }
    }

    func message(_ id: WebSocketConnectionID, _ bytes: UnsafeRawBufferPointer) {
        if joining[id] != nil || FanoutLoad.frameCount(bytes) != nil {
            join(id, bytes)
            return
        }
        handle(id, bytes)
    }

    private func join(_ id: WebSocketConnectionID, _ bytes: UnsafeRawBufferPointer) {
        guard var j = joining[id] else {
            if let n = FanoutLoad.frameCount(bytes), n > 0 { joining[id] = (n, []) }
            return
        }
        j.bytes.append(contentsOf: bytes)
        j.pieces -= 1
        if j.pieces > 0 { joining[id] = j; return }
        joining[id] = nil
        j.bytes.withUnsafeBytes { handle(id, $0) }
    }

    private func handle(_ id: WebSocketConnectionID, _ bytes: UnsafeRawBufferPointer) {
        let now = monotonicMicros()
        let scan = FrameScan(bytes: bytes)
        guard let role = load.roles[id] else { return }
        if let r = scan.requestNumber {
            let ok = scan.status == "ok"
            switch role {
            case .writer(let u):
                if r == 1 {
                    if ok { load.ready.add(1, ordering: .relaxed) } else { load.failures["writer auth \(scan.status ?? "?")", default: 0] += 1 }
                } else {
                    let answer: FanoutLoad.Answer = ok ? .ok : scan.status == "unavailable" ? .refused : .failed
                    load.acked(u, seq: r - 1, answer, now: now)
                    if answer == .failed { load.failures["put \(scan.status ?? "?")", default: 0] += 1 }
                }
            case .watcher:
                if r == 1 {
                    if !ok { load.failures["watcher auth \(scan.status ?? "?")", default: 0] += 1 }
                } else if ok {
                    load.ready.add(1, ordering: .relaxed)
                } else {
                    load.failures["listen \(scan.status ?? "?")", default: 0] += 1
                }
            }
            return
        }
        guard case .watcher(let w) = role, scan.isDataPush, let pathStart = scan.find(#""p":""#) else { return }
        // Path: "users/userN/presence" (leading slash optional).
        var i = pathStart
        if i < bytes.count, bytes[i] == UInt8(ascii: "/") { i += 1 }
        guard let ui = scan.find("users/user", from: i), ui == i + 10, let u = scan.int(at: ui) else { return }
        load.pushed(watcher: w, user: u, value: scan, now: now)
    }
}

extension FanoutLoad {
    /// A text message of at most 6 ASCII digits announces that many pieces of one message.
    static func frameCount(_ b: UnsafeRawBufferPointer) -> Int? {
        guard !b.isEmpty, b.count <= 6 else { return nil }
        var v = 0
        for c in b {
            guard c >= 0x30, c <= 0x39 else { return nil }
            v = v * 10 + Int(c - 0x30)
        }
        return v
    }
}

/// Options both fan-out commands share: the shape, the phases and the transport.
struct FanoutShapeOptions: ParsableArguments {
    @Option(help: "Writer connections (one per user).") var users = 100
    @Option(help: "Watcher connections.") var watchers = 100
    @Option(help: "Users each watcher follows.") var subscriptions = 10
    @Option(help: "Total writes per second.") var rate: Double = 1000
    @Option(help: "Measured seconds of writing.") var duration: Double = 10
    @Option(help: "Seconds of writing before measuring.") var warmup: Double = 1
    @Option(help: "Extra field carrying the writer's monotonic send time (µs) in each value, e.g. sentAt: exact write→watcher latency. Needs rules that accept it (bench/rules/presence-bench.rules.json). Without it, latency comes from client-side (user, sequence) matching.")
    var payloadField: String?
    @Option(help: "Extra field carrying the user's write sequence number in each value, e.g. seq; the final-state check then compares it too.")
    var seqField: String?
    @Option(help: "Seconds to wait for acks and deliveries after writing stops.") var settle: Double = 5
    @Option(help: "Unacknowledged writes one writer may have; at the limit it skips the write that is due, as a presence client sending only its latest state would (0: no limit, an open-loop load).")
    var writerWindow = 0
    @Option(help: "Give up on the connect phase after this many seconds.") var timeout: Double = 120
    @Option(help: "Generator transport: epoll (lean, one thread) or lws (PresenceClient's, the old one).")
    var transport: TransportChoice = .lws

    func validate() throws {
        guard users > 0, watchers >= 0, subscriptions > 0, subscriptions <= users else {
            throw ValidationError("need users > 0 and 0 < subscriptions <= users")
        }
        guard users + watchers < 20_000 else { throw ValidationError("users + watchers must stay below the fd limit (20000)") }
        guard rate > 0, duration > 0, duration <= 3600 else { throw ValidationError("bad --rate/--duration") }
        guard writerWindow >= 0 else { throw ValidationError("--writer-window must be 0 (no limit) or more") }
        for f in [payloadField, seqField].compactMap({ $0 }) where f.isEmpty || f.contains(where: { $0 == "\"" || $0 == "\\" }) {
            throw ValidationError("bad field name \(f)")
        }
    }

    func makeLoad() -> FanoutLoad {
        let load = FanoutLoad(users: users, watchers: watchers, subs: subscriptions, rate: rate, timeField: payloadField, seqField: seqField)
        load.writerWindow = writerWindow
        return load
    }
}

/// `presence-bench fanout`: writers flap presence, watchers listen; latency and delivery.
struct FanoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "U writers flap /users/userI/presence at a total rate R; W watchers each listen to S users. Reports write-to-watcher latency, events/s, acks, CPU per event and a final-state check."
    )

    @OptionGroup var server: ServerOptions
    @OptionGroup var shape: FanoutShapeOptions
    @Option(help: "Watchers connect here instead of --url, in turn (repeat it: a cluster's other nodes, for write-to-remote-watcher latency).")
    var watcherURL: [String] = []

    func run() throws {
        let endpoint = try server.endpoint()
        let watcherEndpoints = try watcherURL.map { url in
            var other = server
            other.url = url
            return try other.endpoint()
        }
        let load = shape.makeLoad()
        let rtdb = RTDBFanout(load: load)
        let client = try server.fanoutClient(shape.transport, subprotocol: nil) { client, event in
            switch event {
            case .connected(let id): rtdb.connected(client, id)
            case .connectFailed(_, let reason): load.connectFailed(reason: reason)
            case .message(let id, let bytes): rtdb.message(id, bytes)
            case .closed(let id, let unexpected): load.closed(id, unexpected: unexpected)
            case .tick(let now): rtdb.tick(client, now: now)
            }
        }
        let sources = (0..<(load.users + load.watchers)).map { server.source($0) }
        let m = runFanoutPhases(
            client: client, load: load, serverPid: server.serverPid, readyName: "auths+listens",
            timeout: shape.timeout, warmup: shape.warmup, duration: shape.duration, settle: shape.settle, lastSeenIsWriters: false,
            connectAll: { load.connectAll(client, to: endpoint, watcherURLs: watcherEndpoints, sources: sources) })
        printResult(FanoutMeasurement.headerFields(scenario: "fanout", url: endpoint, load: load, transport: shape.transport, m: m)
            + m.stateFields + m.finalStateFields)
        if !m.ok { throw ExitCode(2) }
    }
}
