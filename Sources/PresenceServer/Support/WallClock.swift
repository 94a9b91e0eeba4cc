#if canImport(Glibc)
import Glibc
#endif

/// The shell's only clock read: milliseconds since the Unix epoch, passed to the core as `now`.
enum WallClock {
    static func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

/// A monotonic clock in nanoseconds, for latency measurements.
enum MonotonicClock {
    static func nanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}

/// Session ids: 16 URL-safe random characters, as opaque as the real server's.
enum SessionIDs {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    /// Never starts with `-` or `_`: operators paste ids into `presence-client admin kick`, where a
    /// leading `-` reads as a flag.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let first = alphabet[Int(generator.next() % 62)]
        return String([first] + (1..<16).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }
}

/// A fresh random session id (for `Engine(makeSessionID:)`).
public func makeSessionID() -> String { SessionIDs.make() }

/// The wall clock in milliseconds since the epoch, for wiring code outside the loop.
public func wallClockMilliseconds() -> Int64 { WallClock.nowMilliseconds() }
