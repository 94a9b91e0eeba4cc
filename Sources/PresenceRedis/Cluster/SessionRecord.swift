/// A session's record in Redis (`{ns}:s:<id>`): who owns its onDisconnect ops and when they run.
/// `ops` is opaque here (the engine's encoding); Lua never decodes it.
public struct SessionRecord: Sendable, Equatable {
    public enum State: String, Sendable, Equatable {
        /// Its connection is open on the owner.
        case live
        /// Its connection is gone; the ops run at `runAt` unless the user comes back first.
        case held
    }

    public var id: String
    public var owner: String
    public var state: State
    /// Held: when the connection counts as disconnected (the ops' timestamps), node ms.
    public var disconnectedAt: Int64?
    /// Held: when the ops run, node ms.
    public var runAt: Int64?
    public var ops: [UInt8]
    /// The owner's changes since `ops` was stored whole (SESSION `change`), oldest first, each
    /// opaque: the ops are `ops` with these replayed in order.
    public var changes: [[UInt8]]
    /// For adopted and taken-over records: the owner and state before the move.
    public var previousOwner: String?
    public var previousState: State?

    public init(id: String, owner: String, state: State, disconnectedAt: Int64? = nil, runAt: Int64? = nil,
                ops: [UInt8], changes: [[UInt8]] = [], previousOwner: String? = nil, previousState: State? = nil) {
        self.id = id
        self.owner = owner
        self.state = state
        self.disconnectedAt = disconnectedAt
        self.runAt = runAt
        self.ops = ops
        self.changes = changes
        self.previousOwner = previousOwner
        self.previousState = previousState
    }

    /// Session ids come from clients (`ls`): bounded before they become part of a key.
    public static func isValidID(_ id: String) -> Bool { !id.isEmpty && id.utf8.count <= 256 }
}

extension SessionRecord {
    /// A script's list of changes (bulk strings), or nil when it is not one.
    static func changes(_ reply: RedisReply?) -> [[UInt8]]? {
        guard let list = reply?.array else { return nil }
        var changes: [[UInt8]] = []
        changes.reserveCapacity(list.count)
        for item in list {
            guard let bytes = item.bytes else { return nil }
            changes.append(bytes)
        }
        return changes
    }
}
