import Foundation

/// Why the SQLite engine failed.
public enum SQLiteStorageError: Error, Equatable, Sendable, CustomStringConvertible {
    case sqlite(code: Int32, message: String, sql: String?)
    /// The file was written by a newer version of this server.
    case unsupportedSchema(version: Int)
    /// A stored record could not be decoded.
    case corrupt(String)
    case closed
    /// The database file, its directory or its WAL cannot be used as they are: the server must not
    /// start on them (serving an empty or partial database would lose every user's data silently).
    case unusable(path: String, problem: String, remedy: Remedy)

    /// What the operator can do about an unusable database, spelled out in the message.
    public enum Remedy: Sendable, Equatable {
        /// Restore from a backup, or move the file away and import an export (or start empty).
        case restore
        /// Fix the file's or directory's permissions.
        case permissions
        /// Restore the directory, or move the damaged WAL away (losing the commits it held).
        case wal
        /// Use the newer server that wrote it, or move data across with export and import.
        case newerServer
        /// Another process holds the database.
        case locked
        /// The file is some other program's SQLite database.
        case foreign
    }

    /// The disk (or the database's size cap) is full: the commit changed nothing and the same
    /// batches can be committed again once there is room.
    public var isDiskFull: Bool {
        if case .sqlite(let code, _, _) = self { return code & 0xFF == 13 }  // SQLITE_FULL
        return false
    }

    public var description: String {
        switch self {
        case let .sqlite(code, message, sql):
            return "SQLite error \(code): \(message)" + (sql.map { " (\($0))" } ?? "")
        case .unsupportedSchema(let version):
            return "the database has schema version \(version), newer than this server understands"
        case .corrupt(let reason): return "the database is corrupt: \(reason)"
        case .closed: return "the database is closed"
        case let .unusable(path, problem, remedy):
            return "cannot use \(path): \(problem). \(Self.text(remedy, path: path))"
        }
    }

    static func text(_ remedy: Remedy, path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        let database = path.hasSuffix("-wal") ? String(path.dropLast(4)) : path
        switch remedy {
        case .restore:
            return "To recover (with the server stopped), either restore \(SQLiteStorage.fileName) from a backup; "
                + "or move it away (mv \(database) \(database).damaged) and load an export with "
                + "`presence-server import \(directory) EXPORT.json`; "
                + "or move it away to start with an empty database"
        case .permissions:
            return "Give the user running presence-server read and write access to it and to its directory, "
                + "or run the server as their owner"
        case .wal:
            return "To recover (with the server stopped), either restore the data directory (\(SQLiteStorage.fileName) and its -wal file together) "
                + "from a backup; or move the WAL away (mv \(path) \(path).damaged) to start from the last checkpoint, "
                + "losing the commits it held"
        case .newerServer:
            return "It was written by a newer presence-server: run that version, or export the data with it "
                + "(`presence-server export`) and import the export here (`presence-server import`)"
        case .locked:
            return "Another process holds it: is another presence-server running on this data directory? Stop it first"
        case .foreign:
            return "It is another program's SQLite database, not presence-server's: point --data-dir at another directory, "
                + "or move the file away"
        }
    }
}
