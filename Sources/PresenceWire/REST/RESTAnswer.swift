import PresenceCore

/// What the REST API answers a request: its response now, or, on a replicated node, the ticket of
/// the engine's direct request and how to make the response from its outcome (`Engine+Direct`).
/// The shell keeps the connection open until that outcome arrives.
public enum RESTAnswer {
    case response(HTTPResponse)
    case pending(DirectTicket, (DirectOutcome) -> HTTPResponse)

    /// The engine's answer, made into a response by `finish` now or when its outcome comes.
    init(_ answer: DirectAnswer, _ finish: @escaping (DirectOutcome) -> HTTPResponse) {
        switch answer {
        case .now(let outcome): self = .response(finish(outcome))
        case .later(let ticket): self = .pending(ticket, finish)
        }
    }

    /// An outcome of another kind than the request's (a bug, never a client's doing).
    static let mismatch = HTTPResponse.error(500, "Internal error: the request's outcome is of another kind")
}
