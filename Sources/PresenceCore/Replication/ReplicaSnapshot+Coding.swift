/// The bytes of a `ReplicaSnapshot` as a snapshot hash in Redis holds them (`RedisSnapshots`,
/// docs/scaling.md "Snapshots"): one compact JSON body cut into chunks of at most `chunkBytes`, and
/// a header chunk that says how to put them together and check them.
///
/// - Header, chunk `h`: `{"v":1,"ns":"demo","rev":812,"token":"k3x9","n":2,"len":700000,"crc":123}`:
///   the format version, namespace and revision, the writer's token (body chunks are
///   `<token>:0`, `<token>:1`, ...), their number, the body's length and its CRC-32. A writer that
///   died may have left chunks under another token at the same revision: they are ignored.
/// - Body: `{"v":1,"ns":"demo","rev":812,"tree":{...},"rules":"...","l":[[limit, uid, usage]],
///   "hist":[[rev,[[path, reshapedFrom], ...]], ...]}`: the tree in the export format (priorities
///   survive), the namespace's own rules document (absent: the default rules), the limit usage
///   (as in `LogEntry`), and the version window's history (paths as in `LogEntry`).
///
/// Decoding refuses anything else with a `DecodingError` that says what, never a trap: another
/// format version (`unsupportedVersion`: a newer node wrote it; do not load it), missing chunks
/// (`incomplete`: the snapshot was deleted while being read; read the head again), and garbage
/// (`invalid`: a length or checksum that does not match, malformed JSON, a header or body for
/// another namespace or revision, an invalid tree or history).
extension ReplicaSnapshot {
    public static let formatVersion = 1
    public static let headerChunk = "h"
    public static let defaultChunkBytes = 512 * 1024

    public enum EncodingError: Error, Sendable, Equatable, CustomStringConvertible {
        case nonFiniteNumber
        case invalidToken(String)
        public var description: String {
            switch self {
            case .nonFiniteNumber: return "replica snapshot: the tree holds a non-finite number"
            case .invalidToken(let token): return "replica snapshot: chunk token \"\(token)\" must be 1-64 letters or digits"
            }
        }
    }

    public enum DecodingError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Written by a node with another format version.
        case unsupportedVersion(Int)
        /// Chunks are missing: the snapshot was deleted (or never finished) while it was read.
        case incomplete(String)
        case invalid(String)
        public var description: String {
            switch self {
            case .unsupportedVersion(let v): return "replica snapshot format version \(v) is not supported (this node reads \(ReplicaSnapshot.formatVersion))"
            case .incomplete(let reason): return "replica snapshot incomplete: \(reason)"
            case .invalid(let reason): return "invalid replica snapshot: \(reason)"
            }
        }
    }

    /// The chunks to store (ids never start with "."), header last.
    public func encodedChunks(token: String, chunkBytes: Int = defaultChunkBytes) throws(EncodingError) -> [(id: String, data: [UInt8])] {
        guard (1...64).contains(token.utf8.count), token.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) })
        else { throw .invalidToken(token) }
        guard LogEntry.isFinite(tree) else { throw .nonFiniteNumber }
        var members: [(String, JSON)] = [("v", .number(Double(Self.formatVersion))), ("ns", .string(namespace)),
                                         ("rev", LogEntry.json(rev)), ("tree", tree.json(exportFormat: true))]
        if let rules { members.append(("rules", .string(rules))) }
        let usage = limitUsage.filter { $0.key.namespace == namespace }.sorted { $0.key < $1.key }
        if !usage.isEmpty {
            members.append(("l", .array(usage.map { .array([.string($0.key.limit), .string($0.key.uid), LogEntry.json($0.value)]) })))
        }
        if !history.isEmpty {
            members.append(("hist", .array(history.map { item in
                .array([LogEntry.json(item.rev),
                        .array(item.writes.map { .array([.string(LogEntry.string($0.path)), .number(Double($0.reshapedFrom))]) })])
            })))
        }
        let body = Array(JSONWriter.string(.object(members)).utf8)
        let size = max(1, chunkBytes)
        var chunks: [(id: String, data: [UInt8])] = []
        var start = 0
        repeat {
            let end = min(body.count, start + size)
            chunks.append(("\(token):\(chunks.count)", Array(body[start..<end])))
            start = end
        } while start < body.count
        let header: JSON = .object([("v", .number(Double(Self.formatVersion))), ("ns", .string(namespace)), ("rev", LogEntry.json(rev)),
                                    ("token", .string(token)), ("n", .number(Double(chunks.count))),
                                    ("len", .number(Double(body.count))), ("crc", .number(Double(CRC32.checksum(body))))])
        chunks.append((Self.headerChunk, Array(JSONWriter.string(header).utf8)))
        return chunks
    }

    /// The snapshot of `namespace` at `rev` from a snapshot hash's chunks (other fields ignored).
    public init(decodingChunks chunks: [String: [UInt8]], namespace: String, rev: UInt64) throws(DecodingError) {
        guard let headerBytes = chunks[Self.headerChunk] else { throw .incomplete("no header chunk") }
        let header = try Self.object(headerBytes, "header")
        try Self.check(header, namespace: namespace, rev: rev, "header")
        guard let token = header["token"]?.stringValue, let countJSON = header["n"], let count = LogEntry.uint64(countJSON),
              let lengthJSON = header["len"], let length = LogEntry.uint64(lengthJSON),
              let crcJSON = header["crc"], let crc = LogEntry.uint64(crcJSON), crc <= UInt64(UInt32.max) else {
            throw .invalid("the header needs token, n, len and crc")
        }
        guard count >= 1, count <= UInt64(chunks.count) else {
            throw .incomplete("\(count) body chunks expected, \(chunks.count) chunks present")
        }
        var body: [UInt8] = []
        for index in 0..<Int(count) {
            guard let piece = chunks["\(token):\(index)"] else { throw .incomplete("chunk \(token):\(index) is missing") }
            guard UInt64(body.count + piece.count) <= length else { throw .invalid("the chunks hold more than the \(length) bytes announced") }
            body += piece
        }
        guard UInt64(body.count) == length else { throw .invalid("the chunks hold \(body.count) bytes, the header announced \(length)") }
        guard CRC32.checksum(body) == UInt32(crc) else { throw .invalid("checksum mismatch: the chunks are not the bytes written") }
        let json = try Self.object(body, "body")
        try Self.check(json, namespace: namespace, rev: rev, "body")
        guard let treeJSON = json["tree"] else { throw .invalid("no tree") }
        let tree: Node
        do { tree = try Node(json: treeJSON, at: .root) } catch { throw .invalid("tree: \(error)") }
        var rules: String?
        if let value = json["rules"], !value.isNull {
            guard let text = value.stringValue else { throw .invalid("rules must be a string") }
            rules = text
        }
        var limitUsage: [LimitUsageKey: LimitUsage] = [:]
        do {
            for item in try LogEntry.list(json["l"], "l") {
                guard case .array(let triple) = item, triple.count == 3, let limit = triple[0].stringValue,
                      let uid = triple[1].stringValue, let usage = try LogEntry.usage(triple[2]) else {
                    throw LogEntry.DecodingError.invalid("a limit usage is [limit, uid, usage]")
                }
                let key = LimitUsageKey(namespace: namespace, limit: limit, uid: uid)
                guard limitUsage.updateValue(usage, forKey: key) == nil else { throw LogEntry.DecodingError.invalid("usage of \(limit) by \(uid) twice") }
            }
        } catch {
            throw .invalid("limit usage: \(error)")
        }
        let history = try Self.history(json["hist"], rev: rev)
        self.init(namespace: namespace, rev: rev, tree: tree, rules: rules, limitUsage: limitUsage, history: history)
    }

    // MARK: Pieces

    private static func object(_ bytes: [UInt8], _ what: String) throws(DecodingError) -> JSON {
        let json: JSON
        do { json = try JSONParser.parse(bytes: bytes) } catch { throw .invalid("\(what): \(error.description)") }
        guard case .object = json else { throw .invalid("\(what) is not a JSON object") }
        guard let number = json["v"]?.numberValue, number.isFinite, number == number.rounded(), abs(number) < 1e9 else {
            throw .invalid("\(what) has no format version")
        }
        guard Int(number) == formatVersion else { throw .unsupportedVersion(Int(number)) }
        return json
    }

    private static func check(_ json: JSON, namespace: String, rev: UInt64, _ what: String) throws(DecodingError) {
        guard json["ns"]?.stringValue == namespace else { throw .invalid("the \(what) is for another namespace") }
        guard let value = json["rev"], LogEntry.uint64(value) == rev else { throw .invalid("the \(what) is for another revision than \(rev)") }
    }

    private static func history(_ json: JSON?, rev: UInt64) throws(DecodingError) -> [(rev: UInt64, writes: [WrittenPath])] {
        var history: [(rev: UInt64, writes: [WrittenPath])] = []
        do {
            for item in try LogEntry.list(json, "hist") {
                guard case .array(let pair) = item, pair.count == 2, let at = LogEntry.uint64(pair[0]), at <= rev,
                      history.last.map({ $0.rev < at }) ?? true, case .array(let list) = pair[1] else {
                    throw LogEntry.DecodingError.invalid("history items are [rev, writes], revisions increasing up to \(rev)")
                }
                var writes: [WrittenPath] = []
                for write in list {
                    guard case .array(let parts) = write, parts.count == 2, let depth = parts[1].numberValue.flatMap({ Int(exactly: $0) })
                    else { throw LogEntry.DecodingError.invalid("a history write is [path, reshapedFrom]") }
                    let path = try LogEntry.path(parts[0], write: false)
                    guard (0...path.count).contains(depth) else { throw LogEntry.DecodingError.invalid("reshapedFrom \(depth) at \(path)") }
                    writes.append(WrittenPath(path: path, reshapedFrom: depth))
                }
                history.append((at, writes))
            }
        } catch {
            throw .invalid("history: \(error)")
        }
        return history
    }
}
