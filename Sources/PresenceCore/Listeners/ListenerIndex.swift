/// Identifies a connection inside the engine. The shell maps it to its socket.
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.raw < b.raw }
    public var description: String { "#\(raw)" }
}

/// One active listen: a connection watching a path, whole (`query` nil) or through a filtered,
/// tagged query whose result is recomputed and pushed with its tag.
public struct Listener: Hashable, Sendable {
    public var connection: ConnectionID
    public var path: Path
    public var tag: Int?
    public var query: QuerySpec?

    public init(connection: ConnectionID, path: Path, tag: Int?, query: QuerySpec? = nil) {
        self.connection = connection
        self.path = path
        self.tag = tag
        self.query = query
    }
}

/// Every listen of one namespace, in a trie keyed by path segments, so a write finds the listeners
/// above and below it in O(depth + matches) instead of scanning all listeners.
public final class ListenerIndex {
    private final class TrieNode {
        var listeners: Set<Listener> = []
        var children: [String: TrieNode] = [:]
        var isEmpty: Bool { listeners.isEmpty && children.isEmpty }
    }

    private let root = TrieNode()
    public private(set) var count = 0

    public init() {}

    public func add(_ listener: Listener) {
        var node = root
        for key in listener.path.segments {
            if let next = node.children[key] {
                node = next
            } else {
                let next = TrieNode()
                node.children[key] = next
                node = next
            }
        }
        if node.listeners.insert(listener).inserted { count += 1 }
    }

    public func remove(_ listener: Listener) {
        remove(listener, from: root, segments: listener.path.segments[...])
    }

    private func remove(_ listener: Listener, from node: TrieNode, segments: ArraySlice<String>) {
        guard let key = segments.first else {
            if node.listeners.remove(listener) != nil { count -= 1 }
            return
        }
        guard let child = node.children[key] else { return }
        remove(listener, from: child, segments: segments.dropFirst())
        if child.isEmpty { node.children.removeValue(forKey: key) }
    }

    /// Listeners at `path` or above it (their path contains `path`).
    public func listeners(containing path: Path) -> [Listener] {
        var result: [Listener] = []
        var node = root
        result.append(contentsOf: node.listeners)
        for key in path.segments {
            guard let next = node.children[key] else { return result }
            node = next
            result.append(contentsOf: node.listeners)
        }
        return result
    }

    /// Listeners strictly below `path`.
    public func listeners(below path: Path) -> [Listener] {
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return [] }
            node = next
        }
        var result: [Listener] = []
        var stack = Array(node.children.values)
        while let next = stack.popLast() {
            result.append(contentsOf: next.listeners)
            stack.append(contentsOf: next.children.values)
        }
        return result
    }
}
