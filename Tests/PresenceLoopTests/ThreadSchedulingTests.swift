import Foundation
import PresenceLoop
import Testing

/// The loop thread asks for a short slice, the storage thread becomes SCHED_BATCH with a shorter one; each on a
/// thread of its own here (they change the calling thread only).
@Suite struct ThreadSchedulingTests {
    /// The kernel's view of the calling thread: `/proc/thread-self/sched`'s lines, by name.
    static func schedFields() -> [String: String] {
        guard let text = try? String(contentsOfFile: "/proc/thread-self/sched", encoding: .utf8) else { return [:] }
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[parts[0].trimmingCharacters(in: .whitespaces)] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return fields
    }

    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = LockedBox<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            result.set(body())
            done.signal()
        }
        thread.start()
        done.wait()
        return result.get()!
    }

    @Test func aBulkThreadBecomesBatchWithAShortSliceAndKeepsItsNiceValue() {
        let (refusal, slice, policy, niceBefore, niceAfter) = Self.onOwnThread { () -> (String?, String?, Int32, Int32, Int32) in
            let before = getpriority(Int32(PRIO_PROCESS.rawValue), 0)
            let refusal = ThreadScheduling.preferThroughput()
            return (refusal, Self.schedFields()["se.slice"], sched_getscheduler(0), before, getpriority(Int32(PRIO_PROCESS.rawValue), 0))
        }
        #expect(refusal == nil)
        #expect(policy == 3, "SCHED_BATCH")
        #expect(niceAfter == niceBefore)
        // A commit must give the core back to the loop after 0.1 ms, not after the default 0.75 ms
        // or more (the kernel shows the slice from Linux 6.12; older ones ignore it).
        if let slice { #expect(slice == "\(ThreadScheduling.bulkSliceMicroseconds * 1_000)", "se.slice \(slice) ns") }
        #expect(ThreadScheduling.bulkSliceMicroseconds < ThreadScheduling.loopSliceMicroseconds)
    }

    @Test func theLoopThreadAsksForAShortSliceAndKeepsItsNiceValue() throws {
        let (refusal, slice, policy, niceBefore, niceAfter) = Self.onOwnThread { () -> (String?, String?, Int32, Int32, Int32) in
            let before = getpriority(Int32(PRIO_PROCESS.rawValue), 0)
            let refusal = ThreadScheduling.preferLatency(sliceMicroseconds: 300)
            return (refusal, Self.schedFields()["se.slice"], sched_getscheduler(0), before, getpriority(Int32(PRIO_PROCESS.rawValue), 0))
        }
        #expect(refusal == nil)
        #expect(policy == 0, "still SCHED_OTHER")
        #expect(niceAfter == niceBefore)
        // The kernel shows the slice from Linux 6.12 (EEVDF custom slices); older ones ignore it.
        if let slice { #expect(slice == "300000", "se.slice \(slice) ns") }
    }

    /// The storage thread is told from the loop by name in `top -H`, `perf` and `/proc`.
    @Test func aThreadNamedIsNamedForTheKernel() {
        let (named, truncated) = Self.onOwnThread { () -> (String, String) in
            ThreadScheduling.nameThisThread("storage-writer")
            let named = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            ThreadScheduling.nameThisThread("a-name-of-twenty-bytes")
            let truncated = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            return (named, truncated)
        }
        #expect(named == "storage-writer\n")
        #expect(truncated == "a-name-of-twent\n", "Linux keeps 15 bytes")
    }
}

/// A value handed from a test's thread back to the test.
final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ newValue: T) { lock.lock(); value = newValue; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}
