/// Load shedding past saturation (issue 17): when the loop has no idle time left (or, durable,
/// too many writes wait for a commit), the server refuses a share of data writes at once with
/// `unavailable` rather than queue them, so the writes it accepts are applied, acknowledged and
/// pushed with a bounded latency. Pure, with the clock outside: the shell closes a window every
/// `windowMilliseconds` with what it measured, and asks `admit` for each data write.
///
/// - **Signal**: a window is *overloaded* when the loop was busy (not waiting in `epoll_wait`) at
///   least `busyPercent` of it *and* what writers sent waits unread in the kernel longer than
///   `maxReadDelayMilliseconds` (their unread bytes over the bytes read per second), or when more
///   than `maxPendingWrites` writes were not yet durable at its end. A busy loop alone is not
///   past saturation: under load it batches (one send per connection per turn) and keeps up at
///   100 % busy, and on a shared core busy counts the time others had the CPU; unread input that
///   waits is what grows the latency. *Calm*: busy 10 points under the threshold or the read
///   delay under half its bound, and pending writes under half theirs.
/// - **Hysteresis**: shedding starts after `startAfterWindows` overloaded windows in a row (one
///   slow turn does not start it); it stops once the shed share has come down to zero in calm
///   windows. Between calm and overloaded the share holds.
/// - **Adaptive share**: the share of writes accepted shrinks by a fifth each overloaded window
///   (down to `1 - maxFraction`), and each calm window grows it in proportion to the idle time
///   left: by `target / busy` (target 5 points under `busyPercent`), between 5 % and twice, so a
///   loop at 45 % busy doubles it and one at 80 % adds an eighth. The accepted work tracks what
///   the loop can do, and it settles where the loop keeps some idle time (the kernel's queues
///   drain), not all-or-nothing, without the swings of halving a large share at once.
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
        /// How long input may wait unread in the kernel, with the loop busy (0: busy alone).
        var maxReadDelayMilliseconds = 0.0
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
        /// How long what writers sent waits unread (their unread bytes over the bytes read per
        /// second); measured only when the loop was busy (else 0).
        var readDelayMilliseconds = 0.0
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

    /// Whether the loop was busy enough for the read delay to be measured.
    func isBusy(_ window: Window) -> Bool {
        settings.busyPercent > 0 && window.busy * 100 >= Double(settings.busyPercent)
    }

    func isOverloaded(_ window: Window) -> Bool {
        (isBusy(window) && window.readDelayMilliseconds > settings.maxReadDelayMilliseconds)
            || (settings.maxPendingWrites > 0 && window.pendingWrites > settings.maxPendingWrites)
    }

    func isCalm(_ window: Window) -> Bool {
        let loopCalm = settings.busyPercent == 0 || window.busy * 100 < Double(settings.busyPercent - 10)
            || window.readDelayMilliseconds < settings.maxReadDelayMilliseconds / 2
        return loopCalm && (settings.maxPendingWrites == 0 || window.pendingWrites <= settings.maxPendingWrites / 2)
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
            fraction = min(settings.maxFraction, 1 - (1 - fraction) * 0.8)
        } else if isCalm(window) {
            let accepted = (1 - fraction) * growth(window)
            if accepted >= 1 {
                fraction = 0
                isShedding = false
                overloadedStreak = 0
                change = .stopped
            } else {
                fraction = 1 - accepted
            }
        }
        refill()
        return change
    }

    /// Connections that wrote in the current window (whose unread input the shell samples).
    var currentWriters: Dictionary<UInt64, Int>.Keys { demand.keys }

    /// How much the accepted share grows after a calm window: the idle time left says how much more
    /// the loop can take (only the pending-writes signal: by half, doubled when they are under a
    /// quarter of the bound).
    private func growth(_ window: Window) -> Double {
        guard settings.busyPercent > 0 else {
            return window.pendingWrites <= settings.maxPendingWrites / 4 ? 2 : 1.5
        }
        let target = Double(max(1, settings.busyPercent - 5)) / 100
        return min(2, max(1.1, target / max(window.busy, 0.01)))
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
