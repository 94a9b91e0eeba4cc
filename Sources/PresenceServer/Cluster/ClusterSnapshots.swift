import Foundation
import PresenceCore
import PresenceRedis

/// Where one namespace's snapshots stand on this node (docs/scaling.md, "Snapshots and the
/// bounded log"): the newest snapshot it knows of, when it last tried to write one, and the
/// revisions it had applied over the last `--log-keep` (what a snapshot may trim below).
final class SnapshotSchedule {
    /// The newest published snapshot this node knows of (loaded, written, or named by SNAP_BEGIN).
    var knownRev: UInt64 = 0
    /// When this node last tried to write one (or started following): the period counts from here.
    var lastAttemptAt: Int64 = 0
    var writing = false
    /// Loads that found the snapshot deleted under them, in a row.
    var incompleteLoads = 0
    /// (time, applied revision), oldest first: the newest one at least `--log-keep` old says which
    /// revisions every node has had that long.
    private var samples: [(at: Int64, rev: UInt64)] = []

    func started(at now: Int64) {
        lastAttemptAt = now
        writing = false
        samples = []
    }

    func sample(at now: Int64, rev: UInt64, keepMilliseconds: Int64) {
        if samples.last?.rev != rev { samples.append((now, rev)) }
        while samples.count >= 2, samples[1].at <= now - keepMilliseconds { samples.removeFirst() }
    }

    /// Revisions below this were applied here at least `keepMilliseconds` ago (1: none yet).
    func trimBelow(at now: Int64, keepMilliseconds: Int64) -> UInt64 {
        guard let old = samples.last(where: { $0.at <= now - keepMilliseconds }) else { return 1 }
        return old.rev + 1
    }
}

/// Something confined to the loop thread, carried through a worker thread untouched and used
/// again only on the loop (`LoopRuntime.post`).
private struct LoopOnly<T>: @unchecked Sendable {
    let value: T
}

/// Snapshots and the bounded log: every node that serves a namespace offers to write a snapshot
/// every `--snapshot-every` (or `--snapshot-entries` revisions); the snapper lease lets one at a
/// time. Publishing trims the log below the revisions every node had `--log-keep` ago, never past
/// the snapshot. A node that starts following loads the newest published snapshot, then tails the
/// log after it. Encoding and decoding run on a worker thread, off the loop.
extension ClusterLink {
    /// The snapper lease: long enough for one chunk's round trip many times over; renewed while
    /// writing, so that a dead writer's successor starts within this.
    var snapperLeaseMilliseconds: Int64 { max(10_000, 5 * settings.redisTimeoutMilliseconds) }

    /// Every `--node-beat`: offer a snapshot of each namespace that is due.
    func snapshotTick() {
        guard !fenced, !runtime.isStopping, isConnected else { return }
        let now = clock.milliseconds()
        for member in members.values where member.phase == .serving && member.isJoined {
            guard let applied = engine.appliedRevision(namespace: member.name) else { continue }
            let schedule = member.snapshots
            schedule.sample(at: now, rev: applied, keepMilliseconds: settings.logKeepMilliseconds)
            guard !schedule.writing, applied > schedule.knownRev else { continue }
            let due = now - schedule.lastAttemptAt >= settings.snapshotEveryMilliseconds
                || applied - schedule.knownRev >= settings.snapshotEntries
            if due { writeSnapshot(member, now: now) }
        }
    }

    private func writeSnapshot(_ member: ClusterNamespace, now: Int64) {
        guard let lease = member.lease, let snapshot = engine.replicaSnapshot(namespace: member.name) else { return }
        let schedule = member.snapshots
        schedule.writing = true
        schedule.lastAttemptAt = now
        let store = RedisSnapshots(member: lease)
        let generation = member.generation
        store.begin(rev: snapshot.rev, leaseMilliseconds: snapperLeaseMilliseconds) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(.started):
                    guard member.generation == generation else { return schedule.writing = false }
                    encode(snapshot, for: member, store: store)
                case .success(.busy(let holder)):
                    logger.debug("namespace \(member.name): node \(holder) is writing a snapshot")
                    schedule.writing = false
                case let .success(.stale(published, _)):
                    schedule.knownRev = max(schedule.knownRev, published)
                    schedule.writing = false
                case .success(.epochMismatch(let current)):
                    logger.error("namespace \(member.name): no snapshot written: the log has another history now (epoch \(current ?? "none"))")
                    schedule.writing = false
                case .failure(let error):
                    logger.warning("namespace \(member.name): starting a snapshot failed (\(error)); trying again later")
                    schedule.writing = false
                }
            }
        }
    }

    private func encode(_ snapshot: ReplicaSnapshot, for member: ClusterNamespace, store: RedisSnapshots) {
        let token = Self.randomToken()
        offLoop({ Result { () throws(ReplicaSnapshot.EncodingError) in try snapshot.encodedChunks(token: token) } }) { [unowned self] result in
            switch result {
            case .success(let chunks):
                writeChunks(chunks[...], rev: snapshot.rev, count: chunks.count, member: member, store: store,
                            renewedAt: clock.milliseconds())
            case .failure(let error):
                logger.error("namespace \(member.name): the snapshot at revision \(snapshot.rev) cannot be encoded: \(error)")
                member.snapshots.writing = false
            }
        }
    }

    /// Runs `work` on a worker thread (off the event loop), then `done` with its result on the loop.
    private func offLoop<T: Sendable>(_ work: @escaping @Sendable () -> T, then done: @escaping (T) -> Void) {
        let back = LoopOnly(value: done)
        let runtime = runtime
        DispatchQueue.global(qos: .utility).async {
            let result = work()
            runtime.post { back.value(result) }
        }
    }

    /// One chunk per call (at most `ReplicaSnapshot.defaultChunkBytes`, so Redis never blocks long
    /// on one), renewing the snapper lease as time passes; then publish and trim.
    private func writeChunks(_ rest: ArraySlice<(id: String, data: [UInt8])>, rev: UInt64, count: Int,
                             member: ClusterNamespace, store: RedisSnapshots, renewedAt: Int64) {
        let schedule = member.snapshots
        guard let chunk = rest.first else { return publish(rev: rev, count: count, member: member, store: store) }
        guard !fenced, !runtime.isStopping else { return schedule.writing = false }
        let now = clock.milliseconds()
        if now - renewedAt > snapperLeaseMilliseconds / 3 {
            return store.begin(rev: rev, leaseMilliseconds: snapperLeaseMilliseconds) { [unowned self] result in
                runtime.dispatch {
                    guard case .success(.started) = result else {
                        logger.warning("namespace \(member.name): lost the snapshot at revision \(rev) while writing it (\(result))")
                        return schedule.writing = false
                    }
                    writeChunks(rest, rev: rev, count: count, member: member, store: store, renewedAt: now)
                }
            }
        }
        store.write(rev: rev, chunks: [chunk]) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(true):
                    writeChunks(rest.dropFirst(), rev: rev, count: count, member: member, store: store, renewedAt: renewedAt)
                case .success(false):
                    logger.warning("namespace \(member.name): the snapper lease was lost while writing the snapshot at revision \(rev)")
                    schedule.writing = false
                case .failure(let error):
                    logger.warning("namespace \(member.name): writing the snapshot at revision \(rev) failed (\(error)); trying again later")
                    schedule.writing = false
                }
            }
        }
    }

    private func publish(rev: UInt64, count: Int, member: ClusterNamespace, store: RedisSnapshots) {
        let schedule = member.snapshots
        let trimBelow = schedule.trimBelow(at: clock.milliseconds(), keepMilliseconds: settings.logKeepMilliseconds)
        store.finish(rev: rev, chunkCount: count, trimBelow: trimBelow) { [unowned self] result in
            runtime.dispatch {
                schedule.writing = false
                switch result {
                case .success(.published(let min)):
                    schedule.knownRev = max(schedule.knownRev, rev)
                    metrics.snapshotsWritten += 1
                    logger.info("namespace \(member.name): snapshot at revision \(rev) published (\(count) chunks); the log starts at \(min)")
                case .success(.lost):
                    logger.warning("namespace \(member.name): the snapshot at revision \(rev) was not published: another node took the snapper lease")
                case .success(.epochMismatch(let current)):
                    logger.error("namespace \(member.name): the snapshot at revision \(rev) was not published: the log has another history now (epoch \(current ?? "none"))")
                case .failure(let error):
                    logger.warning("namespace \(member.name): publishing the snapshot at revision \(rev) failed (\(error)); trying again later")
                }
            }
        }
    }

    private static func randomToken() -> String {
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<12).map { _ in letters.randomElement()! })
    }

    // MARK: Loading

    /// Follows `member` from its newest published snapshot (`head.snapshot`), then the log after it.
    func loadSnapshot(_ member: ClusterNamespace, head: RedisLog.Head, generation: Int) {
        guard let lease = member.lease else { return }
        loadPage(member, head: head, generation: generation, store: RedisSnapshots(member: lease), cursor: 0, chunks: [:])
    }

    private func loadPage(_ member: ClusterNamespace, head: RedisLog.Head, generation: Int, store: RedisSnapshots,
                          cursor: UInt64, chunks: [String: [UInt8]]) {
        store.page(rev: head.snapshot, cursor: cursor, count: 4) { [unowned self] result in
            runtime.dispatch {
                guard member.generation == generation else { return }
                switch result {
                case .success(let page):
                    let chunks = chunks.merging(page.chunks) { _, new in new }
                    if page.cursor == 0 {
                        decode(chunks, member: member, head: head, generation: generation)
                    } else {
                        loadPage(member, head: head, generation: generation, store: store, cursor: page.cursor, chunks: chunks)
                    }
                case .failure(let error):
                    loadAttemptFailed(member, "reading the snapshot at revision \(head.snapshot)", error) { [unowned self] in
                        if member.generation == generation { startFollowing(member) }
                    }
                }
            }
        }
    }

    private func decode(_ chunks: [String: [UInt8]], member: ClusterNamespace, head: RedisLog.Head, generation: Int) {
        let name = member.name
        let rev = head.snapshot
        let bytes = chunks.values.reduce(0) { $0 + $1.count }
        offLoop({ Result { () throws(ReplicaSnapshot.DecodingError) in
            try ReplicaSnapshot(decodingChunks: chunks, namespace: name, rev: rev)
        } }) { [unowned self] result in
            guard member.generation == generation else { return }
            switch result {
            case .success(let snapshot):
                loaded(snapshot, bytes: bytes, member: member, head: head)
            case .failure(.incomplete(let reason)) where member.snapshots.incompleteLoads < 5:
                // Two newer snapshots were published while this one was read: read the head again.
                member.snapshots.incompleteLoads += 1
                logger.notice("namespace \(name): the snapshot at revision \(rev) went away while it was read (\(reason)); reading the newest")
                startFollowing(member)
            case .failure(let error):
                failFollowing(member, "the snapshot at revision \(rev) cannot be loaded: \(error)")
            }
        }
    }

    private func loaded(_ snapshot: ReplicaSnapshot, bytes: Int, member: ClusterNamespace, head: RedisLog.Head) {
        if let applied = engine.appliedRevision(namespace: member.name), applied > snapshot.rev {
            // Already past it (following again after a gap that a read from an older position
            // reported): the log after what is applied is still there; tail on from it.
            member.phase = .catchingUp(head: head.rev)
            tail.follow(member.keys, after: applied)
            if head.rev <= applied { caughtUp(member) }
            return
        }
        do {
            try engine.loadReplica(snapshot, now: WallClock.nowMilliseconds())
        } catch {
            return failFollowing(member, "the snapshot at revision \(snapshot.rev) cannot be loaded: \(error)")
        }
        member.snapshots.incompleteLoads = 0
        member.snapshots.knownRev = max(member.snapshots.knownRev, snapshot.rev)
        metrics.snapshotsLoaded += 1
        logger.info("namespace \(member.name): loaded the snapshot at revision \(snapshot.rev) (\(bytes) bytes); catching up to \(head.rev) from the log")
        member.phase = .catchingUp(head: head.rev)
        tail.follow(member.keys, after: snapshot.rev)
        if head.rev <= snapshot.rev { caughtUp(member) }
    }
}
