import Foundation
import PresenceCore
import PresenceStorage
import Synchronization
import Testing

/// The storage thread gives the core back inside SQLite's own reads and writes (a checkpoint
/// copies megabytes in one call, longer than the kernel's slice is enforced), and only the thread
/// that asked does: everything stored and read back is unchanged by it.
@Suite struct StorageThreadYieldTests {
    /// Runs `body` on a thread of its own and returns what it returned.
    func onNewThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            result.withLock { $0 = Result { try body() } }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    func bigBatch(_ sequence: UInt64, tag: String) throws -> StorageBatch {
        var batch = StorageBatch(sequence: sequence)
        for index in 0..<400 {
            batch.write(Node(.string(String(repeating: tag, count: 2_000))), at: try Path("/big/\(tag)\(index)"), namespace: "db")
        }
        return batch
    }

    @Test func aCommitThreadThatAskedYieldsInsideSQLiteAndOthersDoNot() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let storage = try SQLiteStorage(directory: directory.path)
        defer { try? storage.close() }
        #expect(StorageThreadYield.install(), "this SQLite lets its system calls be wrapped")
        var reference = StoredState()

        let first = try bigBatch(1, tag: "a")
        let yieldsWhenAsked = try onNewThread { () throws -> UInt64 in
            storage.prepareCommitThread(yieldingEvery: 1)
            try storage.commit([first])
            try storage.checkpoint()
            return StorageThreadYield.yieldsOnThisThread
        }
        reference.apply([first])
        // 800 KB of values is hundreds of page writes, each a microsecond or more.
        #expect(yieldsWhenAsked >= 10, "\(yieldsWhenAsked) yields")

        let second = try bigBatch(2, tag: "b")
        let yieldsUnasked = try onNewThread { () throws -> UInt64 in
            try storage.commit([second])
            try storage.checkpoint()
            return StorageThreadYield.yieldsOnThisThread
        }
        reference.apply([second])
        #expect(yieldsUnasked == 0)

        let afterZero = try onNewThread { () throws -> UInt64 in
            storage.prepareCommitThread(yieldingEvery: 0)
            try storage.commit([try bigBatch(3, tag: "c")])
            return StorageThreadYield.yieldsOnThisThread
        }
        reference.apply([try bigBatch(3, tag: "c")])
        #expect(afterZero == 0, "0 turns yielding off")

        #expect(try storage.load() == reference)
        try storage.close()
        let reopened = try SQLiteStorage(directory: directory.path)
        #expect(try reopened.load() == reference, "what was written while yielding is on disk as it was given")
        try reopened.close()
    }
}
