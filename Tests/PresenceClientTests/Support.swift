import PresenceClient
import PresenceCore
import PresenceTesting

/// A scripted random source: returns the given values in turn, then repeats the last one.
final class ScriptedRandom {
    var values: [Double]
    private(set) var calls = 0
    init(_ values: [Double]) { self.values = values }
    func next() -> Double {
        defer { calls += 1 }
        return values[min(calls, values.count - 1)]
    }
}

/// A ClientConnection with a manual clock and a fake transport: collects what it sends.
final class Harness {
    let clock = ManualClock()
    let random: ScriptedRandom
    var connection: ClientConnection
    var effects: [ClientEffect] = []

    init(credential: String? = "owner", failFast: Bool = false, random: [Double] = [0.5], maxMessageBytes: Int? = nil) {
        let rnd = ScriptedRandom(random)
        self.random = rnd
        var config = ClientConfiguration(server: WebSocketURL("ws://127.0.0.1:9000")!, namespace: "demo", credential: credential)
        config.failFast = failFast
        if let maxMessageBytes { config.maxMessageBytes = maxMessageBytes }
        connection = ClientConnection(configuration: config, random: { rnd.next() })
    }

    var now: Int64 { clock.now }

    /// Runs an input and keeps its effects.
    @discardableResult
    func step<T>(_ body: (inout ClientConnection, Int64) -> T) -> T {
        let result = body(&connection, clock.now)
        effects += connection.drainEffects()
        return result
    }

    func take() -> [ClientEffect] {
        defer { effects = [] }
        return effects
    }

    /// The decoded requests sent since the last take: (r, action, body).
    func requests(_ effects: [ClientEffect]) -> [(r: Int, a: String, b: JSON)] {
        effects.compactMap { effect in
            guard case .send(let text) = effect, let json = try? JSONParser.parse(text), json["t"]?.stringValue == "d",
                  let d = json["d"], let r = d["r"]?.numberValue, let a = d["a"]?.stringValue else { return nil }
            return (Int(r), a, d["b"] ?? .null)
        }
    }

    func events(_ effects: [ClientEffect]) -> [ClientEvent] {
        effects.compactMap { if case .deliver(let e) = $0 { return e } else { return nil } }
    }

    func opens(_ effects: [ClientEffect]) -> [WebSocketURL] {
        effects.compactMap { if case .open(let url) = $0 { return url } else { return nil } }
    }

    /// start → transport open → hello with session `s`.
    func connect(session: String = "S1") {
        if connection.phase == .idle { step { c, now in c.start(now: now) } }
        step { c, now in c.transportOpened(now: now) }
        hello(session)
    }

    func hello(_ session: String) {
        receive("{\"t\":\"c\",\"d\":{\"t\":\"h\",\"d\":{\"ts\":\(clock.now + 5),\"v\":\"5\",\"h\":\"127.0.0.1:9000\",\"s\":\"\(session)\"}}}")
    }

    func receive(_ text: String) {
        step { c, now in c.received(text, now: now) }
    }

    /// One WebSocket frame of bytes, as the transport hands them over.
    func receive(frame: [UInt8]) {
        step { c, now in c.received(frame, now: now) }
    }

    func reply(_ r: Int, status: String = "ok", data: String = "\"\"") {
        receive("{\"t\":\"d\",\"d\":{\"r\":\(r),\"b\":{\"s\":\"\(status)\",\"d\":\(data)}}}")
    }

    func push(_ path: String, _ data: String, action: String = "d") {
        receive("{\"t\":\"d\",\"d\":{\"a\":\"\(action)\",\"b\":{\"p\":\"\(path)\",\"d\":\(data)}}}")
    }
}

func path(_ s: String) -> Path { try! Path(s) }
