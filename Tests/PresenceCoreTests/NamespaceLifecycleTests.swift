import PresenceTesting
import Testing
@testable import PresenceCore

/// Namespaces are released when nothing keeps them, and only so many may hold data at once.
@Suite struct NamespaceLifecycleTests {
    @Test func connectionsNamingNewNamespacesLeaveNothingBehind() {
        let harness = EngineHarness()
        for index in 0..<2_000 {
            let id = harness.connect(namespace: "ns\(index)")
            harness.request(1, "q", #"{"p":"/x","h":""}"#, from: id)
            harness.request(2, "g", #"{"p":"/y","q":{}}"#, from: id)
            harness.disconnect(id)
        }
        #expect(harness.engine.namespaceNames.isEmpty)
        // REST reads and rules lookups of made-up namespaces create nothing either.
        _ = harness.engine.read(.root, namespace: "made-up", credentials: .admin, now: 0)
        _ = harness.engine.rules(namespace: "made-up")
        _ = harness.engine.limitStatus("x", namespace: "made-up", credentials: .admin, now: 0)
        #expect(harness.engine.namespaceNames.isEmpty)
    }

    @Test func whatKeepsANamespaceInMemory() throws {
        let harness = EngineHarness(graceMilliseconds: 3_000)
        // Data keeps it; deleting the data (and leaving) releases it.
        let writer = harness.connect(namespace: "data")
        harness.request(1, "p", #"{"p":"/a","d":1}"#, from: writer)
        harness.disconnect(writer)
        #expect(harness.engine.namespaceNames == ["data"])
        let again = harness.connect(namespace: "data")
        harness.request(1, "p", #"{"p":"/a","d":null}"#, from: again)
        #expect(harness.engine.namespaceNames == ["data"], "still connected")
        harness.disconnect(again)
        #expect(harness.engine.namespaceNames.isEmpty)
        // Held ops keep it until they run (and then their data does).
        let leaving = harness.connect(namespace: "held")
        harness.request(1, "o", #"{"p":"/status","d":"offline"}"#, from: leaving)
        harness.disconnect(leaving)
        #expect(harness.engine.namespaceNames == ["held"])
        harness.advance(byMilliseconds: 3_000)
        #expect(harness.engine.value(at: try Path("/status"), namespace: "held") == Node(.string("offline")))
        // Held ops cancelled by a returning client: released with them.
        let gone = harness.connect(namespace: "cancelled")
        harness.request(1, "o", #"{"p":"/s","d":1}"#, from: gone)
        let session = try #require(harness.sessionIDs[gone])
        harness.disconnect(gone)
        let back = harness.connect(namespace: "cancelled", lastSession: session)
        harness.disconnect(back)
        #expect(!harness.engine.namespaceNames.contains("cancelled"))
        // A REST write of nothing to a new namespace leaves nothing.
        _ = harness.engine.write(.set(.null), at: try Path("/x"), namespace: "rest", credentials: .admin, now: 0)
        #expect(!harness.engine.namespaceNames.contains("rest"))
    }

    @Test func onlySoManyNamespacesMayHoldData() throws {
        let harness = EngineHarness(limits: EngineLimits(maxNamespaces: 2))
        let user = Credentials.user(auth: ["uid": "u"], expiresAt: nil)
        for name in ["one", "two"] {
            guard case .success = harness.engine.write(.set(1), at: try Path("/a"), namespace: name, credentials: user, now: 0) else {
                Issue.record("a write under the cap was refused")
                return
            }
        }
        #expect(harness.engine.namespacesWithData == 2)
        // A third namespace: refused over REST and the wire, for writes and onDisconnect ops.
        guard case .failure(.tooBig(let message)) = harness.engine.write(.set(1), at: try Path("/a"), namespace: "three", credentials: user, now: 0) else {
            Issue.record("a write past the cap was accepted")
            return
        }
        #expect(message.contains("--max-namespaces"))
        let id = harness.connect(namespace: "three")
        harness.request(1, "p", #"{"p":"/a","d":1}"#, from: id)
        harness.request(2, "o", #"{"p":"/a","d":1}"#, from: id)
        #expect(harness.take(id).filter { $0.contains(#""s":"too_big""#) }.count == 2)
        // Reads and listens there are fine; namespaces already holding data still take writes.
        harness.request(3, "q", #"{"p":"/a","h":""}"#, from: id)
        #expect(harness.take(id).last?.contains(#""s":"ok""#) == true)
        guard case .success = harness.engine.write(.set(2), at: try Path("/b"), namespace: "one", credentials: user, now: 0) else {
            Issue.record("a namespace with data was refused")
            return
        }
        #expect(harness.engine.takeNotices().count == 1, "logged once while at the cap")
        // Emptying one frees its place.
        _ = harness.engine.write(.set(.null), at: .root, namespace: "two", credentials: user, now: 0)
        harness.request(4, "p", #"{"p":"/a","d":1}"#, from: id)
        #expect(harness.take(id).last == #"{"t":"d","d":{"r":4,"b":{"s":"ok","d":""}}}"#)
        // The admin is not limited.
        guard case .success = harness.engine.write(.set(1), at: try Path("/a"), namespace: "four", credentials: .admin, now: 0) else {
            Issue.record("the admin was refused")
            return
        }
    }
}

/// While the shell's storage cannot commit (a full disk), writes are refused with `unavailable`
/// and nothing is applied; reads go on; once storage is back, writes are accepted again.
@Suite struct StorageUnavailableTests {
    @Test func writesAreRefusedWhileStorageIsDown() throws {
        let harness = EngineHarness()
        harness.engine.enableJournal()
        let id = harness.connect()
        harness.request(1, "p", #"{"p":"/a","d":1}"#, from: id)
        _ = harness.take(id)
        _ = harness.engine.takeJournal()
        harness.engine.setStorageUnavailable("disk full")
        harness.request(2, "p", #"{"p":"/a","d":2}"#, from: id)
        harness.request(3, "m", #"{"p":"/","d":{"b":1}}"#, from: id)
        harness.request(4, "o", #"{"p":"/a","d":0}"#, from: id)
        let refused = harness.take(id)
        #expect(refused.count == 3 && refused.allSatisfy { $0.contains(#""s":"unavailable""#) && $0.contains("disk full") })
        guard case .failure(.unavailable) = harness.engine.write(.set(3), at: try Path("/a"), namespace: "test", credentials: .admin, now: 0) else {
            Issue.record("a REST write was accepted while storage was down")
            return
        }
        #expect(harness.engine.takeJournal() == nil, "nothing applied, nothing to store")
        harness.request(5, "g", #"{"p":"/a","q":{}}"#, from: id)
        #expect(harness.take(id).last == #"{"t":"d","d":{"r":5,"b":{"s":"ok","d":1}}}"#)
        harness.engine.setStorageUnavailable(nil)
        harness.request(6, "p", #"{"p":"/a","d":2}"#, from: id)
        #expect(harness.take(id).last?.contains(#""s":"ok""#) == true)
    }
}
