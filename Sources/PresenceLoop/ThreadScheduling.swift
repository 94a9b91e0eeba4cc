import CLibUV

/// How the kernel should schedule the calling thread, for a loop that must answer quickly beside
/// threads that work in bulk (the storage writer). Measured under `bench/attack.sh`'s slow
/// readers (`docs/robustness.md`, "The loop's own pauses"): the storage thread, woken for each
/// 256 KB write, preempted the loop thread at once and held the CPU for up to a slice (about a
/// millisecond), and the loop thread woken while it ran waited as long; every client's push waited
/// with it. Both threads now ask for short slices, so neither holds the core for long while the
/// other is runnable.
public enum ThreadScheduling {
    /// The slice the loop thread asks for: short enough that it preempts a bulk thread when it
    /// wakes, long enough that two busy threads do not switch more than a few thousand times a second.
    public static let loopSliceMicroseconds: UInt64 = 200

    /// The calling thread answers clients: ask for a short slice (Linux 6.12 and later; ignored
    /// before). Nil, or why the kernel refused.
    @discardableResult
    public static func preferLatency(sliceMicroseconds: UInt64 = loopSliceMicroseconds) -> String? {
        let error = presence_request_slice(sliceMicroseconds * 1_000)
        return error == 0 ? nil : "sched_setattr: errno \(error)"
    }

    /// The slice the bulk thread asks for: the kernel's least (0.1 ms). Picked when the loop's own
    /// slice has run out, a bulk thread with the default slice (0.75 ms × (1 + log2 CPUs), 1.5 ms
    /// on two) kept the CPU for all of it while the loop waited, runnable: a commit of a 256 KB
    /// value is 0.5-1.6 ms of page copying in the kernel. With this slice it gives the CPU back at
    /// the next scheduling event after 0.1 ms.
    public static let bulkSliceMicroseconds: UInt64 = 100

    /// The calling thread works in bulk: SCHED_BATCH (the same share of the CPU, but its
    /// wake-ups do not preempt the loop) with a short slice (Linux 6.12 and later; ignored before).
    /// Nil, or why the kernel refused.
    @discardableResult
    public static func preferThroughput(sliceMicroseconds: UInt64 = bulkSliceMicroseconds) -> String? {
        let error = presence_become_batch(sliceMicroseconds * 1_000)
        return error == 0 ? nil : "sched_setscheduler(SCHED_BATCH): errno \(error)"
    }

    /// Names the calling thread, so `top -H` and `perf` tell it from the loop (Foundation's
    /// `Thread.name` does not reach the kernel here). Linux keeps the first 15 bytes.
    public static func nameThisThread(_ name: String) {
        _ = presence_name_thread(name)
    }
}
