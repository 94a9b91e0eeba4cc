import PresenceCore

/// REST parameters that carry a number but change nothing here (§9.1 lists them as "accepted and
/// ignored"): they are still range-checked, so a malformed one is a clear 400 rather than a value
/// silently misread.
enum RESTParameters {
    /// Firebase's ceiling for `timeout`.
    static let maxTimeoutMilliseconds: Int64 = 15 * 60 * 1000

    /// The response refusing the request's parameters, or nil when they are acceptable.
    static func refusal(_ query: [String: String]) -> HTTPResponse? {
        if let timeout = query["timeout"], timeoutMilliseconds(timeout) == nil {
            return .error(400, "timeout must be a whole number of ms, s or min from 1ms to 15min, e.g. 3s; got \(ClientInput.quoted(timeout))")
        }
        return nil
    }

    /// `3ms`, `3s`, `3min` as milliseconds, when within 1 ms…15 min; nil otherwise. Never traps:
    /// at most 9 digits are read and the product is checked.
    static func timeoutMilliseconds(_ text: String) -> Int64? {
        let units: [(suffix: String, milliseconds: Int64)] = [("ms", 1), ("min", 60_000), ("s", 1_000)]
        guard let unit = units.first(where: { text.hasSuffix($0.suffix) }) else { return nil }
        let digits = text.utf8.dropLast(unit.suffix.utf8.count)
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let value = Int64(String(decoding: digits, as: UTF8.self)) else { return nil }
        let (milliseconds, overflow) = value.multipliedReportingOverflow(by: unit.milliseconds)
        guard !overflow, milliseconds >= 1, milliseconds <= maxTimeoutMilliseconds else { return nil }
        return milliseconds
    }
}
