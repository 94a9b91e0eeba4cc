import CLibWebSockets
import Foundation
import PresenceLoop
import Synchronization
import Testing

/// A loop on a thread of its own (`startThread`), as the client transport and the bench's echo
/// server run it: jobs from other threads run there in order, a stop asked for from any thread
/// comes after the jobs posted before it, and a failed start is reported to the caller.
@Suite(.serialized) struct LoopThreadTests {
    /// What the loop thread saw, read by the test thread after `waitStopped()`.
    final class Record: Sendable {
        let jobs = Mutex<[Int]>([])
        let offLoop = Atomic<Int>(0)
        let finished = Atomic<Bool>(false)
        let signals = Mutex<[Int32]>([])
    }

    /// A no-listen context on the runtime's loop, its protocol table kept by the runtime.
    static func createContext(_ runtime: LoopRuntime) throws(LoopRuntime.Failure) {
        lws_set_log_level(Int32(LLL_ERR), nil)
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = runtime.keepProtocol(name: "loop-thread-test", callback: loopTestCallback)
        info.user = Unmanaged.passUnretained(runtime).toOpaque()
        try runtime.createContext(&info)
    }

    @Test func jobsRunOnTheLoopThreadInOrderAndAStopComesAfterThem() throws {
        let runtime = try LoopRuntime()
        let record = Record()
        try runtime.startThread(name: "loop-thread-test") { () throws(LoopRuntime.Failure) in
            try Self.createContext(runtime)
        } finished: {
            record.finished.store(true, ordering: .releasing)
        }
        #expect(!runtime.isOnLoopThread)
        for index in 0..<50 {
            runtime.post {
                if !runtime.isOnLoopThread { record.offLoop.add(1, ordering: .relaxed) }
                record.jobs.withLock { $0.append(index) }
            }
        }
        runtime.requestStop()
        runtime.post { record.jobs.withLock { $0.append(-1) } }  // after the stop: dropped or run, never before
        runtime.waitStopped()
        let jobs = record.jobs.withLock { $0 }
        #expect(Array(jobs.prefix(50)) == Array(0..<50))
        let offLoop = record.offLoop.load(ordering: .relaxed), finished = record.finished.load(ordering: .acquiring)
        #expect(offLoop == 0)
        #expect(finished)
        #expect(runtime.context == nil && runtime.isShuttingDown)
        runtime.waitStopped()  // again: returns at once
    }

    /// `waitStopped()` returns only once the thread has ended for good: its thread-local
    /// destructors (OpenSSL's, the Swift runtime's) have run. A client that exits right after then
    /// does not race its loop thread's teardown against the clean-up at exit (a SIGSEGV once seen
    /// in CI). The destructor here is slow on purpose, so a wait that returns early misses it.
    @Test func waitStoppedReturnsOnlyAfterTheThreadsLocalDestructorsRan() throws {
        for _ in 0..<3 {
            let runtime = try LoopRuntime()
            threadLocalDestroyed.store(false, ordering: .releasing)
            try runtime.startThread(name: "loop-thread-test") { () throws(LoopRuntime.Failure) in
                try Self.createContext(runtime)
                pthread_setspecific(slowThreadLocal.key, UnsafeRawPointer(bitPattern: 1))
            }
            runtime.requestStop()
            runtime.waitStopped()
            let destroyed = threadLocalDestroyed.load(ordering: .acquiring)
            #expect(destroyed, "waitStopped() returned while the loop thread was still ending")
        }
    }

    @Test func aStopAskedForBeforeTheContextExistsIsKept() throws {
        let runtime = try LoopRuntime()
        runtime.requestStop()
        try runtime.startThread(name: "loop-thread-test") { () throws(LoopRuntime.Failure) in
            try Self.createContext(runtime)
        }
        runtime.waitStopped()
        #expect(runtime.context == nil)
    }

    @Test func aPrepareThatThrowsIsRethrownAndTheLoopDoesNotRun() throws {
        struct Refused: Error {}
        let runtime = try LoopRuntime()
        let record = Record()
        #expect(throws: Refused.self) {
            try runtime.startThread(name: "loop-thread-test") { () throws(Refused) in
                throw Refused()
            } finished: {
                record.finished.store(true, ordering: .releasing)
            }
        }
        runtime.waitStopped()
        let finished = record.finished.load(ordering: .acquiring)
        #expect(!finished)
    }

    @Test func signalsArriveOnTheLoopThreadThroughWatchers() throws {
        let runtime = try LoopRuntime()
        let record = Record()
        try runtime.startThread(name: "loop-thread-test") { () throws(LoopRuntime.Failure) in
            try Self.createContext(runtime)
            runtime.handleSignals([SIGUSR2]) { signal in
                if !runtime.isOnLoopThread { record.offLoop.add(1, ordering: .relaxed) }
                record.signals.withLock { $0.append(signal) }
                runtime.shutdown(afterMicroseconds: 1)
            }
        }
        kill(getpid(), SIGUSR2)
        runtime.waitStopped()
        let signals = record.signals.withLock { $0 }, offLoop = record.offLoop.load(ordering: .relaxed)
        #expect(signals == [SIGUSR2])
        #expect(offLoop == 0)
    }
}

/// Set by `slowThreadLocal`'s destructor when the loop thread that set it ends.
private let threadLocalDestroyed = Atomic<Bool>(false)

/// A thread-local value whose destructor takes 200 ms, as OpenSSL's per-thread clean-up runs when
/// a thread that used TLS ends.
private final class SlowThreadLocal: Sendable {
    let key: pthread_key_t
    init() {
        var key = pthread_key_t()
        pthread_key_create(&key) { _ in
            usleep(200_000)
            threadLocalDestroyed.store(true, ordering: .releasing)
        }
        self.key = key
    }
}

private let slowThreadLocal = SlowThreadLocal()
