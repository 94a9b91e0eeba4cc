import PresenceCore

/// The list of online users as `g online-users` returns it (`{uid: {"online": true, "lastSeen": ms}}`,
/// or null when nobody is online), with the time it was fetched: what `presence-client online`
/// keeps on disk between runs.
public struct OnlineUsersCache: Equatable, Sendable {
    public static let version = 1

    /// When the list was fetched (ms since the epoch, local clock).
    public var fetchedAt: Int64
    /// Server clock minus local clock at the fetch (lastSeen values are server times).
    public var serverTimeOffset: Int64
    /// The users, sorted by uid.
    public var users: [PresenceRecord]

    public init(fetchedAt: Int64, serverTimeOffset: Int64 = 0, users: [PresenceRecord]) {
        self.fetchedAt = fetchedAt
        self.serverTimeOffset = serverTimeOffset
        self.users = users.sorted { $0.uid < $1.uid }
    }

    /// Reads the reply of `g online-users`: each child with its `online` and `lastSeen`; a child
    /// without `online` counts as online (it is in the index). Null: nobody.
    public static func users(from value: JSON?) -> [PresenceRecord] {
        var out: [PresenceRecord] = []
        for (uid, node) in value?.objectMembers ?? [] {
            var record = PresenceRecord(uid: uid, presence: node)
            if record.online == nil { record.online = true }
            out.append(record)
        }
        return out.sorted { $0.uid < $1.uid }
    }

    /// How old the list is at `now`.
    public func age(now: Int64) -> Int64 { max(0, now - fetchedAt) }

    /// The file's content.
    public var json: JSON {
        .object([
            ("version", .number(Double(Self.version))),
            ("fetchedAt", .number(Double(fetchedAt))),
            ("serverTimeOffset", .number(Double(serverTimeOffset))),
            ("users", .object(users.map { record in
                var members: [(String, JSON)] = [("online", .bool(record.online ?? true))]
                if let lastSeen = record.lastSeen { members.append(("lastSeen", .number(Double(lastSeen)))) }
                return (record.uid, .object(members))
            })),
        ])
    }

    /// Reads a file's content; nil when it is not a cache of this version.
    public init?(json: JSON) {
        guard json["version"]?.numberValue == Double(Self.version),
              let fetchedAt = json["fetchedAt"]?.numberValue, fetchedAt.isFinite else { return nil }
        let offset = json["serverTimeOffset"]?.numberValue ?? 0
        self.init(fetchedAt: Int64(fetchedAt), serverTimeOffset: offset.isFinite ? Int64(offset) : 0,
                  users: Self.users(from: json["users"]))
    }

    /// Reads a cache file (nil when missing or unreadable).
    public static func load(path: String) -> OnlineUsersCache? {
        guard let text = CacheFile.read(path), let json = try? JSONParser.parse(text) else { return nil }
        return OnlineUsersCache(json: json)
    }

    /// Writes the cache file atomically.
    public func save(path: String) throws {
        try CacheFile.write(JSONWriter.string(json) + "\n", to: path)
    }
}
