import Logging
import PresenceCore
import PresenceLoop

/// The loop's side of durable storage: hands each step's changes to the storage thread
/// (`StorageWriter`), all of a turn's steps at once at the end of the loop's turn (`handOver`), records a heartbeat every second, and brings "durable up to N" back to the
/// loop through the runtime's inbox, where the outbound path and the HTTP responder release the
/// acknowledgements waiting for it. Without storage everything here is a no-op.
///
/// When commits fail (a full disk), the storage thread retries them with backoff and nothing is
/// acknowledged meanwhile; `isFailing` turns on (one log line), the engine refuses client writes
/// and onDisconnect registrations with `unavailable` (`Engine.setStorageUnavailable`) and the HTTP
/// route refuses REST writes from their head (503), so clients retry later, while reads go on. The
/// first commit that succeeds turns it off again (one log line) and releases the held
/// acknowledgements.
///
/// Confinement: loop thread only; the storage thread only posts to the loop (hence
/// `@unchecked Sendable`, as `LWSServer`).
final class StorageLink: @unchecked Sendable {
    private let storage: (any StorageEngine)?
    private let logger: Logger
    private let metrics: ServerMetrics
    private var writer: StorageWriter?
    /// This turn's batches, in order, handed over at its end.
    private var turnBatches: [StorageBatch] = []
    private var heartbeat: LoopTimer?
    private var engine: Engine?
    /// Commits are failing: writes are refused until one succeeds (loop thread).
    private(set) var isFailing = false
    /// The last step handed over, and the last one storage reported durable.
    private var submittedUpTo: UInt64 = 0
    private var durableUpTo: UInt64 = 0

    /// Steps (nearly always one write each) handed to storage and not yet reported durable: the
    /// durable queue writers are pushed back on (`WriterPushback`).
    var pendingWrites: Int { Int(clamping: submittedUpTo &- min(durableUpTo, submittedUpTo)) }

    init(storage: (any StorageEngine)?, logger: Logger, metrics: ServerMetrics) {
        self.storage = storage
        self.logger = logger
        self.metrics = metrics
    }

    /// What a REST client is told when its write arrives while commits fail (the engine says the
    /// same to WebSocket clients).
    static let unavailableMessage = "storage cannot take writes now (a commit failed, e.g. a full disk); nothing was written: retry later"

    /// Storage opened, restored, and its thread running (for `/readyz`).
    var isReady: Bool { storage == nil || writer != nil }

    /// Starts the storage thread and the heartbeat, and stores what restoring produced.
    /// `durable` runs on the loop with each sequence storage reports durable.
    func start(engine: Engine, runtime: LoopRuntime, durable: @escaping @Sendable (UInt64) -> Void) {
        guard let storage else { return }
        self.engine = engine
        let writer = StorageWriter(
            storage: storage,
            onDurable: { [unowned self] sequence in
                runtime.post {
                    self.durableUpTo = max(self.durableUpTo, sequence)
                    durable(sequence)
                }
            },
            onFailure: { [unowned self] error in runtime.post { self.failed(error) } },
            onRecovery: { [unowned self] seconds in runtime.post { self.recovered(after: seconds) } })
        writer.start()
        self.writer = writer
        _ = submit(engine)
        heartbeat = runtime.makeTimer { [unowned self] in beat() }
        beat()
    }

    /// Hands the engine's journal to storage; returns its sequence (what acks of this step wait
    /// for), nil without storage or changes.
    func submit(_ engine: Engine) -> UInt64? {
        guard writer != nil, let batch = engine.takeJournal() else { return nil }
        turnBatches.append(batch)
        if let sequence = batch.sequence { submittedUpTo = max(submittedUpTo, sequence) }
        return batch.sequence
    }

    /// The end of the loop's turn: the turn's batches go to the storage thread together (one
    /// wake-up at most).
    func handOver() {
        guard let writer, !turnBatches.isEmpty else { return }
        writer.submit(contentsOf: turnBatches)
        turnBatches.removeAll(keepingCapacity: turnBatches.capacity <= 1_024)
    }

    private func failed(_ error: any Error) {
        guard !isFailing else { return }
        isFailing = true
        engine?.setStorageUnavailable("a commit failed, e.g. a full disk")
        metrics.storageFailing.record(1)
        logger.error("storage failed: \(error). Writes are refused with 'unavailable' (REST 503) until a commit succeeds; reads go on; retrying with backoff (up to 5 s)")
    }

    private func recovered(after seconds: Double) {
        guard isFailing else { return }
        isFailing = false
        engine?.setStorageUnavailable(nil)
        metrics.storageFailing.record(0)
        logger.notice("storage recovered after \(Int(seconds.rounded())) s: writes are accepted again, and the held acknowledgements are sent")
    }

    /// "Still alive at T", every second: after a crash, sessions count as ended there.
    private func beat() {
        guard writer != nil else { return }
        turnBatches.append(StorageBatch(mutations: [.heartbeat(WallClock.nowMilliseconds())]))
        heartbeat?.schedule(afterMicroseconds: 1_000_000)
    }

    /// After the loop ended: store the last changes (the goodbyes of a graceful stop) and close.
    func stop(engine: Engine) {
        guard let writer else { return }
        handOver()
        if let batch = engine.takeJournal() { writer.submit(batch) }
        writer.submit(StorageBatch(mutations: [.heartbeat(WallClock.nowMilliseconds())]))
        let outcome = writer.stop()
        if outcome.unstoredBatches > 0 {
            logger.critical("stopped with \(outcome.unstoredBatches) batches of changes not stored (\(outcome.lastError ?? "storage failing")); none of them was acknowledged to a client")
        }
        self.writer = nil
        do {
            try storage?.close()
        } catch {
            logger.error("closing storage: \(error)")
        }
    }
}
