import PresenceCore

/// One user's presence as the app shows it.
public struct PresenceRecord: Equatable, Sendable {
    public var uid: String
    public var online: Bool?
    public var lastSeen: Int64?

    public init(uid: String, online: Bool? = nil, lastSeen: Int64? = nil) {
        self.uid = uid
        self.online = online
        self.lastSeen = lastSeen
    }

    /// Reads `{online, lastSeen}` (anything else counts as unknown).
    public init(uid: String, presence: JSON) {
        self.uid = uid
        online = presence["online"]?.boolValue
        lastSeen = presence["lastSeen"]?.numberValue.map { Int64($0) }
    }
}

/// The rows of `watch`: updated from values at `users/{uid}/presence` or at `users` (all users).
/// Pure: returns the records that changed.
public struct PresenceBoard: Sendable {
    public private(set) var records: [String: PresenceRecord] = [:]
    /// Users in display order (as named, then as they appear).
    public private(set) var order: [String] = []

    public init(uids: [String] = []) {
        for uid in uids { touch(uid) }
    }

    private mutating func touch(_ uid: String) {
        if records[uid] == nil {
            records[uid] = PresenceRecord(uid: uid)
            order.append(uid)
        }
    }

    /// A value at `users/{uid}/presence`.
    public mutating func apply(uid: String, presence: JSON) -> [PresenceRecord] {
        touch(uid)
        let record = PresenceRecord(uid: uid, presence: presence)
        guard records[uid] != record else { return [] }
        records[uid] = record
        return [record]
    }

    /// The whole `users` node: every child's `presence`; users that disappeared become unknown.
    public mutating func apply(users: JSON) -> [PresenceRecord] {
        var changed: [PresenceRecord] = []
        var seen: Set<String> = []
        for (uid, node) in users.objectMembers ?? [] {
            seen.insert(uid)
            changed += apply(uid: uid, presence: node["presence"] ?? .null)
        }
        for uid in order where !seen.contains(uid) {
            changed += apply(uid: uid, presence: .null)
        }
        return changed
    }
}
