import PresenceCore

/// A decoded client message.
public enum ClientMessage: Equatable, Sendable {
    /// Control ping: answer with a pong.
    case ping
    /// Control messages of the long-poll upgrade dance (`a`, `n`) and others we ignore.
    case ignoredControl
    case request(NumberedRequest)
    /// A well-formed envelope whose request cannot be executed; reply with the error if numbered.
    case invalidRequest(number: Int?, action: String?, error: EngineError)
}

/// Why a message could not be decoded at all; the connection is closed with the reason.
public struct DecodeFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// Decodes the v5 envelope `{"t":"d","d":{"r":N,"a":…,"b":…}}` and its control sibling.
public enum RequestDecoder {
    public static func decode(_ bytes: [UInt8]) throws(DecodeFailure) -> ClientMessage {
        let json: JSON
        do { json = try JSONParser.parse(bytes: bytes) } catch { throw DecodeFailure(reason: error.description) }
        guard case .object = json, let layer = json["t"]?.stringValue, let body = json["d"] else {
            throw DecodeFailure(reason: "not a v5 message: expected {\"t\":\"d\"|\"c\",\"d\":{…}}")
        }
        switch layer {
        case "c":
            guard let command = body["t"]?.stringValue else {
                throw DecodeFailure(reason: "control message without a command")
            }
            return command == "p" ? .ping : .ignoredControl
        case "d":
            return decodeData(body)
        default:
            throw DecodeFailure(reason: "unknown message layer \"\(layer)\"")
        }
    }

    static func decodeData(_ body: JSON) -> ClientMessage {
        var number: Int?
        if let r = body["r"]?.numberValue, r == r.rounded(), abs(r) < 1e15 { number = Int(r) }
        guard let action = body["a"]?.stringValue else {
            return .invalidRequest(number: number, action: nil, error: .invalidData("request without an action"))
        }
        let payload = body["b"] ?? .object([])
        do {
            let request = try decodeRequest(action: action, payload: payload)
            return .request(NumberedRequest(number: number, request: request))
        } catch {
            return .invalidRequest(number: number, action: action, error: error)
        }
    }

    static func path(_ payload: JSON) throws(EngineError) -> Path {
        guard let raw = payload["p"]?.stringValue else { throw .invalidData("missing path \"p\"") }
        do { return try Path(raw) } catch { throw EngineError(error) }
    }

    static func updates(_ payload: JSON) throws(EngineError) -> [Request.Update] {
        guard case .object(let members)? = payload["d"] else {
            throw .invalidData("an update needs an object of relative paths in \"d\"")
        }
        var result: [Request.Update] = []
        for (key, value) in members {
            let relative: Path
            do { relative = try Path(key) } catch { throw EngineError(error) }
            guard !relative.isRoot else { throw .invalidData("empty key in update") }
            result.append(Request.Update(path: relative, value: value))
        }
        // Overlapping keys (`a` and `a/b`) make an update ambiguous; Firebase refuses them too.
        let paths = result.map(\.path).sorted()
        for (a, b) in zip(paths, paths.dropFirst()) where a.contains(b) {
            throw .invalidData("update keys \(a) and \(b) overlap")
        }
        return result
    }

    /// `{"sdk.js.8-10-1": 1}` names the SDK as `js 8.10.1` (for operators).
    static func sdkName(_ counters: JSON?) -> String? {
        guard let members = counters?.objectMembers,
              let key = members.map(\.0).first(where: { $0.hasPrefix("sdk.") }) else { return nil }
        let parts = key.dropFirst(4).split(separator: ".", maxSplits: 1)
        guard parts.count == 2 else { return String(key.dropFirst(4)) }
        return "\(parts[0]) " + String(parts[1].map { $0 == "-" ? "." : $0 })
    }

    static func tag(_ payload: JSON) -> Int? {
        guard let t = payload["t"]?.numberValue, t == t.rounded() else { return nil }
        return Int(t)
    }

    static func decodeRequest(action: String, payload: JSON) throws(EngineError) -> Request {
        switch action {
        case "s":
            return .stats(sdk: sdkName(payload["c"]))
        case "auth", "gauth":
            guard let credential = payload["cred"]?.stringValue else { throw .invalidToken("missing credential \"cred\"") }
            return .auth(credential: credential, authVariable: payload["authvar"], noAuth: payload["noauth"]?.boolValue ?? false)
        case "unauth":
            return .unauth
        case "appcheck":
            return .appCheck
        case "unappeck":
            return .unappCheck
        case "q", "l":
            return .listen(path: try path(payload), query: payload["q"], tag: tag(payload))
        case "n", "u":
            return .unlisten(path: try path(payload), query: payload["q"], tag: tag(payload))
        case "p":
            guard let data = payload["d"] else { throw .invalidData("missing data \"d\"") }
            return .put(path: try path(payload), data: data, hash: payload["h"]?.stringValue)
        case "m":
            return .merge(path: try path(payload), children: try updates(payload))
        case "o":
            guard let data = payload["d"] else { throw .invalidData("missing data \"d\"") }
            return .onDisconnectPut(path: try path(payload), data: data)
        case "om":
            return .onDisconnectMerge(path: try path(payload), children: try updates(payload))
        case "oc":
            return .onDisconnectCancel(path: try path(payload))
        case "g":
            return .get(path: try path(payload), query: payload["q"])
        default:
            throw .invalidData("unknown action \"\(action)\"")
        }
    }
}
