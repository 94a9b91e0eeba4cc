import Logging
import PresenceCore
import PresenceLoop

/// Drives the engine after anything that may have changed it (a message, a close, a REST request,
/// a timer, a reload): hands the step's changes to storage, has the outbound path perform the
/// step's effects (acks wait for those changes to be durable), makes the engine forget connections
/// the outbound path dropped, records limit checks, and arms the one timer for the engine's next
/// deadline.
final class EngineSteps {
    private let engine: Engine
    private let metrics: ServerMetrics
    private let storage: StorageLink
    private let outbox: Outbox
    private let cluster: ClusterLink?
    /// The JSON-lines log of limit checks, when configured.
    let limitEventLog: LimitEventLog?
    /// Replicated mode: the outcomes of REST requests and streams answered through tickets, with
    /// the storage sequence their responses wait for (set by `HTTPRoute`). Called before the
    /// step's messages go out, so that a stream opened here gets its first message.
    var onDirectOutcomes: ([(DirectTicket, DirectOutcome)], UInt64?) -> Void = { _, _ in }
    private var timer: LoopTimer!
    private var timerDeadline: Int64?
    /// For the engine's notices: a connection's first refusal by a per-connection limit, the
    /// namespace cap reached (`Engine.takeNotices`).
    private let logger = Logger(label: "presence-server")

    init(engine: Engine, metrics: ServerMetrics, storage: StorageLink, outbox: Outbox, limitEventLog: LimitEventLog?,
         runtime: LoopRuntime, cluster: ClusterLink? = nil) {
        self.cluster = cluster
        self.engine = engine
        self.metrics = metrics
        self.storage = storage
        self.outbox = outbox
        self.limitEventLog = limitEventLog
        timer = runtime.makeTimer { [unowned self] in
            timerDeadline = nil
            engine.tick(now: WallClock.nowMilliseconds())
            run()
        }
    }

    /// One step. `writeStartedAt` (monotonic ns) times write-to-push for a write's pushes. Returns
    /// the sequence the step's acknowledgements wait for, if storage is on and it changed anything.
    @discardableResult
    func run(writeStartedAt: UInt64? = nil) -> UInt64? {
        var barrier: UInt64?
        while true {
            let sequence = storage.submit(engine)
            if let sequence { barrier = sequence }
            let outcomes = engine.takeDirectOutcomes()
            if !outcomes.isEmpty { onDirectOutcomes(outcomes, sequence) }
            outbox.perform(engine.drainEffects(), barrier: sequence, writeStartedAt: writeStartedAt)
            cluster?.perform(engine.drainClusterEffects())
            // A slow reader leaves the engine now (its listeners, its onDisconnect ops), not when
            // its socket finally closes; what that produces is performed in the same step.
            let dropped = outbox.takeDropped()
            if dropped.isEmpty { break }
            let now = WallClock.nowMilliseconds()
            for id in dropped { engine.disconnect(ConnectionID(id), now: now) }
        }
        recordLimitEvents()
        for notice in engine.takeNotices() { logger.warning("\(notice)") }
        armTimer()
        return barrier
    }

    /// Limit checks of the last step: counted in `/metrics` and appended to the event log.
    private func recordLimitEvents() {
        let events = engine.takeLimitEvents()
        guard !events.isEmpty else { return }
        for event in events { metrics.limitChecked(event) }
        limitEventLog?.append(events)
    }

    /// One timer for everything timed in the core. Re-armed only when the deadline moves earlier;
    /// a timer that fires early (far deadlines are capped at an hour, so no arithmetic on a
    /// client's token expiry can overflow) just finds nothing due and re-arms.
    private func armTimer() {
        guard let deadline = engine.nextDeadline else { return }
        if let armed = timerDeadline, armed <= deadline { return }
        timerDeadline = deadline
        let (delay, overflow) = deadline.subtractingReportingOverflow(WallClock.nowMilliseconds())
        let milliseconds = overflow ? Self.longestWait : min(max(delay, 0), Self.longestWait)
        timer.schedule(afterMicroseconds: max(1, milliseconds * 1000))
    }

    private static let longestWait: Int64 = 3_600_000
}
