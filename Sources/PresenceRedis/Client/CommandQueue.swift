/// A command waiting for its reply, or for a connection to be sent on. Times are on the
/// connection's clock (`RedisClock`, milliseconds).
struct PendingCommand {
    let id: UInt64
    let command: RedisCommand
    /// When the caller stops waiting: the command then fails (`.notSent` if still queued,
    /// `.timedOut` if written; a late reply is dropped).
    let deadline: Int64
    /// How long Redis may hold it once written before its socket counts as dead: the command's
    /// own timeout, never less than the connection's. A caller's short deadline alone does not
    /// tear down a healthy connection.
    let patience: Int64
    let completion: (Result<RedisReply, RedisError>) -> Void
    /// When written: written + patience.
    var stuckAt: Int64 = .max
    /// Its completion has run (timed out while in flight); the reply, when it comes, is dropped.
    var answered = false
}

/// Commands in the order they were sent: the queue of a connection that is not ready yet, or the
/// replies a socket still owes (Redis answers in order, so replies pop from the front).
struct CommandQueue {
    private var items: [PendingCommand] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }

    mutating func append(_ command: PendingCommand) { items.append(command) }

    mutating func popFirst() -> PendingCommand? {
        guard head < items.count else { return nil }
        let first = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    /// The front command if it has this id (replies come in order), else the one with this id.
    mutating func pop(id: UInt64) -> PendingCommand? {
        if head < items.count && items[head].id == id { return popFirst() }
        guard let index = items[head...].firstIndex(where: { $0.id == id }) else { return nil }
        return items.remove(at: index)
    }

    /// In flight: marks the unanswered commands whose deadline has passed as answered and returns
    /// them (in order) for their `.timedOut`; they stay queued to match their replies.
    mutating func answerExpired(now: Int64) -> [PendingCommand] {
        var expired: [PendingCommand] = []
        for index in head..<items.count where !items[index].answered && items[index].deadline <= now {
            items[index].answered = true
            expired.append(items[index])
        }
        return expired
    }

    /// In flight: a command has waited longer than its patience: the socket is dead.
    func isStuck(now: Int64) -> Bool { items[head...].contains { $0.stuckAt <= now } }

    /// In flight: the next moment a deadline or a patience runs out.
    var nextInFlightEvent: Int64? {
        items[head...].lazy.map { $0.answered ? $0.stuckAt : min($0.deadline, $0.stuckAt) }.min()
    }

    /// Removes and returns, in order, the commands whose deadline is at or before `now`.
    mutating func removeExpired(now: Int64) -> [PendingCommand] {
        guard items[head...].contains(where: { $0.deadline <= now }) else { return [] }
        let live = items[head...]
        let expired = live.filter { $0.deadline <= now }
        items = live.filter { $0.deadline > now }
        head = 0
        return expired
    }

    var earliestDeadline: Int64? { items[head...].lazy.map(\.deadline).min() }

    mutating func removeAll() -> [PendingCommand] {
        let all = Array(items[head...])
        items.removeAll()
        head = 0
        return all
    }
}
