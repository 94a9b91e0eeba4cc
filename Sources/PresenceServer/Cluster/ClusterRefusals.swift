import PresenceCore
import PresenceRedis

/// Namespaces this node refuses to serve because Redis lost the history it served there (Redis
/// restarted without its AOF, or another instance): serving them would be a silent rollback for
/// their clients. Only those namespaces are refused; the node serves every other one
/// (docs/scaling.md, "Redis back empty, or with another history").
///
/// A refused namespace's WebSocket clients are told why (a control `e`, then close 1011; the SDKs
/// reconnect with backoff), its REST requests are answered 503, `/readyz` names it and
/// `/.admin/nodes` gives the reason. Every `--node-beat` the node reads the namespace's head again
/// and serves it once Redis holds the remembered history (its data restored) or a history an
/// operator accepted (`presence-server redis-seed`).
final class NamespaceRefusals {
    /// Namespace -> why, for operators (it names the epochs; clients get `clientMessage`).
    private(set) var reasons: [String: String] = [:]
    /// Set by the server: close the namespace's connections, saying why.
    var onRefused: (_ namespace: String) -> Void = { _ in }

    func reason(for namespace: String) -> String? { reasons[namespace] }

    /// What a client of a refused namespace is told.
    static func clientMessage(_ namespace: String) -> String {
        "Namespace \(namespace) is unavailable: the cluster's Redis lost its recent history, and serving it would roll its data back. An operator must restore Redis or accept the loss"
    }

    /// `/.admin/nodes`: namespace -> reason.
    var json: JSON { .object(reasons.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }) }

    /// Records the refusal; true when it is new (said once in the log, not at every check).
    func refuse(_ namespace: String, _ reason: String) -> Bool {
        defer { reasons[namespace] = reason }
        return reasons[namespace] != reason
    }

    /// The namespace is served again; true when it was refused.
    func lift(_ namespace: String) -> Bool { reasons.removeValue(forKey: namespace) != nil }
}

extension ClusterLink {
    /// Redis does not hold the history this node served in `member`: refuse the namespace (and
    /// only it), close its clients, and check again at the next beat.
    func refuse(_ member: ClusterNamespace, _ reason: String) {
        if refusals.refuse(member.name, reason) {
            logger.critical("refusing namespace \(member.name): \(reason). Every other namespace is served")
            // Later connections are refused as they open (WebSocketRoute, HTTPRoute).
            later { [unowned self] in refusals.onRefused(member.name) }
        }
        member.phase = .failed(reason)
        preloading.remove(member.name) // /readyz lists it as refused instead of waiting for it
        let waiting = member.waiting
        member.waiting = []
        for case .propose(let proposal) in waiting {
            answer { engine.proposalFailed(proposal.origin, .notAppended(reason), now: $0) }
        }
        retries.append { [unowned self] in
            guard case .failed = member.phase, refusals.reason(for: member.name) != nil else { return }
            member.phase = .joining
            join(member)
        }
    }

    /// Redis holds a history this node may serve in `member` again.
    func liftRefusal(_ member: ClusterNamespace, _ why: String) {
        if refusals.lift(member.name) { logger.notice("namespace \(member.name) is served again: \(why)") }
    }
}

extension OperatorAPI {
    /// Closes the WebSocket connections of a namespace the cluster refuses, saying why.
    func closeRefused(namespace: String) {
        let message = NamespaceRefusals.clientMessage(namespace)
        for snapshot in engine.connectionSnapshots() where snapshot.namespace == namespace && !snapshot.isStream && table[snapshot.id.raw] != nil {
            outbox.perform([.send([snapshot.id], .serverError(message)),
                            .close(snapshot.id, code: .internalError, reason: "namespace unavailable")])
        }
    }
}
