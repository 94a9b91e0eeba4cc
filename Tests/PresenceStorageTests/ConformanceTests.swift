import Foundation
import PresenceCore
import PresenceStorage
import PresenceTesting
import Testing

/// A fresh directory under the system temporary directory, removed by `TemporaryDirectory.remove`.
struct TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = (NSTemporaryDirectory() as NSString).appendingPathComponent("presence-storage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

@Suite struct InMemoryConformance {
    @Test(arguments: StorageConformance.Check.allCases)
    func conformance(_ check: StorageConformance.Check) throws {
        try StorageConformance(durable: false) { InMemoryStorage() }.run(check)
    }
}

@Suite struct SQLiteConformance {
    @Test(arguments: StorageConformance.Check.allCases, SQLiteStorage.Durability.allCases)
    func conformance(_ check: StorageConformance.Check, _ durability: SQLiteStorage.Durability) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let options = SQLiteStorage.Options(durability: durability)
        try StorageConformance(durable: true) { try SQLiteStorage(directory: directory.path, options: options) }.run(check)
    }

    /// The differential check on more seeds, in one long-lived engine: the store's memory of which
    /// paths have no row must never disagree with the rows (a write above, at or below a remembered
    /// path, priorities, primitives turning into branches and back).
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func randomWritesOnMoreSeeds(_ seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let options = SQLiteStorage.Options(durability: .off)
        try StorageConformance(durable: true) { try SQLiteStorage(directory: directory.path, options: options) }
            .runRandomWrites(seed: seed, commits: 250)
    }
}

@Suite struct SQLiteSettingsTests {
    /// The durability mode must be what SQLite actually runs with (GRDB's own WAL set-up would
    /// reset `synchronous` to NORMAL).
    @Test(arguments: SQLiteStorage.Durability.allCases)
    func effectiveSettings(_ durability: SQLiteStorage.Durability) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let storage = try SQLiteStorage(directory: directory.path, options: .init(durability: durability))
        defer { try? storage.close() }
        let settings = try storage.settings()
        #expect(settings["journal_mode"] == "wal")
        #expect(settings["locking_mode"] == "exclusive")
        #expect(settings["synchronous"] == ["full": "2", "normal": "1", "off": "0"][durability.rawValue])
        #expect(storage.path == directory.path + "/presence.sqlite")
    }

    /// A second server on the same data directory must fail at start-up, not share the file.
    @Test func secondOpenIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let first = try SQLiteStorage(directory: directory.path)
        #expect(throws: (any Error).self) { _ = try SQLiteStorage(directory: directory.path) }
        try first.close()
        let again = try SQLiteStorage(directory: directory.path)
        try again.close()
    }

    @Test func closedStorageThrows() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let storage = try SQLiteStorage(directory: directory.path)
        try storage.close()
        try storage.close()
        #expect(throws: SQLiteStorageError.closed) { _ = try storage.load() }
        #expect(throws: SQLiteStorageError.closed) { try storage.commit(StorageBatch(sequence: 1)) }
    }
}
