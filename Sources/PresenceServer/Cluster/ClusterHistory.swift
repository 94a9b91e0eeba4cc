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
    /// Before CREATE: a namespace this node served under another history is refused (only that
    /// namespace, ClusterRefusals.swift; nothing is written to Redis), unless an operator accepted
    /// the history Redis holds now (`seeded`, `presence-server redis-seed`); otherwise `proceed`.
    func checkHistory(_ member: ClusterNamespace, proceed: @escaping () -> Void) {
        guard let history, let remembered = history.epochs[member.name] else { return proceed() }
        commands.send(RedisCommand("HMGET", member.keys.head, "epoch", "seeded")) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(let reply):
                    let fields = reply.array ?? []
                    let epoch = fields.first?.string
                    if epoch == remembered {
                        liftRefusal(member, "Redis holds its history again")
                        proceed()
                    } else if let epoch, let seeded = fields.dropFirst().first?.integer {
                        liftRefusal(member, "an operator accepted history \(epoch) at \(seeded)")
                        logger.notice("namespace \(member.name): serving history \(epoch), accepted by an operator (redis-seed), in place of \(remembered)")
                        proceed() // CREATE answers EXISTS; the new epoch is remembered then
                    } else {
                        let now = epoch.map { "epoch \($0), which no operator accepted" } ?? "no log at all"
                        refuse(member, "Redis lost the history of namespace \(member.name): this node served epoch \(remembered), Redis has \(now). Restore Redis's data, or accept the loss with presence-server redis-seed (docs/scaling.md)")
                    }
                case .failure(let error):
                    loadAttemptFailed(member, "reading its head", error) { [unowned self] in join(member) }
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
