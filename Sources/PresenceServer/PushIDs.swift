/// Push ids for REST POST (§8.5): 8 characters of millisecond time, then 12 random ones, so ids
/// sort by creation time. Placeholder until the query layer's generator (same-millisecond
/// increments) replaces it.
enum PushIDs {
    static let alphabet = Array("-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")

    static func make(now: Int64) -> String {
        var time = now
        var prefix: [Character] = []
        for _ in 0..<8 {
            prefix.append(alphabet[Int(time % 64)])
            time /= 64
        }
        var generator = SystemRandomNumberGenerator()
        let suffix = (0..<12).map { _ in alphabet[Int(generator.next() % 64)] }
        return String(prefix.reversed()) + String(suffix)
    }
}
