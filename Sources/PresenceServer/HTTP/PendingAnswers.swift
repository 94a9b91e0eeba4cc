import PresenceCore
import PresenceWire

/// REST requests and streams a replicated node answers when the engine's outcome for their ticket
/// arrives (`RESTAnswer.pending`, `Engine.submitStream`): the namespace had to be loaded here, or
/// a change (a write, rules, a limited read's use) had to commit through the log first. Kept by
/// ticket, and by connection so that a client that leaves first is forgotten.
final class PendingAnswers {
    enum Waiter {
        /// An answer made from the outcome.
        case response(OpaquePointer, (DirectOutcome) -> RESTAnswer)
        /// A stream that opens on a successful outcome (engine connection `id`).
        case stream(OpaquePointer, id: UInt64, request: StreamRequest)

        var wsi: OpaquePointer {
            switch self {
            case .response(let wsi, _), .stream(let wsi, _, _): wsi
            }
        }
    }

    private var byTicket: [DirectTicket: Waiter] = [:]
    private var byWSI: [OpaquePointer: DirectTicket] = [:]

    var count: Int { byTicket.count }

    func add(_ ticket: DirectTicket, _ waiter: Waiter) {
        byTicket[ticket] = waiter
        byWSI[waiter.wsi] = ticket
    }

    /// The waiter for an outcome, forgotten; nil when its client has gone.
    func take(_ ticket: DirectTicket) -> Waiter? {
        guard let waiter = byTicket.removeValue(forKey: ticket) else { return nil }
        byWSI.removeValue(forKey: waiter.wsi)
        return waiter
    }

    /// The connection closed: what it waited for, forgotten.
    func closed(_ wsi: OpaquePointer) -> Waiter? {
        guard let ticket = byWSI.removeValue(forKey: wsi) else { return nil }
        return byTicket.removeValue(forKey: ticket)
    }
}
