import Testing
@testable import PresenceCore

/// Issue 16: a location hashed again and again (transactions retried, ETags read) is hashed once
/// while nobody writes there, and the hash kept is never that of an older value.
@Suite struct HashCacheTests {
    typealias F = QueryFixture

    /// The bytes themselves: every hash spells its whole pre-image, so different values never collide.
    static func digest(_ bytes: [UInt8]) -> [UInt8] { bytes }
    static let key = HashCache.Key(namespace: "ns", path: Path(validated: ["list"]))

    func hash(_ cache: inout HashCache, _ node: Node, at key: HashCache.Key = Self.key, computed: inout Int) -> String {
        cache.hash(of: node, at: key, size: { $0.estimatedJSONBytes(within: 1 << 20) }, compute: {
            computed += 1
            return DataHash.hash($0, digest: Self.digest)
        })
    }

    func list(_ count: Int, changing changed: Int? = nil) -> Node {
        var node = Node.null
        for i in 0..<count {
            node.set(Node(.string(i == changed ? "changed" : "value \(i)")), at: Path(validated: ["k\(i)"]))
        }
        return node
    }

    @Test func theSameValueIsHashedOnceAndAChangedOneAgain() {
        var cache = HashCache()
        var computed = 0
        var value = list(50)
        let first = hash(&cache, value, computed: &computed)
        #expect(hash(&cache, value, computed: &computed) == first)
        #expect(computed == 1 && cache.hits == 1)
        // A write there: the kept hash is not used; the new one is the value's own.
        value.set(Node(.string("changed")), at: Path(validated: ["k7"]))
        let second = hash(&cache, value, computed: &computed)
        #expect(computed == 2)
        #expect(second != first && second == DataHash.hash(value, digest: Self.digest))
        #expect(second == DataHash.hash(list(50, changing: 7), digest: Self.digest))
        // An equal value built anew (other storage) is the same value: the kept hash is right for it.
        #expect(hash(&cache, list(50, changing: 7), computed: &computed) == second)
        #expect(computed == 2)
        // The old value again (a write putting it back): hashed again, and equal to its first hash.
        #expect(hash(&cache, list(50), computed: &computed) == first)
        #expect(computed == 3)
    }

    @Test func locationsAreKeptApartByNamespaceAndPath() {
        var cache = HashCache()
        var computed = 0
        let a = list(3), b = list(4)
        let here = hash(&cache, a, computed: &computed)
        let elsewhere = hash(&cache, b, at: HashCache.Key(namespace: "other", path: Self.key.path), computed: &computed)
        #expect(here != elsewhere && computed == 2)
        #expect(hash(&cache, a, computed: &computed) == here)
        #expect(hash(&cache, b, at: HashCache.Key(namespace: "other", path: Self.key.path), computed: &computed) == elsewhere)
        #expect(computed == 2)
        // A different value under a key is hashed as itself, never answered with the key's hash.
        #expect(hash(&cache, b, computed: &computed) == elsewhere && computed == 3)
    }

    @Test func whatItHoldsIsBoundedInBytesAndCount() {
        var cache = HashCache(maxBytes: 4_000, maxEntries: 16)
        var computed = 0
        for i in 0..<200 {
            let value = list(5 + i % 7)
            _ = hash(&cache, value, at: HashCache.Key(namespace: "ns", path: Path(validated: ["l\(i)"])), computed: &computed)
            #expect(cache.bytes <= 4_000 && cache.count <= 16)
        }
        #expect(cache.count > 0)
        // A value over an eighth of the room is hashed, not kept.
        var tooBig = HashCache(maxBytes: 800)
        _ = hash(&tooBig, list(20), computed: &computed)
        #expect(tooBig.count == 0 && tooBig.bytes == 0)
    }
}
