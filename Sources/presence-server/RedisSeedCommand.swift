import ArgumentParser
import Foundation
import PresenceRedis

/// `presence-server redis-seed`: the operator's way back after Redis lost a namespace's history
/// (docs/scaling.md, "Redis back empty, or with another history"). Nodes that remember the lost
/// history refuse the namespace; this accepts the loss on purpose, in Redis, where every node sees
/// it within a beat (no state file to edit on each node).
struct RedisSeedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redis-seed",
        abstract: "Accept, on purpose, that Redis lost a namespace's history, so that the cluster's nodes serve it again.",
        discussion: """
            Nodes remember the history of every namespace they served (--cluster-state); after Redis
            lost its data they refuse those namespaces rather than serve them rolled back. First try
            to restore Redis's data (its AOF): the nodes then serve the namespace again by themselves.
            If the data is gone:
              presence-server redis-seed 127.0.0.1:6390 --ns demo --accept-empty
            starts a new, empty history, marked as accepted, and every node serves it within a beat.
            If a node without that memory already started a new history (--cluster-state none, or a
            new node), accept that one instead:
              presence-server redis-seed 127.0.0.1:6390 --ns demo --accept-existing
            Exit 0 when the namespace's history is accepted, 1 when nothing was done (and why).
            """
    )

    // Names apart from the server's own flags (--redis, --node-lease, --redis-timeout), which
    // the parser gives to the server command wherever they stand.
    @Argument(help: "Redis as HOST:PORT, a numeric address, as given to the nodes' --redis.")
    var redis: String

    @Option(help: "The namespace (database) to accept a history for.")
    var ns: String

    @Flag(help: "Redis holds no history of the namespace: start a new, empty one (its data before the loss is gone).")
    var acceptEmpty = false

    @Flag(help: "Redis holds a history that nodes refuse (started by a node without memory): accept it as the namespace's.")
    var acceptExisting = false

    @Option(help: "Seconds of lease written into a new history (what --node-lease writes when a node creates one).")
    var lease = 5.0

    @Option(help: "Seconds to connect to Redis and for the command.")
    var timeout = 2.0

    func validate() throws {
        guard acceptEmpty != acceptExisting else { throw ValidationError("give exactly one of --accept-empty and --accept-existing") }
        guard lease.isFinite, (1...600).contains(lease) else { throw ValidationError("--lease must be between 1 and 600 seconds") }
        guard timeout.isFinite, (0.1...60).contains(timeout) else { throw ValidationError("--timeout must be between 0.1 and 60 seconds") }
    }

    func run() throws {
        let endpoint: RedisEndpoint
        let keys: RedisKeys
        do {
            endpoint = try RedisEndpoint(parsing: redis)
            keys = try RedisKeys(namespace: ns)
        } catch {
            throw ValidationError("\(error)")
        }
        let result = HistorySeed.seed(endpoint, keys: keys, mode: acceptEmpty ? .empty : .existing,
                                      leaseMilliseconds: Int64((lease * 1000).rounded()),
                                      timeoutMilliseconds: Int64((timeout * 1000).rounded()))
        switch result {
        case .success(.seeded(let epoch)):
            print("namespace \(ns): a new, empty history (epoch \(epoch)) is in Redis, accepted; nodes that refused the namespace serve it within a beat")
        case .success(.accepted(let epoch, let rev)):
            print("namespace \(ns): the history in Redis (epoch \(epoch), \(rev) revisions) is accepted; nodes that refused the namespace serve it within a beat")
        case .success(.exists(let epoch, let rev, seeded: true)):
            print("namespace \(ns): Redis holds a history already accepted (epoch \(epoch), \(rev) revisions); nothing to do")
        case .success(.exists(let epoch, let rev, seeded: false)):
            throw refuse("Redis holds a history of namespace \(ns) (epoch \(epoch), \(rev) revisions); nothing done. If the nodes refuse it and it is the data you want served, run again with --accept-existing")
        case .success(.absent):
            throw refuse("Redis holds no history of namespace \(ns); nothing done. To start a new, empty one, run again with --accept-empty")
        case .success(.orphanLog):
            throw refuse("Redis holds the log of namespace \(ns) without its head (\(keys.head)); nothing done. Restore Redis's data, or delete \(keys.log) by hand and run again")
        case .failure(let error):
            FileHandle.standardError.write(Data("error: Redis at \(redis): \(error)\n".utf8))
            throw ExitCode(2)
        }
    }

    /// Nothing was done: why, on stderr, and exit 1.
    private func refuse(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
        return ExitCode(1)
    }
}
