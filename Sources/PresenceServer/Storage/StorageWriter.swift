import Foundation
import PresenceCore
import PresenceLoop
import Synchronization

/// The storage thread: batches handed over by the loop are committed together (group commit), and
/// the loop is told how far they are durable, so it can release the acknowledgements it held.
///
/// Everything the loop hands over arrives in the engine's order and is committed in that order.
/// The loop hands a turn's batches over at once, and wakes the thread only when it sleeps: while a
/// commit runs, what arrives waits and goes in the next commit, so groups grow with the load and
/// a write costs no wake-up (a semaphore post and a context switch on a shared core).
///
/// A commit that fails (a full disk) changes nothing (the storage engine's contract), so the same
/// batches, with whatever arrived since, are committed again after a backoff (`Retry`) until one
/// succeeds. Meanwhile nothing is reported durable, so no acknowledgement goes out for a write that
/// is not stored; `onFailure` and `onRecovery` mark the outage's start and end.
final class StorageWriter: @unchecked Sendable {
    /// Waits between attempts while commits fail: `initial`, doubling up to `longest`.
    struct Retry: Sendable {
        /// Seconds.
        var initial = 0.05
        var longest = 5.0
        /// At stop, how long to keep trying before giving the unstored batches up.
        var atStop = 5.0
    }

    private struct Pending {
        var batches: [StorageBatch] = []
        var stopping = false
        /// The thread waits for work (a hand-over must signal `wake`).
        var sleeping = false
        /// Hand-overs that had to wake the thread.
        var wakeUps = 0
    }

    /// How a stopped writer left things: batches it could not store (never reported durable).
    struct Outcome: Sendable {
        var unstoredBatches = 0
        var lastError: String?
    }

    private let storage: any StorageEngine
    private let retry: Retry
    private let pending = Mutex(Pending())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let outcome = Mutex(Outcome())
    /// Called on the storage thread after each commit with the last durable sequence.
    private let onDurable: @Sendable (UInt64) -> Void
    /// Called on the storage thread when a commit fails after the last one succeeded.
    private let onFailure: @Sendable (any Error) -> Void
    /// Called on the storage thread when a commit succeeds after failures, with the outage's
    /// length in seconds.
    private let onRecovery: @Sendable (Double) -> Void

    init(storage: any StorageEngine, retry: Retry = Retry(), onDurable: @escaping @Sendable (UInt64) -> Void,
         onFailure: @escaping @Sendable (any Error) -> Void, onRecovery: @escaping @Sendable (Double) -> Void = { _ in }) {
        self.storage = storage
        self.retry = retry
        self.onDurable = onDurable
        self.onFailure = onFailure
        self.onRecovery = onRecovery
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "storage-writer"  // for Foundation; the kernel's name is set in run()
        thread.start()
    }

    /// Hands a batch over (loop thread). Never blocks on the disk.
    func submit(_ batch: StorageBatch) {
        submit(contentsOf: CollectionOfOne(batch))
    }

    /// Hands batches over, in order (loop thread), waking the thread only if it sleeps.
    func submit(contentsOf batches: some Collection<StorageBatch>) {
        guard !batches.isEmpty else { return }
        let mustWake = pending.withLock { state in
            state.batches.append(contentsOf: batches)
            defer { state.sleeping = false }
            if state.sleeping { state.wakeUps += 1 }
            return state.sleeping
        }
        if mustWake { wake.signal() }
    }

    /// How many hand-overs had to wake the storage thread (the rest found it busy).
    var wakeUps: Int { pending.withLock { $0.wakeUps } }

    /// Commits what is left and stops the thread; returns when everything handed over is stored,
    /// or when storage kept failing for `Retry.atStop` (then says what could not be stored).
    @discardableResult
    func stop() -> Outcome {
        pending.withLock { $0.stopping = true }
        wake.signal()
        finished.wait()
        return outcome.withLock { $0 }
    }

    private func run() {
        ThreadScheduling.nameThisThread("storage-writer")
        // Commits are bulk work: they must not take the CPU from the loop the moment a batch wakes them.
        ThreadScheduling.preferThroughput()
        // The kernel holds it to that slice only at its tick (4 ms) or at a wake-up: the engine
        // gives the core back itself, inside a long commit (a checkpoint copies megabytes at once).
        storage.prepareCommitThread(yieldingEvery: ThreadScheduling.bulkSliceMicroseconds)
        func seconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
        var carried: [StorageBatch] = []
        var failingSince: Double?
        var delay = retry.initial
        var stopSince: Double?
        while true {
            if failingSince == nil {
                // Sleep only when nothing is pending (what arrived during the commit goes now).
                let idle = pending.withLock { state -> Bool in
                    state.sleeping = state.batches.isEmpty && !state.stopping
                    return state.sleeping
                }
                if idle { wake.wait() }
            } else {
                _ = wake.wait(timeout: .now() + delay)
            }
            let (batches, stopping) = pending.withLock { state -> ([StorageBatch], Bool) in
                defer { state.batches.removeAll() }
                return (state.batches, state.stopping)
            }
            carried += batches
            if stopping, stopSince == nil { stopSince = seconds() }
            if !carried.isEmpty {
                do {
                    try storage.commit(carried)
                    if let last = carried.compactMap(\.sequence).max() { onDurable(last) }
                    carried = []
                    if let since = failingSince {
                        failingSince = nil
                        delay = retry.initial
                        onRecovery(seconds() - since)
                    }
                } catch {
                    if failingSince == nil {
                        failingSince = seconds()
                        onFailure(error)
                    } else {
                        delay = min(delay * 2, retry.longest)
                    }
                    carried = Self.compactingHeartbeats(carried)
                    outcome.withLock { $0.lastError = "\(error)" }
                }
            }
            if stopping {
                if carried.isEmpty { break }
                if let since = stopSince, seconds() - since >= retry.atStop {
                    outcome.withLock { $0.unstoredBatches = carried.count }
                    break
                }
            }
        }
        finished.signal()
    }

    /// While commits fail, a heartbeat batch arrives every second: keep only the latest (the
    /// liveness clock only needs the last time), so an outage does not grow the retried commit.
    static func compactingHeartbeats(_ batches: [StorageBatch]) -> [StorageBatch] {
        func isHeartbeat(_ batch: StorageBatch) -> Bool {
            batch.sequence == nil && !batch.mutations.isEmpty
                && batch.mutations.allSatisfy { if case .heartbeat = $0 { return true } else { return false } }
        }
        guard let last = batches.lastIndex(where: isHeartbeat) else { return batches }
        return batches.enumerated().filter { $0.offset == last || !isHeartbeat($0.element) }.map(\.element)
    }
}
