import Synchronization

/// A storage engine that keeps everything in memory: nothing survives the process. The default
/// when no data directory is configured, and the reference the conformance suite checks.
public final class InMemoryStorage: StorageEngine {
    private let state: Mutex<StoredState>

    public init(_ initial: StoredState = StoredState()) {
        state = Mutex(initial)
    }

    public func load() throws -> StoredState {
        state.withLock { $0 }
    }

    public func loadTree(namespace: String) throws -> Node {
        state.withLock { $0.namespaces[namespace] ?? .null }
    }

    public func commit(_ batches: [StorageBatch]) throws {
        state.withLock { $0.apply(batches) }
    }

    public func close() throws {}
}
