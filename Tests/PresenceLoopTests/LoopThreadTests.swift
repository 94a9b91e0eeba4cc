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
