/// The cluster-wide node list for operators, and the operators' kicks carried to the node that
/// holds the connection (docs/scaling.md, "Operators"). Global keys, outside every namespace:
/// `<prefix>:{nodes}:beats` (zset: node id -> last beat, Redis ms), `<prefix>:{nodes}:info` (hash:
/// node id -> what the node says about itself, opaque here) and `<prefix>:{nodes}:kicks` (stream).
/// The `{nodes}` hash tag keeps the three in one slot on a Redis Cluster. Liveness does not depend
/// on it: the per-namespace leases decide that.
public final class NodeDirectory {
    public let connection: RedisConnection
    public let nodeID: String
    public let beatsKey: String
    public let infoKey: String
    public let kicksKey: String
    /// The newest kick this node has seen. It starts at the beginning of the stream (the last
    /// minute of kicks): a kick sent while this node's first beat is in flight must still reach it,
    /// and older kicks name sessions that cannot be here (session ids are random per connection).
    public private(set) var lastKickID = "0-0"

    public init(connection: RedisConnection, nodeID: String, prefix: String = "presence") {
        self.connection = connection
        self.nodeID = nodeID
        beatsKey = prefix + ":{nodes}:beats"
        infoKey = prefix + ":{nodes}:info"
        kicksKey = prefix + ":{nodes}:kicks"
    }

    public struct Entry: Sendable, Equatable {
        public var id: String
        /// Redis ms.
        public var lastBeat: Int64
        public var info: [UInt8]
    }

    public struct Kick: Sendable, Equatable {
        public var id: String
        public var session: String
        public var reason: String
        /// The node the operator asked.
        public var from: String
    }

    public struct Beat: Sendable, Equatable {
        public var redisTime: Int64
        public var nodes: [Entry]
        /// Kicks sent since this node's previous beat (none on its first).
        public var kicks: [Kick]
    }

    /// Records this node's beat and info; answers the list and the kicks since the last beat.
    public func beat(info: [UInt8], forgetAfterMilliseconds: Int64, keepKicksMilliseconds: Int64,
                     completion: @escaping (Result<Beat, RedisError>) -> Void) {
        connection.run(RedisScripts.nodes, keys: [beatsKey, infoKey, kicksKey],
                       arguments: [nodeID, info, lastKickID, max(1, forgetAfterMilliseconds), max(1, keepKicksMilliseconds)],
                       parse: Self.parseBeat) { [weak self] result in
            if case .success(let (_, last)) = result { self?.lastKickID = last }
            completion(result.map(\.0))
        }
    }

    static func parseBeat(_ reply: ScriptReply) -> (Beat, String)? {
        guard reply.status == "OK", let time = reply.integer(0), let last = reply.string(1),
              let list = reply.array(2), let kickList = reply.array(3) else { return nil }
        var nodes: [Entry] = []
        var index = 0
        while index + 2 < list.count {
            guard let id = list[index].string, let beat = list[index + 1].string.flatMap(Double.init), beat.isFinite,
                  let info = list[index + 2].bytes else { return nil }
            nodes.append(Entry(id: id, lastBeat: Int64(beat), info: info))
            index += 3
        }
        var kicks: [Kick] = []
        for item in kickList {
            guard let parts = item.array, parts.count == 2, let id = parts[0].string, let fields = parts[1].array else { return nil }
            var values: [String: String] = [:]
            var field = 0
            while field + 1 < fields.count {
                if let name = fields[field].string { values[name] = fields[field + 1].string ?? "" }
                field += 2
            }
            guard let session = values["s"] else { continue }
            kicks.append(Kick(id: id, session: session, reason: values["r"] ?? "", from: values["n"] ?? ""))
        }
        return (Beat(redisTime: time, nodes: nodes, kicks: kicks), last)
    }

    /// Asks every node to close the connection of `session`; the one that holds it does, at its
    /// next beat. Answers the kick's stream id.
    public func kick(session: String, reason: String, completion: @escaping (Result<String, RedisError>) -> Void) {
        connection.send(RedisCommand("XADD", kicksKey, "*", "s", session, "r", reason, "n", nodeID)) { result in
            switch result {
            case .success(let reply):
                if let id = reply.string { completion(.success(id)) } else {
                    completion(.failure(.unexpectedReply("XADD: \(reply.errorMessage ?? String(describing: reply))")))
                }
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// A graceful stop: off the list at once.
    public func leave(completion: @escaping (Result<Void, RedisError>) -> Void) {
        connection.run(RedisScripts.nodesLeave, keys: [beatsKey, infoKey], arguments: [nodeID],
                       parse: { $0.status == "OK" ? () : nil }, completion: completion)
    }
}
