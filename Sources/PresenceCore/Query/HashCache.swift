/// The §8.4 hashes of whole locations, kept while the value there stays the same: a transaction
/// retried, or an ETag read again, on a location nobody wrote since pays for its hash once, as
/// Firebase keeps each node's hash. Every hashed request used to hash its location anew, so a
/// client looping over one location (the attack harness's `hashes`: about 780 requests a second)
/// cost the loop a full hash each time.
///
/// An entry is used only while the location's value `==` the one it was computed from, so it can
/// never be stale, whatever wrote there and however (a write, a snapshot, a replica's log). That
/// check is one pointer comparison while the value is unchanged (a dictionary equal to itself by
/// storage), and at most a walk of the value when it changed, less than hashing it.
///
/// Bounded by the estimated JSON size of the values it holds (`maxBytes`) and by a count: a value
/// held here that has since changed is kept alive by it, so the bound is the memory it can add.
struct HashCache {
    struct Key: Hashable {
        let namespace: String
        let path: Path
    }

    private struct Entry {
        let node: Node
        let hash: String
        let bytes: Int
    }

    let maxBytes: Int
    let maxEntries: Int
    private var entries: [Key: Entry] = [:]
    /// The estimated JSON size of the values held.
    private(set) var bytes = 0
    /// Hashes answered from here, and computed (tests read them to see what was hashed again).
    private(set) var hits = 0
    private(set) var misses = 0

    init(maxBytes: Int = 2 * 1_048_576, maxEntries: Int = 4_096) {
        self.maxBytes = maxBytes
        self.maxEntries = maxEntries
    }

    var count: Int { entries.count }

    /// The hash of `node`, the value at `key`: the one kept if `node` is the value it was made
    /// from, else `compute(node)`, kept when `size(node)` (its estimated JSON bytes, or nil when
    /// too big to say) fits. Full, it lets go of arbitrary entries (a dictionary's first) first.
    mutating func hash(of node: Node, at key: Key, size: (Node) -> Int?, compute: (Node) -> String) -> String {
        if let entry = entries[key] {
            if entry.node == node {
                hits += 1
                return entry.hash
            }
            remove(key)
        }
        misses += 1
        let hash = compute(node)
        guard let size = size(node), size <= maxBytes / 8 else { return hash }
        while !entries.isEmpty, bytes + size > maxBytes || entries.count >= maxEntries {
            remove(entries.keys[entries.startIndex])
        }
        entries[key] = Entry(node: node, hash: hash, bytes: size)
        bytes += size
        return hash
    }

    private mutating func remove(_ key: Key) {
        guard let entry = entries.removeValue(forKey: key) else { return }
        bytes -= entry.bytes
    }
}
