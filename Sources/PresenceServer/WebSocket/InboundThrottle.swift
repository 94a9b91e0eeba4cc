import Logging
import PresenceLoop

/// Where the shell stops reading from a WebSocket connection, for two reasons:
///
/// - its message budget ran out (`MessageBudget`): reading resumes when the budget has refilled,
///   by one timer for all of them (never one per connection: lws inserts timers with a linear
///   sorted insert);
/// - it writes while the server is past saturation (`WriterPushback`): reading resumes, for all
///   of them at once, when the backlog has drained (`backlogChanged`, after each commit report and
///   each turn).
///
/// And for the rest of a turn of the loop, once its messages have taken `--slice-microseconds`
/// of it (`TurnShare`): it is read again when the turn ends.
///
/// A connection is read again only when none holds it.
final class InboundThrottle {
    private let table: ConnectionTable
    private let logger: Logger
    private let metrics: ServerMetrics
    private var paused: [UInt64: Int64] = [:]
    private var timer: LoopTimer!
    private var timerDueAt: Int64?
    private var logs = RefusalLog()
    private var pushbackLogs = RefusalLog()
    private var pushback: WriterPushback
    /// When push-back began (nil: not pushing back): if the queued bytes have not drained after
    /// `stalledPushbackMilliseconds`, they wait for sockets nobody reads.
    private var pushbackSince: Int64?
    /// `--pushback-stall-seconds`.
    private let stalledPushbackMilliseconds: Int64
    /// Drops the connections holding the most queued bytes until the backlog is back to the
    /// given size (`Outbox.dropSlowestReaders`).
    var dropSlowestReaders: (_ target: Int) -> Void = { _ in }
    /// What the server has queued now (writes not yet durable, outbound bytes).
    private let backlog: () -> WriterPushback.Backlog
    /// The loop time each connection's messages took in this turn.
    private var turnShare: TurnShare

    init(table: ConnectionTable, logger: Logger, metrics: ServerMetrics, runtime: LoopRuntime,
         pushback: WriterPushback = WriterPushback(maxPendingWrites: 0, maxQueuedBytes: 0), stalledPushbackMilliseconds: Int64 = 1_000,
         backlog: @escaping () -> WriterPushback.Backlog = { WriterPushback.Backlog() }, turnShareMicroseconds: Int64 = 0) {
        self.table = table
        self.logger = logger
        self.metrics = metrics
        self.pushback = pushback
        self.stalledPushbackMilliseconds = max(1, stalledPushbackMilliseconds)
        self.backlog = backlog
        turnShare = TurnShare(shareNanoseconds: UInt64(max(0, turnShareMicroseconds)) * 1_000)
        timer = runtime.makeTimer { [unowned self] in
            timerDueAt = nil
            resumeDue()
        }
    }

    var pausedCount: Int { paused.count }
    /// Writers not read from now because the server is past saturation.
    var pushedBackCount: Int { pushback.paused.count }

    /// `connection` sent a write, now handled, which added `queuedBytes` to the outbound queues
    /// (nil: refused unhandled): pause reading from it when the server is past saturation and it
    /// is one that fills them (`WriterPushback.wrote`).
    func wrote(_ connection: ShellConnection, queuedBytes: Int?) {
        guard pushback.isEnabled, connection.closing == nil,
              pushback.wrote(connection.id, backlog: backlog(), queuedByWrite: queuedBytes) else { return }
        if pushbackSince == nil {
            let now = WallClock.nowMilliseconds()
            pushbackSince = now
            arm(now + stalledPushbackMilliseconds, now: now)
        }
        if pushback.paused.count == 1 {
            let now = WallClock.nowMilliseconds()
            let queued = backlog()
            if let line = pushbackLogs.note("past saturation (\(queued.pendingWrites) writes not yet durable, \(queued.queuedBytes) bytes queued for sockets): the server stops reading from connections that write until half of it has drained (--pushback-pending-writes \(pushback.maxPendingWrites), --pushback-queued-bytes \(pushback.maxQueuedBytes))", now: now) {
                logger.notice("\(line)")
            }
        }
        connection.pushedBack = true
        if paused[connection.id] == nil { LWSWrite.pauseReading(connection.wsi) }
        metrics.writersPaused.increment()
        metrics.writersPushedBack.record(pushback.paused.count)
    }

    /// The backlog may have shrunk (a commit was reported, a turn's sends went out): once it has
    /// drained, read again from every writer paused for it. True when some were (outside an lws
    /// callback, lws must then be woken to read what it buffered for them).
    @discardableResult
    func backlogChanged() -> Bool {
        guard pushback.isPushingBack else { return false }
        let resumed = pushback.backlogChanged(backlog())
        if !pushback.isPushingBack { pushbackSince = nil }
        guard !resumed.isEmpty else { return false }
        let now = WallClock.nowMilliseconds()
        for id in resumed {
            guard let connection = table[id] else { continue }
            connection.pushedBack = false
            // Not read meanwhile, so not heard: the liveness sweep starts counting again now.
            connection.liveness.heard(at: now)
            if paused[id] == nil, connection.closing == nil, !turnShare.yielded.contains(id) { LWSWrite.resumeReading(connection.wsi) }
        }
        metrics.writersPushedBack.record(pushback.paused.count)
        return true
    }

    /// Charges `bytes` (and a message, when it `ends` one, with the loop time its handling took)
    /// to the connection; pauses reading from it when its budget is exhausted.
    func charge(_ connection: ShellConnection, bytes: Int, endsMessage: Bool, handlingNanoseconds: UInt64) {
        guard connection.budget.isLimited else { return }
        let now = WallClock.nowMilliseconds()
        let cost = MessageBudget.cost(bytes: bytes, endsMessage: endsMessage, handlingNanoseconds: handlingNanoseconds)
        guard !connection.budget.spend(cost, now: now),
              paused[connection.id] == nil else { return }
        let resumeAt = connection.budget.resumeAt(now: now)
        paused[connection.id] = resumeAt
        LWSWrite.pauseReading(connection.wsi)
        metrics.throttled.increment()
        if !connection.wasThrottled {
            connection.wasThrottled = true
            if let line = logs.note("connection \(connection.id) (\(connection.remote)) sends more than \(connection.budget.perSecond) messages a second (burst \(connection.budget.burst); a message costs more the more it carries or the longer the server works on it): reading from it is paused until its budget refills", now: now) {
                logger.notice("\(line)")
            }
        }
        arm(resumeAt, now: now)
    }

    /// `connection`'s message took `nanoseconds` of the loop: past its share of this turn, it is not
    /// read again before the turn ends.
    func handled(_ connection: ShellConnection, nanoseconds: UInt64) {
        guard connection.closing == nil, turnShare.spend(nanoseconds, by: connection.id) else { return }
        LWSWrite.pauseReading(connection.wsi)
    }

    /// A turn of the loop ended: the connections that yielded in it are read again (unless
    /// something else holds them). True when some were: lws must then be woken to read what it
    /// buffered for them.
    func turnEnded() -> Bool {
        var resumed = false
        for id in turnShare.turnEnded() {
            guard let connection = table[id] else { continue }
            if connection.closing == nil, paused[id] == nil, !connection.pushedBack {
                LWSWrite.resumeReading(connection.wsi)
                resumed = true
            }
        }
        return resumed
    }

    func closed(_ id: UInt64) {
        paused.removeValue(forKey: id)
        pushback.closed(id)
    }

    private func arm(_ at: Int64, now: Int64) {
        if let due = timerDueAt, due <= at { return }
        timerDueAt = at
        timer.schedule(afterMicroseconds: max(1, (at - now) * 1_000))
    }

    private func resumeDue() {
        let now = WallClock.nowMilliseconds()
        var next: Int64?
        for (id, at) in paused {
            if at <= now {
                paused.removeValue(forKey: id)
                if let connection = table[id], connection.closing == nil, !connection.pushedBack, !turnShare.yielded.contains(id) {
                    LWSWrite.resumeReading(connection.wsi)
                }
            } else {
                next = min(next ?? at, at)
            }
        }
        if let since = pushbackSince {
            let due = since + stalledPushbackMilliseconds
            if !pushback.isPushingBack {
                pushbackSince = nil
            } else if now >= due {
                relieveStalledPushback(now: now)
                next = min(next ?? now + stalledPushbackMilliseconds, now + stalledPushbackMilliseconds)
            } else {
                next = min(next ?? due, due)
            }
        }
        if let next { arm(next, now: now) }
    }

    /// Push-back has lasted `stalledPushbackMilliseconds`: when it is the queued bytes that have not
    /// drained (not writes waiting for the disk, which drain by themselves), the readers holding
    /// them are dropped; the end of the turn then resumes the writers (`backlogChanged`).
    private func relieveStalledPushback(now: Int64) {
        pushbackSince = now
        let target = pushback.maxQueuedBytes / 2
        guard pushback.maxQueuedBytes > 0, backlog().queuedBytes > target else { return }
        dropSlowestReaders(target)
    }
}
