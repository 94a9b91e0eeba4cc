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
        let overflowed: Bool
        do { (json, overflowed) = try JSONParser.parseReportingOverflow(bytes: bytes) } catch {
            throw DecodeFailure(reason: error.description)
        }
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
            if overflowed, let location = body.firstNonFiniteNumber() {
                // Valid JSON, but a number no double holds: refuse the request, answer by number.
                let number = try? requestNumber(body["r"]).get()
                return .invalidRequest(number: number ?? nil, action: body["a"]?.stringValue, error: .invalidData(
                    "number out of range at \(ClientInput.quoted(location, limit: 100)): numbers must lie within ±1.7976931348623157e308"))
            }
            return decodeData(body)
        default:
            throw DecodeFailure(reason: "unknown message layer \(ClientInput.quoted(layer))")
        }
    }

    static func decodeData(_ body: JSON) -> ClientMessage {
        let action = body["a"]?.stringValue
        let number: Int?
        switch requestNumber(body["r"]) {
        case .success(let valid): number = valid
        case .failure(let error): return .invalidRequest(number: nil, action: action, error: error)
        }
        guard let action else {
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

    /// The request number `r`: absent or null for a request that wants no reply, else a whole
    /// number from 0 to 2^53 − 1. Anything else cannot be answered by number, so the request is
    /// refused as a whole (the shell sends the error as a control message).
    static func requestNumber(_ json: JSON?) -> Result<Int?, EngineError> {
        guard let json, !json.isNull else { return .success(nil) }
        guard let number = ClientInput.integer(json, in: 0...ClientInput.maxSafeInteger) else {
            return .failure(.invalidData("request number r must be an integer from 0 to \(ClientInput.maxSafeInteger)"))
        }
        return .success(number)
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
            throw .invalidData("update keys \(ClientInput.quoted(a.wireString)) and \(ClientInput.quoted(b.wireString)) overlap")
        }
        return result
    }

    /// SDK names longer than this are cut: the name is kept per connection and shown to operators.
    static let maxSDKNameLength = 64

    /// `{"sdk.js.8-10-1": 1}` names the SDK as `js 8.10.1` (for operators).
    static func sdkName(_ counters: JSON?) -> String? {
        guard let members = counters?.objectMembers,
              let key = members.lazy.map(\.0).first(where: { $0.hasPrefix("sdk.") }) else { return nil }
        let name = String(String.UnicodeScalarView(key.unicodeScalars.dropFirst(4).prefix(maxSDKNameLength)))
        let parts = name.split(separator: ".", maxSplits: 1)
        guard parts.count == 2 else { return name }
        return "\(parts[0]) " + String(parts[1].map { $0 == "-" ? "." : $0 })
    }

    /// The tag `t` of a listen or unlisten: absent or null for none, else a whole number from
    /// 1 to 2^53 − 1 (the JS client numbers its tagged queries from 1).
    static func tag(_ payload: JSON) throws(EngineError) -> Int? {
        guard let json = payload["t"], !json.isNull else { return nil }
        guard let tag = ClientInput.integer(json, in: 1...ClientInput.maxSafeInteger) else {
            throw .invalidData("tag t must be an integer from 1 to \(ClientInput.maxSafeInteger)")
        }
        return tag
    }

    /// The data hash `h`: absent for none (a `q` sends the hash of its cached data, a `p` with
    /// `h` is a transaction). A hash is a string; anything else would turn a transaction into a
    /// plain write, so it is refused.
    static func hash(_ payload: JSON) throws(EngineError) -> String? {
        guard let json = payload["h"] else { return nil }
        guard case .string(let hash) = json else { throw .invalidData("hash h must be a string") }
        return hash
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
            _ = try hash(payload)
            return .listen(path: try path(payload), query: payload["q"], tag: try tag(payload))
        case "n", "u":
            return .unlisten(path: try path(payload), query: payload["q"], tag: try tag(payload))
        case "p":
            guard let data = payload["d"] else { throw .invalidData("missing data \"d\"") }
            return .put(path: try path(payload), data: data, hash: try hash(payload))
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
            throw .invalidData("unknown action \(ClientInput.quoted(action))")
        }
    }
}
