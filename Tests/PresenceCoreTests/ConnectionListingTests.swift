import PresenceTesting
import Testing
@testable import PresenceCore

/// What the operators' connection listing reads from the engine: the ids that match a uid and a
/// namespace (REST streams excluded) without a snapshot each, and the snapshot of one id.
@Suite struct ConnectionListingTests {
    /// An unsigned emulator token for uid alice (EngineTests uses the same).
    let alice = "eyJhbGciOiJub25lIiwidHlwZSI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsImZpcmViYXNlIjp7InNpZ25faW5fcHJvdmlkZXIiOiJjdXN0b20ifX0."

    @Test func idsMatchTheFiltersAndLeaveStreamsOut() throws {
        let harness = EngineHarness()
        let aliceInTest = harness.connect(namespace: "test")
        harness.request(1, "auth", "{\"cred\":\"\(alice)\"}", from: aliceInTest)
        let anonymousInTest = harness.connect(namespace: "test")
        let anonymousInOther = harness.connect(namespace: "other")
        let stream = ConnectionID(1000)
        #expect((try? harness.engine.openStream(stream, path: Path("/x"), namespace: "test", credentials: .admin, query: .default,
                                                now: 0).get()) != nil)
        func ids(_ uid: String?, _ namespace: String?) -> Set<ConnectionID> {
            Set(harness.engine.connectionIDs(uid: uid, namespace: namespace))
        }
        #expect(ids(nil, nil) == [aliceInTest, anonymousInTest, anonymousInOther])
        #expect(ids(nil, "test") == [aliceInTest, anonymousInTest])
        #expect(ids("alice", nil) == [aliceInTest] && ids("alice", "other").isEmpty)
        #expect(harness.engine.connectionSnapshots().count == 4, "the stream is an engine connection too")
        let snapshot = try #require(harness.engine.connectionSnapshot(aliceInTest))
        #expect(snapshot.uid == "alice" && snapshot.namespace == "test" && snapshot.auth == "user" && !snapshot.isStream)
        #expect(harness.engine.connectionSnapshot(stream)?.isStream == true)
        harness.disconnect(anonymousInOther)
        #expect(harness.engine.connectionSnapshot(anonymousInOther) == nil && ids(nil, "other").isEmpty)
    }
}
