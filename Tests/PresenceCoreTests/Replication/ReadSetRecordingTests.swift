import Testing
import PresenceCore

/// What each kind of read records, exactly: precision matters (every extra path costs aborts), and
/// a recorder that records too much would still pass the soundness check.
@Suite("Read-set recording")
struct ReadSetRecordingTests {
    static let alice: JSON = ["uid": "alice"]

    func rules(_ text: String) throws -> RuleSet { try RuleSet.load(text: text, source: "test.json") }

    func path(_ text: String) throws -> Path { try Path(text) }

    func shapes(_ paths: String...) throws -> ReadSet { ReadSet(shapes: try paths.map(path)) }

    /// The read set of a write rule at /p (`.write` there) for `writes` over `root`.
    func writeReads(_ rule: String, _ writes: [(String, JSON)], root: JSON = nil, auth: JSON? = alice,
                    extra: String = "") throws -> (Bool, ReadSet) {
        let set = try rules(#"{"rules":{"p":{".write":"# + JSONWriter.string(.string(rule)) + extra + "}}}")
        let resolved = try writes.map { (try path($0.0), try Node(json: $0.1)) }
        var readSet = ReadSet()
        let allowed = set.canWrite(resolved, root: try Node(json: root), auth: auth, now: 1000, recording: &readSet).allowed
        return (allowed, readSet)
    }

    func readReads(_ rule: String, at location: String = "/", root: JSON = nil, auth: JSON? = alice) throws -> (Bool, ReadSet) {
        let set = try rules(#"{"rules":{".read":"# + JSONWriter.string(.string(rule)) + "}}")
        var readSet = ReadSet()
        let allowed = set.canRead(try path(location), root: try Node(json: root), auth: auth, now: 1000, recording: &readSet).allowed
        return (allowed, readSet)
    }

    @Test func rulesThatReadNoDataRecordNothing() throws {
        let set = try rules(#"{"rules":{"users":{"$uid":{".write":"auth.uid == $uid && now > 5"}}}}"#)
        var readSet = ReadSet()
        let write = (try path("/users/alice"), Node(.bool(true)))
        #expect(set.canWrite([write], root: try Node(json: ["users": ["alice": 1]]), auth: Self.alice, now: 1000, recording: &readSet).allowed)
        #expect(readSet.isEmpty)
        #expect(try readReads("auth != null").1.isEmpty)
    }

    @Test func dataValAtTheRuleRecordsExactlyItsShape() throws {
        let (allowed, reads) = try writeReads("data.val() == null", [("/p", 1)])
        #expect(allowed)
        #expect(reads == (try shapes("/p")))
        // Written below the rule's location: still the shape of /p (the rule's `data`).
        #expect(try writeReads("data.val() == null", [("/p/q/r", 1)]).1 == (try shapes("/p")))
    }

    @Test func childChainsRecordTheirEndOnly() throws {
        #expect(try readReads("root.child('users').child(auth.uid).exists()").1 == (try shapes("/users/alice")))
        #expect(try readReads("root.child('a/b/c').val() == 1").1 == (try shapes("/a/b/c")))
        // With parent() the location is tracked, not guessed.
        #expect(try readReads("root.child('a').child('b').parent().child('c').isString()").1 == (try shapes("/a/c")))
        #expect(try readReads("data.hasChild('x/y')", at: "/p").1 == (try shapes("/x/y")))
        // A computed key: the key's own read, then the location it names.
        let computed = try readReads("root.child('names').child(root.child('current').val()).exists()",
                                     root: ["current": "bob", "names": ["bob": true]])
        #expect(computed == (true, try shapes("/current", "/names/bob")))
    }

    @Test func hasChildrenWithNamesReadsEachNameUntilOneIsMissing() throws {
        #expect(try readReads("root.hasChildren(['a', 'b'])", root: ["a": 1, "b": 2]) == (true, try shapes("/a", "/b")))
        #expect(try readReads("root.hasChildren(['a', 'b'])", root: ["b": 2]) == (false, try shapes("/a")))
        #expect(try readReads("root.hasChildren()", root: ["b": 2]) == (true, try shapes("/")))
    }

    @Test func emptyChildPathsReadNothing() throws {
        #expect(try readReads("!root.child('').exists() && !root.hasChild('')").1.isEmpty)
        // The error poisons the rule; nothing was read.
        #expect(try readReads("root.parent().exists()") == (false, ReadSet()))
    }

    @Test func newDataCoveredByTheWriteReadsNothingStored() throws {
        #expect(try writeReads("newData.child('x').val() == 1 && newData.hasChildren(['x'])", [("/p", ["x": 1])]) == (true, ReadSet()))
        // An update that writes /p/y only: /p/x still comes from storage.
        #expect(try writeReads("newData.child('x').val() == 1", [("/p/y", 2)], root: ["p": ["x": 1]]) == (true, try shapes("/p/x")))
        // A value written below /p makes /p a branch whatever is stored: nothing read.
        #expect(try writeReads("newData.exists() && newData.hasChildren() && !newData.isString() && newData.val() != null",
                               [("/p/y", 2)]) == (true, ReadSet()))
        // ... but its priority is the stored one.
        #expect(try writeReads("newData.getPriority() == null", [("/p/y", 2)]) == (true, try shapes("/p")))
        // Only deletes below /p: whether /p remains depends on the stored siblings.
        #expect(try writeReads("newData.exists()", [("/p/y", nil)], root: ["p": ["x": 1, "y": 2]])
                == (true, ReadSet(subtrees: [try path("/p")])))
    }

    @Test func validationOfAncestorsRecordsWhatDecidesWhetherItRuns() throws {
        let set = try rules(#"{"rules":{".write":true,"p":{".validate":"newData.hasChildren(['x'])","sub":{"$k":{}}}}}"#)
        var readSet = ReadSet()
        // A value below /p: /p exists after the write whatever is stored, so only /p/x is read.
        #expect(set.canWrite([(try path("/p/sub/k1"), Node(.number(1)))], root: .null, auth: nil, now: 0, recording: &readSet).allowed == false)
        #expect(readSet == (try shapes("/p/x")))
        // A delete below /p: whether /p still exists (and is validated) depends on all of it.
        readSet = ReadSet()
        let root = try Node(json: ["p": ["x": 1, "y": 2]])
        #expect(set.canWrite([(try path("/p/y"), .null)], root: root, auth: nil, now: 0, recording: &readSet).allowed)
        #expect(readSet == ReadSet(subtrees: [try path("/p")]))
    }

    @Test func thePresenceRulesReadNothingForAPresenceWrite() throws {
        let set = try rules(#"""
        {"rules":{"users":{"$userId":{"presence":{".read":"auth != null",".write":"auth != null && auth.uid == $userId",
         ".validate":"newData.hasChildren(['online', 'lastSeen'])","online":{".validate":"newData.isBoolean()"},
         "lastSeen":{".validate":"newData.isNumber() && newData.val() <= now"},"$other":{".validate":false}}}}}}
        """#)
        let value = try Node(json: ["online": true, "lastSeen": 1000])
        let root = try Node(json: ["users": ["alice": ["presence": ["online": false, "lastSeen": 1]], "bob": 1]])
        var readSet = ReadSet()
        #expect(set.canWrite([(try path("/users/alice/presence"), value)], root: root, auth: Self.alice, now: 1000, recording: &readSet).allowed)
        #expect(readSet.isEmpty)
        // An update of one field: the other field comes from storage.
        #expect(set.canWrite([(try path("/users/alice/presence/online"), Node(.bool(true)))], root: root, auth: Self.alice,
                             now: 1000, recording: &readSet).allowed)
        #expect(readSet == (try shapes("/users/alice/presence/lastSeen")))
    }

    @Test func priorityReadsAndWrites() throws {
        #expect(try readReads("root.child('a').getPriority() == 5", root: ["a": [".value": 1, ".priority": 5]]) == (true, try shapes("/a")))
        // `child('.priority')` is the priority of the node above it.
        #expect(try readReads("root.child('a/.priority').val() == 5").1 == (try shapes("/a")))
        // A `.priority` write copies the stored value: its subtree is read.
        #expect(try writeReads("true", [("/p/q/.priority", 3)]).1 == ReadSet(subtrees: [try path("/p/q")]))
    }

    @Test func readsTooDeepOrWithTooLongKeysRecordTheSubtreeAbove() throws {
        let long = String(repeating: "k", count: 800)
        let token: JSON = ["uid": "alice", "long": .string(long)]
        #expect(try readReads("root.child('a').child(auth.long).exists()", auth: token).1 == ReadSet(subtrees: [try path("/a")]))
        let deep = (0..<70).map { "k\($0)" }.joined(separator: "/")
        let reads = try readReads("root.child('\(deep)').exists()").1
        #expect(reads.subtrees.count == 1 && reads.subtrees[0].count == 64 && reads.shapes.isEmpty)
    }

    @Test func policiesAddTheRulesAndUnknownPoliciesReadEverything() throws {
        struct Custom: AccessPolicy {
            func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool { true }
            func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool { true }
        }
        let rules: any AccessPolicy = try self.rules(#"{"rules":{".write":"root.child('x').exists()"}}"#)
        let writes = [(try path("/a"), Node(.number(1)))]
        let root = try Node(json: ["x": 1])
        var readSet = ReadSet()
        #expect(rules.allowsWrite(writes, root: root, auth: nil, now: 0, recording: &readSet))
        #expect(readSet == ReadSet(shapes: [VirtualPaths.rules, try path("/x")]))
        readSet = ReadSet()
        let open: any AccessPolicy = OpenAccessPolicy()
        #expect(open.allowsWrite(writes, root: root, auth: nil, now: 0, recording: &readSet))
        #expect(readSet == ReadSet(shapes: [VirtualPaths.rules]))
        readSet = ReadSet()
        let custom: any AccessPolicy = Custom()
        #expect(custom.allowsWrite(writes, root: root, auth: nil, now: 0, recording: &readSet))
        #expect(readSet == ReadSet(subtrees: [.root], shapes: [VirtualPaths.rules]))
    }

    @Test func serverValuesAndLimitTiersRecordTheirReads() throws {
        var readSet = ReadSet()
        let root = try Node(json: ["counter": 5, "plans": ["alice": "pro"]])
        let resolved = try ServerValues.resolve(
            ["n": [".sv": ["increment": 2]], "t": [".sv": "timestamp"]], at: try path("/stats"), now: 7,
            current: { root.node(at: $0) }, recording: &readSet)
        #expect(resolved == ["n": 2, "t": 7])
        #expect(readSet == (try shapes("/stats/n")))

        let limits = try LimitSet.load(text: #"""
        {"limits":{"refresh":{"location":"online-users","tiers":[
          {"name":"pro","when":"root.child('plans').child(auth.uid).val() == 'pro'","unlimited":true},
          {"name":"free","when":"auth != null","limit":2}]}}}
        """#, source: "limits.json")
        readSet = ReadSet()
        #expect(limits.limits[0].tier(auth: Self.alice, root: root, now: 0, recording: &readSet)?.name == "pro")
        #expect(readSet == (try shapes("/plans/alice")))
        #expect(LimitUsageKey(namespace: "demo", limit: "refresh", uid: "alice").versionPath == Path(validated: [".limits", "refresh", "alice"]))
    }

    @Test func readSetsStayCompact() throws {
        var readSet = ReadSet(shapes: [try path("/a/b"), try path("/a"), try path("/c")])
        readSet.insert(try path("/a/b/c"), .subtree)
        #expect(readSet.shapes == [try path("/a"), try path("/a/b"), try path("/c")])
        readSet.insert(try path("/a"), .subtree)
        #expect(readSet == ReadSet(subtrees: [try path("/a")], shapes: [try path("/c")]))
        readSet.insert(try path("/a/z"), .shape)
        readSet.insert(try path("/a/z"), .subtree)
        #expect(readSet.count == 2)
        readSet.insert(.root, .subtree)
        #expect(readSet == ReadSet.wholeTree)
        // Virtual paths are their own roots: the data root does not cover them.
        readSet.insert(VirtualPaths.rules, .shape)
        #expect(readSet.count == 2)
    }

    @Test func conflictsFollowTheReadKinds() throws {
        let reads = ReadSet(subtrees: [try path("/s")], shapes: [try path("/n/m"), VirtualPaths.rules])
        func conflicts(_ text: String, reshapedFrom: Int) throws -> Bool {
            reads.conflicts(with: WrittenPath(path: try path(text), reshapedFrom: reshapedFrom))
        }
        #expect(try conflicts("/s/deep/er", reshapedFrom: 3))    // below a subtree
        #expect(try conflicts("/", reshapedFrom: 0))             // above
        #expect(try !conflicts("/t", reshapedFrom: 0))           // beside
        #expect(try conflicts("/n/m", reshapedFrom: 2))          // at a shape
        #expect(try conflicts("/n", reshapedFrom: 1))            // above a shape
        #expect(try !conflicts("/n/m/k", reshapedFrom: 3))       // below a shape, not reshaping it
        #expect(try conflicts("/n/m/k", reshapedFrom: 2))        // below a shape, reshaping it
        #expect(try !conflicts("/n/m/k/j", reshapedFrom: 3))     // reshaping only what is below it
        #expect(reads.conflicts(with: WrittenPath(VirtualPaths.rules)))
        #expect(!ReadSet(shapes: [VirtualPaths.rules]).conflicts(with: WrittenPath(.root)))
        #expect(!ReadSet.wholeTree.conflicts(with: WrittenPath(VirtualPaths.limitUsage(limit: "l", uid: "u"))))
    }
}
