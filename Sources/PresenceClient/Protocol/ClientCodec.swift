import PresenceCore

/// A message from the server, decoded on the client side (protocol doc §2, §3, §4).
public enum ServerMessage: Equatable, Sendable {
    /// The handshake (`{"t":"c","d":{"t":"h","d":{ts,v,h,s}}}`).
    case hello(timestamp: Int64, version: String, host: String, session: String)
    /// Answer to our ping (`o`).
    case pong
    /// `s`: the server shuts this client down; do not reconnect.
    case shutdown(reason: String)
    /// `r`: reconnect to another host.
    case reset(host: String)
    /// `e`: a server error message.
    case error(String)
    /// A reply to request `r`.
    case reply(request: Int, status: String, data: JSON)
    /// A data push: `d` (overwrite), `m` (merge), `c` (listen revoked), `ac`/`apc` (auth revoked), `sd`.
    case push(action: String, body: JSON)
}

/// Encodes client requests and decodes server messages. Pure. Framing (count-prefixed pieces, both
/// ways) is `PresenceWire`'s `FrameSplitter` and `FrameAssembler`, the server's own.
public enum ClientCodec {
    /// `{"t":"d","d":{"r":N,"a":action,"b":body}}`.
    public static func request(_ number: Int, action: String, body: JSON) -> String {
        var out = "{\"t\":\"d\",\"d\":{\"r\":\(number),\"a\":"
        JSONWriter.writeString(action, into: &out)
        out += ",\"b\":"
        JSONWriter.write(body, into: &out)
        out += "}}"
        return out
    }

    /// The control ping `{"t":"c","d":{"t":"p","d":{}}}`.
    public static let ping = "{\"t\":\"c\",\"d\":{\"t\":\"p\",\"d\":{}}}"

    /// The bare keepalive frame (§2.5).
    public static let keepalive = "0"

    /// A request path on the wire: `/a/b`, the root is `/`.
    public static func wirePath(_ path: Path) -> String { path.description }

    /// Decodes one whole (reassembled) server message.
    public static func decode(_ text: String) -> ServerMessage? {
        guard let json = try? JSONParser.parse(text), let t = json["t"]?.stringValue, let d = json["d"] else { return nil }
        switch t {
        case "c":
            guard let cmd = d["t"]?.stringValue else { return nil }
            let payload = d["d"] ?? .null
            switch cmd {
            case "h":
                let ts = payload["ts"]?.numberValue ?? 0
                return .hello(timestamp: Int64(ts), version: payload["v"]?.stringValue ?? "",
                              host: payload["h"]?.stringValue ?? "", session: payload["s"]?.stringValue ?? "")
            case "o": return .pong
            case "s": return .shutdown(reason: payload.stringValue ?? "")
            case "r": return .reset(host: payload.stringValue ?? "")
            case "e": return .error(payload.stringValue ?? JSONWriter.string(payload))
            default: return nil
            }
        case "d":
            if let r = d["r"]?.numberValue {
                let b = d["b"] ?? .null
                return .reply(request: Int(r), status: b["s"]?.stringValue ?? "", data: b["d"] ?? .null)
            }
            if let a = d["a"]?.stringValue { return .push(action: a, body: d["b"] ?? .null) }
            return nil
        default:
            return nil
        }
    }
}
