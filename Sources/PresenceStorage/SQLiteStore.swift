import Foundation
import GRDBSQLite
import PresenceCore

/// Row kinds in `nodes`.
enum RowKind: Int64 {
    /// The priority of a non-empty branch (no value).
    case branch = 0
    case bool = 1
    case number = 2
    case string = 3
}

/// The open connection and its prepared statements. Used only on the database queue, under the
/// storage's lock.
final class SQLiteStore: @unchecked Sendable {  // confined: only used under SQLiteStorage.connection's lock
    let db: OpaquePointer
    let durability: SQLiteStorage.Durability
    let normalSyncInterval: Duration?
    var lastSync = ContinuousClock.now
    var namespaceIDs: [String: Int64] = [:]
    /// Paths known to have no row (branches without a priority: most ancestors of a write). A write
    /// looks up each ancestor for a stored primitive; this skips the lookups that cannot find one.
    /// Only an insert at the path makes an entry wrong, so inserts remove theirs; a rolled-back
    /// transaction clears it all.
    var rowless: Set<StoredPath> = []
    static let rowlessLimit = 200_000

    struct StoredPath: Hashable {
        var ns: Int64
        var key: ArraySlice<UInt8>
    }

    let begin, commitStatement, rollback: SQLiteStatement
    let getRow, deleteAt, deleteUnder, hasUnder, insertRow, setPriority, makeBranch: SQLiteStatement
    let insertNamespace, setRulesStatement: SQLiteStatement
    let upsertSession, deleteSession, setMeta: SQLiteStatement
    let appendSessionChanges, deleteSessionChanges: SQLiteStatement
    let upsertLimitUsage, deleteLimitUsage: SQLiteStatement
    var all: [SQLiteStatement] = []

    init(_ db: OpaquePointer, durability: SQLiteStorage.Durability, normalSyncInterval: Duration?) throws {
        self.db = db
        self.durability = durability
        self.normalSyncInterval = normalSyncInterval
        try SQLiteStore.configure(db, durability: durability)
        try SQLiteStore.migrate(db)

        var prepared: [SQLiteStatement] = []
        func make(_ sql: String) throws -> SQLiteStatement {
            let statement = try SQLiteStatement(db, sql)
            prepared.append(statement)
            return statement
        }
        do {
            begin = try make("BEGIN IMMEDIATE")
            commitStatement = try make("COMMIT")
            rollback = try make("ROLLBACK")
            getRow = try make("SELECT kind, priority FROM nodes WHERE ns = ?1 AND path = ?2")
            deleteAt = try make("DELETE FROM nodes WHERE ns = ?1 AND path = ?2")
            deleteUnder = try make("DELETE FROM nodes WHERE ns = ?1 AND path >= ?2 AND path < ?3")
            hasUnder = try make("SELECT 1 FROM nodes WHERE ns = ?1 AND path >= ?2 AND path < ?3 LIMIT 1")
            insertRow = try make("INSERT INTO nodes(ns, path, kind, value, priority) VALUES (?1, ?2, ?3, ?4, ?5)")
            setPriority = try make("UPDATE nodes SET priority = ?3 WHERE ns = ?1 AND path = ?2")
            makeBranch = try make("UPDATE nodes SET kind = 0, value = NULL WHERE ns = ?1 AND path = ?2")
            insertNamespace = try make("INSERT INTO namespaces(name) VALUES (?1)")
            setRulesStatement = try make("UPDATE namespaces SET rules = ?2 WHERE id = ?1")
            upsertSession = try make("INSERT OR REPLACE INTO sessions(id, record) VALUES (?1, ?2)")
            deleteSession = try make("DELETE FROM sessions WHERE id = ?1")
            // The next number of a stored session's changes; nothing for a session not stored.
            appendSessionChanges = try make("""
                INSERT INTO session_changes(session, seq, change)
                SELECT ?1, (SELECT coalesce(max(seq), 0) + 1 FROM session_changes WHERE session = ?1), ?2
                WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)
                """)
            deleteSessionChanges = try make("DELETE FROM session_changes WHERE session = ?1")
            setMeta = try make("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")
            upsertLimitUsage = try make(
                "INSERT OR REPLACE INTO limit_usage(ns, limit_name, uid, count, cooldown_started) VALUES (?1, ?2, ?3, ?4, ?5)")
            deleteLimitUsage = try make("DELETE FROM limit_usage WHERE ns = ?1 AND limit_name = ?2 AND uid = ?3")
        } catch {
            for statement in prepared { statement.finalize() }
            throw error
        }
        all = prepared

        let names = try SQLiteStatement(db, "SELECT id, name FROM namespaces")
        defer { names.finalize() }
        while try names.step() { namespaceIDs[names.text(1)] = names.int64(0) }
    }

    func finalize() {
        for statement in all { statement.finalize() }
        all = []
    }

    // MARK: Settings and schema

    /// WAL, then the durability mode's `synchronous` level, checked by reading both back.
    static func configure(_ db: OpaquePointer, durability: SQLiteStorage.Durability) throws {
        let journalMode = try pragma(db, "journal_mode = WAL")
        guard journalMode.lowercased() == "wal" else {
            throw SQLiteStorageError.sqlite(code: SQLITE_ERROR, message: "could not enable WAL (journal_mode is \(journalMode))", sql: nil)
        }
        try execute(db, "PRAGMA synchronous = \(durability.pragma)")
        let level = try pragma(db, "synchronous")
        guard level == durability.synchronousLevel else {
            throw SQLiteStorageError.sqlite(code: SQLITE_ERROR, message: "synchronous is \(level), expected \(durability.synchronousLevel)", sql: nil)
        }
    }

    /// The first column of the first row of `PRAGMA <statement>`.
    static func pragma(_ db: OpaquePointer, _ statement: String) throws -> String {
        let query = try SQLiteStatement(db, "PRAGMA \(statement)")
        defer { query.finalize() }
        guard try query.step() else { return "" }
        return query.text(0)
    }

    func settings() throws -> [String: String] {
        var result: [String: String] = [:]
        for name in ["journal_mode", "synchronous", "locking_mode"] { result[name] = try SQLiteStore.pragma(db, name) }
        return result
    }

    static func migrate(_ db: OpaquePointer) throws {
        let version = try SQLiteStatement(db, "PRAGMA user_version")
        defer { version.finalize() }
        _ = try version.step()
        let current = Int(version.int64(0))
        version.reset()
        if current > SQLiteStorage.schemaVersion { throw SQLiteStorageError.unsupportedSchema(version: current) }
        if current == SQLiteStorage.schemaVersion { return }
        try execute(db, """
            BEGIN IMMEDIATE;
            CREATE TABLE IF NOT EXISTS namespaces(
                id INTEGER PRIMARY KEY,
                name TEXT NOT NULL UNIQUE,
                rules TEXT
            );
            CREATE TABLE IF NOT EXISTS nodes(
                ns INTEGER NOT NULL,
                path BLOB NOT NULL,
                kind INTEGER NOT NULL,
                value,
                priority,
                PRIMARY KEY (ns, path)
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS sessions(
                id TEXT PRIMARY KEY NOT NULL,
                record TEXT NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS meta(
                key TEXT PRIMARY KEY NOT NULL,
                value
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS limit_usage(
                ns TEXT NOT NULL,
                limit_name TEXT NOT NULL,
                uid TEXT NOT NULL,
                count INTEGER NOT NULL,
                cooldown_started INTEGER,
                PRIMARY KEY (ns, limit_name, uid)
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS session_changes(
                session TEXT NOT NULL,
                seq INTEGER NOT NULL,
                change TEXT NOT NULL,
                PRIMARY KEY (session, seq)
            ) WITHOUT ROWID;
            PRAGMA user_version = \(SQLiteStorage.schemaVersion);
            COMMIT;
            """)
    }

    static func execute(_ db: OpaquePointer, _ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(db, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(message)
            if sqlite3_get_autocommit(db) == 0 { sqlite3_exec(db, "ROLLBACK", nil, nil, nil) }
            throw SQLiteStorageError.sqlite(code: code, message: text, sql: sql)
        }
    }

    func checkpoint() throws {
        try SQLiteStore.execute(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// Caps the file at its current size plus `extraPages` (nil: lifts the cap); returns the cap.
    func limitPages(extra extraPages: Int?) throws -> Int {
        let current = Int(try SQLiteStore.pragma(db, "page_count")) ?? 0
        let cap = extraPages.map { current + $0 } ?? 4_294_967_294
        return Int(try SQLiteStore.pragma(db, "max_page_count = \(cap)")) ?? 0
    }

    // MARK: Commit

    func commit(_ batches: [StorageBatch]) throws {
        let syncNow: Bool
        if durability == .normal, let interval = normalSyncInterval, ContinuousClock.now - lastSync >= interval {
            syncNow = true
            try SQLiteStore.execute(db, "PRAGMA synchronous = FULL")
        } else {
            syncNow = false
        }
        defer {
            if syncNow { try? SQLiteStore.execute(db, "PRAGMA synchronous = NORMAL") }
        }

        let knownNamespaces = namespaceIDs
        try begin.run()
        do {
            var sequence: UInt64?
            var heartbeat: Int64?
            // A session's consecutive changes go in one row (a connection registering its ops in a
            // burst: one record for the burst, not one insert and one credentials text per op).
            // Loading replays rows in order, and the last identity wins, so the merge loads the same.
            var journal: (session: String, identity: String, changes: [OnDisconnectChange])?
            func flushJournal() throws {
                guard let (session, identity, changes) = journal else { return }
                journal = nil
                appendSessionChanges.bind(1, text: session)
                appendSessionChanges.bind(2, text: JSONWriter.string(StorageCoding.json(identity: identity, changes: changes)))
                try appendSessionChanges.run()
            }
            for batch in batches {
                for mutation in batch.mutations {
                    if case let .changeSessionOps(session, identity, changes) = mutation {
                        if journal?.session == session {
                            journal!.identity = identity
                            journal!.changes += changes
                        } else {
                            try flushJournal()
                            journal = (session, identity, changes)
                        }
                        continue
                    }
                    try flushJournal()
                    switch mutation {
                    case let .write(namespace, path, value):
                        try write(value, at: path, namespace: try namespaceID(namespace))
                    case let .setRules(namespace, document):
                        setRulesStatement.bind(1, int64: try namespaceID(namespace))
                        if let document { setRulesStatement.bind(2, text: document) } else { setRulesStatement.bindNull(2) }
                        try setRulesStatement.run()
                    case .upsertSession(let session):
                        upsertSession.bind(1, text: session.sessionID)
                        upsertSession.bind(2, text: JSONWriter.string(StorageCoding.json(session)))
                        try upsertSession.run()
                        deleteSessionChanges.bind(1, text: session.sessionID)
                        try deleteSessionChanges.run()
                    case .changeSessionOps:
                        break  // journalled above
                    case .removeSession(let sessionID):
                        deleteSession.bind(1, text: sessionID)
                        try deleteSession.run()
                        deleteSessionChanges.bind(1, text: sessionID)
                        try deleteSessionChanges.run()
                    case .heartbeat(let time):
                        heartbeat = time
                    case let .setLimitUsage(key, stored):
                        let usage = stored == .unused ? nil : stored
                        let statement = usage == nil ? deleteLimitUsage : upsertLimitUsage
                        statement.bind(1, text: key.namespace)
                        statement.bind(2, text: key.limit)
                        statement.bind(3, text: key.uid)
                        if let usage {
                            statement.bind(4, int64: Int64(usage.count))
                            if let started = usage.cooldownStartedAt { statement.bind(5, int64: started) } else { statement.bindNull(5) }
                        }
                        try statement.run()
                    }
                }
                if let batchSequence = batch.sequence { sequence = batchSequence }
            }
            try flushJournal()
            if let heartbeat {
                setMeta.bind(1, text: "heartbeat")
                setMeta.bind(2, int64: heartbeat)
                try setMeta.run()
            }
            if let sequence {
                setMeta.bind(1, text: "sequence")
                setMeta.bind(2, int64: Int64(bitPattern: sequence))
                try setMeta.run()
            }
            try commitStatement.run()
        } catch {
            for statement in all { statement.reset() }
            if sqlite3_get_autocommit(db) == 0 { try? rollback.run() }
            namespaceIDs = knownNamespaces
            rowless.removeAll()  // the rolled-back transaction may have deleted rows it saw missing
            throw error
        }
        if syncNow { lastSync = ContinuousClock.now }
    }

    func namespaceID(_ name: String) throws -> Int64 {
        if let id = namespaceIDs[name] { return id }
        insertNamespace.bind(1, text: name)
        try insertNamespace.run()
        let id = sqlite3_last_insert_rowid(db)
        namespaceIDs[name] = id
        return id
    }
}
