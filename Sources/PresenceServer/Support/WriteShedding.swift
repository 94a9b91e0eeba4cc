/// Load shedding past saturation (issue 17): when the loop has no idle time left (or, durable,
/// too many writes wait for a commit), the server refuses a share of data writes at once with
/// `unavailable` rather than queue them, so the writes it accepts are applied, acknowledged and
/// pushed with a bounded latency. Pure, with the clock outside: the shell closes a window every
/// `windowMilliseconds` with what it measured, and asks `admit` for each data write.
///
/// - **Signal**: a window is *overloaded* when the loop was busy (not waiting in `epoll_wait`) at
///   least `busyPercent` of it, or more than `maxPendingWrites` writes were not yet durable at its
///   end; *calm* when busy is 10 points under that and pending writes under half the bound.
/// - **Hysteresis**: shedding starts after `startAfterWindows` overloaded windows in a row (one
///   slow turn does not start it); it stops once the shed share has come down to zero in calm
///   windows. Between calm and overloaded the share holds.
/// - **Adaptive share**: each overloaded window raises the share to refuse by a quarter of what is
///   left (at least 5 points, at most `maxFraction`); each calm window lowers it by a tenth (at
///   least 2 points), by half when the loop was mostly idle. So it settles where the loop keeps
///   some idle time (the kernel's queues drain), not all-or-nothing.
/// - **Fairness (max-min)**: from each window's writes per connection, a level is computed such
///   that capping every connection at it keeps `1 - share` of the writes; a connection writing
///   under the level is never refused, a flood is cut down to it. Each connection holds a token
///   bucket refilled by the level each window (capacity at least one write), so a client that
///   writes now and then always finds a token.
struct WriteShedding {
    struct Settings: Equatable {
        /// Loop busy share (percent of a window) that counts as overloaded; 0: not a signal.
        var busyPercent = 0
        /// Writes not yet durable over which a window counts as overloaded; 0: not a signal.
        var maxPendingWrites = 0
        var startAfterWindows = 3
        var maxFraction = 0.99

        var isEnabled: Bool { busyPercent > 0 || maxPendingWrites > 0 }
    }

    /// What the shell measured over one window.
    struct Window: Equatable {
        /// 0...1: the share of the window the loop was not idle.
        var busy: Double
        /// Writes read but not yet durable at the window's end.
        var pendingWrites: Int
    }

    enum Change: Equatable {
        case started
        case stopped
    }

    let settings: Settings
    /// The share of writes to refuse now (0 when not shedding).
    private(set) var fraction = 0.0
    private(set) var isShedding = false
    /// Writes refused since the start.
    private(set) var shedTotal = 0
    private var overloadedStreak = 0
    /// Writes each connection sent in the current window (admitted or not).
    private var demand: [UInt64: Int] = [:]
    /// Tokens per connection that wrote in the last window; others start with a full bucket.
    private var credit: [UInt64: Double] = [:]
    /// Writes a connection may have accepted per window while shedding.
    private(set) var level = Double.infinity

    init(_ settings: Settings) {
        self.settings = settings
    }

    func isOverloaded(_ window: Window) -> Bool {
        (settings.busyPercent > 0 && window.busy * 100 >= Double(settings.busyPercent))
            || (settings.maxPendingWrites > 0 && window.pendingWrites > settings.maxPendingWrites)
    }

    func isCalm(_ window: Window) -> Bool {
        (settings.busyPercent == 0 || window.busy * 100 < Double(settings.busyPercent - 10))
            && (settings.maxPendingWrites == 0 || window.pendingWrites <= settings.maxPendingWrites / 2)
    }

    /// A window ended: adapt the share, recompute the per-connection level from the window's
    /// writes, refill the buckets. Says when shedding starts or stops.
    mutating func closeWindow(_ window: Window) -> Change? {
        guard settings.isEnabled else { return nil }
        var change: Change?
        if !isShedding {
            overloadedStreak = isOverloaded(window) ? overloadedStreak + 1 : 0
            if overloadedStreak >= settings.startAfterWindows {
                isShedding = true
                fraction = 0.25
                change = .started
            }
        } else if isOverloaded(window) {
            fraction = min(settings.maxFraction, fraction + max(0.05, (1 - fraction) * 0.25))
        } else if isCalm(window) {
            let mostlyIdle = settings.busyPercent == 0 || window.busy * 100 < Double(settings.busyPercent) / 2
            fraction = mostlyIdle ? fraction * 0.5 - 0.02 : fraction - max(0.02, fraction * 0.1)
            if fraction <= 0 {
                fraction = 0
                isShedding = false
                overloadedStreak = 0
                change = .stopped
            }
        }
        refill()
        return change
    }

    /// A connection not seen in the last window starts with this many tokens.
    private var capacity: Double { max(1, level) }

    /// Connection `key` sends a data write: true to accept it, false to refuse it.
    mutating func admit(_ key: UInt64) -> Bool {
        guard settings.isEnabled else { return true }
        demand[key, default: 0] += 1
        guard isShedding, level.isFinite else { return true }
        let tokens = credit[key] ?? capacity
        if tokens >= 1 {
            credit[key] = tokens - 1
            return true
        }
        credit[key] = tokens
        shedTotal += 1
        return false
    }

    /// The connection went away.
    mutating func forget(_ key: UInt64) {
        demand.removeValue(forKey: key)
        credit.removeValue(forKey: key)
    }

    /// The level that keeps `1 - fraction` of the window's writes when every connection is capped
    /// at it (water-filling over the connections, fewest writes first); infinite when not shedding.
    static func level(keeping share: Double, of demand: some Collection<Int>) -> Double {
        let total = demand.reduce(0, +)
        guard share < 1, total > 0 else { return .infinity }
        var budget = max(0, share) * Double(total)
        let sorted = demand.sorted()
        for (index, writes) in sorted.enumerated() {
            let even = budget / Double(sorted.count - index)
            if Double(writes) > even { return even }
            budget -= Double(writes)
        }
        return .infinity
    }

    private mutating func refill() {
        guard isShedding else {
            level = .infinity
            credit = [:]
            demand = [:]
            return
        }
        level = Self.level(keeping: 1 - fraction, of: demand.values)
        var next: [UInt64: Double] = [:]
        next.reserveCapacity(demand.count)
        if level.isFinite {
            // A bucket keeps the fraction of a write left over (so a level of 2.8 averages 2.8).
            let full = level + 1
            for key in demand.keys { next[key] = min(full, (credit[key] ?? capacity) + level) }
        }
        credit = next
        demand = [:]
    }
}
