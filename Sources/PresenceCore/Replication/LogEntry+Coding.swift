/// The JSON form of a `LogEntry`: one compact object with short member names.
///
/// ```json
/// {"v":1,"ns":"demo","k":"w","b":41,"s":["/banned/alice"],"r":["/rooms/r1"],
///  "w":[["/users/alice/presence",{"online":true,"lastSeen":1800000000000}]],
///  "l":[["refresh","alice",{"c":1}]],"id":"uid:alice","o":["10.0.0.5:9001#x7k",3,17],"a":"stale"}
/// ```
///
/// - `v`: `formatVersion`. A different version is refused with `unsupportedVersion`: a node must
///   not skip an entry it cannot read, it stops applying (a newer node wrote it). Members this
///   version does not know are ignored, so a change of meaning needs a new version.
/// - `k`: `w` (write), `h` (run held; `sid` the session), `rules` (`doc` the document or null),
///   `lim` (limit usage only).
/// - `b`: base revision. `r` / `s`: the read set's subtrees / shapes. `w`: `[path, value]` pairs
///   (export format, so priorities survive). `l`: `[limit, uid, usage or null]`, usage
///   `{"c": count, "t": cooldownStartedAt}`. `id`: identity. `o`: `[node, connection, request]`.
///   `sn`: the proposing connection's session.
///   `a`: `stale` for `dataStale` (absent: `repropose`). Empty lists and absent values are omitted.
/// - Paths: `""` is the root, else `/` before each key, with `%` and `/` in keys written `%25`
///   and `%2F` (virtual keys such as a uid may hold them).
/// - Integers above 2^53 are decimal strings. Numbers are written as `JSONWriter` writes them (so
///   a stored -0 travels as 0, as every client sees it); a non-finite number cannot be encoded.
extension LogEntry {
    public enum EncodingError: Error, Sendable, Equatable, CustomStringConvertible {
        case nonFiniteNumber(path: Path)
        public var description: String {
            switch self {
            case .nonFiniteNumber(let path): return "log entry: non-finite number in the value at \(path)"
            }
        }
    }

    public enum DecodingError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Written by a node with another format version: stop applying, do not skip.
        case unsupportedVersion(Int)
        case invalid(String)
        public var description: String {
            switch self {
            case .unsupportedVersion(let v): return "log entry format version \(v) is not supported (this node reads \(LogEntry.formatVersion))"
            case .invalid(let reason): return "invalid log entry: \(reason)"
            }
        }
    }

    public func encoded() throws(EncodingError) -> [UInt8] {
        var members: [(String, JSON)] = [("v", .number(Double(Self.formatVersion))), ("ns", .string(namespace))]
        switch kind {
        case .write: members.append(("k", "w"))
        case .runHeld(let session): members += [("k", "h"), ("sid", .string(session))]
        case .setRules(let document): members += [("k", "rules"), ("doc", document.map { .string($0) } ?? .null)]
        case .limitUsage: members.append(("k", "lim"))
        }
        members.append(("b", Self.json(base)))
        if !readSet.subtrees.isEmpty { members.append(("r", .array(readSet.subtrees.map { .string(Self.string($0)) }))) }
        if !readSet.shapes.isEmpty { members.append(("s", .array(readSet.shapes.map { .string(Self.string($0)) }))) }
        if !writes.isEmpty {
            var list: [JSON] = []
            list.reserveCapacity(writes.count)
            for write in writes {
                guard Self.isFinite(write.value) else { throw .nonFiniteNumber(path: write.path) }
                list.append(.array([.string(Self.string(write.path)), write.value.json(exportFormat: true)]))
            }
            members.append(("w", .array(list)))
        }
        if !limitUsage.isEmpty {
            members.append(("l", .array(limitUsage.map { change in
                .array([.string(change.limit), .string(change.uid), Self.json(change.usage)])
            })))
        }
        if let identity { members.append(("id", .string(identity))) }
        if let origin {
            members.append(("o", .array([.string(origin.node), Self.json(origin.connection), Self.json(origin.request)])))
        }
        if let session { members.append(("sn", .string(session))) }
        if onAbort == .dataStale { members.append(("a", "stale")) }
        return Array(JSONWriter.string(.object(members)).utf8)
    }

    /// Decodes an entry; anything malformed is a `DecodingError`, never a trap.
    public init(decoding bytes: [UInt8]) throws(DecodingError) {
        let json: JSON
        do { json = try JSONParser.parse(bytes: bytes) } catch { throw .invalid(error.description) }
        guard case .object = json else { throw .invalid("not a JSON object") }
        guard let versionNumber = json["v"]?.numberValue, versionNumber.isFinite, versionNumber == versionNumber.rounded(),
              abs(versionNumber) < 1e9 else { throw .invalid("no format version") }
        let version = Int(versionNumber)
        guard version == Self.formatVersion else { throw .unsupportedVersion(version) }
        guard let namespace = json["ns"]?.stringValue else { throw .invalid("no namespace") }
        let kind: Kind
        switch json["k"]?.stringValue {
        case "w"?: kind = .write
        case "h"?:
            guard let session = json["sid"]?.stringValue else { throw .invalid("a run-held entry needs its session") }
            kind = .runHeld(session: session)
        case "rules"?:
            guard let document = json["doc"], document.isNull || document.stringValue != nil else {
                throw .invalid("a rules entry needs its document (a string or null)")
            }
            kind = .setRules(document: document.stringValue)
        case "lim"?: kind = .limitUsage
        case let other?: throw .invalid("unknown kind \"\(other)\"")
        case nil: throw .invalid("no kind")
        }
        guard let baseJSON = json["b"], let base = Self.uint64(baseJSON) else { throw .invalid("no base revision") }
        var readSet = ReadSet()
        for path in try Self.list(json["r"], "r") { readSet.insert(try Self.path(path, write: false), .subtree) }
        for path in try Self.list(json["s"], "s") { readSet.insert(try Self.path(path, write: false), .shape) }
        var writes: [Write] = []
        for item in try Self.list(json["w"], "w") {
            guard case .array(let pair) = item, pair.count == 2 else { throw .invalid("a write is [path, value]") }
            let path = try Self.path(pair[0], write: true)
            do {
                writes.append(Write(path: path, value: try Node(json: pair[1], at: path)))
            } catch {
                throw .invalid("write at \(path): \(error)")
            }
        }
        var limitUsage: [LimitUsageChange] = []
        for item in try Self.list(json["l"], "l") {
            guard case .array(let triple) = item, triple.count == 3, let limit = triple[0].stringValue,
                  let uid = triple[1].stringValue else { throw .invalid("a limit usage is [limit, uid, usage]") }
            limitUsage.append(LimitUsageChange(limit: limit, uid: uid, usage: try Self.usage(triple[2])))
        }
        var identity: String?
        if let value = json["id"], !value.isNull {
            guard let text = value.stringValue else { throw .invalid("identity must be a string") }
            identity = text
        }
        var origin: Origin?
        if let value = json["o"], !value.isNull {
            guard case .array(let parts) = value, parts.count == 3, let node = parts[0].stringValue,
                  let connection = Self.uint64(parts[1]), let request = Self.uint64(parts[2]) else {
                throw .invalid("origin is [node, connection, request]")
            }
            origin = Origin(node: node, connection: connection, request: request)
        }
        var session: String?
        if let value = json["sn"], !value.isNull {
            guard let text = value.stringValue else { throw .invalid("session must be a string") }
            session = text
        }
        let onAbort: OnAbort
        switch json["a"] {
        case nil, .null?: onAbort = .repropose
        case .string("stale")?: onAbort = .dataStale
        default: throw .invalid("unknown abort action")
        }
        self.init(namespace: namespace, kind: kind, base: base, readSet: readSet, writes: writes,
                  limitUsage: limitUsage, identity: identity, origin: origin, session: session, onAbort: onAbort)
    }

    // MARK: Pieces

    static func string(_ path: Path) -> String {
        var out = ""
        for key in path.segments {
            out += "/"
            if key.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "/") }) {
                out += JSStrings.replaceAll(JSStrings.replaceAll(key, "%", with: "%25"), "/", with: "%2F")
            } else {
                out += key
            }
        }
        return out
    }

    /// A path from its string form. Written paths must be data paths (valid keys, `.priority`
    /// only last); read paths may hold any keys (a rule may look anywhere).
    static func path(_ json: JSON, write: Bool) throws(DecodingError) -> Path {
        guard let text = json.stringValue else { throw .invalid("a path must be a string") }
        if text.isEmpty { return .root }
        guard text.utf8.first == UInt8(ascii: "/") else { throw .invalid("path \"\(text)\" must start with /") }
        var segments: [String] = []
        for piece in text.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            segments.append(try unescape(Substring(piece)))
            guard segments.count <= ReadSet.maxPathDepth else { throw .invalid("path deeper than \(ReadSet.maxPathDepth) keys") }
        }
        if write {
            for (index, key) in segments.enumerated() where !Path.isValidKey(key) {
                guard key == ".priority", index == segments.count - 1 else { throw .invalid("invalid key \"\(key)\" in a written path") }
            }
        }
        return Path(validated: segments)
    }

    private static func unescape(_ key: Substring) throws(DecodingError) -> String {
        guard key.utf8.contains(UInt8(ascii: "%")) else { return String(key) }
        var out = ""
        var rest = key
        while let percent = rest.firstIndex(of: "%") {
            out.append(contentsOf: rest[..<percent])
            switch rest[percent...].prefix(3) {
            case "%25": out.append("%")
            case "%2F": out.append("/")
            default: throw .invalid("bad escape in key \"\(key)\"")
            }
            rest = rest[percent...].dropFirst(3)
        }
        out.append(contentsOf: rest)
        return out
    }

    static func list(_ json: JSON?, _ name: String) throws(DecodingError) -> [JSON] {
        switch json {
        case nil, .null?: return []
        case .array(let items)?: return items
        default: throw .invalid("\(name) must be a list")
        }
    }

    /// `{"c": count, "t": cooldownStartedAt}`, or null for no usage (also in snapshots).
    static func json(_ usage: LimitUsage?) -> JSON {
        guard let usage else { return .null }
        var fields: [(String, JSON)] = [("c", .number(Double(usage.count)))]
        if let started = usage.cooldownStartedAt { fields.append(("t", StorageCoding.json(started))) }
        return .object(fields)
    }

    static func usage(_ json: JSON) throws(DecodingError) -> LimitUsage? {
        if json.isNull { return nil }
        guard let countJSON = json["c"], let count = uint64(countJSON), count <= UInt64(Int.max) else {
            throw .invalid("a limit usage needs a count")
        }
        var started: Int64?
        if let value = json["t"], !value.isNull {
            guard let time = StorageCoding.int64(value) else { throw .invalid("cooldown start must be an integer") }
            started = time
        }
        return LimitUsage(count: Int(count), cooldownStartedAt: started)
    }

    private static let exactDoubleLimit: UInt64 = 1 << 53

    static func json(_ value: UInt64) -> JSON {
        value <= exactDoubleLimit ? .number(Double(value)) : .string(String(value))
    }

    static func uint64(_ json: JSON) -> UInt64? {
        switch json {
        case .number(let n):
            guard n.isFinite, n >= 0, n == n.rounded(), n <= Double(exactDoubleLimit) else { return nil }
            return UInt64(n)
        case .string(let s): return UInt64(s)
        default: return nil
        }
    }

    static func isFinite(_ node: Node) -> Bool {
        switch node {
        case let .leaf(leaf, priority):
            if case .number(let n) = leaf, !n.isFinite { return false }
            if case .number(let n)? = priority, !n.isFinite { return false }
            return true
        case let .branch(children, priority):
            if case .number(let n)? = priority, !n.isFinite { return false }
            return children.values.allSatisfy(isFinite)
        }
    }
}
