/// JSON forms of what storage keeps besides trees, shared by every engine (and an external log):
/// sessions, their onDisconnect ops and the credentials the ops run under.
///
/// Int64 values (times, expiries) are JSON numbers when a double holds them exactly (|v| ≤ 2^53)
/// and decimal strings otherwise, so every value round-trips.
public enum StorageCoding {
    public struct DecodingError: Error, Equatable, Sendable, CustomStringConvertible {
        public var reason: String
        public init(_ reason: String) { self.reason = reason }
        public var description: String { "stored record is invalid: \(reason)" }
    }

    // MARK: Sessions

    public static func json(_ session: StoredSession) -> JSON {
        var members: [(String, JSON)] = [
            ("id", .string(session.sessionID)),
            ("ns", .string(session.namespace)),
            ("identity", .string(session.identity)),
            ("ops", .array(session.ops.map(json))),
        ]
        if let time = session.disconnectedAt { members.append(("disconnectedAt", json(time))) }
        if let time = session.runAt { members.append(("runAt", json(time))) }
        return .object(members)
    }

    public static func session(_ json: JSON) throws(DecodingError) -> StoredSession {
        guard let id = json["id"]?.stringValue, let namespace = json["ns"]?.stringValue,
            let identity = json["identity"]?.stringValue, case .array(let opsJSON)? = json["ops"]
        else { throw DecodingError("session needs id, ns, identity and ops") }
        var ops: [OnDisconnectOp] = []
        ops.reserveCapacity(opsJSON.count)
        for op in opsJSON { ops.append(try self.op(op)) }
        return StoredSession(
            sessionID: id, namespace: namespace, identity: identity, ops: ops,
            disconnectedAt: try optionalInt64(json["disconnectedAt"], "disconnectedAt"),
            runAt: try optionalInt64(json["runAt"], "runAt"))
    }

    // MARK: onDisconnect ops

    public static func json(_ op: OnDisconnectOp) -> JSON {
        .object([
            ("path", .array(op.path.segments.map { .string($0) })),
            ("value", op.value),
            ("credentials", json(op.credentials)),
        ])
    }

    public static func op(_ json: JSON) throws(DecodingError) -> OnDisconnectOp {
        guard case .array(let segmentsJSON)? = json["path"], let value = json["value"],
            let credentialsJSON = json["credentials"]
        else { throw DecodingError("op needs path, value and credentials") }
        return OnDisconnectOp(path: Path(validated: try strings(segmentsJSON)), value: value, credentials: try credentials(credentialsJSON))
    }

    private static func strings(_ segments: [JSON]) throws(DecodingError) -> [String] {
        var keys: [String] = []
        for segment in segments {
            guard let key = segment.stringValue else { throw DecodingError("path segments must be strings") }
            keys.append(key)
        }
        return keys
    }

    // MARK: Changes of a session's ops

    /// `{"identity": …, "changes": [{"set": op} | {"cancel": [segments]}]}`.
    public static func json(identity: String, changes: [OnDisconnectChange]) -> JSON {
        .object([
            ("identity", .string(identity)),
            ("changes", .array(changes.map { change in
                switch change {
                case .set(let op): return .object([("set", json(op))])
                case .cancel(let path): return .object([("cancel", .array(path.segments.map { .string($0) }))])
                }
            })),
        ])
    }

    public static func changes(_ json: JSON) throws(DecodingError) -> (identity: String, changes: [OnDisconnectChange]) {
        guard let identity = json["identity"]?.stringValue, case .array(let list)? = json["changes"] else {
            throw DecodingError("session changes need identity and changes")
        }
        var changes: [OnDisconnectChange] = []
        for change in list {
            if let op = change["set"] {
                changes.append(.set(try self.op(op)))
            } else if case .array(let segments)? = change["cancel"] {
                changes.append(.cancel(Path(validated: try strings(segments))))
            } else {
                throw DecodingError("a change is a set or a cancel")
            }
        }
        return (identity, changes)
    }

    // MARK: Credentials

    /// `"admin"`, `"unauthenticated"`, or `{"auth": …, "expiresAt": …}` for a user.
    public static func json(_ credentials: Credentials) -> JSON {
        switch credentials {
        case .admin: return .string("admin")
        case .unauthenticated: return .string("unauthenticated")
        case let .user(auth, expiresAt):
            var members: [(String, JSON)] = [("auth", auth)]
            if let expiresAt { members.append(("expiresAt", json(expiresAt))) }
            return .object(members)
        }
    }

    public static func credentials(_ json: JSON) throws(DecodingError) -> Credentials {
        switch json {
        case .string("admin"): return .admin
        case .string("unauthenticated"): return .unauthenticated
        case .object:
            guard let auth = json["auth"] else { throw DecodingError("user credentials need auth") }
            return .user(auth: auth, expiresAt: try optionalInt64(json["expiresAt"], "expiresAt"))
        default:
            throw DecodingError("unknown credentials")
        }
    }

    // MARK: Int64

    private static let exactDoubleLimit: Int64 = 1 << 53

    public static func json(_ value: Int64) -> JSON {
        if value >= -exactDoubleLimit && value <= exactDoubleLimit { return .number(Double(value)) }
        return .string(String(value))
    }

    public static func int64(_ json: JSON) -> Int64? {
        switch json {
        case .number(let n):
            guard n.isFinite, n == n.rounded(), abs(n) <= Double(exactDoubleLimit) else { return nil }
            return Int64(n)
        case .string(let s): return Int64(s)
        default: return nil
        }
    }

    private static func optionalInt64(_ json: JSON?, _ name: String) throws(DecodingError) -> Int64? {
        guard let json, !json.isNull else { return nil }
        guard let value = int64(json) else { throw DecodingError("\(name) must be an integer") }
        return value
    }
}
