/// One entry of a namespace's log: stream ID `<rev>-0`, fields `k` (kind), `n` (the node that
/// appended it), `t` (Redis time, ms) and the kind's own fields.
public struct RedisLogEntry: Sendable, Equatable {
    public enum Body: Sendable, Equatable {
        /// `p`: a step proposed by `node` (field `e`: the engine's entry, opaque here).
        case proposal([UInt8])
        /// `dead`: `node` (a reaper, or a new incarnation of the same name) declared `deadNode`
        /// dead; it had last beaten at `lastBeat` (Redis ms).
        case nodeDead(deadNode: String, lastBeat: Int64)
        /// `leave`: `node` stopped gracefully; its live sessions count as disconnected at `at`.
        case nodeLeft(at: Int64)
        /// `takeover`: `node` took session `session` over from `from`, which closes that
        /// connection (4001) without running its ops.
        case takeover(session: String, from: String)
        /// A kind this version does not know (a newer node wrote it): stop applying, do not skip.
        case unknown(kind: String)
    }

    public let rev: UInt64
    public let node: String
    public let time: Int64
    public let body: Body

    public init(rev: UInt64, node: String, time: Int64, body: Body) {
        self.rev = rev
        self.node = node
        self.time = time
        self.body = body
    }

    /// Parses `[id, [field, value, ...]]` as XRANGE and XREAD return it.
    init?(_ reply: RedisReply) {
        guard let parts = reply.array, parts.count == 2, let id = parts[0].string,
              let rev = RedisLogEntry.revision(ofID: id), let list = parts[1].array else { return nil }
        var fields: [String: [UInt8]] = [:]
        var index = 0
        while index + 1 < list.count {
            if let name = list[index].string, let value = list[index + 1].bytes { fields[name] = value }
            index += 2
        }
        func text(_ name: String) -> String? { fields[name].map { String(decoding: $0, as: UTF8.self) } }
        guard let kind = text("k"), let node = text("n"), let time = text("t").flatMap({ Int64($0) }) else { return nil }
        let body: Body
        switch kind {
        case "p":
            guard let payload = fields["e"] else { return nil }
            body = .proposal(payload)
        case "dead":
            guard let dead = text("d"), let beat = text("b").flatMap({ Int64($0) }) else { return nil }
            body = .nodeDead(deadNode: dead, lastBeat: beat)
        case "leave":
            guard let at = text("b").flatMap({ Int64($0) }) else { return nil }
            body = .nodeLeft(at: at)
        case "takeover":
            guard let session = text("s"), let from = text("f") else { return nil }
            body = .takeover(session: session, from: from)
        default:
            body = .unknown(kind: kind)
        }
        self.init(rev: rev, node: node, time: time, body: body)
    }

    /// `123-0` -> 123. Only sequence 0 is ours: revisions are the whole ID.
    static func revision(ofID id: String) -> UInt64? {
        guard id.hasSuffix("-0") else { return nil }
        return UInt64(id.dropLast(2))
    }
}
