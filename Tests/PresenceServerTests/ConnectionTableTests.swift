@testable import PresenceServer
import Testing

@Suite struct ConnectionTableTests {
    func connection(_ table: ConnectionTable, remote: String) -> ShellConnection {
        ShellConnection(id: table.nextID(), wsi: OpaquePointer(bitPattern: 0x1000)!, remote: remote, userAgent: nil, now: 0,
                        maxMessageBytes: 1_000)
    }

    @Test func idsAreNeverReusedAndAStaleIdMisses() {
        let table = ConnectionTable()
        let first = connection(table, remote: "10.0.0.1")
        table.insert(first)
        #expect(table[first.id] === first)
        table.remove(first.id)
        let second = connection(table, remote: "10.0.0.1")
        table.insert(second)
        #expect(second.id != first.id)
        #expect(table[first.id] == nil)
        #expect(table.remove(first.id) == nil)
    }

    @Test func connectionsAreCountedPerAddress() {
        let table = ConnectionTable()
        let a1 = connection(table, remote: "10.0.0.1"), a2 = connection(table, remote: "10.0.0.1")
        let b = connection(table, remote: "10.0.0.2")
        for each in [a1, a2, b] { table.insert(each) }
        #expect(table.count == 3 && table.liveConnections(from: "10.0.0.1") == 2 && table.liveConnections(from: "10.0.0.2") == 1)
        table.remove(a1.id)
        table.remove(b.id)
        #expect(table.liveConnections(from: "10.0.0.1") == 1 && table.liveConnections(from: "10.0.0.2") == 0)
    }

    @Test func userAgentsAreSharedAndTheCacheIsBounded() {
        let table = ConnectionTable()
        #expect(table.intern(userAgent: nil) == nil)
        let one = table.intern(userAgent: String("Firebase/5/9.0/android"))
        #expect(one == "Firebase/5/9.0/android")
        for index in 0..<2_000 { _ = table.intern(userAgent: "agent \(index)") }
        #expect(table.intern(userAgent: "agent 1999") == "agent 1999")
    }
}
