import PresenceLoop
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Set by signal handlers; the loop looks at them when woken.
let stopRequested = Atomic<Bool>(false)
let reloadRequested = Atomic<Bool>(false)

/// SIGTERM and SIGINT stop the server, SIGHUP reloads its files; SIGPIPE is ignored (a write to a
/// closed socket fails instead). A handler only sets a flag and wakes the loop.
enum Signals {
    static func install() {
        signal(SIGTERM) { _ in requestStopFromSignal() }
        signal(SIGINT) { _ in requestStopFromSignal() }
        signal(SIGHUP) { _ in
            reloadRequested.store(true, ordering: .relaxed)
            LoopRuntime.wakeFromSignal()
        }
        signal(SIGPIPE, SIG_IGN)
    }
}

/// Async-signal-safe.
func requestStopFromSignal() {
    stopRequested.store(true, ordering: .relaxed)
    LoopRuntime.wakeFromSignal()
}
