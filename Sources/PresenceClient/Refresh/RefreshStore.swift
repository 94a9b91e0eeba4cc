import Foundation
import PresenceCore

/// Where a ``RefreshScheduler`` keeps the time of each kind's last successful refresh, so that a
/// new process (or a new scheduler) knows how fresh its data is.
public protocol RefreshStore: AnyObject {
    /// The stored times: kind name → ms since the epoch. Empty when nothing is stored or the store
    /// cannot be read (a refresh then simply happens).
    func load() -> [String: Int64]
    /// Replaces the stored times.
    func save(_ timestamps: [String: Int64])
}

/// A store that lives as long as the object: for tests, and for refreshes that need no durability.
public final class InMemoryRefreshStore: RefreshStore {
    public private(set) var timestamps: [String: Int64]
    /// How many times ``save(_:)`` was called.
    public private(set) var saves = 0

    public init(_ timestamps: [String: Int64] = [:]) { self.timestamps = timestamps }

    public func load() -> [String: Int64] { timestamps }

    public func save(_ timestamps: [String: Int64]) {
        self.timestamps = timestamps
        saves += 1
    }
}

/// A small JSON file, `{"online-users": 1700000000000, …}`, replaced atomically on each save.
/// Its directory is created when missing. Read and write failures are not fatal: an unreadable
/// file counts as empty, a failed save is reported through ``lastError``.
public final class FileRefreshStore: RefreshStore {
    public let path: String
    public private(set) var lastError: String?

    public init(path: String) { self.path = path }

    public func load() -> [String: Int64] {
        guard let data = FileManager.default.contents(atPath: path),
              let text = String(data: data, encoding: .utf8),
              let json = try? JSONParser.parse(text) else { return [:] }
        return Self.decode(json)
    }

    public func save(_ timestamps: [String: Int64]) {
        do {
            try CacheFile.write(JSONWriter.string(Self.encode(timestamps)) + "\n", to: path)
            lastError = nil
        } catch {
            lastError = "cannot write \(path): \(error)"
        }
    }

    /// The file's content for `timestamps` (keys sorted, so the file is stable).
    public static func encode(_ timestamps: [String: Int64]) -> JSON {
        .object(timestamps.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })
    }

    /// Reads the members that are numbers; anything else is ignored.
    public static func decode(_ json: JSON) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for (key, value) in json.objectMembers ?? [] {
            if let n = value.numberValue, n.isFinite { out[key] = Int64(n) }
        }
        return out
    }
}

/// Small files under the user's cache directory.
public enum CacheFile {
    /// `$XDG_CACHE_HOME/presence-client`, else `$HOME/.cache/presence-client`, else a directory
    /// under the temporary directory.
    public static func directory(environment: [String: String]) -> String {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/presence-client" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.cache/presence-client" }
        return (environment["TMPDIR"] ?? "/tmp") + "/presence-client-cache"
    }

    /// A file name for one server, database and user: readable, with anything outside
    /// `[A-Za-z0-9._-]` escaped as `%XX`, e.g. `127.0.0.1_9000-default-bob`.
    public static func key(server: String, namespace: String?, uid: String?) -> String {
        var host = server
        if let range = host.range(of: "://") { host = String(host[range.upperBound...]) }
        while host.hasSuffix("/") { host.removeLast() }
        let ns = (namespace?.isEmpty ?? true) ? "default" : namespace!
        return [host.replacingOccurrences(of: ":", with: "_"), ns, uid ?? "anonymous"].map(escape).joined(separator: "-")
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80, c.isLetter || c.isNumber || c == "." || c == "_" {
                out.append(c)
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// Writes `text` to `path` atomically (a temporary file, then a rename), creating the directory.
    public static func write(_ text: String, to path: String) throws {
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url, options: .atomic)
    }

    /// The file's text, or nil when it cannot be read.
    public static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(data: data, encoding: .utf8)
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
