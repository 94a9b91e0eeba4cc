/// At most one log line a second for a refusal a flood can repeat thousands of times a second:
/// the first is logged at once, the next ones are counted and summed up in the following line.
struct RefusalLog {
    private var loggedAt: Int64 = .min
    private var unlogged = 0

    /// The line to log now, or nil (counted for the next one).
    mutating func note(_ line: String, now: Int64) -> String? {
        guard loggedAt == .min || now - loggedAt >= 1_000 else {
            unlogged += 1
            return nil
        }
        loggedAt = now
        defer { unlogged = 0 }
        return unlogged == 0 ? line : "\(line) (and \(unlogged) more refused since the last such line)"
    }
}
