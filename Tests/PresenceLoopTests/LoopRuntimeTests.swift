import CHiredis
import CLibUV
import CLibWebSockets
import Foundation
import PresenceLoop
import Synchronization
import Testing

/// The loop runtime without sockets: an lws context that listens nowhere, on a loop the runtime
/// owns; timers, the inbox from other threads, a second libuv source, and the shutdown order.
@Suite(.serialized) struct LoopRuntimeTests {
    /// Builds a runtime with a no-listen lws context whose callback drains the inbox.
    final class Fixture {
        let runtime: LoopRuntime
        let protocols: UnsafeMutablePointer<lws_protocols>

        init() throws {
            runtime = try LoopRuntime()
            protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
            protocols.initialize(repeating: lws_protocols(), count: 2)
            protocols[0].name = UnsafePointer(strdup("loop-test"))
            protocols[0].callback = loopTestCallback
            lws_set_log_level(Int32(LLL_ERR), nil)
            var info = lws_context_creation_info()
            info.port = CONTEXT_PORT_NO_LISTEN
            info.protocols = UnsafePointer(protocols)
            info.user = Unmanaged.passUnretained(runtime).toOpaque()
            try runtime.createContext(&info)
        }

        deinit {
            free(UnsafeMutablePointer(mutating: protocols[0].name))
            protocols.deallocate()
        }
    }

    @Test func timersFireInTheirOrderAndRunReturnsAfterShutdown() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        var fired: [String] = []
        let late = runtime.makeTimer { fired.append("late") }
        let early = runtime.makeTimer { fired.append("early") }
        let cancelled = runtime.makeTimer { fired.append("cancelled") }
        // Unowned: the runtime keeps its timers, so a timer closure holding it would be a cycle
        // (LeakSanitizer reports the runtime, its inbox and timers under make test-sanitizers).
        let stop = runtime.makeTimer { [unowned runtime] in runtime.shutdown(afterMicroseconds: 1) }
        late.schedule(afterMicroseconds: 30_000)
        early.schedule(afterMicroseconds: 10_000)
        cancelled.schedule(afterMicroseconds: 20_000)
        cancelled.cancel()
        stop.schedule(afterMicroseconds: 50_000)
        #expect(early.isScheduled && !cancelled.isScheduled)
        #expect(runtime.run() == 0)
        #expect(fired == ["early", "late"])
        #expect(runtime.context == nil && runtime.isShuttingDown)
    }

    /// lws arms its libuv timer for its first timer rounded to the nearest millisecond: one due
    /// within half a millisecond was armed for 0 ms, and libuv fired it again and again in the same
    /// pass until it was due, the loop polling nothing meanwhile (`LWSTimerGuard`). Each timer here
    /// schedules the next 300 µs later; the loop must turn (and poll) between any two of them.
    @Test func aTimerDueWithinHalfAMillisecondLetsTheLoopTurnMeanwhile() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        #expect(runtime.guardedLWSTimers == 1)
        var turns = 0
        runtime.onTurnEnd { turns += 1 }
        var turnsAtFire: [Int] = []
        var chain: LoopTimer?
        chain = runtime.makeTimer { [unowned runtime] in
            turnsAtFire.append(turns)
            if turnsAtFire.count == 20 { return runtime.shutdown(afterMicroseconds: 1) }
            chain?.schedule(afterMicroseconds: 300)
        }
        chain?.schedule(afterMicroseconds: 2_000)
        #expect(runtime.run() == 0)
        chain = nil
        #expect(turnsAtFire.count == 20)
        let between = zip(turnsAtFire.dropFirst(), turnsAtFire).map { $0 - $1 }
        #expect(between.allSatisfy { $0 >= 1 }, "loop turns between consecutive timers: \(between)")
    }

    @Test func jobsPostedFromOtherThreadsRunOnTheLoopInOrder() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        final class Record: Sendable {
            let loopThread = pthread_self()
            let seen = Mutex<[Int]>([])
            let onLoop = Atomic<Bool>(true)
        }
        let record = Record()
        let producer = Thread {
            for index in 0..<100 {
                runtime.post {
                    if pthread_equal(pthread_self(), record.loopThread) == 0 { record.onLoop.store(false, ordering: .relaxed) }
                    record.seen.withLock { $0.append(index) }
                    if index == 99 { runtime.shutdown(afterMicroseconds: 1) }
                }
            }
        }
        producer.start()
        #expect(runtime.run() == 0)
        let order = record.seen.withLock { $0 }
        let allOnLoop = record.onLoop.load(ordering: .relaxed)
        #expect(order == Array(0..<100))
        #expect(allOnLoop)
        // After shutdown a post is dropped, not run and not a crash.
        runtime.post { Issue.record("ran after shutdown") }
    }

    @Test func aSecondEventSourceSharesTheLoopAndClosesAtShutdown() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        // A plain libuv timer stands in for hiredis's poll handles.
        let handle = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        defer { handle.deallocate() }
        #expect(uv_timer_init(runtime.uvLoop, handle) == 0)
        final class Counter { var ticks = 0; var closed = false }
        let counter = Counter()
        handle.pointee.data = Unmanaged.passUnretained(counter).toOpaque()
        uv_timer_start(handle, { timer in
            let counter = Unmanaged<Counter>.fromOpaque(timer!.pointee.data).takeUnretainedValue()
            counter.ticks += 1
        }, 1, 2)
        var hookRan = false
        runtime.onShutdown {
            hookRan = true
            uv_timer_stop(handle)
            uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closing in
                Unmanaged<Counter>.fromOpaque(closing!.pointee.data).takeUnretainedValue().closed = true
            }
        }
        // Work from that source goes through dispatch, so lws timers it schedules are honoured.
        let stop = runtime.makeTimer { [unowned runtime] in runtime.shutdown(afterMicroseconds: 1) }
        runtime.dispatch { stop.schedule(afterMicroseconds: 40_000) }
        #expect(runtime.run() == 0)
        #expect(hookRan && counter.closed && counter.ticks >= 5)
    }

    /// The turn-end hook runs after a turn's work and before the loop waits again: jobs posted
    /// together are all done when it runs, it runs once more at the shutdown, and its handle
    /// closes with the loop.
    @Test func theTurnEndHookSeesEachTurnsWorkOnceAndClosesWithTheLoop() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        final class Record: @unchecked Sendable { var done = 0; var seen: [Int] = [] } // loop thread only
        let record = Record()
        runtime.onTurnEnd { if record.seen.last != record.done { record.seen.append(record.done) } }
        for _ in 0..<3 { runtime.post { record.done += 1 } }
        let later = runtime.makeTimer { record.done += 10 }
        later.schedule(afterMicroseconds: 20_000)
        let stop = runtime.makeTimer { runtime.shutdown(afterMicroseconds: 1) }
        stop.schedule(afterMicroseconds: 40_000)
        #expect(runtime.run() == 0)
        // Nothing done (the first turns), the three jobs of one turn together, then the timer's.
        #expect(record.seen.drop { $0 == 0 } == [3, 13])
    }
}

extension LoopRuntimeTests {
    /// The scale-out's Redis client puts its handles (`CHiredis`'s adapter and timers) on the
    /// server's loop: the runtime's `uvLoop` is the loop type hiredis's adapter takes.
    @Test func theHiredisAdaptersTimerRunsOnTheRuntimesLoop() throws {
        let fixture = try Fixture()
        let runtime = fixture.runtime
        final class Owner { var fired = 0; var released = false }
        let owner = Owner()
        let raw = Unmanaged.passUnretained(owner).toOpaque()
        let created = prs_timer_create(runtime.uvLoop, { owner in
            Unmanaged<Owner>.fromOpaque(owner!).takeUnretainedValue().fired += 1
        }, { owner in
            Unmanaged<Owner>.fromOpaque(owner!).takeUnretainedValue().released = true
        }, raw)
        let timer = try #require(created)
        prs_timer_arm(timer, 5)
        runtime.onShutdown { prs_timer_close(timer) }
        let stop = runtime.makeTimer { [unowned runtime] in runtime.shutdown(afterMicroseconds: 1) }
        stop.schedule(afterMicroseconds: 30_000)
        #expect(runtime.run() == 0)
        #expect(owner.fired == 1 && owner.released)
    }
}

/// The test protocol's callback: the inbox (and a stop `requestStop` asked for) is served where a
/// server or client would serve it. Also `LoopThreadTests`'.
func loopTestCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED, let wsi, let raw = lws_context_user(lws_get_context(wsi)) {
        Unmanaged<LoopRuntime>.fromOpaque(raw).takeUnretainedValue().serviceWake()
    }
    return 0
}
