import GRDBSQLite
import PresenceCore

/// Writes: the stored rows of a tree, changed as `Node.set` changes the tree.
extension SQLiteStore {

    /// `Node.set(value, at: path)` on the stored rows, with the same results:
    /// - a null value deletes at and below the path, unless a primitive sits above it (then nothing
    ///   changes); branches emptied by the deletion lose their priority rows;
    /// - a value replaces what is at and below the path; a primitive above it becomes a branch
    ///   that keeps its priority;
    /// - a trailing `.priority` key sets the priority of an existing node (a non-null value below a
    ///   primitive deletes that primitive, as `Node.set` does).
    func write(_ value: Node, at path: Path, namespace ns: Int64) throws {
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

    func writePriority(_ value: Node, ns: Int64, encoded: [UInt8], ends: [Int],
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
    func prune(_ ns: Int64, encoded: [UInt8], ends: [Int], branchAncestors: [Int]) throws {
        for depth in branchAncestors.reversed() {
            let at = encoded[..<ends[depth]]
            if try exists(below: ns, at) { return }
            try run(deleteAt, ns, at)
        }
    }

    /// Deletes the row at `at` and every row below it; true when any row was deleted.
    func deleteSubtree(_ ns: Int64, _ at: ArraySlice<UInt8>) throws -> Bool {
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

    func exists(below ns: Int64, _ at: ArraySlice<UInt8>) throws -> Bool {
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

    func row(_ ns: Int64, _ at: ArraySlice<UInt8>) throws -> (kind: RowKind, hasPriority: Bool)? {
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
    func forgetRowless(_ ns: Int64, _ at: ArraySlice<UInt8>) {
        if !rowless.isEmpty { rowless.remove(StoredPath(ns: ns, key: at)) }
    }

    func run(_ statement: SQLiteStatement, _ ns: Int64, _ at: ArraySlice<UInt8>) throws {
        statement.bind(1, int64: ns)
        statement.bind(2, blob: at)
        try statement.run()
    }

    func bind(_ priority: Priority?, _ statement: SQLiteStatement, _ index: Int32) {
        switch priority {
        case nil: statement.bindNull(index)
        case .number(let n)?: statement.bind(index, number: n)
        case .string(let s)?: statement.bind(index, text: s)
        }
    }

    /// Inserts the rows of `node` at `encoded` (which is restored on return). Children go in key
    /// order so that large subtrees fill the B-tree sequentially.
    func insert(_ node: Node, ns: Int64, encoded: inout [UInt8]) throws {
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
    func appendKey(_ key: String, to encoded: inout [UInt8]) {
        encoded.append(0x01)
        if key.utf8.allSatisfy({ $0 < 0x80 }) {
            encoded.append(contentsOf: key.utf8)
        } else {
            encoded.append(contentsOf: key.precomposedStringWithCanonicalMapping.utf8)
        }
    }
}
