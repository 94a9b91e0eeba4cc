/// Identifies a connection inside the engine. The shell maps it to its socket.
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.raw < b.raw }
    public var description: String { "#\(raw)" }
}

/// One active listen: a connection watching a path, whole (`query` nil) or through a filtered,
/// tagged query whose result is recomputed and pushed with its tag.
///
/// Memory: one of these lives in the listener trie and one in the connection's listens for every
/// listen, so it is kept small (40 bytes): the rare filtered query is boxed.
public struct Listener: Hashable, Sendable {
    public var connection: ConnectionID
    public var path: Path
    public var tag: Int?
    private var queryBox: QueryBox?

    public var query: QuerySpec? {
        get { queryBox?.spec }
        set { queryBox = newValue.map(QueryBox.init) }
    }

    public init(connection: ConnectionID, path: Path, tag: Int?, query: QuerySpec? = nil) {
        self.connection = connection
        self.path = path
        self.tag = tag
        self.queryBox = query.map(QueryBox.init)
    }

    public static func == (a: Listener, b: Listener) -> Bool {
        a.connection == b.connection && a.tag == b.tag && a.path == b.path && a.query == b.query
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(connection)
        hasher.combine(path)
        hasher.combine(tag)
        hasher.combine(query)
    }
}

/// An immutable filtered query, shared by the copies of a `Listener`.
final class QueryBox: Sendable {
    let spec: QuerySpec
    init(_ spec: QuerySpec) { self.spec = spec }
}

/// Every listen of one namespace, in a trie keyed by path segments, so a write finds the listeners
/// above and below it in O(depth + matches) instead of scanning all listeners.
///
/// Most nodes hold no listener or one, and have one child or none (`users/<uid>/presence`), so a
/// node keeps a single listener and a single child inline and only allocates a set or a dictionary
/// for more: about 100 bytes per node instead of ~300.
public final class ListenerIndex {
    private enum Listeners {
        case none
        case one(Listener)
        case many(Set<Listener>)
    }

    private enum Children {
        case none
        case one(String, TrieNode)
        case many([String: TrieNode])
    }

    private final class TrieNode {
        var listeners: Listeners = .none
        var children: Children = .none

        var isEmpty: Bool {
            if case .none = listeners, case .none = children { return true }
            return false
        }

        func child(_ key: String) -> TrieNode? {
            switch children {
            case .none: return nil
            case .one(let existing, let node): return existing == key ? node : nil
            case .many(let map): return map[key]
            }
        }

        func addChild(_ key: String, _ node: TrieNode) {
            switch children {
            case .none:
                children = .one(key, node)
            case .one(let existing, let other):
                children = .many([existing: other, key: node])
            case .many(var map):
                children = .none  // keep the dictionary uniquely referenced while it grows
                map[key] = node
                children = .many(map)
            }
        }

        func removeChild(_ key: String) {
            switch children {
            case .none:
                return
            case .one(let existing, _):
                if existing == key { children = .none }
            case .many(var map):
                children = .none
                map.removeValue(forKey: key)
                if map.count == 1, let (remaining, node) = map.first {
                    children = .one(remaining, node)
                } else if !map.isEmpty {
                    children = .many(map)
                }
            }
        }

        func forEachChild(_ body: (TrieNode) -> Void) {
            switch children {
            case .none: return
            case .one(_, let node): body(node)
            case .many(let map): for node in map.values { body(node) }
            }
        }

        /// True when inserted (it was not there).
        func insert(_ listener: Listener) -> Bool {
            switch listeners {
            case .none:
                listeners = .one(listener)
                return true
            case .one(let existing):
                if existing == listener { return false }
                listeners = .many([existing, listener])
                return true
            case .many(var set):
                listeners = .none
                let inserted = set.insert(listener).inserted
                listeners = .many(set)
                return inserted
            }
        }

        /// True when removed (it was there).
        func remove(_ listener: Listener) -> Bool {
            switch listeners {
            case .none:
                return false
            case .one(let existing):
                guard existing == listener else { return false }
                listeners = .none
                return true
            case .many(var set):
                listeners = .none
                let removed = set.remove(listener) != nil
                if set.count == 1, let remaining = set.first {
                    listeners = .one(remaining)
                } else if !set.isEmpty {
                    listeners = .many(set)
                }
                return removed
            }
        }

        func appendListeners(to result: inout [Listener]) {
            switch listeners {
            case .none: return
            case .one(let listener): result.append(listener)
            case .many(let set): result.append(contentsOf: set)
            }
        }
    }

    private let root = TrieNode()
    public private(set) var count = 0

    public init() {}

    public func add(_ listener: Listener) {
        var node = root
        for key in listener.path.segments {
            if let next = node.child(key) {
                node = next
            } else {
                let next = TrieNode()
                node.addChild(key, next)
                node = next
            }
        }
        if node.insert(listener) { count += 1 }
    }

    public func remove(_ listener: Listener) {
        remove(listener, from: root, segments: listener.path.segments[...])
    }

    private func remove(_ listener: Listener, from node: TrieNode, segments: ArraySlice<String>) {
        guard let key = segments.first else {
            if node.remove(listener) { count -= 1 }
            return
        }
        guard let child = node.child(key) else { return }
        remove(listener, from: child, segments: segments.dropFirst())
        if child.isEmpty { node.removeChild(key) }
    }

    /// Listeners at `path` or above it (their path contains `path`).
    public func listeners(containing path: Path) -> [Listener] {
        var result: [Listener] = []
        var node = root
        node.appendListeners(to: &result)
        for key in path.segments {
            guard let next = node.child(key) else { return result }
            node = next
            node.appendListeners(to: &result)
        }
        return result
    }

    /// Listeners strictly below `path`.
    public func listeners(below path: Path) -> [Listener] {
        var node = root
        for key in path.segments {
            guard let next = node.child(key) else { return [] }
            node = next
        }
        var result: [Listener] = []
        var stack: [TrieNode] = []
        node.forEachChild { stack.append($0) }
        while let next = stack.popLast() {
            next.appendListeners(to: &result)
            next.forEachChild { stack.append($0) }
        }
        return result
    }
}
