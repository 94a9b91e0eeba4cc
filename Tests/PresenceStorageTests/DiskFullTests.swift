import PresenceCore
@testable import PresenceStorage
import Testing

/// A full disk at run time: the commit that does not fit fails as a whole (nothing of it stored,
/// the store still usable), says the disk is full, and the same batches commit once there is room.
/// The database is capped with `PRAGMA max_page_count`, which fails a commit with SQLITE_FULL as a
/// full disk does.
@Suite struct DiskFullTests {
    @Test(arguments: SQLiteStorage.Durability.allCases)
    func aCommitThatDoesNotFitChangesNothingAndIsRetried(_ durability: SQLiteStorage.Durability) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let storage = try SQLiteStorage(directory: directory.path, options: .init(durability: durability))
        defer { try? storage.close() }
        var reference = StoredState()
        func commit(_ batches: [StorageBatch]) throws {
            try storage.commit(batches)
            reference.apply(batches)
        }
        var first = StorageBatch(sequence: 1)
        first.write(Node(.bool(true)), at: try Path("/users/alice/presence/online"), namespace: "db")
        first.upsert(StoredSession(sessionID: "s1", namespace: "db", identity: "uid:alice",
                                   ops: [OnDisconnectOp(path: try Path("/users/alice/presence/online"), value: false, credentials: .admin)]))
        try commit([first])

        // A group commit too big for what is left: many rows, a session change, a heartbeat.
        var big = StorageBatch(sequence: 2)
        for index in 0..<2_000 {
            big.write(Node(.string(String(repeating: "y", count: 200))), at: try Path("/bulk/k\(index)"), namespace: "db")
        }
        big.write(.null, at: try Path("/users/alice"), namespace: "db")
        big.write(Node(.number(1)), at: try Path("/fresh"), namespace: "new-namespace")
        big.removeSession("s1")
        big.heartbeat(42)
        let small = StorageBatch(sequence: 3, mutations: [.write(namespace: "db", path: try Path("/users/bob"), value: Node(.number(7)))])

        _ = try storage.limitPages(extra: 2)
        do {
            try storage.commit([big, small])
            Issue.record("a commit larger than the room left succeeded")
        } catch let error as SQLiteStorageError {
            #expect(error.isDiskFull, "\(error)")
        }
        #expect(try storage.load() == reference, "nothing of the failed commit is stored")

        // Room again: the same batches, in order, as the storage thread would retry them.
        _ = try storage.limitPages(extra: nil)
        try commit([big, small])
        #expect(try storage.load() == reference)
        // The store's caches (namespace ids, row-less paths) survived the rollback intact.
        var after = StorageBatch(sequence: 4)
        after.write(Node(.string("a")), at: try Path("/users/alice/name"), namespace: "db")
        after.write(Node(.number(2)), at: try Path("/fresh"), namespace: "new-namespace")
        try commit([after])
        #expect(try storage.load() == reference)
        try storage.close()
        let reopened = try SQLiteStorage(directory: directory.path, options: .init(durability: durability))
        #expect(try reopened.load() == reference)
        try reopened.close()
    }
}
