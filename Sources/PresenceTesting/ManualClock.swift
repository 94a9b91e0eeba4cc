/// A clock the test moves by hand: the core takes `now` as an input, so this is all time is.
public final class ManualClock: @unchecked Sendable {
    public private(set) var now: Int64

    public init(now: Int64 = 1_700_000_000_000) { self.now = now }

    public func advance(byMilliseconds delta: Int64) { now += delta }
}
