import PresenceCore
import PresenceRedis

/// Proposals (SEQ) and their failures. An appended entry is answered by the tail (the engine acks
/// when it applies its own entry). A proposal whose outcome is unknown (a timeout, a lost
/// connection) is looked for in the log by its origin, never reported failed while it may be there.
extension ClusterLink {
    func propose(_ proposal: Proposal, on member: ClusterNamespace) {
        guard let epoch = member.epoch else { return }
        let claim: RedisLog.SessionClaim = switch proposal.claim {
        case .none: .none
        case .own(let session): .own(session)
        }
        let sent = MonotonicClock.nanoseconds()
        member.log.append(node: settings.nodeID, epoch: epoch, payload: proposal.payload, claim: claim) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(.appended):
                    metrics.roundTrip(since: sent)
                case .success(.notOwner):
                    answer { engine.proposalFailed(proposal.origin, .notOwner, now: $0) }
                case .success(.epochMismatch(let current)):
                    logger.error("namespace \(member.name): the log has another history (epoch \(current ?? "none")); writes are refused")
                    notAppended(proposal, "the log has another history: Redis lost its data")
                case .success(.fenced):
                    notAppended(proposal, "this node's lease expired")
                    fence("SEQ in namespace \(member.name) found this node's lease expired")
                case .failure(let error) where !error.outcomeUnknown:
                    notAppended(proposal, error.description)
                case .failure:
                    resolve(proposal, after: engine.appliedRevision(namespace: member.name) ?? 0)
                }
            }
        }
    }

    private func notAppended(_ proposal: Proposal, _ reason: String) {
        answer { engine.proposalFailed(proposal.origin, .notAppended(reason), now: $0) }
    }

    /// Reads the log after `rev` for the proposal's origin: absent means it was never appended.
    /// Found, the tail delivers it. A failed read is tried again at the next beat.
    private func resolve(_ proposal: Proposal, after rev: UInt64) {
        guard let member = members[proposal.namespace] else { return }
        member.log.range(after: rev, count: 1000) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(let entries):
                    for entry in entries {
                        if case .proposal(let bytes) = entry.body, let decoded = try? LogEntry(decoding: bytes),
                           decoded.origin == proposal.origin { return }
                    }
                    if let last = entries.last, entries.count == 1000 {
                        resolve(proposal, after: last.rev)
                    } else {
                        notAppended(proposal, "Redis did not answer in time, and the write is not in the log")
                    }
                case .failure:
                    unresolved.append((proposal, after: rev))
                }
            }
        }
    }

    func retryUnresolved() {
        let pending = unresolved
        unresolved = []
        for (proposal, rev) in pending { resolve(proposal, after: rev) }
    }
}
