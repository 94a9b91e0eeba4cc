import CLibUV

extension LoopRuntime {
    /// Turns on libuv's accounting of the time the loop waits for events (idle); call before
    /// `run()`. False when libuv refuses.
    public func measureIdleTime() -> Bool {
        presence_uv_measure_idle_time(uvLoop) == 0
    }

    /// Nanoseconds the loop has spent waiting for events since `measureIdleTime()`.
    public var idleNanoseconds: UInt64 { uv_metrics_idle_time(uvLoop) }

    /// libuv's monotonic clock, in nanoseconds.
    public static var monotonicNanoseconds: UInt64 { uv_hrtime() }
}
