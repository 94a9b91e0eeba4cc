import Glibc
import PresenceClient
import Synchronization

/// Who follows whom in the fan-out and churn shapes: watcher w follows users (w·S + j) mod U for
/// its slots j < S.
struct WatchPattern: Sendable {
    let users: Int
    let subs: Int

    /// User watched by watcher `w` in its subscription slot `j`.
    @inline(__always) func user(_ w: Int, _ j: Int) -> Int { (w * subs + j) % users }
    /// Slot of user `u` in watcher `w`'s subscriptions, if it watches `u`.
    @inline(__always) func slot(_ w: Int, _ u: Int) -> Int? {
        let j = ((u - (w * subs) % users) + users) % users
        return j < subs ? j : nil
    }

    /// How many of `watchers` watchers follow each user.
    func watchersPerUser(watchers: Int) -> [Int] {
        var counts = [Int](repeating: 0, count: users)
        for w in 0..<watchers { for j in 0..<subs { counts[user(w, j)] += 1 } }
        return counts
    }
}

/// The fan-out shape and what it measures, shared by the RTDB (`fanout`) and MQTT (`mqtt-fanout`)
/// generators: U writers flap their presence at R writes/s in total (round robin), W watchers
/// each follow S users. Touched only on the transport's thread, except the two atomics.
final class FanoutLoad: @unchecked Sendable {
    enum Role { case writer(Int), watcher(Int) }

    let users: Int
    let watchers: Int
    let subs: Int
    let pattern: WatchPattern
    let rate: Double
    /// The two numeric fields a writer may embed in each value: its monotonic send time (µs),
    /// which gives exact write→watcher latency, and the user's write sequence number.
    let timeField: String?
    let seqField: String?
    private let timeNeedle: [UInt8]
    private let seqNeedle: [UInt8]

    var roles: [WebSocketConnectionID: Role] = [:]
    var writerConn: [WebSocketConnectionID]
    // Per user.
    var seq: [Int]
    var lastSend: [UInt64]
    var prevSend: [UInt64]
    /// The `lastSeen` the writer itself put in its last value (MQTT has no server timestamp).
    var lastSeenSent: [Int]
    /// Writes not answered yet, in send order: (sequence number, send time); an answered one out of
    /// order (a refusal overtakes the acks that wait for a commit) is marked with sequence 0.
    private(set) var inflight: [[(seq: Int, sentAt: UInt64)]]
    private var inflightHead: [Int]
    /// The last write the server acknowledged (`ok`), and its send time: what every watcher must
    /// end up holding (a refused write changes nothing).
    private(set) var lastAckedSeq: [Int]
    private var lastAckedSend: [UInt64]
    private let watchersOfUser: [Int]
    // Per watcher × subscription slot: what the watcher holds now.
    private var stOnline: [Int8]
    private var stLastSeen: [Int]
    private var stTime: [Int]
    private var stSeq: [Int]

    var failures: [String: Int] = [:]
    var closedUnexpectedly = 0
    /// Auths and listens (or CONNACKs and SUBACKs) answered, and failed connects.
    let ready = Atomic<Int>(0)
    let failedConnects = Atomic<Int>(0)

    // Phases (set by `runFanoutPhases`).
    var writing = false
    var measuring = false
    var startMicros: UInt64 = 0
    /// Writes paced since `startMicros`: sent, or held back by the writer window.
    var writesSent = 0
    /// Unacknowledged writes a writer may have (0: no limit, the default: an open-loop load, as
    /// the SDKs send every write at once). At the limit, a writer skips the write that is due, as
    /// a presence client that sends only its latest state would (`writes_held_back_by_window`).
    var writerWindow = 0
    private var userCursor = 0
    // Measured from the start of measuring.
    private(set) var measuredWrites = 0
    private(set) var writesSkipped = 0
    private(set) var writesHeldBack = 0
    private(set) var maxBehind = 0
    private(set) var writesAcked = 0
    private(set) var writesFailed = 0
    /// Writes answered `unavailable` (the server shedding load past saturation).
    private(set) var writesRefused = 0
    private(set) var acksInWindow = 0
    private(set) var expectedEvents = 0
    private(set) var eventsMeasured = 0
    private(set) var eventsInWindow = 0
    private(set) var eventsLate = 0
    private(set) var eventsUnmatched = 0
    private(set) var perSecond: [Int] = []
    private(set) var latencyBySecond: [LatencySamples] = []
    var latency = LatencySamples(reserve: 1 << 21)
    var ackLatency = LatencySamples(reserve: 1 << 18)

    init(users: Int, watchers: Int, subs: Int, rate: Double, timeField: String?, seqField: String?) {
        self.users = users
        self.watchers = watchers
        self.subs = subs
        self.rate = rate
        self.timeField = timeField
        self.seqField = seqField
        timeNeedle = timeField.map { Array("\"\($0)\":".utf8) } ?? []
        seqNeedle = seqField.map { Array("\"\($0)\":".utf8) } ?? []
        writerConn = .init(repeating: 0, count: users)
        seq = .init(repeating: 0, count: users)
        lastSend = .init(repeating: 0, count: users)
        prevSend = .init(repeating: 0, count: users)
        lastSeenSent = .init(repeating: 0, count: users)
        inflight = .init(repeating: [], count: users)
        inflightHead = .init(repeating: 0, count: users)
        lastAckedSeq = .init(repeating: 0, count: users)
        lastAckedSend = .init(repeating: 0, count: users)
        pattern = WatchPattern(users: users, subs: subs)
        watchersOfUser = pattern.watchersPerUser(watchers: watchers)
        stOnline = .init(repeating: -1, count: watchers * subs)
        stLastSeen = .init(repeating: 0, count: watchers * subs)
        stTime = .init(repeating: 0, count: watchers * subs)
        stSeq = .init(repeating: 0, count: watchers * subs)
    }

    @inline(__always) func user(_ w: Int, _ j: Int) -> Int { pattern.user(w, j) }
    @inline(__always) func slot(_ w: Int, _ u: Int) -> Int? { pattern.slot(w, u) }

    /// Opens every writer connection, then every watcher's (on the transport's thread).
    /// Writers connect to `url`; watchers to `watcherURLs` in turn (a cluster's other nodes), or
    /// to `url` too when there are none.
    func connectAll(_ client: any FanoutClient, to url: WebSocketURL, watcherURLs: [WebSocketURL] = [], sources: [String?]) {
        for i in 0..<users { roles[client.connect(to: url, sourceAddress: sources[i])] = .writer(i) }
        for i in 0..<watchers {
            let target = watcherURLs.isEmpty ? url : watcherURLs[i % watcherURLs.count]
            roles[client.connect(to: target, sourceAddress: sources[users + i])] = .watcher(i)
        }
    }

    func connectFailed(reason: String) {
        failures["connect: \(reason)", default: 0] += 1
        failedConnects.add(1, ordering: .relaxed)
    }

    /// A connection ended; a writer that lost its connection writes no more.
    func closed(_ id: WebSocketConnectionID, unexpected: Bool) {
        guard unexpected else { return }
        closedUnexpectedly += 1
        if case .writer(let u) = roles[id] { writerConn[u] = 0 }
    }

    /// `,"time":µs,"seq":n` for the fields in use (empty when none), to end a JSON object with.
    func extraFields(sentAt: UInt64, seq n: Int) -> String {
        var s = ""
        if let timeField { s += ",\"\(timeField)\":\(sentAt)" }
        if let seqField { s += ",\"\(seqField)\":\(n)" }
        return s
    }

    var allAcked: Bool { inflight.indices.allSatisfy { inflightHead[$0] == inflight[$0].count } }

    /// Sends every write due at `now`: `write(u, sentAt)` for user u, whose `seq[u]` is already
    /// the new value's. Writers without a connection are skipped (and counted).
    func pace(now: UInt64, _ write: (Int, UInt64) -> Void) {
        guard writing else { return }
        let due = Int(rate * Double(now &- startMicros) / 1e6)
        var budget = 5000  // bounded burst per call
        while writesSent < due, budget > 0 {
            budget -= 1
            let u = userCursor
            userCursor = (userCursor + 1) % users
            guard writerConn[u] != 0 else {
                if measuring { writesSkipped += 1 }
                continue
            }
            if writerWindow > 0, outstanding(u) >= writerWindow {
                writesSent += 1
                if measuring { writesHeldBack += 1 }
                continue
            }
            seq[u] += 1
            prevSend[u] = lastSend[u]
            let t = monotonicMicros()
            lastSend[u] = t
            inflight[u].append((seq[u], t))
            write(u, t)
            writesSent += 1
            if measuring {
                measuredWrites += 1
                expectedEvents += watchersOfUser[u]
            }
        }
        if measuring { maxBehind = max(maxBehind, due - writesSent) }
    }

    /// Writes of user u not answered yet (marked ones included: an upper bound).
    private func outstanding(_ u: Int) -> Int { inflight[u].count - inflightHead[u] }

    enum Answer { case ok, refused, failed }

    /// A reply to user u's write number `seq` (nil: the oldest unanswered, for transports whose
    /// acks come in order). Only `ok` ones count as acks in the latency and acks/s, and become the
    /// state watchers must end with; `unavailable` ones (`writes_refused`) are expected past
    /// saturation and never pushed; other failures count in `writes_failed`.
    func acked(_ u: Int, seq: Int? = nil, _ answer: Answer, now: UInt64) {
        let h = inflightHead[u]
        var found: Int?
        if h < inflight[u].count {
            if seq == nil || inflight[u][h].seq == seq { found = h } else { found = inflight[u][(h + 1)...].firstIndex { $0.seq == seq } }
        }
        if let i = found {
            let write = inflight[u][i]
            if answer == .ok {
                if measuring {
                    ackLatency.add(now &- write.sentAt)
                    if writing { acksInWindow += 1 }
                }
                if write.seq > lastAckedSeq[u] {
                    lastAckedSeq[u] = write.seq
                    lastAckedSend[u] = write.sentAt
                }
            } else if answer == .refused, measuring {
                expectedEvents -= watchersOfUser[u]
            }
            inflight[u][i].seq = 0
            var head = h
            while head < inflight[u].count, inflight[u][head].seq == 0 { head += 1 }
            if head == inflight[u].count { inflight[u].removeAll(keepingCapacity: true); head = 0 }
            inflightHead[u] = head
        }
        switch answer {
        case .ok: writesAcked += 1
        case .refused: writesRefused += 1
        case .failed: writesFailed += 1
        }
    }

    /// A push of user u's value (`{"online":…,"lastSeen":…,…}` somewhere in `scan`) to watcher w.
    func pushed(watcher w: Int, user u: Int, value scan: FrameScan, now: UInt64) {
        guard u >= 0, u < users, let j = slot(w, u) else { return }
        let k = w * subs + j
        var online: Int8 = -1
        if let o = scan.find(#""online":"#), o < scan.bytes.count { online = scan.bytes[o] == UInt8(ascii: "t") ? 1 : 0 }
        stOnline[k] = online
        if let ls = scan.find(#""lastSeen":"#) { stLastSeen[k] = scan.int(at: ls) ?? 0 }
        var sentAt: Int?
        if !timeNeedle.isEmpty, let f = scan.find(timeNeedle) { sentAt = scan.int(at: f) }
        if let sentAt { stTime[k] = sentAt }
        if !seqNeedle.isEmpty, let f = scan.find(seqNeedle), let n = scan.int(at: f) { stSeq[k] = n }
        guard measuring, online >= 0 else { return }
        eventsMeasured += 1
        if writing { eventsInWindow += 1 }
        let sec = Int((now &- startMicros) / 1_000_000)
        while perSecond.count <= sec {
            perSecond.append(0)
            latencyBySecond.append(LatencySamples(reserve: 0))
        }
        perSecond[sec] += 1
        let lat: UInt64
        if let sentAt, sentAt > 0, UInt64(sentAt) <= now {
            lat = now - UInt64(sentAt)
        } else if seq[u] > 0, (seq[u] % 2 == 1) == (online == 1), lastSend[u] > 0 {
            lat = now &- lastSend[u]
        } else if seq[u] > 1, prevSend[u] > 0 {
            eventsLate += 1
            lat = now &- prevSend[u]
        } else {
            eventsUnmatched += 1
            return
        }
        latency.add(lat)
        latencyBySecond[sec].add(lat)
    }

    /// The online value user u's write number `n` carries (writers start online, then flap).
    static func online(seq n: Int) -> Bool { n % 2 == 1 }

    /// Compares every watcher's view with each user's last acknowledged write (refused ones change
    /// nothing): `online`, the embedded fields,
    /// and `lastSeen` (equal to what the writer sent, or, for server timestamps, the same for all
    /// of a user's watchers).
    func verify(lastSeenIsWriters: Bool) -> FanoutVerdict {
        var v = FanoutVerdict()
        var firstLastSeen = [Int](repeating: -1, count: users)
        for w in 0..<watchers {
            for j in 0..<subs {
                let u = user(w, j)
                let last = lastAckedSeq[u]
                guard last > 0 else { continue }
                v.checked += 1
                let k = w * subs + j
                let want: Int8 = Self.online(seq: last) ? 1 : 0
                var ok = stOnline[k] == want
                if timeField != nil, ok { ok = UInt64(stTime[k]) == lastAckedSend[u] }
                if seqField != nil, ok { ok = stSeq[k] == last }
                if !ok {
                    v.wrong += 1
                    if v.examples.count < 5 {
                        v.examples.append("watcher\(w) user\(u): online \(stOnline[k]) seq \(stSeq[k]), want \(want) seq \(last)")
                    }
                }
                if lastSeenIsWriters {
                    if stLastSeen[k] != lastSeenSent[u] { v.lastSeenDisagree += 1 }
                } else if firstLastSeen[u] < 0 {
                    firstLastSeen[u] = stLastSeen[k]
                } else if firstLastSeen[u] != stLastSeen[k] {
                    v.lastSeenDisagree += 1
                }
            }
        }
        return v
    }

    /// Everything counted while measuring, as report fields (`writeSeconds`: the measured window).
    func reportFields(writeSeconds: Double) -> [(String, ReportJSON)] {
        let offered = Int((rate * writeSeconds).rounded())
        // The pace is kept when at least 99.5 % of the offered writes went out and the generator
        // was never more than 50 ms of writes behind.
        let paceKept = Double(measuredWrites + writesHeldBack) >= 0.995 * Double(offered) && Double(maxBehind) <= max(rate * 0.05, 5)
        var fields: [(String, ReportJSON)] = [
            ("writes_offered", .int(offered)),
            ("writes_measured", .int(measuredWrites)),
            ("write_rate_achieved", .double(Double(measuredWrites) / writeSeconds)),
            ("writes_max_behind", .int(maxBehind)),
            ("writes_skipped_no_connection", .int(writesSkipped)),
            ("writer_window", .int(writerWindow)),
            ("writes_held_back_by_window", .int(writesHeldBack)),
            ("pace_kept", .bool(paceKept)),
        ]
        if !paceKept {
            fields.append(("pace_warning", .string("the generator sent \(measuredWrites) of \(offered) offered writes (at most \(maxBehind) behind): it did not keep the rate")))
        }
        fields += [
            ("writes_acked_total", .int(writesAcked)),
            ("writes_failed", .int(writesFailed)),
            ("writes_refused_unavailable", .int(writesRefused)),
            ("acks_per_s_in_window", .double(Double(acksInWindow) / writeSeconds)),
            ("ack_latency", ackLatency.summary()),
            ("events_expected", .int(expectedEvents)),
            ("events_delivered", .int(eventsMeasured)),
            ("events_per_s", .double(Double(eventsMeasured) / writeSeconds)),
            ("events_per_s_in_window", .double(Double(eventsInWindow) / writeSeconds)),
            ("events_per_s_by_second", .array(perSecond.map { .int($0) })),
            ("latency_source", .string(timeField.map { "payload field \($0)" } ?? "client-side (user, sequence) match")),
            ("latency", latency.summary()),
            ("latency_p99_us_by_second", .array(latencyBySecond.indices.map { latencyBySecond[$0].percentile(0.99).map { .double($0) } ?? .null })),
            ("events_matched_to_previous_write", .int(eventsLate)),
            ("events_unmatched", .int(eventsUnmatched)),
            ("failures", .object(failures.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
            ("closed_by_server", .int(closedUnexpectedly)),
        ]
        return fields
    }
}

/// The final-state check's findings.
struct FanoutVerdict {
    var checked = 0
    var wrong = 0
    var lastSeenDisagree = 0
    var examples: [String] = []
}
