/// Splits a fuzz input into the parts a target needs, so one byte string can carry a rules
/// document, data and a path at once.
struct FuzzInput {
    let parts: [[UInt8]]

    /// Parts separated by NUL bytes (never valid inside JSON text or a path).
    init(_ bytes: [UInt8], parts count: Int) {
        var parts = bytes.split(separator: 0, maxSplits: count - 1, omittingEmptySubsequences: false).map(Array.init)
        while parts.count < count { parts.append([]) }
        self.parts = parts
    }

    subscript(index: Int) -> [UInt8] { parts[index] }

    /// The part as text, with invalid UTF-8 repaired (what a JSON string or an HTTP line can carry).
    func text(_ index: Int) -> String { String(decoding: parts[index], as: UTF8.self) }
}
