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
    private let db: OpaquePointer
    private let durability: SQLiteStorage.Durability
    private let normalSyncInterval: Duration?
    private var lastSync = ContinuousClock.now
    private var namespaceIDs: [String: Int64] = [:]
    /// Paths known to have no row (branches without a priority: most ancestors of a write). A write
    /// looks up each ancestor for a stored primitive; this skips the lookups that cannot find one.
    /// Only an insert at the path makes an entry wrong, so inserts remove theirs; a rolled-back
    /// transaction clears it all.
    private var rowless: Set<StoredPath> = []
    private static let rowlessLimit = 200_000

    private struct StoredPath: Hashable {
        var ns: Int64
        var key: ArraySlice<UInt8>
    }

    private let begin, commitStatement, rollback: SQLiteStatement
    private let getRow, deleteAt, deleteUnder, hasUnder, insertRow, setPriority, makeBranch: SQLiteStatement
    private let insertNamespace, setRulesStatement: SQLiteStatement
    private let upsertSession, deleteSession, setMeta: SQLiteStatement
    private let upsertLimitUsage, deleteLimitUsage: SQLiteStatement
    private var all: [SQLiteStatement] = []

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
    private static func configure(_ db: OpaquePointer, durability: SQLiteStorage.Durability) throws {
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
    private static func pragma(_ db: OpaquePointer, _ statement: String) throws -> String {
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

    private static func migrate(_ db: OpaquePointer) throws {
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
            PRAGMA user_version = \(SQLiteStorage.schemaVersion);
            COMMIT;
            """)
    }

    private static func execute(_ db: OpaquePointer, _ sql: String) throws {
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
            for batch in batches {
                for mutation in batch.mutations {
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
                    case .removeSession(let sessionID):
                        deleteSession.bind(1, text: sessionID)
                        try deleteSession.run()
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

    private func namespaceID(_ name: String) throws -> Int64 {
        if let id = namespaceIDs[name] { return id }
        insertNamespace.bind(1, text: name)
        try insertNamespace.run()
        let id = sqlite3_last_insert_rowid(db)
        namespaceIDs[name] = id
        return id
    }

    // MARK: Writes

    /// `Node.set(value, at: path)` on the stored rows, with the same results:
    /// - a null value deletes at and below the path, unless a primitive sits above it (then nothing
    ///   changes); branches emptied by the deletion lose their priority rows;
    /// - a value replaces what is at and below the path; a primitive above it becomes a branch
    ///   that keeps its priority;
    /// - a trailing `.priority` key sets the priority of an existing node (a non-null value below a
    ///   primitive deletes that primitive, as `Node.set` does).
    private func write(_ value: Node, at path: Path, namespace ns: Int64) throws {
        var segments = path.segments[...]
        let isPriority = segments.last == ".priority"
        if isPriority { segments = segments.dropLast() }

        var encoded: [UInt8] = []
        var ends: [Int] = [0]  // ends[i]: length of the encoding of the first i keys
        ends.reserveCapacity(segments.count + 1)
        for key in segments {
            appendKey(key, to: &encoded)
            ends.append(encoded.count)
        }

        // The strict ancestors' rows: branches with a priority, and at most one primitive.
        var branchAncestors: [Int] = []
        var leafAncestor: (depth: Int, hasPriority: Bool)?
        for depth in 0..<segments.count {
            let prefix = StoredPath(ns: ns, key: encoded[..<ends[depth]])
            if rowless.contains(prefix) { continue }
            guard let row = try row(ns, prefix.key) else {
                if rowless.count >= Self.rowlessLimit { rowless.removeAll(keepingCapacity: true) }
                rowless.insert(StoredPath(ns: ns, key: ArraySlice(Array(prefix.key))))
                continue
            }
            if row.kind == .branch {
                branchAncestors.append(depth)
            } else {
                leafAncestor = (depth, row.hasPriority)
                break
            }
        }

        if isPriority {
            try writePriority(value, ns: ns, encoded: encoded, ends: ends,
                              branchAncestors: branchAncestors, leafAncestor: leafAncestor)
            return
        }

        if value.isNull {
            if leafAncestor != nil { return }  // deleting below a primitive deletes nothing
            let deleted = try deleteSubtree(ns, encoded[...])
            if deleted { try prune(ns, encoded: encoded, ends: ends, branchAncestors: branchAncestors) }
            return
        }

        if let leaf = leafAncestor {
            // Nothing is stored below a primitive, so only the primitive itself changes.
            let at = encoded[..<ends[leaf.depth]]
            try run(leaf.hasPriority ? makeBranch : deleteAt, ns, at)
        } else {
            _ = try deleteSubtree(ns, encoded[...])
        }
        try insert(value, ns: ns, encoded: &encoded)
    }

    private func writePriority(_ value: Node, ns: Int64, encoded: [UInt8], ends: [Int],
                               branchAncestors: [Int], leafAncestor: (depth: Int, hasPriority: Bool)?) throws {
        let priority: Priority? = switch value.leafValue {
        case .number(let n)?: .number(n)
        case .string(let s)?: .string(s)
        default: nil
        }
        if let leaf = leafAncestor {
            // A null value stops at the primitive; any other value turns it into a branch whose
            // only child path ends in null, which empties it: the primitive is deleted.
            if value.isNull { return }
            try run(deleteAt, ns, encoded[..<ends[leaf.depth]])
            try prune(ns, encoded: encoded, ends: ends, branchAncestors: branchAncestors)
            return
        }
        let target = encoded[...]
        switch try row(ns, target) {
        case let row? where row.kind != .branch:
            setPriority.bind(1, int64: ns)
            setPriority.bind(2, blob: target)
            bind(priority, setPriority, 3)
            try setPriority.run()
        case .some:
            if let priority {
                setPriority.bind(1, int64: ns)
                setPriority.bind(2, blob: target)
                bind(priority, setPriority, 3)
                try setPriority.run()
            } else {
                try run(deleteAt, ns, target)
            }
        case nil:
            // A branch without a priority gets one; a missing node stays missing.
            guard let priority, try exists(below: ns, target) else { return }
            forgetRowless(ns, target)
            insertRow.bind(1, int64: ns)
            insertRow.bind(2, blob: target)
            insertRow.bind(3, int64: RowKind.branch.rawValue)
            insertRow.bindNull(4)
            bind(priority, insertRow, 5)
            try insertRow.run()
        }
    }

    /// Removes the priority rows of the branches that deletions left empty, deepest first.
    private func prune(_ ns: Int64, encoded: [UInt8], ends: [Int], branchAncestors: [Int]) throws {
        for depth in branchAncestors.reversed() {
            let at = encoded[..<ends[depth]]
            if try exists(below: ns, at) { return }
            try run(deleteAt, ns, at)
        }
    }

    /// Deletes the row at `at` and every row below it; true when any row was deleted.
    private func deleteSubtree(_ ns: Int64, _ at: ArraySlice<UInt8>) throws -> Bool {
        try run(deleteAt, ns, at)
        var changes = sqlite3_changes(db)
        var low = Array(at)
        low.append(0x01)
        var high = Array(at)
        high.append(0x02)
        deleteUnder.bind(1, int64: ns)
        deleteUnder.bind(2, blob: low[...])
        deleteUnder.bind(3, blob: high[...])
        try deleteUnder.run()
        changes += sqlite3_changes(db)
        return changes > 0
    }

    private func exists(below ns: Int64, _ at: ArraySlice<UInt8>) throws -> Bool {
        var low = Array(at)
        low.append(0x01)
        var high = Array(at)
        high.append(0x02)
        hasUnder.bind(1, int64: ns)
        hasUnder.bind(2, blob: low[...])
        hasUnder.bind(3, blob: high[...])
        defer { hasUnder.reset() }
        return try hasUnder.step()
    }

    private func row(_ ns: Int64, _ at: ArraySlice<UInt8>) throws -> (kind: RowKind, hasPriority: Bool)? {
        getRow.bind(1, int64: ns)
        getRow.bind(2, blob: at)
        defer { getRow.reset() }
        guard try getRow.step() else { return nil }
        guard let kind = RowKind(rawValue: getRow.int64(0)) else {
            throw SQLiteStorageError.corrupt("unknown row kind \(getRow.int64(0))")
        }
        return (kind, getRow.type(1) != SQLITE_NULL)
    }

    /// A row is about to be inserted at `at`: it is no longer row-less.
    private func forgetRowless(_ ns: Int64, _ at: ArraySlice<UInt8>) {
        if !rowless.isEmpty { rowless.remove(StoredPath(ns: ns, key: at)) }
    }

    private func run(_ statement: SQLiteStatement, _ ns: Int64, _ at: ArraySlice<UInt8>) throws {
        statement.bind(1, int64: ns)
        statement.bind(2, blob: at)
        try statement.run()
    }

    private func bind(_ priority: Priority?, _ statement: SQLiteStatement, _ index: Int32) {
        switch priority {
        case nil: statement.bindNull(index)
        case .number(let n)?: statement.bind(index, number: n)
        case .string(let s)?: statement.bind(index, text: s)
        }
    }

    /// Inserts the rows of `node` at `encoded` (which is restored on return). Children go in key
    /// order so that large subtrees fill the B-tree sequentially.
    private func insert(_ node: Node, ns: Int64, encoded: inout [UInt8]) throws {
        switch node {
        case let .leaf(leaf, priority):
            forgetRowless(ns, encoded[...])
            insertRow.bind(1, int64: ns)
            insertRow.bind(2, blob: encoded[...])
            switch leaf {
            case .bool(let b):
                insertRow.bind(3, int64: RowKind.bool.rawValue)
                insertRow.bind(4, int64: b ? 1 : 0)
            case .number(let n):
                insertRow.bind(3, int64: RowKind.number.rawValue)
                insertRow.bind(4, number: n)
            case .string(let s):
                insertRow.bind(3, int64: RowKind.string.rawValue)
                insertRow.bind(4, text: s)
            }
            bind(priority, insertRow, 5)
            try insertRow.run()
        case let .branch(children, priority):
            guard !children.isEmpty else { return }
            if let priority {
                forgetRowless(ns, encoded[...])
                insertRow.bind(1, int64: ns)
                insertRow.bind(2, blob: encoded[...])
                insertRow.bind(3, int64: RowKind.branch.rawValue)
                insertRow.bindNull(4)
                bind(priority, insertRow, 5)
                try insertRow.run()
            }
            let mark = encoded.count
            let keys = children.count > 1 ? children.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } : Array(children.keys)
            for key in keys {
                appendKey(key, to: &encoded)
                try insert(children[key]!, ns: ns, encoded: &encoded)
                encoded.removeSubrange(mark...)
            }
        }
    }

    /// Appends the separator and the key's bytes in NFC. Swift compares strings by canonical
    /// equivalence, so `Node` holds "é" and "e\u{301}" as one key; storing each key's NFC form makes
    /// the rows agree (otherwise a replaced spelling would come back at the next load).
    private func appendKey(_ key: String, to encoded: inout [UInt8]) {
        encoded.append(0x01)
        if key.utf8.allSatisfy({ $0 < 0x80 }) {
            encoded.append(contentsOf: key.utf8)
        } else {
            encoded.append(contentsOf: key.precomposedStringWithCanonicalMapping.utf8)
        }
    }

    // MARK: Load

    func load() throws -> StoredState {
        var names: [Int64: String] = [:]
        var rules: [String: String] = [:]
        let namespaces = try SQLiteStatement(db, "SELECT id, name, rules FROM namespaces")
        defer { namespaces.finalize() }
        while try namespaces.step() {
            let name = namespaces.text(1)
            names[namespaces.int64(0)] = name
            if namespaces.type(2) != SQLITE_NULL { rules[name] = namespaces.text(2) }
        }

        var trees: [String: Node] = [:]
        let rows = try SQLiteStatement(db, "SELECT ns, path, kind, value, priority FROM nodes ORDER BY ns, path")
        defer { rows.finalize() }
        var builder: TreeBuilder?
        var current: Int64 = 0
        while try rows.step() {
            let ns = rows.int64(0)
            if builder == nil || ns != current {
                if let finished = builder?.finish(), let name = names[current], !finished.isNull { trees[name] = finished }
                builder = TreeBuilder()
                current = ns
            }
            try builder!.add(rows)
        }
        if let finished = builder?.finish(), let name = names[current], !finished.isNull { trees[name] = finished }

        var sessions: [StoredSession] = []
        let sessionRows = try SQLiteStatement(db, "SELECT record FROM sessions ORDER BY id")
        defer { sessionRows.finalize() }
        while try sessionRows.step() {
            let text = sessionRows.text(0)
            do {
                sessions.append(try StorageCoding.session(JSONParser.parse(text)))
            } catch {
                throw SQLiteStorageError.corrupt("session record \(text): \(error)")
            }
        }

        var heartbeat: Int64?
        var sequence: UInt64?
        let meta = try SQLiteStatement(db, "SELECT key, value FROM meta")
        defer { meta.finalize() }
        while try meta.step() {
            switch meta.text(0) {
            case "heartbeat": heartbeat = meta.int64(1)
            case "sequence": sequence = UInt64(bitPattern: meta.int64(1))
            default: continue
            }
        }
        var limitUsage: [LimitUsageKey: LimitUsage] = [:]
        let usageRows = try SQLiteStatement(db, "SELECT ns, limit_name, uid, count, cooldown_started FROM limit_usage")
        defer { usageRows.finalize() }
        while try usageRows.step() {
            let key = LimitUsageKey(namespace: usageRows.text(0), limit: usageRows.text(1), uid: usageRows.text(2))
            limitUsage[key] = LimitUsage(count: Int(usageRows.int64(3)),
                                         cooldownStartedAt: usageRows.type(4) == SQLITE_NULL ? nil : usageRows.int64(4))
        }
        return StoredState(namespaces: trees, rules: rules, sessions: sessions, lastHeartbeat: heartbeat, lastSequence: sequence,
                           limitUsage: limitUsage)
    }

    func loadTree(namespace: String) throws -> Node {
        guard let ns = namespaceIDs[namespace] else { return .null }
        let rows = try SQLiteStatement(db, "SELECT ns, path, kind, value, priority FROM nodes WHERE ns = ?1 ORDER BY path")
        defer { rows.finalize() }
        rows.bind(1, int64: ns)
        var builder = TreeBuilder()
        while try rows.step() { try builder.add(rows) }
        return builder.finish()
    }
}

/// Rebuilds a tree from its rows in path order (a depth-first walk): a stack of open branches
/// along the previous row's path; only the keys that differ from the previous row are decoded.
struct TreeBuilder {
    private struct Frame {
        var key: String
        var children: [String: Node] = [:]
        var priority: Priority?
    }

    private var stack: [Frame] = [Frame(key: "")]
    private var rootLeaf: Node?
    private var previous: [UInt8] = []
    private var starts: [Int] = []

    /// Adds the current row of a `SELECT ns, path, kind, value, priority` statement.
    mutating func add(_ row: SQLiteStatement) throws {
        let path = row.blob(1)
        guard let kind = RowKind(rawValue: row.int64(2)) else {
            throw SQLiteStorageError.corrupt("unknown row kind \(row.int64(2))")
        }
        // Keys shared with the previous row: those whose closing separator lies inside the common
        // prefix, or that close where the previous row (an ancestor of this one) ends.
        var common = 0
        let limit = min(previous.count, path.count)
        while common < limit && previous[common] == path[common] { common += 1 }
        starts.removeAll(keepingCapacity: true)
        for index in 0..<path.count where path[index] == 0x01 { starts.append(index) }
        var shared = 0
        while shared + 1 < starts.count,
            starts[shared + 1] < common || (starts[shared + 1] == common && common == previous.count) {
            shared += 1
        }
        if common == path.count && common == previous.count { shared = starts.count }
        shared = min(shared, stack.count - 1)
        while stack.count - 1 > shared { pop() }

        let keyCount = starts.count
        let branchKeys = kind == .branch ? keyCount : keyCount - 1
        while stack.count - 1 < branchKeys {
            stack.append(Frame(key: key(path, stack.count - 1)))
        }
        let priority = Self.priority(row)
        if kind == .branch {
            if keyCount == 0 || stack.count - 1 == keyCount { stack[stack.count - 1].priority = priority }
        } else {
            let leaf: Leaf = switch kind {
            case .bool: .bool(row.int64(3) != 0)
            case .number: .number(row.double(3))
            default: .string(row.text(3))
            }
            let node = Node.leaf(leaf, priority: priority)
            if keyCount == 0 {
                rootLeaf = node
            } else {
                stack[stack.count - 1].children[key(path, keyCount - 1)] = node
            }
        }
        previous.removeAll(keepingCapacity: true)
        previous.append(contentsOf: path)
    }

    private func key(_ path: UnsafeRawBufferPointer, _ index: Int) -> String {
        let start = starts[index] + 1
        let end = index + 1 < starts.count ? starts[index + 1] : path.count
        return String(decoding: UnsafeRawBufferPointer(rebasing: path[start..<end]), as: UTF8.self)
    }

    private static func priority(_ row: SQLiteStatement) -> Priority? {
        switch row.type(4) {
        case SQLITE_INTEGER, SQLITE_FLOAT: return .number(row.double(4))
        case SQLITE_TEXT: return .string(row.text(4))
        default: return nil
        }
    }

    private mutating func pop() {
        let frame = stack.removeLast()
        guard !frame.children.isEmpty else { return }
        stack[stack.count - 1].children[frame.key] = .branch(frame.children, priority: frame.priority)
    }

    mutating func finish() -> Node {
        while stack.count > 1 { pop() }
        let root = stack.removeLast()
        stack = [Frame(key: "")]
        previous = []
        if root.children.isEmpty { return rootLeaf ?? .null }
        return .branch(root.children, priority: root.priority)
    }
}
