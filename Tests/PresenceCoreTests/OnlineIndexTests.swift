import PresenceCore
import PresenceTesting
import Testing

/// The online-users index: updated by each write, read with `g` at its location.
@Suite struct OnlineIndexTests {
    func online(_ harness: EngineHarness, _ id: ConnectionID) -> String {
        harness.request(99, "g", #"{"p":"/online-users","q":{}}"#, from: id)
        return harness.take(id).last ?? ""
    }

    @Test func writesKeepTheIndexAndGetReadsIt() {
        let harness = EngineHarness()
        let id = harness.connect()
        harness.request(1, "p", #"{"p":"/users/alice/presence","d":{"online":true,"lastSeen":5}}"#, from: id)
        harness.request(2, "p", #"{"p":"/users/bob/presence","d":{"online":false,"lastSeen":6}}"#, from: id)
        harness.request(3, "p", #"{"p":"/users/carol/presence/online","d":true}"#, from: id)
        _ = harness.take(id)
        #expect(online(harness, id) == #"{"t":"d","d":{"r":99,"b":{"s":"ok","d":{"alice":{"lastSeen":5,"online":true},"carol":{"online":true}}}}}"#)
        // A multi-path update, a delete of a whole user, and a rewrite of the whole collection.
        harness.request(4, "m", #"{"p":"/users","d":{"alice/presence/online":false,"bob/presence/online":true}}"#, from: id)
        harness.request(5, "p", #"{"p":"/users/carol","d":null}"#, from: id)
        _ = harness.take(id)
        #expect(online(harness, id) == #"{"t":"d","d":{"r":99,"b":{"s":"ok","d":{"bob":{"lastSeen":6,"online":true}}}}}"#)
        harness.request(6, "p", #"{"p":"/users","d":{"dan":{"presence":{"online":true,"lastSeen":7}}}}"#, from: id)
        _ = harness.take(id)
        #expect(online(harness, id) == #"{"t":"d","d":{"r":99,"b":{"s":"ok","d":{"dan":{"lastSeen":7,"online":true}}}}}"#)
    }

    @Test func patternsAreValidated() throws {
        let custom = try OnlineIndexConfiguration(pattern: "status/$uid", field: "up", location: "/who")
        let status = try Path("/status"), who = try Path("/who")
        #expect(custom.collection == status && custom.node == .root && custom.location == who)
        #expect(throws: DataError.self) { try OnlineIndexConfiguration(pattern: "users/presence", field: "online", location: "x") }
        #expect(throws: DataError.self) { try OnlineIndexConfiguration(pattern: "users/$uid/$uid", field: "online", location: "x") }
    }
}
