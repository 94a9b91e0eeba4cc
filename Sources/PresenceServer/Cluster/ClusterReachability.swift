import PresenceCore
import PresenceRedis

/// Whether this node reaches Redis, as operators see it (docs/scaling.md, "Redis down when a node
/// starts"): one line when Redis turns unreachable (a node started without it says so plainly),
/// a reminder now and then while it stays away (never a line per attempt: the connection retries
/// every 2 s at most), one line when it is back; and the reason `/readyz` gives. Pure: the caller
/// passes its monotonic time.
struct RedisReachability {
    /// The first reminder comes this long after Redis turned unreachable; each later one twice as
    /// long after the previous, up to `longestReminderMilliseconds`.
    static let firstReminderMilliseconds: Int64 = 30_000
    static let longestReminderMilliseconds: Int64 = 600_000

    struct Outage: Equatable {
        var since: Int64
        var reason: String
        var attempts: Int
        var nextReminder: Int64
        var reminderGap: Int64
    }

    let address: String
    private(set) var everConnected = false
    private(set) var outage: Outage?

    init(address: String) { self.address = address }

    var isDown: Bool { outage != nil }

    /// A connect attempt failed or the connection was lost: the line to log, if this starts an outage.
    mutating func failed(_ reason: String, retryInMilliseconds retry: Int64, at now: Int64) -> String? {
        if var outage {
            outage.reason = reason
            outage.attempts += 1
            self.outage = outage
            return nil
        }
        outage = Outage(since: now, reason: reason, attempts: 1, nextReminder: now + Self.firstReminderMilliseconds,
                        reminderGap: Self.firstReminderMilliseconds)
        guard everConnected else {
            return "cannot reach Redis at \(address) (\(reason)): the node runs without it, answering /readyz with 503 and requests with unavailable, until it connects; retrying with backoff (at most every 2 s, logged again only now and then)"
        }
        return "Redis \(address) unreachable (\(reason)); retrying in \(retry) ms"
    }

    /// Connected: the line to log, if this ends an outage.
    mutating func connected(at now: Int64) -> String? {
        defer {
            outage = nil
            everConnected = true
        }
        guard let outage else { return nil }
        let span = "after \(Self.seconds(now - outage.since)) s and \(Self.attempts(outage.attempts))"
        return everConnected ? "Redis \(address) reachable again \(span)" : "Redis \(address) reachable \(span): catching up, then ready"
    }

    /// At each beat: a reminder while the outage lasts, rarely.
    mutating func reminder(at now: Int64) -> String? {
        guard var outage, now >= outage.nextReminder else { return nil }
        outage.reminderGap = min(outage.reminderGap * 2, Self.longestReminderMilliseconds)
        outage.nextReminder = now + outage.reminderGap
        self.outage = outage
        return "Redis \(address) still unreachable after \(Self.seconds(now - outage.since)) s (\(Self.attempts(outage.attempts)); last: \(outage.reason)); retrying"
    }

    /// Why the node cannot reach Redis, for `/readyz` and for requests answered `unavailable`.
    func unreachableReason(at now: Int64) -> String {
        guard let outage else { return "not connected to Redis at \(address) yet" }
        return "Redis at \(address) unreachable for \(Self.seconds(now - outage.since)) s (\(outage.reason))"
    }

    private static func seconds(_ milliseconds: Int64) -> Int64 { max(0, milliseconds) / 1000 }

    private static func attempts(_ count: Int) -> String { count == 1 ? "1 failed attempt" : "\(count) failed attempts" }
}

extension ClusterLink {
    /// Why `/readyz` answers 503, or nil when the node is ready.
    var notReadyReason: String? {
        if fenced { return "fenced: this node stopped serving and is shutting down" }
        if !isConnected { return reachability.unreachableReason(at: clock.milliseconds()) }
        if !preloading.isEmpty { return "loading namespaces \(preloading.sorted().joined(separator: ", ")) (catching up with their logs)" }
        return nil
    }

    /// A step of loading `member` failed (opening its log, joining its lease table, reading its
    /// head or snapshot): the requests waiting for the namespace are answered `unavailable` now,
    /// rather than for as long as Redis stays away, and `retry` runs at the next beat (at once when
    /// Redis comes back). While Redis is unreachable this is not logged again per attempt.
    func loadAttemptFailed(_ member: ClusterNamespace, _ what: String, _ error: RedisError, retry: @escaping () -> Void) {
        // Not connected: the command waited for a connection (its failure may even come before
        // the connection's own first failure, when both wait for the same timeout).
        let down = reachability.isDown || !isConnected
        if down {
            logger.debug("namespace \(member.name): \(what) failed (\(error)); retrying")
        } else {
            logger.warning("namespace \(member.name): \(what) failed (\(error)); retrying")
        }
        retries.append(retry)
        let cause = down ? reachability.unreachableReason(at: clock.milliseconds()) : "\(what) failed: \(error)"
        let reason = "namespace \(member.name) is not loaded on this node yet (\(cause)); retry"
        answer { engine.loadFailed(namespace: member.name, reason: reason, now: $0) }
    }

    /// Work that waited for Redis (CREATE, JOIN, a head read...), now.
    func runRetries() {
        let jobs = retries
        retries = []
        for job in jobs { job() }
    }
}
