import Foundation
import PresenceCore
import PresenceStorage
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process (this test binary, running only `crashChild`) commits numbered batches in a
/// loop and prints each number once `commit` has returned; the parent SIGKILLs it mid-stream.
/// Reopening must show every acknowledged batch, whole, and nothing half-applied.
@Suite(.serialized) struct CrashTests {
    static let directoryVariable = "PRESENCE_STORAGE_CRASH_DIR"
    static let durabilityVariable = "PRESENCE_STORAGE_CRASH_DURABILITY"

    /// The child is this test binary run again (`<binary> --testing-library swift-testing --filter
    /// crashChild`), which is how `swift test` runs Swift Testing on Linux; where the binary is
    /// a bundle run by a helper (macOS), the test does not run.
    @Test(.enabled(if: CommandLine.arguments[0].hasSuffix(".xctest")), arguments: SQLiteStorage.Durability.allCases)
    func acknowledgedCommitsSurviveSIGKILL(_ durability: SQLiteStorage.Durability) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var acknowledged: UInt64 = 0
        // Three crashes in a row on the same database: each child recovers what the last one left.
        for round in 0..<3 {
            // The kill lands at a different moment each round: right after an acknowledgement,
            // or a little later, in the middle of a later commit.
            let child = try runChild(directory: directory.path, durability: durability,
                                     killAfter: 80 + round * 60, delayMicroseconds: [0, 1_300, 4_700][round])
            #expect(child.killedBySignal, "the child should die by SIGKILL, not exit")
            #expect(child.lastAck > acknowledged, "the child should acknowledge new commits")
            acknowledged = max(acknowledged, child.lastAck)

            let storage = try SQLiteStorage(directory: directory.path, options: .init(durability: durability))
            defer { try? storage.close() }
            let state = try storage.load()
            let tree = state.namespaces["crash"] ?? .null
            var last: UInt64 = 0
            if case .number(let n)? = tree.node(at: try Path("/last")).leafValue { last = UInt64(n) }
            // Every acknowledged batch is there; an unacknowledged one may be too, but only whole.
            #expect(last >= acknowledged, "round \(round): stored \(last), acknowledged \(acknowledged)")
            #expect(state.lastSequence == last)
            #expect(state.lastHeartbeat == Int64(last))
            let sequences = tree.node(at: try Path("/seq")).children
            #expect(sequences.count == Int(last), "no batch missing or extra")
            for n in stride(from: 1, through: last, by: 1) where sequences[String(n)] != Node(.number(Double(n))) {
                Issue.record("batch \(n) missing after round \(round)")
                break
            }
            if last % 10 == 0 && last > 0 {
                #expect(tree.node(at: try Path("/bulk/\(last)")).children.count == 100, "a bulk write is whole")
            }
            #expect(state.sessions.filter { $0.sessionID != "big" }.count == min(Int(last), 10))
            // The large session's ops, journalled as one change per batch: exactly the replay of
            // the changes of the batches stored.
            let big = state.sessions.first { $0.sessionID == "big" }
            #expect(big?.ops == StoredSession.replay((1...max(1, last)).map(Self.change), onto: Self.bigBase), "round \(round)")
            acknowledged = last
        }
    }

    /// The child's side. Runs only when the parent spawns this binary with the variables set.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[CrashTests.directoryVariable] != nil))
    func crashChild() throws {
        let environment = ProcessInfo.processInfo.environment
        guard let directory = environment[Self.directoryVariable],
            let durability = environment[Self.durabilityVariable].flatMap(SQLiteStorage.Durability.init(rawValue:))
        else { return }
        let storage = try SQLiteStorage(directory: directory, options: .init(durability: durability))
        let stored = try storage.load()
        var next = (stored.lastSequence ?? 0) + 1
        var bigOps = stored.sessions.first { $0.sessionID == "big" }?.ops ?? Self.bigBase
        let deadline = ContinuousClock.now + .seconds(60)  // never outlive a parent that failed to kill
        while ContinuousClock.now < deadline {
            var batch = StorageBatch(sequence: next)
            batch.write(Node(.number(Double(next))), at: try Path("/seq/\(next)"), namespace: "crash")
            batch.write(Node(.number(Double(next))), at: try Path("/last"), namespace: "crash")
            if next % 10 == 0 {
                var children: [String: Node] = [:]
                for index in 0..<100 { children["k\(index)"] = Node(.string(String(repeating: "x", count: 200))) }
                batch.write(.branch(children, priority: nil), at: try Path("/bulk/\(next)"), namespace: "crash")
            }
            batch.upsert(StoredSession(sessionID: "s\(next % 10)", namespace: "crash", identity: "u",
                                       ops: [OnDisconnectOp(path: try Path("/status"), value: [".sv": "timestamp"], credentials: .admin)]))
            // A large queue: one change per batch, and stored whole every 25th (as the core compacts).
            bigOps = StoredSession.replay([Self.change(next)], onto: bigOps)
            if next == 1 || next % 25 == 0 {
                batch.upsert(StoredSession(sessionID: "big", namespace: "crash", identity: "u", ops: bigOps))
            } else {
                batch.mutations.append(.changeSessionOps(sessionID: "big", identity: "u", changes: [Self.change(next)]))
            }
            batch.heartbeat(Int64(next))
            try storage.commit(batch)
            let line = Array("ACK \(next)\n".utf8)
            _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            next += 1
        }
    }

    static let bigBase = (0..<40).map {
        OnDisconnectOp(path: Path(validated: ["rooms", "r\($0)"]), value: ["member": true, "at": ["n": .number(Double($0))]], credentials: .admin)
    }

    /// Batch n's change of the large queue: a set, or every fifth a cancel that splits an op.
    static func change(_ n: UInt64) -> OnDisconnectChange {
        let room = "r\(n % 45)"
        if n % 5 == 0 { return .cancel(Path(validated: ["rooms", room, "at", "n"])) }
        return .set(OnDisconnectOp(path: Path(validated: ["rooms", room]), value: ["member": true, "at": ["n": .number(Double(n))]], credentials: .admin))
    }

    struct ChildResult {
        var lastAck: UInt64
        var killedBySignal: Bool
    }

    /// Spawns the child, waits for `killAfter` acknowledgements and `delayMicroseconds` more,
    /// SIGKILLs it and collects every acknowledgement it printed before dying.
    func runChild(directory: String, durability: SQLiteStorage.Durability, killAfter: Int, delayMicroseconds: UInt32) throws -> ChildResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["--testing-library", "swift-testing", "--filter", "crashChild"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.directoryVariable] = directory
        environment[Self.durabilityVariable] = durability.rawValue
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()

        let reader = output.fileHandleForReading
        var text = ""
        var acks = 0
        var lastAck: UInt64 = 0
        var killed = false
        let deadline = ContinuousClock.now + .seconds(60)
        func consume(_ data: Data) {
            text += String(decoding: data, as: UTF8.self)
            while let newline = text.firstIndex(of: "\n") {
                let line = text[..<newline]
                text.removeSubrange(...newline)
                if line.hasPrefix("ACK "), let n = UInt64(line.dropFirst(4)) {
                    acks += 1
                    lastAck = max(lastAck, n)
                }
            }
        }
        while true {
            let data = reader.availableData
            if data.isEmpty { break }  // end of file: the child is gone
            consume(data)
            if !killed && (acks >= killAfter || ContinuousClock.now > deadline) {
                if delayMicroseconds > 0 { usleep(delayMicroseconds) }
                kill(process.processIdentifier, SIGKILL)
                killed = true
            }
        }
        process.waitUntilExit()
        return ChildResult(lastAck: lastAck,
                           killedBySignal: process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)
    }
}
