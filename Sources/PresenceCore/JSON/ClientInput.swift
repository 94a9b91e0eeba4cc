/// Checks for numbers and text that come from clients, shared by every decoder.
///
/// Every number a client sends is a `Double` (JSON); converting one to an integer with `Int(_:)`
/// traps on NaN, infinities and values beyond `Int`'s range, and one such trap stops the server
/// for everyone. Decoders use `integer(_:in:)` instead, which answers nil for anything that is
/// not a whole number inside the range. Error messages quote client text with `quoted(_:)`, which
/// keeps a short, escaped prefix, so a megabyte of hostile input is never echoed or logged whole.
public enum ClientInput {
    /// 2^53 − 1 (`Number.MAX_SAFE_INTEGER`): the largest integer a JavaScript client represents
    /// exactly, and the upper bound of every integer field on the wire (`r`, `t`, `l`, REST limits).
    public static let maxSafeInteger = 9_007_199_254_740_991

    /// How many characters of client text an error message quotes.
    public static let echoLimit = 40

    /// `value` as an `Int` when it is a whole number inside `range`; nil for fractions, NaN,
    /// infinities and anything outside `range`. Never traps.
    public static func integer(_ value: Double, in range: ClosedRange<Int>) -> Int? {
        guard let exact = Int(exactly: value), range.contains(exact) else { return nil }
        return exact
    }

    /// The integer in a JSON member, with the same rules as `integer(_:in:)`; nil for non-numbers.
    public static func integer(_ json: JSON, in range: ClosedRange<Int>) -> Int? {
        guard case .number(let value) = json else { return nil }
        return integer(value, in: range)
    }

    /// `text` as a JSON string literal for an error message, cut to `limit` Unicode scalars.
    /// A cut text ends in `…` and says how long the original was: `"aaaa…" (1048576 bytes)`.
    /// Control characters and quotes are escaped, so the result is safe in a log line. Cost is
    /// bounded by `limit`, not by the length of `text`.
    public static func quoted(_ text: String, limit: Int = echoLimit) -> String {
        var prefix = ""
        var count = 0
        var cut = false
        for scalar in text.unicodeScalars {
            if count == limit {
                cut = true
                break
            }
            prefix.unicodeScalars.append(scalar)
            count += 1
        }
        guard cut else { return JSONWriter.string(.string(prefix)) }
        return JSONWriter.string(.string(prefix + "…")) + " (\(text.utf8.count) bytes)"
    }

    /// A number for an error message: integers without a fraction, others as Swift prints them.
    public static func describe(_ value: Double) -> String {
        var out = ""
        JSONWriter.writeNumber(value, into: &out)
        return value.isFinite ? out : "\(value)"
    }
}
