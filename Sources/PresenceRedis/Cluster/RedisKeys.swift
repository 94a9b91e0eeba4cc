/// The Redis keys of one namespace (one Firebase database). Every key carries the hash tag
/// `{namespace}`, so one namespace lives in one hash slot: its scripts stay atomic on a Redis
/// Cluster too, and namespaces spread over shards. docs/scaling.md lists what each key holds.
public struct RedisKeys: Sendable, Hashable {
    public let prefix: String
    public let namespace: String
    /// `<prefix>:{<namespace>}:`; the scripts derive per-session and per-node keys from it.
    public let base: String

    public enum Invalid: Error, Equatable {
        case prefix(String)
        case namespace(String)
    }

    /// `prefix` must not contain braces (they would move the hash tag); `namespace` must be non-empty.
    public init(prefix: String = "presence", namespace: String) throws(Invalid) {
        guard !prefix.isEmpty, !prefix.contains("{"), !prefix.contains("}") else { throw .prefix(prefix) }
        guard !namespace.isEmpty, namespace.utf8.count <= 512 else { throw .namespace(namespace) }
        self.prefix = prefix
        self.namespace = namespace
        base = "\(prefix):{\(namespace)}:"
    }

    /// Hash: `rev`, `epoch`, `lease` (ms), `snap`, `prev`, `pending`, `min`.
    public var head: String { base + "head" }
    /// Stream: entry `<rev>-0` per revision.
    public var log: String { base + "log" }
    /// Hash: node id -> last beat (Redis TIME, ms). The lease table.
    public var nodes: String { base + "nodes" }
    /// Hash: node id -> time its live sessions count as disconnected (dead or left), until adopted.
    public var down: String { base + "down" }
    /// String: the node writing snapshots (SET PX lease).
    public var snapper: String { base + "snapper" }
    /// Hash per session: `owner`, `state` (live | held), `at`, `runAt`, `ops`.
    public func session(_ id: String) -> String { base + "s:" + id }
    /// Set per node: the session ids it owns.
    public func owned(by node: String) -> String { base + "owned:" + node }
    /// Hash per snapshot: chunk id -> bytes, and `.count`.
    public func snapshot(_ rev: UInt64) -> String { base + "snap:\(rev)" }

    /// The key the log script names when a step claims no session (never written).
    var noSession: String { base + "s:" }
}
