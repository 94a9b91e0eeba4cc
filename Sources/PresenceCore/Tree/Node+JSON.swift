extension Node {
    /// Builds a node from client data in export format (§8.1): `.priority` and `.value` are honoured,
    /// arrays become integer-keyed objects, nulls and empty objects vanish. Server values must have
    /// been resolved already (`ServerValues.resolve`). `path` is where the value will be written; it
    /// is used for the 768-byte / 32-level limits and in error messages.
    public init(json: JSON, at path: Path = .root) throws(DataError) {
        self = try Node.build(json, depth: path.count, pathBytes: path.byteLength, path: path)
    }

    private static func build(_ json: JSON, depth: Int, pathBytes: Int, path: Path) throws(DataError) -> Node {
        switch json {
        case .null: return .null
        case .bool(let b): return .leaf(.bool(b), priority: nil)
        case .number(let n):
            // The parser refuses 1e400, but arithmetic (an increment) can still overflow.
            guard n.isFinite else { throw DataError.invalidData(path: path.description, reason: "numbers must be finite") }
            return .leaf(.number(n), priority: nil)
        case .string(let s): return .leaf(.string(s), priority: nil)
        case .array(let elements):
            var children: [String: Node] = [:]
            for (index, element) in elements.enumerated() {
                let key = String(index)
                let child = try buildChild(key, element, depth: depth, pathBytes: pathBytes, path: path)
                if !child.isNull { children[key] = child }
            }
            return .branch(children, priority: nil)
        case .object(let members):
            var children: [String: Node] = [:]
            var priority: Priority?
            var leafValue: JSON?
            for (key, member) in members {
                switch key {
                case ".priority":
                    priority = try parsePriority(member, path: path)
                case ".value":
                    leafValue = member
                case ".sv":
                    throw DataError.unknownServerValue(path: path.description)
                default:
                    let child = try buildChild(key, member, depth: depth, pathBytes: pathBytes, path: path)
                    if !child.isNull { children[key] = child } else { children.removeValue(forKey: key) }
                }
            }
            if let leafValue {
                guard children.isEmpty else {
                    throw DataError.invalidData(path: path.description, reason: ".value cannot sit beside children")
                }
                switch leafValue {
                case .bool, .number, .string:
                    return try build(leafValue, depth: depth, pathBytes: pathBytes, path: path).withPriority(priority)
                case .null:
                    return .null
                default:
                    throw DataError.invalidData(path: path.description, reason: ".value must be a string, number or boolean")
                }
            }
            return children.isEmpty ? .null : .branch(children, priority: priority)
        }
    }

    private static func buildChild(_ key: String, _ json: JSON, depth: Int, pathBytes: Int, path: Path) throws(DataError) -> Node {
        guard Path.isValidKey(key) else {
            throw DataError.invalidData(path: path.description, reason: "invalid key \(ClientInput.quoted(key)): keys must be non-empty and may not contain . $ # [ ] / or control characters")
        }
        let childDepth = depth + 1
        let childBytes = pathBytes + (depth == 0 ? 0 : 1) + key.utf8.count
        let childPath = path.child(key)
        if childDepth > Path.maxDepth {
            throw DataError.invalidData(path: childPath.description, reason: "data nested deeper than \(Path.maxDepth) levels")
        }
        if childBytes > Path.maxKeyPathBytes {
            throw DataError.invalidData(path: childPath.description, reason: "key path longer than \(Path.maxKeyPathBytes) bytes")
        }
        return try build(json, depth: childDepth, pathBytes: childBytes, path: childPath)
    }

    private static func parsePriority(_ json: JSON, path: Path) throws(DataError) -> Priority? {
        switch json {
        case .null: return nil
        case .number(let n) where n.isFinite: return .number(n)
        case .string(let s): return .string(s)
        default: throw DataError.invalidData(path: path.description, reason: ".priority must be a string, number or null")
        }
    }

    /// The value as JSON. With `exportFormat`, priorities are included (`.priority`, `.value`).
    public func json(exportFormat: Bool = false) -> JSON {
        switch self {
        case let .leaf(leaf, priority):
            if exportFormat, let priority {
                return .object([(".value", leaf.json), (".priority", priority.json)])
            }
            return leaf.json
        case let .branch(children, priority):
            if children.isEmpty { return .null }
            var members = KeyOrder.sorted(children).map { ($0.key, $0.value.json(exportFormat: exportFormat)) }
            if exportFormat, let priority { members.append((".priority", priority.json)) }
            return .object(members)
        }
    }

    /// Writes compact JSON text, keys in Firebase key order. Built as UTF-8 bytes and appended once:
    /// appending each piece to a `String` cost about 300 instructions per byte written.
    public func writeJSON(into out: inout String, exportFormat: Bool = false) {
        var bytes: [UInt8] = []
        writeJSON(into: &bytes, exportFormat: exportFormat)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// The same text as UTF-8 bytes.
    public func writeJSON(into out: inout [UInt8], exportFormat: Bool = false) {
        switch self {
        case let .leaf(leaf, priority):
            if exportFormat, let priority {
                out.append(contentsOf: #"{".value":"#.utf8)
                Node.writeLeaf(leaf, into: &out)
                out.append(contentsOf: #",".priority":"#.utf8)
                Node.writeLeaf(priority.leaf, into: &out)
                out.append(UInt8(ascii: "}"))
            } else {
                Node.writeLeaf(leaf, into: &out)
            }
        case let .branch(children, priority):
            if children.isEmpty { return out.append(contentsOf: "null".utf8) }
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, child) in KeyOrder.sorted(children) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                Node.writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                child.writeJSON(into: &out, exportFormat: exportFormat)
            }
            if exportFormat, let priority {
                out.append(contentsOf: #",".priority":"#.utf8)
                Node.writeLeaf(priority.leaf, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    public func jsonString(exportFormat: Bool = false) -> String {
        var bytes: [UInt8] = []
        writeJSON(into: &bytes, exportFormat: exportFormat)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func writeLeaf(_ leaf: Leaf, into out: inout [UInt8]) {
        switch leaf {
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): JSONWriter.writeNumber(n, into: &out)
        case .string(let s): writeString(s, into: &out)
        }
    }

    /// A JSON string with `JSONWriter.writeString`'s escapes (quote, backslash, control characters).
    static func writeString(_ s: String, into out: inout [UInt8]) {
        JSONStringBytes.appendQuoted(s, to: &out)
    }
}
