#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds on a monotonic clock. Every timing decision of the Redis client (command and
/// connect deadlines, backoff, lease fencing) reads time through this, so tests can move it by hand.
public protocol RedisClock: AnyObject {
    func milliseconds() -> Int64
}

/// CLOCK_MONOTONIC: never jumps with the wall clock, so an NTP step cannot expire every deadline.
public final class RedisMonotonicClock: RedisClock {
    public init() {}

    public func milliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
