import Foundation

/// Where a cluster node keeps its memory of the histories it served (`--cluster-state`,
/// `ClusterHistory`). A node always has one unless told `--cluster-state none`: without it, a node
/// started against a Redis that lost its data would create new, empty histories, a silent
/// rollback for every client (issue 14, docs/scaling.md "Redis back empty").
public enum ClusterStateFile {
    /// `--cluster-state none`: no memory (unsafe; tests and throw-away clusters only).
    public static let disabled = "none"

    public struct Unusable: Error, CustomStringConvertible {
        public var description: String
    }

    /// The default file for a node: `<data-dir>/cluster-state-<node name>.json`, one per node name,
    /// so that nodes sharing a data directory never share a memory. Bytes of the name other than
    /// letters, digits and `.`, `_`, `-`, `:` are written `%XX`.
    public static func defaultPath(dataDirectory: String, nodeName: String) throws(Unusable) -> String {
        var escaped = ""
        for byte in nodeName.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: ":"):
                escaped.append(Character(Unicode.Scalar(byte)))
            default:
                escaped += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        let file = "cluster-state-\(escaped).json"
        guard file.utf8.count <= 255 else {
            throw Unusable(description: "--node-id is too long to name this node's --cluster-state file in --data-dir; give --cluster-state FILE")
        }
        let directory = dataDirectory.isEmpty ? "." : dataDirectory
        return directory.hasSuffix("/") ? directory + file : directory + "/" + file
    }

    /// Makes sure the node can keep its memory before it serves anything: creates the file's
    /// directory if missing, reads the file (refusing one that is not a memory), and writes it back
    /// (an empty memory when new). nil when it can, else why not.
    public static func prepare(_ path: String) -> String? {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                return "cannot create the directory of --cluster-state \(path) (\(error.localizedDescription))"
            }
        }
        let history: ClusterHistory
        do { history = try ClusterHistory(path: path) } catch { return error.description }
        if let failure = history.save() { return "cannot write --cluster-state \(path) (\(failure))" }
        return nil
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
