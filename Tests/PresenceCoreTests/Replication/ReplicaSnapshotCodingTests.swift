import Testing
import PresenceCore
import PresenceTesting

@Suite("Replica snapshot bytes")
struct ReplicaSnapshotCodingTests {
    static func randomSnapshot(_ random: inout SeededRandom, namespace: String = "demo", rev: UInt64 = 812) -> ReplicaSnapshot {
        let keys = ["a", "b", "users", "100%", "-Nx9", "é", "x y"]
        func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }
        var tree = Node.null
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            let path = Path(validated: (0..<Int.random(in: 1...4, using: &random)).map { _ in pick(keys) })
            tree.set(ReadSetHarness.value(keys: ["a", "b", "c"], depth: 0, using: &random), at: path)
        }
        if Bool.random(using: &random) { tree.set(Node(.number(4)), at: Path(validated: ["a", ".priority"])) }
        var usage: [LimitUsageKey: LimitUsage] = [:]
        for uid in ["alice", "b/o%b", ""] where Bool.random(using: &random) {
            usage[LimitUsageKey(namespace: namespace, limit: "refresh", uid: uid)] =
                LimitUsage(count: Int.random(in: 0...9, using: &random), cooldownStartedAt: pick([nil, 1_800_000_000_123]))
        }
        var history: [(rev: UInt64, writes: [WrittenPath])] = []
        var at = rev > 64 ? rev - 64 : 0
        while at < rev {
            at += UInt64.random(in: 1...9, using: &random)
            guard at <= rev else { break }
            let writes = (0..<Int.random(in: 1...3, using: &random)).map { _ -> WrittenPath in
                let path = Int.random(in: 0..<5, using: &random) == 0
                    ? VirtualPaths.limitUsage(limit: "refresh", uid: pick(["a/b", "50%", "alice"]))
                    : Path(validated: (0..<Int.random(in: 0...3, using: &random)).map { _ in pick(keys) })
                return WrittenPath(path: path, reshapedFrom: Int.random(in: 0...path.count, using: &random))
            }
            history.append((at, writes))
        }
        return ReplicaSnapshot(namespace: namespace, rev: rev, tree: tree,
                               rules: pick([nil, #"{"rules":{".read":"auth != null"}} // "é" \n"#]),
                               limitUsage: usage, history: history)
    }

    static func dictionary(_ chunks: [(id: String, data: [UInt8])]) -> [String: [UInt8]] {
        Dictionary(uniqueKeysWithValues: chunks.map { ($0.id, $0.data) })
    }

    static func expectEqual(_ a: ReplicaSnapshot, _ b: ReplicaSnapshot) {
        #expect(a.namespace == b.namespace && a.rev == b.rev)
        #expect(a.tree == b.tree)
        #expect(a.rules == b.rules)
        #expect(a.limitUsage == b.limitUsage)
        #expect(a.history.map(\.rev) == b.history.map(\.rev))
        #expect(a.history.map(\.writes) == b.history.map(\.writes))
    }

    /// Chunks around a body of our choosing, with a header that matches it (length and checksum):
    /// what a buggy or hostile writer could store.
    static func chunks(body: String, namespace: String = "demo", rev: UInt64 = 812, version: Int = 1) -> [String: [UInt8]] {
        let bytes = Array(body.utf8)
        let header = #"{"v":\#(version),"ns":"\#(namespace)","rev":\#(rev),"token":"t","n":1,"len":\#(bytes.count),"crc":\#(CRC32.checksum(bytes))}"#
        return ["h": Array(header.utf8), "t:0": bytes]
    }

    @Test(arguments: 1...60 as ClosedRange<UInt64>)
    func aSnapshotReadBackIsTheSnapshotWritten(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let snapshot = Self.randomSnapshot(&random, rev: UInt64.random(in: 0...200, using: &random) + (seed % 7 == 0 ? (1 << 53) : 0))
        let chunkBytes = [1, 7, 64, ReplicaSnapshot.defaultChunkBytes][Int(seed % 4)]
        let chunks = try snapshot.encodedChunks(token: "tok\(seed)", chunkBytes: chunkBytes)
        #expect(chunks.allSatisfy { !$0.id.hasPrefix(".") && $0.data.count <= max(chunkBytes, 200) || $0.id == "h" })
        var stored = Self.dictionary(chunks)
        stored["other:0"] = Array("left by a writer that died".utf8) // ignored: another token
        let decoded = try ReplicaSnapshot(decodingChunks: stored, namespace: snapshot.namespace, rev: snapshot.rev)
        Self.expectEqual(decoded, snapshot)
        // and the window it rebuilds is the one it came from
        let window = try VersionWindow(capacity: 64, head: snapshot.rev, history: decoded.history)
        #expect(window.history.map(\.rev) == snapshot.history.filter { $0.rev > window.floor }.map(\.rev))
    }

    @Test func anEmptyNamespaceAtRevisionZeroRoundTrips() throws {
        let snapshot = ReplicaSnapshot(namespace: "n", rev: 0, tree: .null, rules: nil, limitUsage: [:], history: [])
        let chunks = try snapshot.encodedChunks(token: "a")
        #expect(chunks.count == 2)
        Self.expectEqual(try ReplicaSnapshot(decodingChunks: Self.dictionary(chunks), namespace: "n", rev: 0), snapshot)
    }

    @Test func aBadTokenOrANonFiniteNumberIsNotEncoded() {
        let snapshot = ReplicaSnapshot(namespace: "n", rev: 1, tree: .null, rules: nil, limitUsage: [:], history: [])
        for token in ["", "a:b", ".h", String(repeating: "x", count: 65)] {
            #expect(throws: ReplicaSnapshot.EncodingError.invalidToken(token)) { try snapshot.encodedChunks(token: token) }
        }
        var bad = snapshot
        bad.tree = .leaf(.number(.infinity), priority: nil)
        #expect(throws: ReplicaSnapshot.EncodingError.nonFiniteNumber) { try bad.encodedChunks(token: "a") }
    }

    /// Every byte of every chunk changed, every chunk cut short or missing: refused with a reason,
    /// never loaded, never a trap.
    @Test func damagedChunksAreRefused() throws {
        var random = SeededRandom(seed: 7)
        let snapshot = Self.randomSnapshot(&random)
        let stored = Self.dictionary(try snapshot.encodedChunks(token: "tok", chunkBytes: 50))
        var refusals = 0
        for (id, data) in stored {
            for index in data.indices {
                var damaged = stored
                damaged[id]![index] ^= 0x5A
                #expect(throws: ReplicaSnapshot.DecodingError.self) {
                    try ReplicaSnapshot(decodingChunks: damaged, namespace: "demo", rev: 812)
                }
                refusals += 1
            }
            var cut = stored
            cut[id] = Array(data.dropLast())
            #expect(throws: ReplicaSnapshot.DecodingError.self) { try ReplicaSnapshot(decodingChunks: cut, namespace: "demo", rev: 812) }
            var missing = stored
            missing[id] = nil
            #expect(throws: ReplicaSnapshot.DecodingError.self) { try ReplicaSnapshot(decodingChunks: missing, namespace: "demo", rev: 812) }
        }
        #expect(refusals > 500)
        let body = stored.filter { $0.key != "h" }.keys.sorted().first!
        var withoutBody = stored
        withoutBody[body] = nil
        if case .incomplete? = Self.refusal(withoutBody) {} else { Issue.record("a missing chunk is incomplete") }
        var withoutHeader = stored
        withoutHeader["h"] = nil
        #expect(Self.refusal(withoutHeader) == .incomplete("no header chunk"))
        #expect(Self.refusal([:]) == .incomplete("no header chunk"))
    }

    static func refusal(_ chunks: [String: [UInt8]], namespace: String = "demo", rev: UInt64 = 812) -> ReplicaSnapshot.DecodingError? {
        do {
            _ = try ReplicaSnapshot(decodingChunks: chunks, namespace: namespace, rev: rev)
            return nil
        } catch {
            return error
        }
    }

    @Test func aSnapshotOfAnotherNamespaceRevisionOrVersionIsRefused() throws {
        let snapshot = ReplicaSnapshot(namespace: "demo", rev: 9, tree: Node(.bool(true)), rules: nil, limitUsage: [:], history: [])
        let stored = Self.dictionary(try snapshot.encodedChunks(token: "a"))
        #expect(Self.refusal(stored, namespace: "other", rev: 9) == .invalid("the header is for another namespace"))
        #expect(Self.refusal(stored, namespace: "demo", rev: 10) == .invalid("the header is for another revision than 10"))
        #expect(Self.refusal(Self.chunks(body: #"{"v":2}"#, version: 2)) == .unsupportedVersion(2))
        #expect(Self.refusal(Self.chunks(body: #"{"v":2,"ns":"demo","rev":812,"tree":null}"#)) == .unsupportedVersion(2))
        // a header that matches, over a body written for something else
        #expect(Self.refusal(Self.chunks(body: #"{"v":1,"ns":"x","rev":812,"tree":null}"#)) == .invalid("the body is for another namespace"))
        #expect(Self.refusal(Self.chunks(body: #"{"v":1,"ns":"demo","rev":811,"tree":null}"#)) == .invalid("the body is for another revision than 812"))
    }

    /// Bodies whose length and checksum are right but whose content is not a snapshot.
    @Test(arguments: [
        "", "null", "[]", #"{"ns":"demo","rev":812}"#, #"{"v":1,"ns":"demo","rev":812}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":{"a":{".sv":"timestamp"}}}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":{"a b/c":1}}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"rules":5}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"l":[["refresh","alice",null]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"l":[["refresh","alice",{"c":1}],["refresh","alice",{"c":2}]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"l":[["refresh","alice",{"c":-1}]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":[[813,[["/a",0]]]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":[[5,[["/a",0]]],[5,[["/b",0]]]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":[[5,[["/a",2]]]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":[[5,[["a",0]]]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":[[5,[["/a",0.5]]]]}"#,
        #"{"v":1,"ns":"demo","rev":812,"tree":null,"hist":{"5":[]}}"#,
        #"{"v":1e999,"ns":"demo","rev":812,"tree":null}"#,
    ])
    func garbageWithAValidChecksumIsRefused(body: String) {
        guard case .invalid? = Self.refusal(Self.chunks(body: body)) else {
            Issue.record("\(body) was not refused as invalid: \(String(describing: Self.refusal(Self.chunks(body: body))))")
            return
        }
    }

    @Test func hostileHeadersAreRefused() {
        let body = Array(#"{"v":1,"ns":"demo","rev":812,"tree":null}"#.utf8)
        let crc = CRC32.checksum(body)
        func header(_ text: String) -> [String: [UInt8]] { ["h": Array(text.utf8), "t:0": body] }
        let headers = [
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":1e300,"len":\#(body.count),"crc":\#(crc)}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":0,"len":\#(body.count),"crc":\#(crc)}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":1,"len":-1,"crc":\#(crc)}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":1,"len":3,"crc":\#(crc)}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":1,"len":\#(body.count),"crc":4294967296}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":"t","n":1,"len":\#(body.count)}"#,
            #"{"v":1,"ns":"demo","rev":812,"token":7,"n":1,"len":\#(body.count),"crc":\#(crc)}"#,
            #"{"v":1,"ns":"demo","rev":"812x","token":"t","n":1,"len":\#(body.count),"crc":\#(crc)}"#,
            "not json", "", "[1]", "{\"v\":1",
        ]
        for text in headers {
            #expect(Self.refusal(header(text)) != nil, "\(text)")
        }
        #expect(Self.refusal(header(#"{"v":1,"ns":"demo","rev":812,"token":"t","n":1,"len":\#(body.count),"crc":\#(crc)}"#)) == nil)
        var random = SeededRandom(seed: 3)
        for _ in 0..<500 {
            let noise = (0..<Int.random(in: 0...80, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(Self.refusal(["h": noise, "t:0": noise]) != nil)
        }
    }
}
