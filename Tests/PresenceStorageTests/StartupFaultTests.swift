import Foundation
import GRDBSQLite
import PresenceCore
@testable import PresenceStorage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A damaged data directory must stop the server with a message that names the file, the problem
/// and what to do, and leave the file as it was found; only a directory with no database in it is
/// a new one.
@Suite struct StartupFaultTests {
    let users: JSON = ["alice": ["online": true, "lastSeen": 1], "bob": ["online": false, "lastSeen": 2]]

    func file(_ directory: TemporaryDirectory) -> String { directory.path + "/" + SQLiteStorage.fileName }

    /// A database with some data, closed cleanly.
    func populate(_ directory: TemporaryDirectory, rows: Int = 50) throws {
        let storage = try SQLiteStorage(directory: directory.path)
        var batch = StorageBatch(sequence: 1)
        batch.write(try Node(json: users), at: try Path("/users"), namespace: "db")
        for index in 0..<rows {
            batch.write(Node(.string(String(repeating: "x", count: 500))), at: try Path("/bulk/k\(index)"), namespace: "db")
        }
        try storage.commit(batch)
        try storage.close()
    }

    /// Expects opening to be refused with `remedy`, a message naming `path` and `words`, and the
    /// files left byte for byte as they were.
    func expectRefused(_ directory: TemporaryDirectory, path: String? = nil, remedy: SQLiteStorageError.Remedy, _ words: [String],
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let files = ["", "-wal", "-shm"].map { file(directory) + $0 }
        let before = files.map { FileManager.default.contents(atPath: $0) }
        do {
            let storage = try SQLiteStorage(directory: directory.path)
            try? storage.close()
            Issue.record("opened a damaged database", sourceLocation: sourceLocation)
        } catch let error as SQLiteStorageError {
            guard case .unusable(let refusedPath, _, let refusedRemedy) = error else {
                Issue.record("not an unusable-database error: \(error)", sourceLocation: sourceLocation)
                return
            }
            #expect(refusedPath == (path ?? file(directory)), sourceLocation: sourceLocation)
            #expect(refusedRemedy == remedy, "\(error)", sourceLocation: sourceLocation)
            let message = error.description
            for word in words { #expect(message.contains(word), "\(message) should say \(word)", sourceLocation: sourceLocation) }
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
        #expect(files.map { FileManager.default.contents(atPath: $0) } == before, "the files were changed", sourceLocation: sourceLocation)
    }

    @Test func aNewDirectoryGetsAFreshDatabaseCreatedAtomically() throws {
        let parent = try TemporaryDirectory()
        defer { parent.remove() }
        let directory = parent.path + "/data/nested"
        // A leftover of a creation that crashed is ignored.
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: directory + "/presence.sqlite.new", contents: Data([1, 2, 3]))
        let storage = try SQLiteStorage(directory: directory)
        #expect(try storage.load().isEmpty)
        try storage.close()
        #expect(!FileManager.default.fileExists(atPath: directory + "/presence.sqlite.new"))
        let header = FileManager.default.contents(atPath: directory + "/presence.sqlite")?.prefix(16)
        #expect(header.map(Array.init) == SQLiteFileCheck.headerMagic)
    }

    @Test func aZeroByteFileIsRefusedNotServedEmpty() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        FileManager.default.createFile(atPath: file(directory), contents: Data())
        expectRefused(directory, remedy: .restore, ["empty (0 bytes)", file(directory), "backup", "presence-server import", "move it away"])
    }

    @Test func aFileThatIsNotSQLiteIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        FileManager.default.createFile(atPath: file(directory), contents: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }))
        expectRefused(directory, remedy: .restore, ["not a SQLite database"])
        FileManager.default.createFile(atPath: file(directory), contents: Data("SQLite".utf8))
        expectRefused(directory, remedy: .restore, ["not a SQLite database"])
    }

    @Test func aTruncatedFileIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try populate(directory, rows: 200)
        let size = try #require(SQLiteFileCheck.fileStatus(file(directory))).size
        #expect(truncate(file(directory), off_t(size / 2)) == 0)
        expectRefused(directory, remedy: .restore, ["truncated", "its header says \(size)"])
    }

    @Test func aDamagedPageIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try populate(directory, rows: 200)
        // Scribble over the second page (the first page of a table), keeping the file's length.
        let fd = open(file(directory), O_WRONLY)
        let garbage = [UInt8](repeating: 0xA5, count: 4096)
        #expect(garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, 4096) } == 4096)
        close(fd)
        expectRefused(directory, remedy: .restore, ["backup"])
    }

    @Test func aNewerSchemaAndAForeignDatabaseAreRefused() throws {
        let newer = try TemporaryDirectory()
        defer { newer.remove() }
        try populate(newer)
        try execute(file(newer), "PRAGMA user_version = 99")
        expectRefused(newer, remedy: .newerServer, ["schema version 99", "presence-server export"])

        let foreign = try TemporaryDirectory()
        defer { foreign.remove() }
        try execute(file(foreign), "CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL)")
        expectRefused(foreign, remedy: .foreign, ["invoices", "--data-dir"])
    }

    @Test func aSecondServerIsToldTheDirectoryIsInUse() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try populate(directory)
        let first = try SQLiteStorage(directory: directory.path)
        try first.commit(StorageBatch(sequence: 2, mutations: [.heartbeat(5)]))
        do {
            _ = try SQLiteStorage(directory: directory.path)
            Issue.record("a second open succeeded")
        } catch let error as SQLiteStorageError {
            guard case .unusable(_, _, .locked) = error else { throw error }
            #expect(error.description.contains("another presence-server"))
        }
        try first.close()
    }

    /// A snapshot of a running server's directory (database and WAL, as after a crash) opens with
    /// everything the WAL holds; a damaged WAL is refused rather than silently ignored.
    @Test func theWALIsUsedWhenWholeAndRefusedWhenDamaged() throws {
        let running = try TemporaryDirectory()
        defer { running.remove() }
        try populate(running)
        let storage = try SQLiteStorage(directory: running.path)
        var batch = StorageBatch(sequence: 2)
        batch.write(Node(.string("in the WAL only")), at: try Path("/late"), namespace: "db")
        try storage.commit(batch)
        let snapshot = try TemporaryDirectory()
        defer { snapshot.remove() }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: file(running) + suffix, toPath: file(snapshot) + suffix) }
        try storage.close()
        #expect((SQLiteFileCheck.fileStatus(file(snapshot) + "-wal")?.size ?? 0) > 32)

        let whole = try TemporaryDirectory()
        defer { whole.remove() }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: file(snapshot) + suffix, toPath: file(whole) + suffix) }
        // A stale shared-memory file is never read (exclusive locking keeps the WAL index in memory).
        FileManager.default.createFile(atPath: file(whole) + "-shm", contents: Data(repeating: 0xFF, count: 32_768))
        let reopened = try SQLiteStorage(directory: whole.path)
        #expect(try reopened.load().namespaces["db"]?.node(at: try Path("/late")) == Node(.string("in the WAL only")))
        try reopened.close()

        let damaged = try TemporaryDirectory()
        defer { damaged.remove() }
        for suffix in ["", "-wal"] { try FileManager.default.copyItem(atPath: file(snapshot) + suffix, toPath: file(damaged) + suffix) }
        let wal = file(damaged) + "-wal"
        let fd = open(wal, O_WRONLY)
        #expect([UInt8](repeating: 0xFF, count: 4).withUnsafeBytes { pwrite(fd, $0.baseAddress, 4, 16) } == 4)  // the first salt
        close(fd)
        expectRefused(damaged, path: wal, remedy: .wal, ["checksum", "last checkpoint"])
        #expect(truncate(wal, 20) == 0)
        expectRefused(damaged, path: wal, remedy: .wal, ["truncated"])

        // The database file gone, its WAL still there: moved or deleted by mistake.
        #expect(unlink(file(damaged)) == 0)
        expectRefused(damaged, remedy: .restore, ["missing"])
    }

    @Test(.enabled(if: getuid() != 0, "root may write any file"))
    func aReadOnlyFileOrDirectoryIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer {
            chmod(directory.path, 0o700)
            directory.remove()
        }
        try populate(directory)
        chmod(file(directory), 0o400)
        expectRefused(directory, remedy: .permissions, ["read and write"])
        chmod(file(directory), 0o600)
        chmod(directory.path, 0o500)
        expectRefused(directory, path: directory.path, remedy: .permissions, ["not writable"])
    }

    func execute(_ path: String, _ sql: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let db else {
            throw SQLiteStorageError.closed
        }
        defer { sqlite3_close(db) }
        #expect(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK)
    }
}
