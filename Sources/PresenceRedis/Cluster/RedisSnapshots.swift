/// Snapshot bookkeeping for one namespace (SNAP_BEGIN, SNAP_CHUNKS, SNAP_DONE): one node at a
/// time (the snapper lease) writes its replica at some rev as chunks, then publishes it and trims
/// the log below it. Loaders read `head.snap` and page through the chunks.
public final class RedisSnapshots {
    /// The node writing or reading snapshots, in its namespace.
    public let member: NodeLease
    private var connection: RedisConnection { member.connection }
    private var keys: RedisKeys { member.keys }
    private var node: String { member.node.id }
    private var epoch: String { member.epoch }

    public init(member: NodeLease) { self.member = member }

    public enum Begin: Sendable, Equatable {
        case started
        /// Another node holds the snapper lease.
        case busy(holder: String)
        /// `rev` is not newer than the current snapshot, or is past the head.
        case stale(snapshot: UInt64, head: UInt64)
        case epochMismatch(current: String?)
    }

    /// Claims the snapper lease for `leaseMilliseconds` (renewed by calling again) and starts a
    /// snapshot at `rev`.
    public func begin(rev: UInt64, leaseMilliseconds: Int64, completion: @escaping (Result<Begin, RedisError>) -> Void) {
        connection.run(RedisScripts.snapshotBegin, keys: [keys.head, keys.snapper],
                       arguments: [node, epoch, rev, max(1, leaseMilliseconds)], parse: { reply in
            switch reply.status {
            case "OK": return .started
            case "BUSY": return .busy(holder: reply.string(0) ?? "")
            case "STALE":
                guard let snap = reply.integer(0), let head = reply.integer(1) else { return nil }
                return .stale(snapshot: UInt64(max(0, snap)), head: UInt64(max(0, head)))
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            default: return nil
            }
        }, completion: completion)
    }

    /// Stores chunks (id -> bytes; ids must not start with "."). False: the lease was lost, stop.
    public func write(rev: UInt64, chunks: [(id: String, data: [UInt8])], completion: @escaping (Result<Bool, RedisError>) -> Void) {
        guard chunks.allSatisfy({ !$0.id.isEmpty && !$0.id.hasPrefix(".") }) else {
            return connection.later { completion(.failure(.notSent("snapshot chunk ids must be non-empty and not start with \".\""))) }
        }
        var arguments: [any RedisArgument] = [node, rev]
        for chunk in chunks { arguments += [chunk.id, chunk.data] }
        connection.run(RedisScripts.snapshotChunks, keys: [keys.head, keys.snapper, keys.snapshot(rev)],
                       arguments: arguments, parse: { reply in
            switch reply.status {
            case "OK": return true
            case "LOST": return false
            default: return nil
            }
        }, completion: completion)
    }

    public enum Finish: Sendable, Equatable {
        /// Published; the log now starts at `min`.
        case published(min: UInt64)
        case lost
        case epochMismatch(current: String?)
    }

    /// Publishes the snapshot at `rev` (`chunkCount` chunks written) and trims the log below
    /// `trimBelow` (capped at `rev + 1`; keep enough for restarting nodes to catch up from the log).
    public func finish(rev: UInt64, chunkCount: Int, trimBelow: UInt64,
                       completion: @escaping (Result<Finish, RedisError>) -> Void) {
        connection.run(RedisScripts.snapshotDone, keys: [keys.head, keys.snapper, keys.log, keys.snapshot(rev)],
                       arguments: [node, epoch, rev, trimBelow, max(0, chunkCount)], parse: { reply in
            switch reply.status {
            case "OK": return reply.integer(0).map { .published(min: UInt64(max(0, $0))) }
            case "LOST": return .lost
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            default: return nil
            }
        }, completion: completion)
    }

    public struct Page: Sendable, Equatable {
        /// 0 when the scan is complete.
        public var cursor: UInt64
        public var chunks: [String: [UInt8]]
        /// The `.count` the publisher recorded, when this page carried it.
        public var expectedCount: Int?
    }

    /// One page of a published snapshot's chunks (HSCAN: a chunk may come twice, key by id). A
    /// complete load has `expectedCount` distinct chunks; fewer means the snapshot was deleted
    /// meanwhile (two newer ones were published): start over from the new `head.snap`.
    public func page(rev: UInt64, cursor: UInt64, count: Int = 100,
                     completion: @escaping (Result<Page, RedisError>) -> Void) {
        connection.send(RedisCommand("HSCAN", keys.snapshot(rev), cursor, "COUNT", max(1, count))) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 2, let next = parts[0].string.flatMap({ UInt64($0) }),
                      let items = parts[1].array else { return .failure(.unexpectedReply("HSCAN: \(reply)")) }
                var page = Page(cursor: next, chunks: [:], expectedCount: nil)
                var index = 0
                while index + 1 < items.count {
                    if let id = items[index].string, let data = items[index + 1].bytes {
                        if id == ".count" { page.expectedCount = Int(String(decoding: data, as: UTF8.self)) }
                        else { page.chunks[id] = data }
                    }
                    index += 2
                }
                return .success(page)
            })
        }
    }
}
