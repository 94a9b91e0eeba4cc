import PresenceCore
import PresenceLoop
import PresenceRedis

/// The node's side of the operators' scatter-gather (docs/scaling.md, "Operators"): it answers
/// other nodes' asks (through `onAsk`, set by the operator API) and gathers the answers to its own
/// asks, polling the answer list every `pollMicroseconds` until every live node answered, the
/// caller has enough, or the wait is over. At most `maxInFlight` gathers at a time.
final class ClusterAsks {
    static let pollMicroseconds: Int64 = 40_000
    static let maxInFlight = 16
    /// Asks older than this (Redis time) are not answered: nobody waits for them any more.
    static let staleAfterMilliseconds: Int64 = 30_000

    let asks: NodeAsks
    /// The answer to another node's ask, or nil to give none (set by the operator API).
    var onAsk: (NodeAsks.Ask) -> JSON? = { _ in nil }
    fileprivate var gathers: [Gather] = []
    fileprivate var timer: LoopTimer?

    init(connection: RedisConnection, reader: RedisConnection, nodeID: String) {
        asks = NodeAsks(connection: connection, reader: reader, nodeID: nodeID)
    }

    /// What came back: the answers by node id, and the live nodes that did not answer in time.
    struct Gathered {
        var answers: [String: JSON]
        var missing: [String]
        /// Why nothing was asked (Redis unreachable, too many gathers), if so.
        var failure: String?
    }

    fileprivate final class Gather {
        let kind: String
        let expected: Set<String>
        let deadline: Int64
        let enough: ([String: JSON]) -> Bool
        let completion: (Gathered) -> Void
        var askID: String?
        var answers: [String: JSON] = [:]
        var seen = 0
        var polling = false
        var finished = false

        init(kind: String, expected: Set<String>, deadline: Int64, enough: @escaping ([String: JSON]) -> Bool,
             completion: @escaping (Gathered) -> Void) {
            self.kind = kind
            self.expected = expected
            self.deadline = deadline
            self.enough = enough
            self.completion = completion
        }

        var isComplete: Bool { expected.isSubset(of: answers.keys) || enough(answers) }

        func finish(failure: String? = nil) {
            guard !finished else { return }
            finished = true
            completion(Gathered(answers: answers, missing: expected.subtracting(answers.keys).sorted(), failure: failure))
        }
    }
}

extension ClusterLink {
    /// The ids of the nodes whose last node-list beat is younger than the lease, this one excepted:
    /// the nodes an ask waits for. (A node killed stays here until its lease runs out, and is
    /// then reported as not answering; after that it is `silent` and not waited for.)
    func liveOtherNodes(now: Int64) -> Set<String> {
        Set(directory.list.filter { entry in
            entry.id != settings.nodeID && (directory.age(of: entry, now: now).map { $0 <= settings.leaseMilliseconds } ?? false)
        }.map(\.id))
    }

    /// Nodes in the list whose beat is older than the lease: not asked.
    func silentNodes(now: Int64) -> [String] {
        directory.list.filter { entry in
            entry.id != settings.nodeID && (directory.age(of: entry, now: now).map { $0 > settings.leaseMilliseconds } ?? true)
        }.map(\.id).sorted()
    }

    /// Asks every live node `kind` with `body`; `completion` gets their answers once all have
    /// answered, `enough` says so, or `waitMilliseconds` have passed. It may run inside this call.
    func gather(kind: String, body: JSON, waitMilliseconds: Int64, enough: @escaping ([String: JSON]) -> Bool = { _ in false },
                completion: @escaping (ClusterAsks.Gathered) -> Void) {
        let expected = liveOtherNodes(now: WallClock.nowMilliseconds())
        let gather = ClusterAsks.Gather(kind: kind, expected: expected, deadline: Int64(MonotonicClock.nanoseconds() / 1_000_000) + waitMilliseconds,
                                        enough: enough, completion: completion)
        guard !expected.isEmpty else { return gather.finish() }
        guard asking.gathers.count < ClusterAsks.maxInFlight else {
            return gather.finish(failure: "too many cluster-wide requests in flight; try again")
        }
        asking.gathers.append(gather)
        armAskPolling()
        asking.asks.ask(kind: kind, body: Array(JSONWriter.string(body).utf8)) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(let id): gather.askID = id
                case .failure(let error):
                    logger.warning("asking the other nodes (\(kind)) failed: \(error)")
                    endGather(gather, failure: "Redis did not take the request: \(error)")
                }
            }
        }
    }

    /// Another node's ask: answered unless it is stale (a node back after an outage reads a backlog).
    func answerAsk(_ ask: NodeAsks.Ask) {
        if let posted = ask.postedAt, directory.observedAt > 0 {
            let redisNow = directory.redisTime + max(0, WallClock.nowMilliseconds() - directory.observedAt)
            if redisNow - posted > ClusterAsks.staleAfterMilliseconds { return }
        }
        guard let answer = asking.onAsk(ask) else { return }
        asking.asks.answer(ask.id, body: Array(JSONWriter.string(answer).utf8)) { [unowned self] result in
            if case .failure(let error) = result {
                runtime.dispatch { logger.debug("answering ask \(ask.id) (\(ask.kind)) failed: \(error)") }
            }
        }
    }

    private func armAskPolling() {
        if asking.timer == nil { asking.timer = runtime.makeTimer { [unowned self] in pollAnswers() } }
        if asking.timer?.isScheduled == false { asking.timer?.schedule(afterMicroseconds: ClusterAsks.pollMicroseconds) }
    }

    private func pollAnswers() {
        let now = Int64(MonotonicClock.nanoseconds() / 1_000_000)
        for gather in asking.gathers where !gather.polling {
            if now >= gather.deadline {
                endGather(gather)
                continue
            }
            guard let id = gather.askID else { continue }
            gather.polling = true
            asking.asks.answers(to: id, skip: gather.seen) { [unowned self] result in
                runtime.dispatch {
                    gather.polling = false
                    guard case .success(let items) = result else { return }
                    gather.seen += items.count
                    for item in items {
                        guard let answer = try? JSONParser.parse(bytes: item), let node = answer["node"]?.stringValue else { continue }
                        gather.answers[node] = answer
                    }
                    if gather.isComplete { endGather(gather) }
                }
            }
        }
        if !asking.gathers.isEmpty { armAskPolling() }
    }

    private func endGather(_ gather: ClusterAsks.Gather, failure: String? = nil) {
        asking.gathers.removeAll { $0 === gather }
        gather.finish(failure: failure)
    }
}
