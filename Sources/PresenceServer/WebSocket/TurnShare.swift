/// One connection's share of a turn of the loop (issue 16): the loop time its messages took in the
/// current turn. Past `--slice-microseconds` the connection yields: it is not read from again
/// before the next turn, so the other clients' messages that arrived meanwhile go first. Without
/// it, a client that sends many costly messages at once (50 writes that each move 20 tagged
/// windows, in one TCP read) held the loop for milliseconds while its message budget still
/// allowed them, and everyone else waited behind it.
struct TurnShare {
    /// The turn this connection's use was counted in (the loop's turn counter).
    private var turn: UInt64 = 0
    private var nanoseconds: UInt64 = 0
    /// It yielded in `turn` and waits for the turn's end to be read again.
    private(set) var yielded = false

    /// Adds `spent` to the use in `current`; true when the connection has now had more than
    /// `share` of it and must yield (once per turn).
    mutating func spend(_ spent: UInt64, turn current: UInt64, share: UInt64) -> Bool {
        if turn != current {
            turn = current
            nanoseconds = 0
            yielded = false
        }
        let (sum, overflow) = nanoseconds.addingReportingOverflow(spent)
        nanoseconds = overflow ? .max : sum
        guard share > 0, nanoseconds > share, !yielded else { return false }
        yielded = true
        return true
    }

    /// The turn it yielded in is over: it may be read again.
    mutating func resumed() { yielded = false }
}
