import Testing
import PresenceCore
import PresenceTesting

@Suite("Log entries")
struct LogEntryTests {
    static func randomEntry(_ random: inout SeededRandom) -> LogEntry {
        let keys = ["a", "b", "users", "100%", "-Nx9", "é"]
        func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }
        func path(_ count: Int) -> Path { Path(validated: (0..<count).map { _ in pick(keys) }) }
        let kinds: [LogEntry.Kind] = [.write, .runHeld(session: "s-\(random.next() % 100)"), .setRules(document: nil),
                                      .setRules(document: #"{"rules":{".read":"auth != null"}} // "é" \n"#), .limitUsage]
        var readSet = ReadSet()
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            readSet.insert(path(Int.random(in: 0...4, using: &random)), Bool.random(using: &random) ? .shape : .subtree)
        }
        readSet.insert(VirtualPaths.limitUsage(limit: "refresh", uid: pick(["a/b", "50%", "", "alice"])), .shape)
        var writes: [LogEntry.Write] = []
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            let target = Int.random(in: 0..<6, using: &random) == 0 ? path(2).child(".priority") : path(Int.random(in: 0...3, using: &random))
            let value: Node = target.last == ".priority" ? Node(.number(4))
                : ReadSetHarness.value(keys: ["a", "b", "c"], depth: 0, using: &random)
            writes.append(LogEntry.Write(path: target, value: value))
        }
        let usage: [LimitUsageChange] = Bool.random(using: &random) ? [] : [
            LimitUsageChange(limit: "refresh", uid: "alice", usage: LimitUsage(count: 2, cooldownStartedAt: 1_800_000_000_123)),
            LimitUsageChange(limit: "post", uid: "b/o%b", usage: nil),
            LimitUsageChange(limit: "post", uid: "carol", usage: LimitUsage(count: 1)),
        ]
        return LogEntry(
            namespace: pick(["demo", "my-app-default-rtdb"]), kind: pick(kinds),
            base: pick([0, 41, 1 << 53, (1 << 53) + 1, UInt64.max]), readSet: readSet, writes: writes, limitUsage: usage,
            identity: pick([nil, "uid:alice", "anonymous", "admin"]),
            origin: Bool.random(using: &random) ? nil : LogEntry.Origin(node: "10.0.0.5:9001#x7k", connection: UInt64.max, request: 17),
            session: pick([nil, "a#1-s3", "sé\"ssion"]),
            onAbort: Bool.random(using: &random) ? .repropose : .dataStale)
    }

    typealias LimitUsageChange = LogEntry.LimitUsageChange

    @Test func roundTrips() throws {
        var random = SeededRandom(seed: 5)
        for _ in 0..<500 {
            let entry = Self.randomEntry(&random)
            let bytes = try entry.encoded()
            #expect(try LogEntry(decoding: bytes) == entry, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test func aPresenceWriteIsSmallAndReadable() throws {
        let entry = LogEntry(
            namespace: "demo", kind: .write, base: 41,
            readSet: ReadSet(shapes: [VirtualPaths.rules, try Path("/banned/alice")]),
            writes: [LogEntry.Write(path: try Path("/users/alice/presence"),
                                    value: try Node(json: ["online": true, "lastSeen": 1_800_000_000_000]))],
            identity: "uid:alice", origin: LogEntry.Origin(node: "a#x", connection: 3, request: 17), onAbort: .dataStale)
        let text = String(decoding: try entry.encoded(), as: UTF8.self)
        #expect(text == #"{"v":1,"ns":"demo","k":"w","b":41,"s":["/.rules","/banned/alice"],"# +
                #""w":[["/users/alice/presence",{"lastSeen":1800000000000,"online":true}]],"id":"uid:alice","o":["a#x",3,17],"a":"stale"}"#)
        let held = LogEntry(namespace: "demo", kind: .runHeld(session: "s1"), base: 7,
                            writes: [LogEntry.Write(path: try Path("/users/alice/presence/online"), value: .null)])
        #expect(String(decoding: try held.encoded(), as: UTF8.self)
                == #"{"v":1,"ns":"demo","k":"h","sid":"s1","b":7,"w":[["/users/alice/presence/online",null]]}"#)
    }

    @Test func virtualWritesNameRulesAndLimitUsage() {
        let entry = LogEntry(namespace: "demo", kind: .setRules(document: "{}"), base: 1,
                             limitUsage: [LogEntry.LimitUsageChange(limit: "l", uid: "u", usage: nil)])
        #expect(entry.virtualWrites == [WrittenPath(VirtualPaths.rules), WrittenPath(VirtualPaths.limitUsage(limit: "l", uid: "u"))])
    }

    @Test func refusesToEncodeNonFiniteNumbers() throws {
        let path = try Path("/n")
        for value in [Node(.number(.infinity)), Node.branch(["x": Node(.number(.nan))], priority: nil),
                      Node.leaf(.string("s"), priority: .number(-.infinity))] {
            let entry = LogEntry(namespace: "demo", kind: .write, base: 0, writes: [LogEntry.Write(path: path, value: value)])
            #expect(throws: LogEntry.EncodingError.nonFiniteNumber(path: path)) { try entry.encoded() }
        }
    }

    @Test func aNewerFormatIsNamedNotSkipped() {
        #expect(throws: LogEntry.DecodingError.unsupportedVersion(2)) {
            try LogEntry(decoding: Array(#"{"v":2,"ns":"demo","k":"w","b":1}"#.utf8))
        }
    }

    @Test(arguments: [
        "", "null", "[]", "{}", #"{"v":1}"#, #"{"v":"1","ns":"d","k":"w","b":1}"#, #"{"v":1.5,"ns":"d","k":"w","b":1}"#,
        #"{"v":1e300,"ns":"d","k":"w","b":1}"#, #"{"v":1,"ns":5,"k":"w","b":1}"#, #"{"v":1,"ns":"d","k":"x","b":1}"#,
        #"{"v":1,"ns":"d","k":"h","b":1}"#, #"{"v":1,"ns":"d","k":"rules","b":1}"#, #"{"v":1,"ns":"d","k":"rules","doc":3,"b":1}"#,
        #"{"v":1,"ns":"d","k":"w"}"#, #"{"v":1,"ns":"d","k":"w","b":-1}"#, #"{"v":1,"ns":"d","k":"w","b":1.5}"#,
        #"{"v":1,"ns":"d","k":"w","b":1e300}"#, #"{"v":1,"ns":"d","k":"w","b":"18446744073709551616"}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"r":"/a"}"#, #"{"v":1,"ns":"d","k":"w","b":1,"r":[1]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"s":["a"]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"s":["/a%2"]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"s":["/a%zz"]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/a"]]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/a.b",1]]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/a//b",1]]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/.priority/a",1]]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/a",{".sv":"timestamp"}]]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"w":[["/a",{"b.c":1}]]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"w":{"/a":1}}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"l":[["l","u"]]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"l":[["l","u",{"c":-1}]]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"l":[["l","u",{"c":1,"t":"x"}]]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"id":7}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"o":["n",1]}"#, #"{"v":1,"ns":"d","k":"w","b":1,"o":["n",-1,2]}"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"a":"later"}"#, #"{"v":1,"ns":"d","k":"w","b":1"#,
        #"{"v":1,"ns":"d","k":"w","b":1,"s":["/"# + String(repeating: "k/", count: 70) + #"k"]}"#,
    ])
    func refusesMalformedEntries(_ text: String) {
        #expect(throws: LogEntry.DecodingError.self) { try LogEntry(decoding: Array(text.utf8)) }
    }

    @Test func garbageNeverTraps() throws {
        var random = SeededRandom(seed: 11)
        let valid = try Self.randomEntry(&random).encoded()
        // Every prefix, and every single-byte change, either decodes to something that encodes
        // again or fails with a DecodingError.
        for length in 0..<valid.count {
            #expect(throws: LogEntry.DecodingError.self) { try LogEntry(decoding: Array(valid[..<length])) }
        }
        for index in valid.indices {
            for byte: UInt8 in [0, 0x22, 0x2F, 0x25, 0x7B, 0x5D, 0x31, 0xFF, 0xC3] {
                var bytes = valid
                bytes[index] = byte
                if let entry = try? LogEntry(decoding: bytes) { _ = try? entry.encoded() }
            }
        }
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0..<64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(throws: LogEntry.DecodingError.self) { try LogEntry(decoding: bytes) }
        }
    }
}
