import PresenceCore

/// What the REST API answers a request: its response now, a big read the shell writes in slices,
/// or, on a replicated node, the ticket of the engine's direct request and how to answer from its
/// outcome (`Engine+Direct`). The shell keeps the connection open until that outcome arrives.
public enum RESTAnswer {
    case response(HTTPResponse)
    case sliced(SlicedResponse)
    case pending(DirectTicket, (DirectOutcome) -> RESTAnswer)

    /// The engine's answer, made into a response by `finish` now or when its outcome comes.
    init(_ answer: DirectAnswer, _ finish: @escaping (DirectOutcome) -> HTTPResponse) {
        self.init(answer, answering: { .response(finish($0)) })
    }

    /// The engine's answer, made into an answer by `finish` now or when its outcome comes.
    init(_ answer: DirectAnswer, answering finish: @escaping (DirectOutcome) -> RESTAnswer) {
        switch answer {
        case .now(let outcome): self = finish(outcome)
        case .later(let ticket): self = .pending(ticket, finish)
        }
    }

    /// An outcome of another kind than the request's (a bug, never a client's doing).
    public static let mismatch = HTTPResponse.error(500, "Internal error: the request's outcome is of another kind")
}

/// A `GET` whose answer is too big to make at once (over `--slice-reads-over`): the shell builds
/// its text in slices (`SlicedRead`), answers 413 if the text passes `--max-read-bytes`, else
/// writes it a piece at a time (made pretty piece by piece for `print=pretty`).
public struct SlicedResponse: Sendable {
    public var read: DeferredRead
    public var pretty: Bool

    public init(read: DeferredRead, pretty: Bool) {
        self.read = read
        self.pretty = pretty
    }

    public static let contentType = ("Content-Type", "application/json; charset=utf-8")

    /// The response for the read's outcome (the text, or its refusal), made whole: for callers
    /// without a loop to slice on (`RESTHandler.handle`, tests).
    public func response(for outcome: Result<[UInt8], EngineError>) -> HTTPResponse {
        switch outcome {
        case .failure(let error): return .refusal(for: error)
        case .success(var text):
            if pretty {
                var stream = PrettyJSONStream()
                var out: [UInt8] = []
                stream.append(text, to: &out)
                stream.finish(into: &out)
                text = out
            }
            return .json(200, String(decoding: text, as: UTF8.self))
        }
    }
}
