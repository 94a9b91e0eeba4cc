/// A fuzz target: a function of arbitrary bytes that must never trap, hang or break one of the
/// invariants it checks (a broken invariant is a `fatalError`, which libFuzzer records as a crash
/// and saves the input). `presence-fuzz <name>` runs one under libFuzzer, or replays files.
public struct FuzzTarget: Sendable {
    public let name: String
    /// What the bytes are and what is checked, for `presence-fuzz --list` and the docs.
    public let summary: String
    public let run: @Sendable ([UInt8]) -> Void

    public init(name: String, summary: String, run: @escaping @Sendable ([UInt8]) -> Void) {
        self.name = name
        self.summary = summary
        self.run = run
    }

    /// Every target, in the order `make fuzz` runs them.
    public static let all: [FuzzTarget] = [
        JSONFuzzing.target, WireFuzzing.target, RulesFuzzing.target, TokenFuzzing.target,
        PathFuzzing.target, RESTFuzzing.target, QueryFuzzing.target,
    ]

    public static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// Stops the process with a message libFuzzer shows beside the saved input.
func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("invariant broken: \(message())") }
}
