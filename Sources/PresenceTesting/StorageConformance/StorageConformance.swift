import PresenceCore
import Testing

/// The checks every `StorageEngine` must pass. An engine's test target runs them, usually one test
/// case per check:
///
/// ```swift
/// @Test(arguments: StorageConformance.Check.allCases)
/// func conformance(_ check: StorageConformance.Check) throws {
///     let dir = makeTemporaryDirectory()
///     try StorageConformance(durable: true) { try SQLiteStorage(directory: dir) }.run(check)
/// }
/// ```
///
/// Every check compares what the engine loads with `StoredState.apply` (the reference semantics)
/// of the same batches, after every commit. Failures are recorded with Swift Testing's `#expect`.
public struct StorageConformance: Sendable {
    public enum Check: String, CaseIterable, Sendable, CustomStringConvertible {
        case emptyLoad
        case scriptedWrites
        case priorities
        case randomWrites
        case multipleNamespaces
        case sessions
        case sessionChanges
        case rules
        case heartbeatAndSequence
        case groupCommit
        case exportImport
        case reopen
        case largeBatch
        case limitUsage

        public var description: String { rawValue }
    }

    /// Opens the engine under test. Called again after `close()` for the reopen checks, where it
    /// must open the same stored data.
    public let open: @Sendable () throws -> any StorageEngine
    /// Whether data survives `close()` and a new `open()`; the reopen checks run only then.
    public let isDurable: Bool

    public init(durable: Bool, open: @escaping @Sendable () throws -> any StorageEngine) {
        self.isDurable = durable
        self.open = open
    }

    public func runAll() throws {
        for check in Check.allCases { try run(check) }
    }

    /// The differential check alone, with another seed and length (for soak runs).
    public func runRandomWrites(seed: UInt64, commits: Int) throws {
        let harness = ConformanceHarness(engine: try open(), open: open, isDurable: isDurable)
        defer { try? harness.engine.close() }
        try harness.randomWrites(seed: seed, commits: commits)
        if isDurable { try harness.reopenEngine() }
    }

    public func run(_ check: Check) throws {
        let harness = ConformanceHarness(engine: try open(), open: open, isDurable: isDurable)
        defer { try? harness.engine.close() }
        switch check {
        case .emptyLoad: try harness.emptyLoad()
        case .scriptedWrites: try harness.scriptedWrites()
        case .priorities: try harness.priorities()
        case .randomWrites: try harness.randomWrites()
        case .multipleNamespaces: try harness.multipleNamespaces()
        case .sessions: try harness.sessions()
        case .sessionChanges: try harness.sessionChanges()
        case .rules: try harness.rules()
        case .heartbeatAndSequence: try harness.heartbeatAndSequence()
        case .groupCommit: try harness.groupCommit()
        case .exportImport: try harness.exportImport()
        case .reopen: try harness.reopen()
        case .largeBatch: try harness.largeBatch()
        case .limitUsage: try harness.limitUsage()
        }
    }
}
