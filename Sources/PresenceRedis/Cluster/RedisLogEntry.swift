import PresenceCore

/// One entry of a namespace's log: stream ID `<rev>-0`, fields `k` (kind), `n` (the node that
/// appended it), `t` (Redis time, ms) and the kind's own fields. It is the engine's
/// `LogRevision` (`Engine.apply` takes it as read), parsed from the stream here.
public typealias RedisLogEntry = LogRevision

extension LogRevision {
    /// Parses `[id, [field, value, ...]]` as XRANGE and XREAD return it.
    init?(_ reply: RedisReply) {
        guard let parts = reply.array, parts.count == 2, let id = parts[0].string,
              let rev = LogRevision.revision(ofID: id), let list = parts[1].array else { return nil }
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
