import Foundation
import GRDB
import GRDBSQLite
import PresenceCore
import Synchronization

/// The embedded default engine: SQLite (through GRDB) in `<dataDir>/presence.sqlite`, WAL mode.
///
/// Trees are stored one row per leaf, keyed by (namespace, encoded path); a branch with a priority
/// has a row of its own. A path is encoded as each key preceded by the byte 0x01, which sorts below
/// every byte a key may hold (keys exclude control characters), so the rows below a path are exactly
/// the range [enc + 0x01, enc + 0x02) and a table scan in key order visits a tree depth-first.
///
/// The file is opened with an exclusive lock held until `close()`: a second server on the same data
/// directory fails at start-up ("database is locked") instead of interleaving writes.
public final class SQLiteStorage: StorageEngine {
    /// How far a commit has gone when `commit` returns. Each mode keeps the database consistent
    /// after a process crash; they differ in what an OS crash or power loss may take.
    public enum Durability: String, Sendable, CaseIterable {
        /// `synchronous=FULL`: the WAL is fsynced before every commit returns. A returned commit
        /// survives a process crash, an OS crash and power loss (on storage that honours fsync).
        case full
        /// `synchronous=NORMAL`: commits reach the OS (`write`) but are not fsynced. A returned
        /// commit survives a process crash (SIGKILL included). An OS crash or power loss may roll
        /// the database back to the last fsync, losing the commits made since. The WAL is fsynced
        /// at each checkpoint (about every 4 MB of WAL) and by the first commit made at least
        /// `Options.normalSyncInterval` after the previous fsync; with the server's heartbeat
        /// commit every second and the default 1 s interval, that is at most the commits of the
        /// last ~2 s. Never corrupts.
        case normal
        /// `synchronous=OFF`: never fsyncs. A returned commit survives a process crash (its bytes
        /// were handed to the OS); an OS crash or power loss may lose any amount of recent
        /// commits and may corrupt the file (a checkpoint's page writes can land out of order).
        case off
    }

    public struct Options: Sendable {
        public var durability: Durability
        /// In `.normal` mode, the longest time between two fsyncs of the WAL: a commit that comes
        /// this long after the last fsync is made with `synchronous=FULL`. With the server's
        /// one-second heartbeat commit this bounds the power-loss window to about this interval.
        /// nil: fsync only at checkpoints (about every 4 MB of WAL).
        public var normalSyncInterval: Duration?
        /// SQLite page cache for the connection, in KiB.
        public var cacheSizeKiB: Int

        public init(durability: Durability = .full, normalSyncInterval: Duration? = .seconds(1), cacheSizeKiB: Int = 65_536) {
            self.durability = durability
            self.normalSyncInterval = normalSyncInterval
            self.cacheSizeKiB = cacheSizeKiB
        }
    }

    public static let fileName = "presence.sqlite"
    /// 2 added `limit_usage`, 3 `session_changes`; every table is created with IF NOT EXISTS, so
    /// older files upgrade in place.
    static let schemaVersion = 3

    /// The database file.
    public let path: String
    public let options: Options
    private let queue: DatabaseQueue
    private let connection: Mutex<SQLiteStore?>

    /// Opens (creating if needed) `<directory>/presence.sqlite`, creating the directory too.
    /// A directory that exists must hold a usable database or none: see `SQLiteFileCheck`.
    public convenience init(directory: String, options: Options = Options()) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw SQLiteStorageError.unusable(path: directory, problem: "cannot create the data directory (\(error.localizedDescription))",
                                              remedy: .permissions)
        }
        try self.init(file: (directory as NSString).appendingPathComponent(SQLiteStorage.fileName), options: options)
    }

    /// Opens the database file at `file`, creating it when there is none. An existing file that is
    /// empty, truncated, damaged, read-only, locked, newer or not ours is refused with an
    /// `SQLiteStorageError.unusable` that says what is wrong and how to recover.
    public init(file: String, options: Options = Options()) throws {
        self.path = file
        self.options = options
        // Journal mode and synchronous are set by SQLiteStore after opening, not through GRDB's
        // `journalMode = .wal`: that setting runs after `prepareDatabase` and forces
        // `synchronous = NORMAL`, which would silently weaken `.full`.
        var configuration = Configuration()
        configuration.label = "presence-storage"
        let cacheSize = options.cacheSizeKiB
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
            try db.execute(sql: "PRAGMA cache_size = -\(cacheSize)")
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
        }
        try SQLiteFileCheck.prepare(file)
        StorageThreadYield.install()
        do {
            queue = try DatabaseQueue(path: file, configuration: configuration)
        } catch let error as DatabaseError {
            throw SQLiteFileCheck.refusal(file, code: error.extendedResultCode.rawValue, message: error.message ?? "\(error)")
        }
        let durability = options.durability
        let interval = options.normalSyncInterval
        let opened: SQLiteStore
        do {
            opened = try queue.inDatabase { db throws -> SQLiteStore in
                guard let handle = db.sqliteConnection else { throw SQLiteStorageError.closed }
                // A file the OS lets us read but not write is opened read-only without a word;
                // every commit would then fail.
                if sqlite3_db_readonly(handle, "main") == 1 {
                    throw SQLiteStorageError.unusable(path: file, problem: "SQLite can only open it read-only", remedy: .permissions)
                }
                return try SQLiteStore(handle, durability: durability, normalSyncInterval: interval)
            }
        } catch {
            try? queue.close()
            if case SQLiteStorageError.sqlite(let code, let message, _) = error { throw SQLiteFileCheck.refusal(file, code: code, message: message) }
            throw error
        }
        connection = Mutex(opened)
    }

    deinit {
        try? close()
    }

    /// Everything stored. A damaged page or record met on the way is reported with the file's
    /// path and what to do, as at open.
    public func load() throws -> StoredState {
        do {
            return try withConnection { try $0.load() }
        } catch let error as SQLiteStorageError {
            switch error {
            case let .sqlite(code, message, _): throw SQLiteFileCheck.refusal(path, code: code, message: message)
            case .corrupt(let reason): throw SQLiteStorageError.unusable(path: path, problem: "a stored record is damaged: \(reason)", remedy: .restore)
            default: throw error
            }
        }
    }

    public func loadTree(namespace: String) throws -> Node {
        try withConnection { try $0.loadTree(namespace: namespace) }
    }

    public func commit(_ batches: [StorageBatch]) throws {
        guard batches.contains(where: { !$0.isEmpty || $0.sequence != nil }) else { return }
        // The commit's own work is what is measured: the thread was asleep until now.
        StorageThreadYield.startOfWork()
        try withConnection { try $0.commit(batches) }
    }

    /// The connection's effective settings (`journal_mode`, `synchronous`, `locking_mode`), as
    /// SQLite reports them; for start-up logs and tests.
    public func settings() throws -> [String: String] {
        try withConnection { try $0.settings() }
    }

    /// Checkpoints the WAL into the database file (fsyncing both unless the mode is `.off`).
    public func checkpoint() throws {
        try withConnection { try $0.checkpoint() }
    }

    /// Lets the database grow by at most `extraPages` pages (nil: no cap). SQLite then fails a
    /// commit that needs more with `SQLITE_FULL`, exactly as on a full disk: tests use it to check
    /// that such a commit changes nothing and that the next one succeeds once there is room.
    func limitPages(extra extraPages: Int?) throws -> Int {
        try withConnection { try $0.limitPages(extra: extraPages) }
    }

    /// The calling thread's reads and writes give the core back after `microseconds` of work
    /// since it last did (`StorageThreadYield`).
    public func prepareCommitThread(yieldingEvery microseconds: UInt64) {
        StorageThreadYield.yieldHere(every: microseconds)
    }

    public func close() throws {
        let closed = try connection.withLock { connection throws -> Bool in
            guard let open = connection else { return false }
            connection = nil
            queue.inDatabase { _ in open.finalize() }
            return true
        }
        if closed { try queue.close() }
    }

    /// Runs `body` on the open connection, on the database queue.
    private func withConnection<T: Sendable>(_ body: (SQLiteStore) throws -> T) throws -> T {
        try connection.withLock { connection throws -> T in
            guard let connection else { throw SQLiteStorageError.closed }
            return try queue.inDatabase { _ in try body(connection) }
        }
    }
}

extension SQLiteStorage.Durability {
    var pragma: String {
        switch self {
        case .full: return "FULL"
        case .normal: return "NORMAL"
        case .off: return "OFF"
        }
    }

    /// What `PRAGMA synchronous` reads back.
    var synchronousLevel: String {
        switch self {
        case .full: return "2"
        case .normal: return "1"
        case .off: return "0"
        }
    }
}
