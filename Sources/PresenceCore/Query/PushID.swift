/// Push ids (§8.5): 8 characters of millisecond timestamp and 12 random characters, all from an
/// alphabet in ASCII order, so ids sort by creation time as strings and as keys.
public enum PushID {
    /// `-0-9A-Z_a-z`, in ASCII order.
    public static let alphabet: [Character] = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")

    public static let length = 20

    /// Makes ids that strictly increase (as strings and in key order), like the JS client's
    /// `nextPushId`: a new random part for a new millisecond, the previous random part plus one
    /// for the same millisecond. Unlike the client it never goes backwards: a `now` older than the
    /// last one used is treated as that last one, and when the random part overflows (all `z`)
    /// the timestamp moves on by one millisecond.
    public struct Generator: Sendable {
        private var lastTime: Int64 = -1
        private var lastRandom: [UInt8] = []

        public init() {}

        /// The next id for `now` (milliseconds since the epoch), drawing from the system generator.
        public mutating func next(now: Int64) -> String {
            var random = SystemRandomNumberGenerator()
            return next(now: now, using: &random)
        }

        /// The next id for `now`, drawing any new random characters from `random`.
        public mutating func next<R: RandomNumberGenerator>(now: Int64, using random: inout R) -> String {
            var time = max(now, lastTime, 0)
            if time == lastTime, let carried = Self.increment(lastRandom) {
                lastRandom = carried
            } else {
                if time == lastTime { time += 1 }
                // A loop, not `map`: a closure capturing the inout (zero-sized) system generator
                // makes ThreadSanitizer's access instrumentation fault.
                var digits: [UInt8] = []
                digits.reserveCapacity(12)
                for _ in 0..<12 { digits.append(UInt8(random.next(upperBound: UInt64(64)))) }
                lastRandom = digits
            }
            lastTime = time
            var characters: [Character] = []
            characters.reserveCapacity(PushID.length)
            var remaining = time
            for _ in 0..<8 {
                characters.append(PushID.alphabet[Int(remaining % 64)])
                remaining /= 64
            }
            characters.reverse()
            characters += lastRandom.map { PushID.alphabet[Int($0)] }
            return String(characters)
        }

        /// The random digits plus one (base 64), or nil when they are all at the maximum.
        private static func increment(_ digits: [UInt8]) -> [UInt8]? {
            var result = digits
            var position = result.count - 1
            while position >= 0 {
                if result[position] < 63 {
                    result[position] += 1
                    return result
                }
                result[position] = 0
                position -= 1
            }
            return nil
        }
    }

    /// The millisecond timestamp in the first 8 characters of `id`, or nil if `id` is not a push id.
    public static func timestamp(of id: String) -> Int64? {
        let characters = Array(id)
        guard characters.count == length else { return nil }
        var time: Int64 = 0
        for (offset, character) in characters.enumerated() {
            guard let digit = alphabet.firstIndex(of: character) else { return nil }
            if offset < 8 { time = time * 64 + Int64(digit) }
        }
        return time
    }
}
