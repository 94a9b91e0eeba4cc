import CLibUV

/// Signals as loop events: libuv signal watchers on the runtime's loop. The handler runs on the
/// loop thread, so it may do anything a timer may (a signal handler proper may only set a flag:
/// the server does that, see `receiveSignals`). lws installs no watchers of its own on a loop it
/// was given (`foreign_loops`).
extension LoopRuntime {
    /// Loop thread, after `createContext`: `handler` runs when one of `signals` arrives, instead of
    /// the signal's default action, until the shutdown begins (the watchers are closed then, and the
    /// default action is back).
    public func handleSignals(_ signals: [Int32], _ handler: @escaping (Int32) -> Void) {
        guard !isStopping else { return }
        for signal in signals {
            let watcher = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
            guard uv_signal_init(uvLoop, watcher) == 0 else { watcher.deallocate(); continue }
            let box = SignalHandlerBox(runtime: self, handler: handler)
            watcher.pointee.data = Unmanaged.passRetained(box).toOpaque()
            uv_signal_start(watcher, loopSignalArrived, signal)
            signalWatchers.append(watcher)
        }
    }

    /// At the shutdown: the watchers go (libuv frees them in a later loop iteration).
    func closeSignalWatchers() {
        for watcher in signalWatchers {
            uv_signal_stop(watcher)
            uv_close(UnsafeMutableRawPointer(watcher).assumingMemoryBound(to: uv_handle_t.self), loopSignalClosed)
        }
        signalWatchers = []
    }
}

private final class SignalHandlerBox {
    unowned let runtime: LoopRuntime
    let handler: (Int32) -> Void
    init(runtime: LoopRuntime, handler: @escaping (Int32) -> Void) {
        self.runtime = runtime
        self.handler = handler
    }
}

/// A watched signal arrived (on the loop thread). Through `dispatch`, so that lws timers the
/// handler schedules are armed.
private func loopSignalArrived(_ watcher: UnsafeMutablePointer<uv_signal_t>?, _ signal: Int32) {
    guard let data = watcher?.pointee.data else { return }
    let box = Unmanaged<SignalHandlerBox>.fromOpaque(data).takeUnretainedValue()
    box.runtime.dispatch { box.handler(signal) }
}

private func loopSignalClosed(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
    guard let handle else { return }
    if let data = handle.pointee.data { Unmanaged<SignalHandlerBox>.fromOpaque(data).release() }
    UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_signal_t.self).deallocate()
}
