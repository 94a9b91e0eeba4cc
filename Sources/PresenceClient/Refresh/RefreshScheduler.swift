/// A kind of refresh (`online-users`, `last-seen-wording`, `poll/alice`): the key under which a
/// ``RefreshScheduler`` keeps its interval and its last success.
public struct RefreshKind: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let name: String
    public init(_ name: String) { self.name = name }
    public init(stringLiteral value: String) { name = value }
    public var description: String { name }
    public static func < (a: RefreshKind, b: RefreshKind) -> Bool { a.name < b.name }
}

/// How often a kind is refreshed.
public struct RefreshPolicy: Equatable, Sendable {
    /// Data is stale this long after the last successful refresh.
    public var intervalMilliseconds: Int64
    /// The suggested next refresh comes a random extra `[0, jitter × interval)` after the interval,
    /// so that many refreshers started together drift apart. 0 ≤ jitter ≤ 1.
    public var jitter: Double
    /// After a failure, wait this long before handing the kind out again (its data stays stale).
    public var retryMilliseconds: Int64

    public init(intervalMilliseconds: Int64, jitter: Double = 0, retryMilliseconds: Int64? = nil) {
        self.intervalMilliseconds = max(0, intervalMilliseconds)
        self.jitter = min(max(jitter, 0), 1)
        self.retryMilliseconds = max(0, retryMilliseconds ?? min(self.intervalMilliseconds, 30_000))
    }
}

/// Decides when each kind of refresh is due and runs them under a concurrency limit.
///
/// Pure and single-threaded: time comes in as `now` (ms since the epoch) and randomness from the
/// injected source (uniform in [0, 1)). The owner drives it from one thread (the client's service
/// thread): ``takeDue(now:)`` hands out the refreshes that are due, up to ``concurrencyLimit``
/// running at once; the owner starts each one and reports its outcome with
/// ``complete(_:success:now:)``. Only a success moves a kind's timestamp, and successes are written
/// to the ``RefreshStore`` at once, so a new scheduler on the same store knows them.
public struct RefreshScheduler {
    /// A refresh handed out by the scheduler; report its end with ``RefreshScheduler/complete(_:success:now:)``.
    public struct Ticket: Hashable, Sendable {
        public let id: Int
        public let kind: RefreshKind
        /// When it was handed out.
        public let startedAt: Int64
    }

    /// What a completed refresh changed.
    public struct Outcome: Equatable, Sendable {
        public let kind: RefreshKind
        public let success: Bool
        /// The kind's last success after this outcome (unchanged by a failure).
        public let lastSuccess: Int64?
        /// When the kind is next due.
        public let nextRefresh: Int64
    }

    /// At most this many refreshes run at once (at least 1).
    public let concurrencyLimit: Int
    public private(set) var policies: [RefreshKind: RefreshPolicy] = [:]
    /// Registration order: ties between due kinds go to the earlier one.
    public private(set) var kinds: [RefreshKind] = []
    private var lastSuccesses: [RefreshKind: Int64] = [:]
    /// The random extra drawn for the current interval of each kind.
    private var jitterOffsets: [RefreshKind: Int64] = [:]
    /// After a failure: not before this time.
    private var retryNotBefore: [RefreshKind: Int64] = [:]
    private var running: [Int: Ticket] = [:]
    private var nextTicket = 1
    private let store: any RefreshStore
    private var random: () -> Double

    public init(store: any RefreshStore = InMemoryRefreshStore(), concurrencyLimit: Int = 4,
                random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.store = store
        self.concurrencyLimit = max(1, concurrencyLimit)
        self.random = random
        for (name, at) in store.load() { lastSuccesses[RefreshKind(name)] = at }
    }

    // MARK: kinds

    /// Adds a kind, or changes its policy (the jitter already drawn is kept if it still fits).
    public mutating func register(_ kind: RefreshKind, _ policy: RefreshPolicy) {
        if policies[kind] == nil { kinds.append(kind) }
        policies[kind] = policy
        if let offset = jitterOffsets[kind], offset >= maxJitter(policy) && offset > 0 {
            jitterOffsets[kind] = drawJitter(policy)
        }
    }

    /// Forgets a kind (its stored timestamp stays in the store).
    public mutating func unregister(_ kind: RefreshKind) {
        policies[kind] = nil
        kinds.removeAll { $0 == kind }
        jitterOffsets[kind] = nil
        retryNotBefore[kind] = nil
    }

    // MARK: questions

    /// When `kind` last refreshed successfully (nil: never, as far as the store knows).
    public func lastSuccess(_ kind: RefreshKind) -> Int64? { lastSuccesses[kind] }

    /// How old the kind's data is at `now` (nil when it never refreshed).
    public func age(_ kind: RefreshKind, now: Int64) -> Int64? { lastSuccesses[kind].map { max(0, now - $0) } }

    /// True when `kind` never refreshed successfully or its last success is at least one interval old.
    /// Jitter and failures do not change the answer: it is about the age of the data.
    public func shouldRefresh(_ kind: RefreshKind, now: Int64) -> Bool {
        guard let last = lastSuccesses[kind] else { return true }
        let interval = policies[kind]?.intervalMilliseconds ?? 0
        return now - last >= interval
    }

    /// The suggested time of the next refresh of `kind` (never before `now`): one interval after the
    /// last success plus this interval's random jitter, and not before the retry delay after a failure.
    /// A kind that never refreshed is due at `now` (or after its retry delay).
    public mutating func nextRefresh(_ kind: RefreshKind, now: Int64) -> Int64 {
        max(now, dueTime(kind))
    }

    /// True while a ticket of `kind` is out.
    public func isRunning(_ kind: RefreshKind) -> Bool { running.values.contains { $0.kind == kind } }

    /// The tickets out, oldest first.
    public var runningTickets: [Ticket] { running.values.sorted { $0.id < $1.id } }

    /// The earliest ``nextRefresh(_:now:)`` among the registered kinds not running (nil when all run
    /// or none is registered): when to call ``takeDue(now:)`` next.
    public mutating func nextDeadline(now: Int64) -> Int64? {
        var best: Int64?
        for kind in kinds where !isRunning(kind) {
            let t = nextRefresh(kind, now: now)
            if best == nil || t < best! { best = t }
        }
        return best
    }

    // MARK: running

    /// Hands out the due kinds (``nextRefresh(_:now:)`` ≤ `now`, not running), earliest due first,
    /// while fewer than ``concurrencyLimit`` are running. Start each one and report it with
    /// ``complete(_:success:now:)``.
    public mutating func takeDue(now: Int64) -> [Ticket] {
        var due: [(at: Int64, order: Int, kind: RefreshKind)] = []
        for (order, kind) in kinds.enumerated() where !isRunning(kind) {
            let at = dueTime(kind)
            if at <= now { due.append((at, order, kind)) }
        }
        due.sort { ($0.at, $0.order) < ($1.at, $1.order) }
        var out: [Ticket] = []
        for item in due {
            guard running.count < concurrencyLimit else { break }
            out.append(issue(item.kind, now: now))
        }
        return out
    }

    /// Starts `kind` now whether due or not (a forced refresh), unless it is already running or the
    /// concurrency limit is reached (then nil).
    public mutating func start(_ kind: RefreshKind, now: Int64) -> Ticket? {
        guard policies[kind] != nil, !isRunning(kind), running.count < concurrencyLimit else { return nil }
        return issue(kind, now: now)
    }

    /// Reports the end of a refresh. A success records `now` as the kind's last success (and saves
    /// it), draws a new jitter and clears any retry delay; a failure leaves the timestamp alone and
    /// holds the kind back for its retry delay. Unknown or already completed tickets: nil.
    @discardableResult
    public mutating func complete(_ ticket: Ticket, success: Bool, now: Int64) -> Outcome? {
        guard running.removeValue(forKey: ticket.id) != nil else { return nil }
        let policy = policies[ticket.kind]
        if success {
            lastSuccesses[ticket.kind] = now
            retryNotBefore[ticket.kind] = nil
            jitterOffsets[ticket.kind] = policy.map { drawJitter($0) } ?? 0
            save()
        } else if let policy {
            retryNotBefore[ticket.kind] = now + policy.retryMilliseconds
        }
        return Outcome(kind: ticket.kind, success: success, lastSuccess: lastSuccesses[ticket.kind],
                       nextRefresh: max(now, dueTime(ticket.kind)))
    }

    /// Records a success that did not go through a ticket (data obtained another way).
    public mutating func recordSuccess(_ kind: RefreshKind, now: Int64) {
        lastSuccesses[kind] = now
        retryNotBefore[kind] = nil
        jitterOffsets[kind] = policies[kind].map { drawJitter($0) } ?? 0
        save()
    }

    /// Drops every ticket of `kind` without an outcome (its refresh was abandoned).
    public mutating func cancel(_ kind: RefreshKind) {
        running = running.filter { $0.value.kind != kind }
    }

    // MARK: internals

    private mutating func issue(_ kind: RefreshKind, now: Int64) -> Ticket {
        let ticket = Ticket(id: nextTicket, kind: kind, startedAt: now)
        nextTicket += 1
        running[ticket.id] = ticket
        return ticket
    }

    private mutating func dueTime(_ kind: RefreshKind) -> Int64 {
        var at: Int64 = .min
        if let last = lastSuccesses[kind], let policy = policies[kind] {
            let offset: Int64
            if let o = jitterOffsets[kind] {
                offset = o
            } else {
                offset = drawJitter(policy)
                jitterOffsets[kind] = offset
            }
            at = last + policy.intervalMilliseconds + offset
        }
        if let retry = retryNotBefore[kind] { at = max(at, retry) }
        return at
    }

    private func maxJitter(_ policy: RefreshPolicy) -> Int64 {
        Int64((Double(policy.intervalMilliseconds) * policy.jitter).rounded(.down))
    }

    private mutating func drawJitter(_ policy: RefreshPolicy) -> Int64 {
        let span = maxJitter(policy)
        guard span > 0 else { return 0 }
        let u = min(max(random(), 0), 0.999_999_999)
        return min(span - 1, Int64((Double(span) * u).rounded(.down)))
    }

    private func save() {
        var out: [String: Int64] = store.load()
        for (kind, at) in lastSuccesses { out[kind.name] = at }
        store.save(out)
    }
}
