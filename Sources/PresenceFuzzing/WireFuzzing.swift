import PresenceCore
import PresenceWire

/// Raw bytes after the WebSocket handshake: the input is a sequence of text frames separated by
/// newlines. Each frame goes through the frame assembler (count-prefixed multi-frame messages),
/// the request decoder and the engine (the presence rules, emulator tokens), as the shell feeds
/// them; then the connection drops (its onDisconnect ops run) and the engine's timer fires.
///
/// Invariants: nothing traps; each numbered request gets exactly one reply with its number; every
/// message sent is strict JSON, error texts are short; the stored tree stays valid (finite
/// numbers, valid keys, depth ≤ 32, key paths ≤ 768 bytes).
enum WireFuzzing {
    static let target = FuzzTarget(
        name: "wire",
        summary: "frames (newline-separated) → FrameAssembler → RequestDecoder → Engine; one reply per numbered request, strict-JSON output, valid tree",
        run: run)

    static let maxFrames = 64

    static func run(_ bytes: [UInt8]) {
        let engine = FuzzWorld.engine()
        let client = ConnectionID(1), watcher = ConnectionID(2)
        engine.open(client, namespace: "fuzz", lastSession: nil, host: "fuzz", now: FuzzWorld.now)
        engine.open(watcher, namespace: "fuzz", lastSession: nil, host: "fuzz", now: FuzzWorld.now)
        // The watcher is the admin and listens to everything, so every write is pushed somewhere.
        engine.handle(NumberedRequest(number: 1, request: .auth(credential: "owner", authVariable: nil, noAuth: false)), from: watcher, now: FuzzWorld.now)
        engine.handle(NumberedRequest(number: 2, request: .listen(path: .root, query: nil, tag: nil)), from: watcher, now: FuzzWorld.now)
        _ = engine.drainEffects()

        var assembler = FrameAssembler(maxMessageBytes: 1 << 16)
        var expected: [Int: Int] = [:]
        var replies: [Int: Int] = [:]
        var now = FuzzWorld.now
        for frame in bytes.split(separator: 0x0A, maxSplits: maxFrames, omittingEmptySubsequences: false) {
            now += 7
            guard case .message(let message)? = try? assembler.accept(Array(frame)) else { continue }
            switch try? RequestDecoder.decode(message) {
            case .request(let request)?:
                if let number = request.number { expected[number, default: 0] += 1 }
                engine.handle(request, from: client, now: now)
            case .invalidRequest(let number?, _, let error)?:
                // The shell answers these itself, without the engine.
                expected[number, default: 0] += 1
                count(.reply(number: number, result: .failure(error)), into: &replies)
            case .ping?: engine.ping(client)
            case .invalidRequest(nil, _, _)?, .ignoredControl?, nil: break
            }
            for effect in engine.drainEffects() {
                guard case .send(let recipients, let outbound) = effect, recipients.contains(client) else { continue }
                count(outbound, into: &replies)
            }
        }
        invariant(replies == expected, "replies by request number \(replies) differ from the numbered requests \(expected)")

        engine.disconnect(client, now: now + 1)
        if let deadline = engine.nextDeadline { engine.tick(now: max(deadline, now + 1)) }
        for effect in engine.drainEffects() {
            if case .send(_, let outbound) = effect { _ = FuzzWorld.checkOutbound(OutboundEncoder.encode(outbound)) }
        }
        FuzzWorld.checkTree(engine.value(at: .root, namespace: "fuzz"))
    }

    static func count(_ outbound: Outbound, into replies: inout [Int: Int]) {
        let json = FuzzWorld.checkOutbound(OutboundEncoder.encode(outbound))
        if case .reply(let number, _) = outbound {
            invariant(json["d"]?["r"] == .number(Double(number)), "reply \(number) was encoded with another number")
            replies[number, default: 0] += 1
        }
    }
}
