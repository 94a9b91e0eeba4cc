import Foundation
import PresenceClient
import PresenceCore
import PresenceLoop
import Synchronization

/// Line output: flushed at once (pipes included), colour only on a terminal without NO_COLOR.
struct Console: Sendable {
    let color: Bool
    let isTerminal: Bool

    init() {
        isTerminal = isatty(1) == 1
        color = isTerminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
    }

    /// Writes all of `text` to a file descriptor, unbuffered (so pipes see each line at once).
    static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(n)
        }
    }

    func line(_ text: String) { Self.write(text + "\n", to: 1) }

    func raw(_ text: String) { Self.write(text, to: 1) }

    func error(_ text: String) {
        let useColor = isatty(2) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        Self.write((useColor ? "\u{1B}[31merror:\u{1B}[0m " : "error: ") + text + "\n", to: 2)
    }

    func note(_ text: String) {
        Self.write(text + "\n", to: 2)
    }

    enum Tint: String { case green = "32", red = "31", yellow = "33", dim = "2", bold = "1", cyan = "36" }

    func paint(_ text: String, _ tint: Tint) -> String {
        color ? "\u{1B}[\(tint.rawValue)m\(text)\u{1B}[0m" : text
    }

    /// `HH:MM:SS.mmm` (local time).
    static func clock(_ ms: Int64) -> String {
        var seconds = time_t(ms / 1000)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let milli = Int(ms % 1000)
        let m = milli < 10 ? "00\(milli)" : milli < 100 ? "0\(milli)" : "\(milli)"
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(m)"
    }

    /// A JSON object line from members.
    static func json(_ members: [(String, JSON)]) -> String { JSONWriter.string(.object(members)) }
}

/// Exit codes shared by the commands.
enum Exit {
    static let ok: Int32 = 0
    static let connection: Int32 = 2
    static let refused: Int32 = 3
    static let auth: Int32 = 4
    /// A feature limit is in its cooldown (`online` without --wait).
    static let rateLimited: Int32 = 5
    static let interrupted: Int32 = 130
}

/// Runs a ``ClientRuntime`` until a command decides it is done, then stops it and returns the exit code.
final class Session: @unchecked Sendable {
    let runtime: ClientRuntime
    let console = Console()
    private let done = DispatchSemaphore(value: 0)
    private let code = Mutex<Int32?>(nil)
    private let signaled = Atomic<Bool>(false)
    /// Service thread only.
    private var endDeadline: Int64?
    private let relay: SignalRelay
    /// Service thread only.
    private var signalHandler: (Session, Int32) -> Void = { _, _ in }

    /// Measured: the client connects with 13 and aborts, crashes or hangs below; 16 leaves room.
    static let minimumFileDescriptors: UInt64 = 16

    init(configuration: ClientConfiguration) {
        // Before the runtime exists: libuv aborts the process when its loop cannot open its fds.
        if let shortfall = FileDescriptorLimit.shortfall(
            minimum: Self.minimumFileDescriptors, program: "presence-client",
            needs: "its event loop, its wake-ups and the connection") {
            console.error(shortfall)
            exit(Exit.connection)
        }
        let relay = SignalRelay()
        self.relay = relay
        runtime = ClientRuntime(configuration: configuration, connectTimeoutSeconds: 10,
                                signalHandler: { signal in relay.fire(signal) })
    }

    /// Starts and blocks until ``end(_:clean:)``; returns the exit code.
    func run(onEvent: @escaping (Session, ClientEvent) -> Void,
             onTick: @escaping (Session, Int64) -> Void = { _, _ in },
             onSignal: @escaping (Session, Int32) -> Void = { s, signal in s.end(signal == SIGINT ? Exit.interrupted : Exit.ok) },
             setup: @escaping (Session) -> Void = { _ in }) -> Int32 {
        signalHandler = onSignal
        relay.set { [self] signal in runtime.perform { [self] _ in signalHandler(self, signal) } }
        do {
            try runtime.start(
                onEvent: { [self] _, event in
                    if case .status(.stopped) = event { onEvent(self, event); signalDone(); return }
                    if case .fatal(let message) = event { fatal(message) }
                    onEvent(self, event)
                },
                onTick: { [self] _, now in
                    if let d = endDeadline, now >= d { signalDone() }
                    onTick(self, now)
                },
                setup: { [self] _ in setup(self) })
        } catch {
            console.error("cannot start the client: \(error)")
            runtime.shutdown()  // joins a loop thread that did start: never exit while it ends
            return Exit.connection
        }
        done.wait()
        runtime.shutdown()
        return code.withLock { $0 } ?? Exit.ok
    }

    /// Service thread only.
    private var sawDisconnect = false

    /// Service thread: connection states go to standard error (the first connect is not news).
    func note(_ status: ConnectionStatus) {
        switch status {
        case .connecting(let attempt) where attempt <= 1: return
        case .connected where !sawDisconnect: return
        case .stopped: return
        case .disconnected: sawDisconnect = true
        default: break
        }
        console.note(StatusText.text(status))
    }

    /// Service thread: finish with `code`. `clean` closes the socket with a close frame first
    /// (waiting at most `grace` ms); otherwise the socket is dropped.
    func end(_ exitCode: Int32, clean: Bool = true, grace: Int64 = 2000) {
        code.withLock { if $0 == nil { $0 = exitCode } }
        if runtime.connection.phase == .stopped { signalDone(); return }
        if endDeadline == nil { endDeadline = runtime.now + grace }
        if clean {
            runtime.withConnection { c, now in c.stop(now: now) }
        } else {
            runtime.withConnection { c, now in c.kill(now: now) }
        }
    }

    /// Service thread: report a fatal error and exit with the matching code.
    private func fatal(_ message: String) {
        console.error(message)
        let exitCode: Int32 = message.contains("credential") ? Exit.auth : Exit.connection
        code.withLock { if $0 == nil { $0 = exitCode } }
        if endDeadline == nil { endDeadline = runtime.now + 2000 }
    }

    private func signalDone() {
        if !signaled.exchange(true, ordering: .acquiringAndReleasing) { done.signal() }
    }
}

/// Forwards a signal (delivered on the service thread) to a handler set after the runtime exists.
final class SignalRelay: Sendable {
    private let handler = Mutex<(@Sendable (Int32) -> Void)?>(nil)
    func set(_ h: @escaping @Sendable (Int32) -> Void) { handler.withLock { $0 = h } }
    func fire(_ signal: Int32) {
        if let h = handler.withLock({ $0 }) { h(signal) } else { exit(128 + signal) }
    }
}
