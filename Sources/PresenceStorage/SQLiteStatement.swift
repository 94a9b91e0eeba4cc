import GRDBSQLite

/// SQLite's "copy the bound bytes now" destructor.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared statement used through SQLite's C API: GRDB binds strings as NUL-terminated C strings,
/// which would cut a stored string at an embedded U+0000, and its row decoding costs too much when
/// a million rows are loaded at start-up. Only used on the connection's queue.
final class SQLiteStatement {
    let handle: OpaquePointer
    private let connection: OpaquePointer
    let sql: String

    init(_ connection: OpaquePointer, _ sql: String) throws(SQLiteStorageError) {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            throw SQLiteStorageError.sqlite(code: code, message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
        self.handle = statement
        self.connection = connection
        self.sql = sql
    }

    func finalize() { sqlite3_finalize(handle) }

    func error(_ code: Int32) -> SQLiteStorageError {
        .sqlite(code: code, message: String(cString: sqlite3_errmsg(connection)), sql: sql)
    }

    // MARK: Binding (1-based indexes)

    func bindNull(_ index: Int32) { sqlite3_bind_null(handle, index) }

    func bind(_ index: Int32, int64 value: Int64) { sqlite3_bind_int64(handle, index, value) }

    func bind(_ index: Int32, double value: Double) { sqlite3_bind_double(handle, index, value) }

    /// Integral doubles that an Int64 holds exactly are stored as integers (smaller on disk);
    /// they read back as the same double. -0.0 stays a double so that its sign survives.
    func bind(_ index: Int32, number value: Double) {
        if value == value.rounded(), abs(value) <= 9_007_199_254_740_992, !(value == 0 && value.sign == .minus) {
            sqlite3_bind_int64(handle, index, Int64(value))
        } else {
            sqlite3_bind_double(handle, index, value)
        }
    }

    func bind(_ index: Int32, text value: String) {
        var value = value
        value.withUTF8 { bytes in
            if bytes.isEmpty {
                sqlite3_bind_text(handle, index, "", 0, sqliteTransient)
            } else {
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    _ = sqlite3_bind_text(handle, index, chars.baseAddress, Int32(chars.count), sqliteTransient)
                }
            }
        }
    }

    func bind(_ index: Int32, blob bytes: ArraySlice<UInt8>) {
        if bytes.isEmpty {
            sqlite3_bind_zeroblob(handle, index, 0)
        } else {
            bytes.withUnsafeBytes { raw in
                _ = sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), sqliteTransient)
            }
        }
    }

    // MARK: Stepping

    /// Steps once; true when a row is available.
    func step() throws(SQLiteStorageError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw error(code)
        }
    }

    /// Runs a statement that returns no rows, then resets it.
    func run() throws(SQLiteStorageError) {
        defer { reset() }
        while try step() {}
    }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    // MARK: Columns (0-based indexes)

    func type(_ column: Int32) -> Int32 { sqlite3_column_type(handle, column) }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column's bytes, valid until the next step or reset.
    func blob(_ column: Int32) -> UnsafeRawBufferPointer {
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count)
    }
}
