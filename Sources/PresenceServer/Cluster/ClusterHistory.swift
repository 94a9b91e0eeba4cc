import Foundation
import PresenceRedis

/// The history (log epoch) of each namespace this node has served, kept in a small file
/// (`--cluster-state FILE`) so that a node started against a Redis that lost its data (restarted
/// without its AOF, or another instance) refuses to serve those namespaces instead of creating a
/// new, empty history: a silent rollback for every client. Without the file a node has no such
/// memory (`--cluster-state none`; docs/scaling.md, "Redis back empty"). By default the file is
/// `<data-dir>/cluster-state-<node name>.json` (`ClusterStateFile`).
///
/// The file is a JSON object, namespace -> epoch, rewritten whole (a temporary file, then a
/// rename) when a namespace is first joined. Accepting a new history on purpose (Redis was
/// re-seeded, or moved) means removing its namespace from the file, or the file.
final class ClusterHistory {
    let path: String
    private(set) var epochs: [String: String]

    struct Unreadable: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String { "--cluster-state \(path): \(reason)" }
    }

    /// Reads the file; a missing file is an empty memory.
    init(path: String) throws(Unreadable) {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else {
            epochs = [:]
            return
        }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw Unreadable(path: path, reason: "cannot be read (\(error.localizedDescription))")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: String] else {
            throw Unreadable(path: path, reason: "is not a JSON object of namespace -> epoch; remove it to forget every history")
        }
        epochs = object
    }

    /// Remembers `epoch` for `namespace`; nil on success, else why the file could not be written.
    func remember(_ epoch: String, for namespace: String) -> String? {
        guard epochs[namespace] != epoch else { return nil }
        epochs[namespace] = epoch
        return save()
    }

    /// Writes the whole memory (a temporary file, then a rename); nil on success, else why not.
    func save() -> String? {
        do {
            let data = try JSONSerialization.data(withJSONObject: epochs, options: [.sortedKeys])
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            return nil
        } catch {
            return error.localizedDescription
        }
    }
}

extension ClusterLink {
    /// Before CREATE: a namespace this node served under another history is refused (the node
    /// fences itself, saying why, and writes nothing to Redis); otherwise `proceed`.
    func checkHistory(_ member: ClusterNamespace, proceed: @escaping () -> Void) {
        guard let history, let remembered = history.epochs[member.name] else { return proceed() }
        member.log.head { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(let head) where head?.epoch == remembered:
                    proceed()
                case .success(let head):
                    let now = head.map { "epoch \($0.epoch)" } ?? "no log at all"
                    fence("Redis lost the history of namespace \(member.name): this node served epoch \(remembered), Redis has \(now). Refusing to serve it (and to create a new, empty history): restore Redis's data, or remove \(member.name) from \(history.path) to accept the new history")
                case .failure(let error):
                    logger.warning("namespace \(member.name): reading its head failed (\(error)); retrying")
                    retries.append { [unowned self] in join(member) }
                }
            }
        }
    }

    /// After CREATE or JOIN told the epoch: remember it (a new namespace, or the first run with the file).
    func rememberHistory(_ epoch: String, of member: ClusterNamespace) {
        guard let history, let failure = history.remember(epoch, for: member.name) else { return }
        logger.error("namespace \(member.name): cannot record its history in \(history.path) (\(failure))")
    }
}
