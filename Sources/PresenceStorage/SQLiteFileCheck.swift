import Foundation
import GRDBSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What is checked before SQLite is given the database file, so that a damaged data directory
/// stops the server with a message instead of being served (SQLite would treat a zero-byte file as
/// a new, empty database, and ignore a damaged WAL with every commit it holds).
///
/// - No file (and no WAL): a new data directory. The database is created under a temporary name
///   and renamed into place once its schema is written, so a crash never leaves a zero-byte file
///   that the next start would have to refuse.
/// - A file: it must be a regular, readable and writable file, start with SQLite's header, and be
///   at least as long as its header says (else it was truncated).
/// - The WAL (`-wal`): empty, or a header with SQLite's magic number and a valid checksum.
/// - The shared-memory file (`-shm`) is never read: the connection uses exclusive locking, so
///   SQLite keeps the WAL index in its own memory.
///
/// Integrity of the pages and the schema version are checked by `SQLiteStore` once SQLite has the
/// file open (`PRAGMA quick_check`, `PRAGMA user_version`).
enum SQLiteFileCheck {
    static let headerMagic = Array("SQLite format 3\0".utf8)
    static let walMagics: Set<UInt32> = [0x377F_0682, 0x377F_0683]

    /// Checks `file` and its directory; creates a new database when there is none.
    static func prepare(_ file: String) throws(SQLiteStorageError) {
        let directory = (file as NSString).deletingLastPathComponent
        let dir = directory.isEmpty ? "." : directory
        guard access(dir, W_OK | X_OK) == 0 else {
            throw .unusable(path: dir, problem: "the data directory is not writable by this process (\(errnoText()))",
                            remedy: .permissions)
        }
        let wal = file + "-wal"
        guard let status = fileStatus(file) else {
            if let walStatus = fileStatus(wal), walStatus.size > 0 {
                throw .unusable(path: file, problem: "the database file is missing but its WAL (\(wal)) is there: the file was moved or deleted",
                                remedy: .restore)
            }
            try create(file)
            return
        }
        guard status.isRegular else {
            throw .unusable(path: file, problem: "it is not a regular file", remedy: .restore)
        }
        guard access(file, R_OK | W_OK) == 0 else {
            throw .unusable(path: file, problem: "this process cannot read and write it (\(errnoText()))", remedy: .permissions)
        }
        if status.size == 0 {
            throw .unusable(path: file, problem: "the file is empty (0 bytes), so it holds no database; if it was cut short (a truncated copy, a full disk), every user's data is missing from it",
                            remedy: .restore)
        }
        let header = try read(file, count: 100)
        guard header.count == 100, Array(header.prefix(16)) == headerMagic else {
            throw .unusable(path: file, problem: "it is not a SQLite database (its first bytes are not SQLite's header)", remedy: .restore)
        }
        let rawPageSize = Int(header[16]) << 8 | Int(header[17])
        let pageSize = rawPageSize == 1 ? 65_536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else {
            throw .unusable(path: file, problem: "its header is damaged (page size \(rawPageSize))", remedy: .restore)
        }
        let pageCount = bigEndian(header, 28)
        // The header's page count is valid when the change counter matches "version-valid-for".
        if pageCount > 0, bigEndian(header, 24) == bigEndian(header, 92) {
            let expected = Int64(pageCount) * Int64(pageSize)
            if status.size < expected {
                throw .unusable(path: file, problem: "the file is truncated: it has \(status.size) bytes, its header says \(expected)",
                                remedy: .restore)
            }
        }
        try checkWAL(wal)
        try verifyContents(file)
    }

    /// Reads the database through a connection that runs no writing statement: SQLite's page check,
    /// the schema version, and that the tables are ours. (A read-only connection cannot read a WAL
    /// database without its shared-memory file. Closing it checkpoints a whole WAL into the file, as
    /// any clean close does; a damaged WAL was refused before SQLite saw it.)
    static func verifyContents(_ file: String) throws(SQLiteStorageError) {
        let wal = file + "-wal"
        let hadWAL = fileStatus(wal) != nil
        var db: OpaquePointer?
        let opened = sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE, nil)
        defer {
            sqlite3_close(db)
            // Reading a WAL database opens its WAL; do not leave an empty one that was not there.
            if !hadWAL, fileStatus(wal)?.size == 0 { unlink(wal) }
        }
        guard opened == SQLITE_OK, let db else {
            throw refusal(file, code: opened, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open")
        }
        sqlite3_busy_timeout(db, 0)
        do {
            // Exclusive locking: the WAL index lives in memory, no -shm file is used.
            _ = try rows(db, "PRAGMA locking_mode = EXCLUSIVE")
            _ = try rows(db, "PRAGMA query_only = 1")
            let check = try rows(db, "PRAGMA quick_check(5)")
            guard check == ["ok"] else {
                throw SQLiteStorageError.unusable(path: file, problem: "SQLite's integrity check failed: " + check.joined(separator: "; "),
                                                  remedy: .restore)
            }
            let version = Int(try rows(db, "PRAGMA user_version").first ?? "0") ?? 0
            if version > SQLiteStorage.schemaVersion {
                throw SQLiteStorageError.unusable(
                    path: file, problem: "it has schema version \(version); this server understands up to \(SQLiteStorage.schemaVersion)",
                    remedy: .newerServer)
            }
            if version == 0 {
                let tables = try rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
                if !tables.isEmpty {
                    throw SQLiteStorageError.unusable(
                        path: file, problem: "it has no presence schema version but holds tables (\(tables.prefix(5).joined(separator: ", ")))",
                        remedy: .foreign)
                }
            }
        } catch let error as SQLiteStorageError {
            if case .sqlite(let code, let message, _) = error { throw refusal(file, code: code, message: message) }
            throw error
        } catch {
            throw .unusable(path: file, problem: "\(error)", remedy: .restore)
        }
    }

    /// A SQLite error met while opening or checking the file, as the operator should read it.
    static func refusal(_ file: String, code: Int32, message: String) -> SQLiteStorageError {
        switch code & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return .unusable(path: file, problem: "it is locked (\(message))", remedy: .locked)
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN, SQLITE_AUTH:
            return .unusable(path: file, problem: message, remedy: .permissions)
        default:
            return .unusable(path: file, problem: "SQLite cannot read it (\(message))", remedy: .restore)
        }
    }

    /// The first column of every row.
    static func rows(_ db: OpaquePointer, _ sql: String) throws -> [String] {
        let statement = try SQLiteStatement(db, sql)
        defer { statement.finalize() }
        var result: [String] = []
        while try statement.step() { result.append(statement.text(0)) }
        return result
    }

    /// A WAL that SQLite would silently ignore (a damaged header) holds commits that would be lost.
    static func checkWAL(_ wal: String) throws(SQLiteStorageError) {
        guard let status = fileStatus(wal), status.size > 0 else { return }
        guard status.isRegular, access(wal, R_OK | W_OK) == 0 else {
            throw .unusable(path: wal, problem: "the WAL file is not a regular file this process can read and write", remedy: .permissions)
        }
        let header = try read(wal, count: 32)
        guard header.count == 32 else {
            throw .unusable(path: wal, problem: "the WAL file is truncated (\(status.size) bytes, shorter than its header)", remedy: .wal)
        }
        let magic = bigEndian(header, 0)
        guard walMagics.contains(magic) else {
            throw .unusable(path: wal, problem: "the WAL file is damaged: its header is not SQLite's, so SQLite would ignore the commits it holds",
                            remedy: .wal)
        }
        // The header checksum over its first 24 bytes (SQLite's WAL checksum: big-endian words when
        // the magic's low bit is set, native little-endian otherwise).
        let bigEndianWords = magic & 1 == 1
        var s0: UInt32 = 0, s1: UInt32 = 0
        for offset in stride(from: 0, to: 24, by: 8) {
            let x0 = bigEndianWords ? bigEndian(header, offset) : littleEndian(header, offset)
            let x1 = bigEndianWords ? bigEndian(header, offset + 4) : littleEndian(header, offset + 4)
            s0 = s0 &+ x0 &+ s1
            s1 = s1 &+ x1 &+ s0
        }
        guard s0 == bigEndian(header, 24), s1 == bigEndian(header, 28) else {
            throw .unusable(path: wal, problem: "the WAL file is damaged: its header checksum is wrong, so SQLite would ignore the commits it holds",
                            remedy: .wal)
        }
    }

    /// Creates the database under a temporary name, writes its schema and moves it into place.
    static func create(_ file: String) throws(SQLiteStorageError) {
        let temporary = file + ".new"
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(temporary + suffix) }
        var db: OpaquePointer?
        let code = sqlite3_open_v2(temporary, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard code == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "error \(code)"
            sqlite3_close(db)
            throw .unusable(path: temporary, problem: "cannot create the database: \(message)", remedy: .permissions)
        }
        do {
            try SQLiteStore.migrate(db)
        } catch {
            sqlite3_close(db)
            unlink(temporary)
            throw .unusable(path: temporary, problem: "cannot create the database: \(error)", remedy: .permissions)
        }
        sqlite3_close(db)  // the default rollback journal: nothing is left beside the file
        let fd = open(temporary, O_RDONLY)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
        guard rename(temporary, file) == 0 else {
            throw .unusable(path: file, problem: "cannot move the new database into place (\(errnoText()))", remedy: .permissions)
        }
        let directory = (file as NSString).deletingLastPathComponent
        let dirFD = open(directory.isEmpty ? "." : directory, O_RDONLY)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
    }

    // MARK: Files

    struct Status {
        var size: Int64
        var isRegular: Bool
    }

    static func fileStatus(_ path: String) -> Status? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Status(size: Int64(info.st_size), isRegular: (info.st_mode & S_IFMT) == S_IFREG)
    }

    static func read(_ path: String, count: Int) throws(SQLiteStorageError) -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .unusable(path: path, problem: "cannot open it (\(errnoText()))", remedy: .permissions) }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, 0) }
        guard got >= 0 else { throw .unusable(path: path, problem: "cannot read it (\(errnoText()))", remedy: .permissions) }
        return Array(bytes.prefix(got))
    }

    static func bigEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    static func littleEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset + 3]) << 24 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset])
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
