/// Requests that do not arrive on a WebSocket (REST reads and writes, rules uploads, streams). A
/// single node answers them at once; a replicated node answers them through a ticket
/// (`Engine+Direct`), once the namespace is loaded and, for a change or a limited read, once its
/// entry has committed on this node.
public struct DirectTicket: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let raw: UInt64

    public init(raw: UInt64) { self.raw = raw }

    public static func < (a: DirectTicket, b: DirectTicket) -> Bool { a.raw < b.raw }
    public var description: String { "ticket \(raw)" }
}

/// What `Engine.submit…` answers: the outcome now, or a ticket whose outcome comes later
/// (`Engine.takeDirectOutcomes`, in the step that decides it).
public enum DirectAnswer {
    case now(DirectOutcome)
    case later(DirectTicket)
}

/// The outcome of a direct request.
public enum DirectOutcome {
    case read(Result<Node, EngineError>)
    /// A read too big to answer at once (`Engine.submitRead`'s `sliced`): the shell writes it in
    /// slices. The rules allowed it; the budget is checked on the text.
    case slicedRead(DeferredRead)
    case write(DirectWriteResult)
    case rules(Result<Void, EngineError>)
    /// The stream is open: its first message (the whole value) is queued for its connection.
    case stream(Result<Void, EngineError>)
    /// The rules in force (`Engine.rules(namespace:)`).
    case rulesDocument((document: JSON, text: String?)?)
    /// An operator's reset of one user's usage of a limit is in force here; true when the user had
    /// usage stored when the reset was ordered (on a cluster: in the replica it was ordered against,
    /// loaded first if this node had let the namespace go).
    case reset(Result<Bool, EngineError>)

    /// A deferred read's outcome: the read, or its refusal by the rules.
    init(_ deferred: Result<DeferredRead, EngineError>) {
        switch deferred {
        case .success(let read): self = .slicedRead(read)
        case .failure(let error): self = .read(.failure(error))
        }
    }

    /// A read's result (nil for another kind).
    public var read: Result<Node, EngineError>? {
        if case .read(let result) = self { return result }
        return nil
    }

    /// A write's result (nil for another kind).
    public var write: DirectWriteResult? {
        if case .write(let result) = self { return result }
        return nil
    }

    /// A rules upload's or a stream's result (nil for another kind).
    public var done: Result<Void, EngineError>? {
        switch self {
        case .rules(let result), .stream(let result): return result
        case .reset(let result): return result.map { _ in () }
        default: return nil
        }
    }
}

/// A direct write's result, and the value at its read-back location at the moment it was decided
/// (committed, or refused as stale), when the request asked for it and the credentials may read
/// it there: the REST ETag of a conditional write, and the current value a 412 answers with.
public struct DirectWriteResult {
    public var result: Result<[(Path, Node)], EngineError>
    public var readBack: Node?

    public init(result: Result<[(Path, Node)], EngineError>, readBack: Node?) {
        self.result = result
        self.readBack = readBack
    }
}

/// A direct request as the engine keeps it until it is answered (re-evaluated as it is after an
/// abort).
enum DirectRequest {
    case read(Path, Credentials, QuerySpec, countsAsUse: Bool, shallow: Bool, sliced: DeferredRead.Form?, hashed: Bool)
    case write(Engine.DirectWrite, Path, Credentials, ifMatch: (path: Path, etag: String)?, readBack: Path?)
    /// A namespace's own rules document (its text); nil forgets it.
    case rules(document: String?)
    case stream(ConnectionID, Path, Credentials, QuerySpec)
    /// The rules in force, once the namespace is loaded.
    case rulesDocument
    /// Forget one user's usage of a limit (an operator's reset), on every node.
    case resetLimit(LimitUsageKey)
}

/// The replicated engine's direct requests: those waiting for their namespace to be loaded, and
/// the outcomes not yet taken by the shell.
struct DirectRequests {
    struct Waiting {
        var ticket: DirectTicket
        var request: DirectRequest
        var deadline: Int64
    }

    var lastTicket: UInt64 = 0
    var waiting: [String: [Waiting]] = [:]
    var outcomes: [(DirectTicket, DirectOutcome)] = []
    /// A limit reset being ordered: whether the user had usage when it was last evaluated.
    var resetHadUsage: [DirectTicket: Bool] = [:]
    /// The earliest deadline of a waiting request (stale-early at worst).
    var earliestDeadline: Int64?

    mutating func nextTicket() -> DirectTicket {
        lastTicket += 1
        return DirectTicket(raw: lastTicket)
    }
}
