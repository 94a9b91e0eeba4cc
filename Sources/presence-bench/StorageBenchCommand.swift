import ArgumentParser
import Foundation
import PresenceCore
import PresenceStorage

/// `presence-bench storage`: the durable storage engine alone (no server, no sockets): presence
/// writes committed in groups, as the server's storage thread commits one loop iteration's worth.
struct StorageBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storage",
        abstract: "Measure group commits of presence writes in the SQLite storage engine (in process)."
    )

    @Option(help: "Durability mode: full, normal or off.")
    var durability = "normal"

    @Option(help: "Presence writes per commit (the server commits one loop iteration's writes together).")
    var writesPerCommit = 100

    @Option(help: "Commits to measure.")
    var commits = 200

    @Option(help: "Distinct users written (users/<uid>/presence).")
    var users = 10_000

    @Option(help: "Directory for the database; default: a new temporary one, removed afterwards.")
    var directory: String?

    func run() throws {
        guard let mode = SQLiteStorage.Durability(rawValue: durability) else {
            throw ValidationError("--durability must be full, normal or off")
        }
        let dir = directory ?? NSTemporaryDirectory() + "presence-storage-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(atPath: dir) } }
        let storage = try SQLiteStorage(directory: dir, options: .init(durability: mode))
        defer { try? storage.close() }

        func batch(_ number: Int) -> StorageBatch {
            var batch = StorageBatch(sequence: UInt64(number + 1))
            let now = 1_800_000_000_000 + Int64(number)
            for i in 0..<writesPerCommit {
                let user = (number * writesPerCommit + i) * 7_919 % users
                let presence = Node.branch(["online": Node(.bool(i % 2 == 0)), "lastSeen": Node(.number(Double(now)))], priority: nil)
                batch.write(presence, at: Path(validated: ["users", "user\(user)", "presence"]), namespace: "bench")
            }
            batch.heartbeat(now)
            return batch
        }
        // Every user once, so that measured writes replace existing rows as in steady state.
        for first in stride(from: 0, to: users, by: writesPerCommit) { try storage.commit(batch(first / writesPerCommit)) }

        var latencies: [Double] = []
        let start = DispatchTime.now().uptimeNanoseconds
        for number in 0..<commits {
            let prepared = batch(number)
            let before = DispatchTime.now().uptimeNanoseconds
            try storage.commit(prepared)
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - before) / 1e3)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        latencies.sort()
        func percentile(_ p: Double) -> String { String(format: "%.0f", latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) }
        let writes = commits * writesPerCommit
        let result: [(String, String)] = [
            ("scenario", "\"storage\""), ("durability", "\"\(durability)\""), ("writes_per_commit", "\(writesPerCommit)"),
            ("commits", "\(commits)"), ("users", "\(users)"),
            ("writes_per_s", String(format: "%.0f", Double(writes) / seconds)),
            ("commits_per_s", String(format: "%.0f", Double(commits) / seconds)),
            ("us_per_write", String(format: "%.2f", seconds * 1e6 / Double(writes))),
            ("commit_p50_us", percentile(0.5)), ("commit_p99_us", percentile(0.99)),
        ]
        print("{" + result.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    }
}
