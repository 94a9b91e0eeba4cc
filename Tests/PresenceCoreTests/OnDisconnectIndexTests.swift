import PresenceTesting
import Testing
@testable import PresenceCore

/// The two forms of an onDisconnect queue (a list for a few ops, a trie past
/// `OnDisconnectQueue.maxListed`) must hold the same ops in the same order after any sequence of
/// sets and cancels, give the same result when run, and count the same bytes.
@Suite struct OnDisconnectIndexTests {
    static let keys = ["a", "b", "c", "d"]
    let who = Credentials.user(auth: ["uid": "u"], expiresAt: nil)

    func path(_ random: inout SeededRandom) -> Path {
        Path(validated: (0..<random.int(4)).map { _ in Self.keys[random.int(Self.keys.count)] })
    }

    func value(_ random: inout SeededRandom, depth: Int = 0) -> JSON {
        switch random.int(depth > 1 ? 3 : 6) {
        case 0: return .number(Double(random.int(100)))
        case 1: return .string("v\(random.int(10))")
        case 2: return [".sv": "timestamp"]
        case 3: return .null
        default:
            // Distinct keys: `JSON.==` does not see an object with a repeated key as equal to itself.
            var members: [(String, JSON)] = []
            for _ in 0..<(1 + random.int(3)) {
                let key = Self.keys[random.int(Self.keys.count)]
                if !members.contains(where: { $0.0 == key }) { members.append((key, value(&random, depth: depth + 1))) }
            }
            if random.int(5) == 0 { members.append((".priority", 1)) }
            return .object(members)
        }
    }

    /// The result of running ops in order on a tree (server values as a fixed string).
    func run(_ ops: [OnDisconnectOp]) -> Node {
        var tree = Node.null
        for op in ops {
            let resolved = ServerValues.containsPlaceholder(op.value) ? JSON.string("ts") : op.value
            if let node = try? Node(json: resolved, at: op.path) { tree.set(node, at: op.path) }
        }
        return tree
    }

    func bytes(_ ops: [OnDisconnectOp]) -> Int { ops.reduce(0) { $0 + OnDisconnectQueue.size(of: $1.value) } }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func theListAndTheTrieAgreeOnEverySequence(_ seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var list: [OnDisconnectOp] = []
        var index = OnDisconnectIndex([])
        var listBytes = 0, indexBytes = 0
        for step in 0..<400 {
            if random.int(3) == 0 {
                let at = path(&random)
                let listed = OnDisconnectQueue.cancel(at, in: &list)
                let indexed = index.cancel(at)
                #expect((listed == nil) == (indexed == nil), "step \(step): cancel \(at) changed one form only")
                listBytes += listed ?? 0
                indexBytes += indexed ?? 0
            } else {
                let op = OnDisconnectOp(path: path(&random), value: value(&random), credentials: who)
                list.removeAll { removed in
                    guard op.path.contains(removed.path) else { return false }
                    listBytes -= OnDisconnectQueue.size(of: removed.value)
                    return true
                }
                list.append(op)
                listBytes += OnDisconnectQueue.size(of: op.value)
                indexBytes += index.set(op)
            }
            #expect(index.ops == list, "step \(step)")
            #expect(index.count == list.count)
            #expect(listBytes == bytes(list) && indexBytes == bytes(list), "step \(step): byte counts")
            #expect(run(index.ops) == run(list))
            if index.ops != list { return }
        }
    }

    /// The public queue moves from the list to the trie when it grows, keeps its order, and a
    /// queue restored from its ops (storage) is equal to it.
    /// Issue 16: the trie was changed while its box still held it (`switch storage { case
    /// .indexed(var index):`), so every set copied the dictionaries on its path and a
    /// connection's n-th op cost O(n) (1,000 ops: a 5.8 ms loop turn when they ran). The trie must
    /// be the only holder of its nodes while it changes, after sets, cancels and journalling.
    @Test func theTrieIsTheOnlyHolderOfItsNodesWhileItChanges() throws {
        var queue = OnDisconnectQueue()
        #expect(queue.trieIsUniquelyHeldWhileChanging() == nil, "a list has no trie")
        for n in 0..<200 {
            queue.set(["gone": .number(Double(n))], at: try Path("/od/\(n)"), credentials: who)
        }
        #expect(queue.isIndexed)
        #expect(queue.trieIsUniquelyHeldWhileChanging() == true)
        queue.cancel(try Path("/od/7"))
        _ = queue.journalled(changes: 1)
        #expect(queue.trieIsUniquelyHeldWhileChanging() == true)
        let copy = queue
        #expect(queue.trieIsUniquelyHeldWhileChanging() == false, "a copy shares the nodes, and the probe sees it")
        #expect(copy.count == queue.count)
    }

    @Test func aGrowingQueueKeepsItsOrderAcrossTheSwitch() throws {
        var queue = OnDisconnectQueue()
        var expected: [String] = []
        for index in 0..<(OnDisconnectQueue.maxListed * 3) {
            queue.set(.number(Double(index)), at: Path(validated: ["users", "u\(index % 50)", "p"]), credentials: who)
            expected.removeAll { $0 == "/users/u\(index % 50)/p" }
            expected.append("/users/u\(index % 50)/p")
            if index == OnDisconnectQueue.maxListed { #expect(queue.isIndexed) }
        }
        #expect(queue.ops.map(\.path.description) == expected)
        queue.cancel(try Path("/users/u7"))
        expected.removeAll { $0 == "/users/u7/p" }
        #expect(queue.ops.map(\.path.description) == expected)
        #expect(OnDisconnectQueue(restoring: queue.ops) == queue)
        #expect(queue.coverage(at: try Path("/users")).count == expected.count)
        #expect(queue.coverage(at: try Path("/users/u8")) == (1, OnDisconnectQueue.size(of: .number(8 + 50))))
    }
}
