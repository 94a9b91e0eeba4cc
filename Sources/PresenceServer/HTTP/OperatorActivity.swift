import PresenceCore
import PresenceLoop
import PresenceWire

/// The last minutes of the server's activity, for the operator dashboard's charts: one sample a
/// second for ten minutes, kept on the loop and read at `GET /.admin/activity[?since=ms]`.
struct ActivitySample: Equatable {
    /// Wall-clock time of the sample (ms since the epoch).
    var time: Int64
    var connections: Int
    var streams: Int
    /// Running totals since the start; rates come from consecutive samples.
    var messagesIn: Int
    var messagesOut: Int
    var pushes: Int
    var writes: Int
}

/// A fixed-size ring of samples: appending past the capacity forgets the oldest.
struct ActivityHistory {
    let capacity: Int
    private var ring: [ActivitySample] = []
    /// Where the next sample goes once the ring is full (its oldest entry).
    private var next = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        ring.reserveCapacity(self.capacity)
    }

    mutating func append(_ sample: ActivitySample) {
        if ring.count < capacity {
            ring.append(sample)
        } else {
            ring[next] = sample
            next = (next + 1) % capacity
        }
    }

    /// Oldest first.
    var samples: [ActivitySample] { Array(ring[next...] + ring[..<next]) }

    /// `{"intervalMs", "capacity", "samples": [{t, connections, streams, messagesIn, messagesOut,
    /// pushes, writes}]}`, oldest first, newer than `since` when given; the four traffic fields are
    /// per second over the interval that ends at `t` (the oldest kept sample has no rates).
    func json(since: Int64?, intervalMilliseconds: Int64) -> JSON {
        let all = samples
        var out: [JSON] = []
        for (index, sample) in all.enumerated() where since.map({ sample.time > $0 }) ?? true {
            var fields: [(String, JSON)] = [
                ("t", .number(Double(sample.time))), ("connections", .number(Double(sample.connections))),
                ("streams", .number(Double(sample.streams))),
            ]
            if index > 0, sample.time > all[index - 1].time {
                let previous = all[index - 1]
                let seconds = Double(sample.time - previous.time) / 1000
                func rate(_ value: Int, _ before: Int) -> JSON { .number(Double(max(0, value - before)) / seconds) }
                fields += [
                    ("messagesIn", rate(sample.messagesIn, previous.messagesIn)),
                    ("messagesOut", rate(sample.messagesOut, previous.messagesOut)),
                    ("pushes", rate(sample.pushes, previous.pushes)), ("writes", rate(sample.writes, previous.writes)),
                ]
            }
            out.append(.object(fields))
        }
        return .object([
            ("intervalMs", .number(Double(intervalMilliseconds))), ("capacity", .number(Double(capacity))),
            ("samples", .array(out)),
        ])
    }
}

/// Takes a sample every second on the server's loop, with one loop timer for the whole server
/// (no per-connection cost).
final class ActivitySampler {
    static let intervalMilliseconds: Int64 = 1_000
    /// Ten minutes.
    private(set) var history = ActivityHistory(capacity: 600)
    private var timer: LoopTimer?

    /// Starts sampling: `take` is called on the loop once a second until the loop shuts down.
    func start(runtime: LoopRuntime, take: @escaping () -> ActivitySample) {
        let timer = runtime.makeTimer { [unowned self] in fire(take) }
        self.timer = timer
        fire(take)
    }

    private func fire(_ take: () -> ActivitySample) {
        history.append(take())
        timer?.schedule(afterMicroseconds: Self.intervalMilliseconds * 1_000)
    }
}

extension OperatorAPI {
    /// Begins the dashboard's one-a-second sampling (once the loop exists).
    func startSampling(runtime: LoopRuntime, streams: EventStreams) {
        activity.start(runtime: runtime) { [unowned self, unowned streams] in
            let (messagesIn, _) = received()
            return ActivitySample(
                time: now(), connections: table.count, streams: streams.count,
                messagesIn: messagesIn, messagesOut: outbox.messagesSent, pushes: outbox.pushes,
                writes: engine.counters.writes.values.reduce(0, +))
        }
    }

    /// `GET /.admin/activity[?since=ms]`: the samples newer than `since` (all ten minutes without).
    func activityResponse(_ request: HTTPRequest) -> HTTPResponse {
        let since = request.query["since"].flatMap { Int64($0) }
        return .json(200, JSONWriter.string(activity.history.json(since: since, intervalMilliseconds: ActivitySampler.intervalMilliseconds)))
    }
}
