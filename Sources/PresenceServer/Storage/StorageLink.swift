import Logging
import PresenceCore
import PresenceLoop

/// The loop's side of durable storage: hands each step's changes to the storage thread
/// (`StorageWriter`), records a heartbeat every second, and brings "durable up to N" back to the
/// loop through the runtime's inbox, where the outbound path and the HTTP responder release the
/// acknowledgements waiting for it. Without storage everything here is a no-op.
final class StorageLink {
    private let storage: (any StorageEngine)?
    private let logger: Logger
    private var writer: StorageWriter?
    private var heartbeat: LoopTimer?

    init(storage: (any StorageEngine)?, logger: Logger) {
        self.storage = storage
        self.logger = logger
    }

    /// Storage opened, restored, and its thread running (for `/readyz`).
    var isReady: Bool { storage == nil || writer != nil }

    /// Starts the storage thread and the heartbeat, and stores what restoring produced.
    /// `durable` runs on the loop with each sequence storage reports durable.
    func start(engine: Engine, runtime: LoopRuntime, durable: @escaping @Sendable (UInt64) -> Void) {
        guard let storage else { return }
        let logger = logger
        let writer = StorageWriter(
            storage: storage,
            onDurable: { sequence in runtime.post { durable(sequence) } },
            onFailure: { error in
                // Acknowledging writes that are not stored would lie to clients: stop instead.
                logger.critical("storage failed, stopping: \(error)")
                LWSServer.requestStop()
            })
        writer.start()
        self.writer = writer
        _ = submit(engine)
        heartbeat = runtime.makeTimer { [unowned self] in beat() }
        beat()
    }

    /// Hands the engine's journal to storage; returns its sequence (what acks of this step wait
    /// for), nil without storage or changes.
    func submit(_ engine: Engine) -> UInt64? {
        guard let writer, let batch = engine.takeJournal() else { return nil }
        writer.submit(batch)
        return batch.sequence
    }

    /// "Still alive at T", every second: after a crash, sessions count as ended there.
    private func beat() {
        guard let writer else { return }
        writer.submit(StorageBatch(mutations: [.heartbeat(WallClock.nowMilliseconds())]))
        heartbeat?.schedule(afterMicroseconds: 1_000_000)
    }

    /// After the loop ended: store the last changes (the goodbyes of a graceful stop) and close.
    func stop(engine: Engine) {
        guard let writer else { return }
        if let batch = engine.takeJournal() { writer.submit(batch) }
        writer.submit(StorageBatch(mutations: [.heartbeat(WallClock.nowMilliseconds())]))
        writer.stop()
        self.writer = nil
        do {
            try storage?.close()
        } catch {
            logger.error("closing storage: \(error)")
        }
    }
}
