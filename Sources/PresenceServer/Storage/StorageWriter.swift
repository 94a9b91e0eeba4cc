import Foundation
import PresenceCore
import Synchronization

/// The storage thread: batches handed over by the loop are committed together (group commit), and
/// the loop is told how far they are durable, so it can release the acknowledgements it held.
///
/// Everything the loop hands over arrives in the engine's order and is committed in that order.
final class StorageWriter: @unchecked Sendable {
    private struct Pending {
        var batches: [StorageBatch] = []
        var stopping = false
    }

    private let storage: any StorageEngine
    private let pending = Mutex(Pending())
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Called on the storage thread after each commit with the last durable sequence.
    private let onDurable: @Sendable (UInt64) -> Void
    /// Called on the storage thread when a commit fails: durability can no longer be promised.
    private let onFailure: @Sendable (any Error) -> Void

    init(storage: any StorageEngine, onDurable: @escaping @Sendable (UInt64) -> Void,
         onFailure: @escaping @Sendable (any Error) -> Void) {
        self.storage = storage
        self.onDurable = onDurable
        self.onFailure = onFailure
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "presence-storage"
        thread.start()
    }

    /// Hands a batch over (loop thread). Never blocks on the disk.
    func submit(_ batch: StorageBatch) {
        pending.withLock { $0.batches.append(batch) }
        wake.signal()
    }

    /// Commits what is left and stops the thread; returns when everything handed over is stored.
    func stop() {
        pending.withLock { $0.stopping = true }
        wake.signal()
        finished.wait()
    }

    private func run() {
        while true {
            wake.wait()
            let (batches, stopping) = pending.withLock { state -> ([StorageBatch], Bool) in
                defer { state.batches.removeAll() }
                return (state.batches, state.stopping)
            }
            if !batches.isEmpty {
                do {
                    try storage.commit(batches)
                    if let last = batches.compactMap(\.sequence).max() { onDurable(last) }
                } catch {
                    onFailure(error)
                }
            }
            if stopping { break }
        }
        finished.signal()
    }
}
