/// "Who is online now" for one namespace, kept up to date as presence nodes change rather than by
/// scanning the tree: each write updates only the users it touches.
///
/// A user's presence node is `<collection>/<uid>/<node>` (default `users/$uid/presence`); they are
/// online when its `field` (default `online`) is `true`. `lastSeen` is reported when it is a number.
public struct OnlineIndexConfiguration: Sendable {
    /// The collection path before the `$uid` segment (`users`).
    public var collection: Path
    /// The path from a user's node to the presence node (`presence`).
    public var node: Path
    /// The boolean field that says online.
    public var field: String
    /// Where `g` and REST `GET` read the list (a virtual location; rules apply to it as to data).
    public var location: Path

    public init(collection: Path, node: Path, field: String, location: Path) {
        self.collection = collection
        self.node = node
        self.field = field
        self.location = location
    }

    /// `users/$uid/presence`, field `online`, served at `/online-users`.
    public static let `default` = OnlineIndexConfiguration(
        collection: Path(validated: ["users"]), node: Path(validated: ["presence"]), field: "online",
        location: Path(validated: ["online-users"]))

    /// Parses a pattern like `users/$uid/presence` (exactly one `$uid` segment).
    public init(pattern: String, field: String, location: String) throws(DataError) {
        let segments = pattern.split(separator: "/").map(String.init)
        guard let index = segments.firstIndex(of: "$uid"), segments.filter({ $0 == "$uid" }).count == 1 else {
            throw DataError.invalidPath(pattern, reason: "the presence pattern needs exactly one $uid segment")
        }
        for key in segments where key != "$uid" && !Path.isValidKey(key) {
            throw DataError.invalidPath(pattern, reason: "invalid key \"\(key)\"")
        }
        guard Path.isValidKey(field) else { throw DataError.invalidPath(field, reason: "invalid field name") }
        self.init(collection: Path(validated: Array(segments[..<index])), node: Path(validated: Array(segments[(index + 1)...])),
                  field: field, location: try Path(location))
    }
}

/// The index itself: `{uid: {"online": true, "lastSeen": n}}` for every online user, kept as the
/// node a read returns. Each write changes the entries of the users it touches (O(1) each), so a
/// read of the list is a snapshot of this node, not a rebuild of it from every user.
struct OnlineIndex {
    private(set) var node: Node = .null

    var count: Int { node.children.count }

    /// Re-reads the users a write at `path` may have changed.
    mutating func update(after path: Path, root: Node, configuration: OnlineIndexConfiguration) {
        let collection = configuration.collection
        if path.count <= collection.count {
            // A write at or above the collection: re-read every user below it.
            guard path.contains(collection) else { return }
            node = .null
            for uid in root.node(at: collection).children.keys { refresh(uid, root: root, configuration: configuration) }
        } else if collection.contains(path) {
            refresh(path.segments[collection.count], root: root, configuration: configuration)
        }
    }

    mutating func refresh(_ uid: String, root: Node, configuration: OnlineIndexConfiguration) {
        let presence = root.node(at: configuration.collection.child(uid).appending(configuration.node))
        let key = Path(validated: [uid])
        guard presence.child(configuration.field).leafValue == .bool(true) else {
            if node.hasChildren { node.set(.null, at: key) }
            return
        }
        var entry: [String: Node] = ["online": Node(.bool(true))]
        if case .number(let lastSeen)? = presence.child("lastSeen").leafValue { entry["lastSeen"] = Node(.number(lastSeen)) }
        node.set(.branch(entry, priority: nil), at: key)
    }
}
