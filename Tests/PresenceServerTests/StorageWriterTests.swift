import Foundation
import PresenceCore
import PresenceLoop
@testable import PresenceServer
import Synchronization
import Testing

/// The storage thread when commits fail (a full disk): nothing is reported durable until the same
/// batches commit, the outage is reported once each way, and heartbeats do not pile up.
@Suite struct StorageWriterTests {
    /// In-memory storage whose commits fail while `failing` is set, and that records each success.
    final class FlakyStorage: StorageEngine, @unchecked Sendable {
        struct Full: Error {}
        let inner = InMemoryStorage()
        let failing = Mutex(false)
        let attempts = Mutex(0)
        let committed = Mutex<[[StorageBatch]]>([])
        func load() throws -> StoredState { try inner.load() }
        func commit(_ batches: [StorageBatch]) throws {
            attempts.withLock { $0 += 1 }
            if failing.withLock({ $0 }) { throw Full() }
            try inner.commit(batches)
            committed.withLock { $0.append(batches) }
        }
        func close() throws {}
    }

    final class Events: @unchecked Sendable {
        let log = Mutex<[String]>([])
        func add(_ event: String) { log.withLock { $0.append(event) } }
        var all: [String] { log.withLock { $0 } }
    }

    func write(_ sequence: UInt64, _ value: Double) throws -> StorageBatch {
        StorageBatch(sequence: sequence, mutations: [.write(namespace: "db", path: try Path("/v"), value: Node(.number(value)))])
    }

    func waitUntil(_ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(5)
        while !condition(), Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
    }

    @Test func failedCommitsAreRetriedAndNothingIsDurableUntilOneSucceeds() throws {
        let storage = FlakyStorage()
        let events = Events()
        let writer = StorageWriter(storage: storage, retry: .init(initial: 0.01, longest: 0.05, atStop: 1),
                                   onDurable: { events.add("durable \($0)") }, onFailure: { _ in events.add("failed") },
                                   onRecovery: { _ in events.add("recovered") })
        writer.start()
        writer.submit(try write(1, 1))
        waitUntil { events.all == ["durable 1"] }
        storage.failing.withLock { $0 = true }
        writer.submit(try write(2, 2))
        for beat in 0..<5 { writer.submit(StorageBatch(mutations: [.heartbeat(Int64(beat))])) }
        writer.submit(try write(3, 3))
        waitUntil { storage.attempts.withLock { $0 } >= 5 }
        #expect(events.all == ["durable 1", "failed"], "nothing is durable while commits fail; the outage is reported once")
        storage.failing.withLock { $0 = false }
        waitUntil { events.all.count == 4 }
        #expect(events.all == ["durable 1", "failed", "durable 3", "recovered"])
        // The retried commit held every batch in order, with one heartbeat left of five.
        let retried = storage.committed.withLock { $0 }[1]
        #expect(retried.compactMap(\.sequence) == [2, 3])
        #expect(retried.filter { $0.sequence == nil }.count == 1)
        #expect(try storage.load().namespaces["db"]?.node(at: try Path("/v")) == Node(.number(3)))
        #expect(writer.stop().unstoredBatches == 0)
    }

    @Test func aStopWhileFailingGivesUpAfterItsDeadlineAndSaysWhat() throws {
        let storage = FlakyStorage()
        storage.failing.withLock { $0 = true }
        let writer = StorageWriter(storage: storage, retry: .init(initial: 0.01, longest: 0.02, atStop: 0.2),
                                   onDurable: { _ in Issue.record("reported durable") }, onFailure: { _ in })
        writer.start()
        writer.submit(try write(1, 1))
        let outcome = writer.stop()
        #expect(outcome.unstoredBatches == 1 && outcome.lastError != nil)
        #expect(storage.attempts.withLock { $0 } >= 2)
    }

    /// Storage whose first commit waits until the test opens the gate.
    final class GatedStorage: StorageEngine, @unchecked Sendable {
        let inner = InMemoryStorage()
        let gate = DispatchSemaphore(value: 0)
        let entered = Mutex(0)
        let committed = Mutex<[[UInt64]]>([])
        func load() throws -> StoredState { try inner.load() }
        func commit(_ batches: [StorageBatch]) throws {
            if entered.withLock({ $0 += 1; return $0 }) == 1 { gate.wait() }
            try inner.commit(batches)
            committed.withLock { $0.append(batches.compactMap(\.sequence)) }
        }
        func close() throws {}
    }

    /// Under load the storage thread is busy when the loop hands work over: what arrives during a
    /// commit waits and goes in the next commit, all together and in order (a bigger group, no
    /// wake-up per write), and is reported durable only then.
    @Test func batchesHandedOverDuringACommitGoTogetherInTheNext() throws {
        let storage = GatedStorage()
        let events = Events()
        let writer = StorageWriter(storage: storage, onDurable: { events.add("durable \($0)") }, onFailure: { _ in })
        writer.start()
        writer.submit(try write(1, 1))
        waitUntil { storage.entered.withLock { $0 } == 1 }
        writer.submit(try write(2, 2))
        writer.submit(contentsOf: [try write(3, 3), try write(4, 4)])
        writer.submit(try write(5, 5))
        #expect(events.all.isEmpty, "nothing is durable while the first commit runs")
        storage.gate.signal()
        waitUntil { events.all.count == 2 }
        #expect(events.all == ["durable 1", "durable 5"])
        #expect(storage.committed.withLock { $0 } == [[1], [2, 3, 4, 5]])
        #expect(writer.wakeUps <= 1, "only a hand-over to a sleeping thread wakes it")
        #expect(writer.stop().unstoredBatches == 0)
    }

    /// Storage that records on which thread it was prepared and on which it committed.
    final class ThreadRecordingStorage: StorageEngine, @unchecked Sendable {
        let inner = InMemoryStorage()
        let events = Mutex<[String]>([])
        func load() throws -> StoredState { try inner.load() }
        func prepareCommitThread(yieldingEvery microseconds: UInt64) {
            events.withLock { $0.append("prepare \(microseconds) on \(pthread_self())") }
        }
        func commit(_ batches: [StorageBatch]) throws {
            try inner.commit(batches)
            events.withLock { $0.append("commit on \(pthread_self())") }
        }
        func close() throws {}
    }

    /// The storage thread asks its engine, once and before any commit, to give the core back to
    /// the loop every bulk slice of work (the kernel would only at its tick): a commit of a big
    /// value, or a checkpoint, must not hold the core the loop shares for milliseconds.
    @Test func theStorageThreadAsksItsEngineToYieldBeforeItsFirstCommit() throws {
        let storage = ThreadRecordingStorage()
        let events = Events()
        let writer = StorageWriter(storage: storage, onDurable: { events.add("durable \($0)") }, onFailure: { _ in })
        writer.start()
        writer.submit(try write(1, 1))
        waitUntil { events.all.count == 1 }
        writer.submit(try write(2, 2))
        waitUntil { events.all.count == 2 }
        #expect(writer.stop().unstoredBatches == 0)
        let recorded = storage.events.withLock { $0 }
        let storageThread = recorded.first.map { String($0.split(separator: " ").last ?? "") } ?? ""
        #expect(recorded == ["prepare \(ThreadScheduling.bulkSliceMicroseconds) on \(storageThread)",
                             "commit on \(storageThread)", "commit on \(storageThread)"])
        #expect(storageThread != "\(pthread_self())", "commits run on the storage thread")
    }
}
