/// Each connection's share of a turn of the loop (issue 16): the loop time its messages took in the
/// current turn. Past `--slice-microseconds` the connection yields: it is not read from again
/// before the turn ends, so the other clients' messages that arrived meanwhile go first. Without
/// it, a client that sends many costly messages at once (50 writes that each move 20 tagged
/// windows, in one TCP read) held the loop for milliseconds while its message budget still
/// allowed them, and everyone else waited behind it. Kept here, for the connections that spoke in
/// this turn only, rather than in each connection (whose size is counted: bytes per connection).
struct TurnShare {
    /// Loop time one connection's messages may take in one turn (0: no limit).
    let share: UInt64
    private var used: [UInt64: UInt64] = [:]
    /// Connections that had their share of this turn.
    private(set) var yielded: Set<UInt64> = []

    init(shareNanoseconds: UInt64) { share = shareNanoseconds }

    /// Adds `spent` to `id`'s use of this turn; true when it has now had more than its share and
    /// must yield (once per turn).
    mutating func spend(_ spent: UInt64, by id: UInt64) -> Bool {
        guard share > 0, spent > 0 else { return false }
        let (sum, overflow) = used[id, default: 0].addingReportingOverflow(spent)
        let total = overflow ? UInt64.max : sum
        used[id] = total
        guard total > share, !yielded.contains(id) else { return false }
        yielded.insert(id)
        return true
    }

    /// The turn is over: every connection starts afresh; returns those that yielded in it. Called
    /// every turn, so a turn with nothing to clear costs two checks (clearing a set just returned
    /// would copy its storage).
    mutating func turnEnded() -> Set<UInt64> {
        if !used.isEmpty { used.removeAll(keepingCapacity: true) }
        guard !yielded.isEmpty else { return [] }
        let ended = yielded
        yielded = []
        return ended
    }
}
