/// Push-back on writers past saturation (issue 17): when the server has more work queued than it
/// can finish quickly, it stops reading from the connections that write, rather than read on and
/// queue seconds of pushes and acknowledgements.
///
/// The backlog has two measures, each with its limit (0 turns it off):
/// - **writes not yet durable**: steps handed to storage whose commit has not been reported (acks
///   wait for them; on one core the storage thread and the loop compete, so reading more only
///   makes every ack later);
/// - **outbound bytes queued**: pushes and replies waiting for sockets, all connections together.
///
/// A connection that sends a write while the backlog is over either limit is paused (the shell
/// stops reading from it: TCP pushes back on the client, which is never disconnected for it; what
/// it already sent is handled in order later, and nothing it was acknowledged is lost). The
/// connections paused are resumed together once both measures are back to half their limits, so a
/// backlog near a limit does not pause and resume every turn. Connections that only read (listens,
/// pings) are never paused.
///
/// When storage keeps up and it is the queued bytes that are over, only the writers whose writes
/// fill the queues are paused: a write that queued less than half of what an average write queues
/// (a moving average up to the push-back) reads on. A client writing small values beside a feed of 256 KB values
/// pushed to twenty readers was paused with the feed (issue 16: 50-110 ms, once a run); writers
/// alike, as in the common shape of many users flapping presence, are all paused as before.
/// Pure: the shell reports writes and backlog changes and performs what this decides.
struct WriterPushback {
    struct Backlog: Equatable {
        var pendingWrites = 0
        var queuedBytes = 0
    }

    let maxPendingWrites: Int
    let maxQueuedBytes: Int
    private(set) var paused: Set<UInt64> = []
    /// Over a limit, and not yet back to half of both.
    private(set) var isPushingBack = false

    init(maxPendingWrites: Int, maxQueuedBytes: Int) {
        self.maxPendingWrites = max(0, maxPendingWrites)
        self.maxQueuedBytes = max(0, maxQueuedBytes)
    }

    var isEnabled: Bool { maxPendingWrites > 0 || maxQueuedBytes > 0 }

    func isOver(_ backlog: Backlog) -> Bool {
        (maxPendingWrites > 0 && backlog.pendingWrites > maxPendingWrites)
            || (maxQueuedBytes > 0 && backlog.queuedBytes > maxQueuedBytes)
    }

    /// Both measures at or under half their limits: reading may resume.
    func hasDrained(_ backlog: Backlog) -> Bool {
        (maxPendingWrites == 0 || backlog.pendingWrites <= maxPendingWrites / 2)
            && (maxQueuedBytes == 0 || backlog.queuedBytes <= maxQueuedBytes / 2)
    }

    /// Bytes an average write added to the outbound queues up to the push-back (each write weighs
    /// 1/16; held while pushing back, so the light writes that go on do not make themselves the
    /// average).
    private(set) var averageQueuedByWrite = 0

    /// Connection `id` sent a write, handled, which added `queuedByWrite` bytes to the outbound
    /// queues (its pushes to every listener, its reply; nil: a write refused unhandled, which
    /// counts as an average one); `backlog` is what is queued now. True when reading from it must
    /// pause (it was not paused already).
    mutating func wrote(_ id: UInt64, backlog: Backlog, queuedByWrite: Int? = nil) -> Bool {
        guard isEnabled else { return false }
        if !isPushingBack, let queuedByWrite {
            averageQueuedByWrite += (min(max(0, queuedByWrite), 1 << 48) - averageQueuedByWrite) / 16
        }
        if !isPushingBack, isOver(backlog) { isPushingBack = true }
        guard isPushingBack else { return false }
        if let queuedByWrite, !storageIsBehind(backlog), queuedByWrite < averageQueuedByWrite / 2 { return false }
        return paused.insert(id).inserted
    }

    /// Writes wait for storage (over half the limit): every writer adds to that, whatever it queues.
    func storageIsBehind(_ backlog: Backlog) -> Bool {
        maxPendingWrites > 0 && backlog.pendingWrites > maxPendingWrites / 2
    }

    /// The backlog changed (a commit was reported, queues drained): the connections to resume
    /// reading from, all at once when it has drained, else none.
    mutating func backlogChanged(_ backlog: Backlog) -> Set<UInt64> {
        guard isPushingBack else { return [] }
        if isOver(backlog) { return [] }
        guard hasDrained(backlog) else { return [] }
        isPushingBack = false
        defer { paused = [] }
        return paused
    }

    /// A connection went away: nothing to resume.
    mutating func closed(_ id: UInt64) {
        paused.remove(id)
    }

    func isPaused(_ id: UInt64) -> Bool { paused.contains(id) }
}
