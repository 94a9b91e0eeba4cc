import Logging
import PresenceLoop

/// Connections whose message budget ran out (`MessageBudget`): reading from them is paused, and
/// one timer resumes each when its budget has refilled (one timer for all of them, never one per
/// connection: lws inserts timers with a linear sorted insert).
final class InboundThrottle {
    private let table: ConnectionTable
    private let logger: Logger
    private let metrics: ServerMetrics
    private var paused: [UInt64: Int64] = [:]
    private var timer: LoopTimer!
    private var timerDueAt: Int64?
    private var logs = RefusalLog()

    init(table: ConnectionTable, logger: Logger, metrics: ServerMetrics, runtime: LoopRuntime) {
        self.table = table
        self.logger = logger
        self.metrics = metrics
        timer = runtime.makeTimer { [unowned self] in
            timerDueAt = nil
            resumeDue()
        }
    }

    var pausedCount: Int { paused.count }

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

    func closed(_ id: UInt64) { paused.removeValue(forKey: id) }

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
                if let connection = table[id], connection.closing == nil { LWSWrite.resumeReading(connection.wsi) }
            } else {
                next = min(next ?? at, at)
            }
        }
        if let next { arm(next, now: now) }
    }
}
