import ArgumentParser
import Foundation
import PresenceCore

/// `presence-bench snapshot`: the cost of a cluster snapshot of one namespace holding `--users`
/// presence nodes (`users/<uid>/presence {online, lastSeen}`) and a full version window of history
/// (`--history` revisions, one presence write each): the bytes stored in Redis, and the time to
/// encode them (the writer, on a worker thread) and to decode them (a node that starts following),
/// in process. Wall-clock times: on a shared machine, take the best of `--runs`.
struct SnapshotBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "snapshot", abstract: "Bytes and time of a cluster snapshot (in process).")

    @Option(help: "Presence nodes in the namespace.")
    var users = 100_000

    @Option(help: "Revisions of version-window history carried along.")
    var history = 10_000

    @Option(help: "Runs; the best time of each phase is reported.")
    var runs = 3

    func run() throws {
        var tree = Node.null
        for index in 0..<users {
            let presence: Node = .branch(["online": Node(.bool(index % 2 == 0)), "lastSeen": Node(.number(1_800_000_000_000 + Double(index)))], priority: nil)
            tree.set(presence, at: Path(validated: ["users", "user\(index)", "presence"]))
        }
        let rev = UInt64(max(history, 1)) * 3
        let window = (0..<history).map { offset -> (rev: UInt64, writes: [WrittenPath]) in
            (rev - UInt64(offset), [WrittenPath(path: Path(validated: ["users", "user\(offset % max(users, 1))", "presence"]), reshapedFrom: 3)])
        }.reversed()
        let snapshot = ReplicaSnapshot(namespace: "bench", rev: rev, tree: tree, rules: nil, limitUsage: [:], history: Array(window))
        var encodeBest = Double.infinity, decodeBest = Double.infinity
        var bytes = 0, chunkCount = 0
        for _ in 0..<max(1, runs) {
            var start = DispatchTime.now().uptimeNanoseconds
            let chunks = try snapshot.encodedChunks(token: "bench")
            encodeBest = min(encodeBest, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            bytes = chunks.reduce(0) { $0 + $1.data.count }
            chunkCount = chunks.count
            let stored = Dictionary(uniqueKeysWithValues: chunks.map { ($0.id, $0.data) })
            start = DispatchTime.now().uptimeNanoseconds
            let decoded = try ReplicaSnapshot(decodingChunks: stored, namespace: "bench", rev: rev)
            decodeBest = min(decodeBest, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            guard decoded.tree == tree, decoded.history.count == history else { throw ValidationError("the snapshot did not round-trip") }
        }
        print("{\"users\":\(users),\"history\":\(history),\"bytes\":\(bytes),\"chunks\":\(chunkCount),\"encode_ms\":\(encodeBest.rounded()),\"decode_ms\":\(decodeBest.rounded())}")
    }
}
