import PresenceCore

/// The pages of a cluster-wide `/.admin/connections` (docs/scaling.md, "Operators"), pure:
/// connections are ordered by node id, then by connection id on their node; a cursor is the last
/// connection of the previous page (`<node id>/<connection id>`). Each node answers at most
/// `limit` connections after the cursor, and the node asked merges those pages into one.
enum ConnectionPages {
    /// The largest connection id a JSON number carries exactly (2^53).
    static let largestID = 9_007_199_254_740_992.0

    typealias Cursor = (node: String, id: UInt64)

    /// Which connections a listing wants, and after which one; an ask's body carries the same.
    struct Query {
        var uid: String?
        var namespace: String?
        var limit: Int
        var after: Cursor?

        init(uid: String?, namespace: String?, limit: Int, after: Cursor?) {
            self.uid = uid
            self.namespace = namespace
            self.limit = min(max(limit, 1), 1000)
            self.after = after
        }

        /// From an ask's body, range-checked (another node wrote it, but Redis is shared).
        init?(ask body: JSON) {
            guard let limit = body["limit"]?.numberValue, limit.isFinite else { return nil }
            var after: Cursor?
            if let node = body["afterNode"]?.stringValue {
                guard let id = body["afterId"]?.numberValue.flatMap(ConnectionPages.id) else { return nil }
                after = (node, id)
            }
            self.init(uid: body["uid"]?.stringValue, namespace: body["ns"]?.stringValue, limit: Int(min(max(limit, 1), 1000)),
                      after: after)
        }

        var json: JSON {
            .object([
                ("uid", uid.map { .string($0) } ?? .null), ("ns", namespace.map { .string($0) } ?? .null),
                ("limit", .number(Double(limit))), ("afterNode", after.map { .string($0.node) } ?? .null),
                ("afterId", after.map { .number(Double($0.id)) } ?? .null),
            ])
        }
    }

    /// A connection id from a JSON number, nil unless it is a whole number in 0...2^53.
    static func id(_ number: Double) -> UInt64? {
        guard number.isFinite, number >= 0, number <= largestID, number.rounded() == number else { return nil }
        return UInt64(number)
    }

    static func cursor(_ text: String) -> Cursor? {
        guard let slash = text.lastIndex(of: "/"), let id = UInt64(text[text.index(after: slash)...]), slash != text.startIndex
        else { return nil }
        return (String(text[..<slash]), id)
    }

    static func cursorText(_ cursor: Cursor) -> String { "\(cursor.node)/\(cursor.id)" }

    /// Where node `node`'s page starts in its connection ids (ascending), after `after`.
    static func start(of ids: [UInt64], node: String, after: Cursor?) -> Int {
        guard let after else { return 0 }
        if after.node > node { return ids.count }
        if after.node < node { return 0 }
        return ids.firstIndex { $0 > after.id } ?? ids.count
    }

    /// One node's answer: `{node, total, more, connections, ids}`.
    static func answer(node: String, total: Int, more: Bool, rows: [(id: UInt64, row: JSON)]) -> JSON {
        .object([
            ("node", .string(node)), ("total", .number(Double(total))), ("more", .bool(more)),
            ("connections", .array(rows.map(\.row))), ("ids", .array(rows.map { .number(Double($0.id)) })),
        ])
    }

    struct Merged {
        var rows: [JSON]
        /// The connections of every node that answered (not only this page's).
        var total: Double
        var nextCursor: String?
        /// Each node that answered, with its count.
        var nodes: [(id: String, connections: Double)]
    }

    /// The nodes' answers (by node id) as one page of at most `limit`. Malformed answers are skipped.
    static func merge(_ answers: [String: JSON], limit: Int) -> Merged {
        var rows: [(node: String, id: UInt64, row: JSON)] = []
        var more = false
        var merged = Merged(rows: [], total: 0, nextCursor: nil, nodes: [])
        for (node, answer) in answers.sorted(by: { $0.key < $1.key }) {
            guard case .array(let connections)? = answer["connections"], case .array(let ids)? = answer["ids"],
                  connections.count == ids.count, let count = answer["total"]?.numberValue, count.isFinite, count >= 0 else { continue }
            merged.total += count
            merged.nodes.append((node, count))
            more = more || answer["more"] == .bool(true)
            for (row, id) in zip(connections, ids) {
                if let id = id.numberValue.flatMap(Self.id) { rows.append((node, id, row)) }
            }
        }
        rows.sort { ($0.node, $0.id) < ($1.node, $1.id) }
        let page = rows.prefix(max(1, limit))
        merged.rows = page.map(\.row)
        if more || rows.count > page.count, let last = page.last { merged.nextCursor = cursorText((last.node, last.id)) }
        return merged
    }
}
