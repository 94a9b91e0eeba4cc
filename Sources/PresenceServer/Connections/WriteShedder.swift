import Logging
import PresenceCore
import PresenceLoop

/// The shell of load shedding (`WriteShedding` decides): every 100 ms it measures the loop's busy
/// share (libuv's idle-time accounting: time not spent waiting in `epoll_wait`, which on a shared
/// core includes time the storage thread or another process had the CPU) and the writes not yet
/// durable, closes a window with them, and logs once when shedding starts and once when it stops.
/// The WebSocket and REST routes ask `admit` for each data write (`p`, `m`, transactions; REST
/// PUT/PATCH/POST/DELETE) and answer a refused one with `unavailable` / 503 at once. Never asked
/// for auth, listens, onDisconnect registrations, pings or the server's own onDisconnect writes.
final class WriteShedder {
    static let message = "server overloaded, retry later"
    static let windowMicroseconds: Int64 = 100_000
    /// REST writes are counted per client address, apart from WebSocket connection ids.
    private static let restKeyBit: UInt64 = 1 << 63

    private var shedding: WriteShedding
    private let logger: Logger
    private let metrics: ServerMetrics
    private let runtime: LoopRuntime
    private let pendingWrites: () -> Int
    /// Bytes waiting unread in the kernel for a WebSocket connection (nil: gone), and the bytes
    /// read from WebSocket connections so far.
    private let unreadBytes: (UInt64) -> Int?
    var bytesRead: () -> Int = { 0 }
    private var bytesReadAtWindowStart = 0
    private var timer: LoopTimer?
    private var windowStartedAt: UInt64 = 0
    private var idleAtWindowStart: UInt64 = 0
    /// Refused since shedding last started (for the log line when it stops).
    private var shedSinceStart = 0

    init(settings: WriteShedding.Settings, logger: Logger, metrics: ServerMetrics, runtime: LoopRuntime,
         pendingWrites: @escaping () -> Int, unreadBytes: @escaping (UInt64) -> Int?) {
        shedding = WriteShedding(settings)
        self.logger = logger
        self.metrics = metrics
        self.runtime = runtime
        self.pendingWrites = pendingWrites
        self.unreadBytes = unreadBytes
    }

    var isShedding: Bool { shedding.isShedding }
    var shedTotal: Int { shedding.shedTotal }

    /// Starts measuring (once the loop exists, before it runs).
    func start() {
        guard shedding.settings.isEnabled else { return }
        if shedding.settings.busyPercent > 0, !runtime.measureIdleTime() {
            logger.warning("libuv cannot measure the loop's idle time: write shedding watches only --shed-pending-writes")
        }
        windowStartedAt = LoopRuntime.monotonicNanoseconds
        idleAtWindowStart = runtime.idleNanoseconds
        bytesReadAtWindowStart = bytesRead()
        metrics.writeShedding.record(0)
        let timer = runtime.makeTimer { [unowned self] in closeWindow() }
        self.timer = timer
        timer.schedule(afterMicroseconds: Self.windowMicroseconds)
    }

    /// WebSocket connection `id` sends a data write: false when it must be refused.
    func admit(connection id: UInt64) -> Bool {
        record(shedding.admit(id))
    }

    /// A REST data write from `address`: false when it must be refused.
    func admit(restFrom address: String) -> Bool {
        record(shedding.admit(Self.restKey(address)))
    }

    func closed(_ id: UInt64) {
        shedding.forget(id)
    }

    private func record(_ admitted: Bool) -> Bool {
        if !admitted {
            shedSinceStart += 1
            metrics.writesShed.increment()
        }
        return admitted
    }

    /// FNV-1a of the address, with the top bit set (connection ids never reach it).
    static func restKey(_ address: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in address.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash | restKeyBit
    }

    /// Writers sampled per window for their unread input (one `ioctl` each).
    static let sampledWriters = 256

    /// How long what the window's writers sent waits unread: their unread bytes (a sample of at
    /// most `sampledWriters`, scaled up) over the bytes read per second.
    private func readDelay(readPerSecond: Double) -> Double {
        let writers = shedding.currentWriters
        var sampled = 0, unread = 0
        for key in writers.prefix(Self.sampledWriters) {
            guard let bytes = unreadBytes(key) else { continue }
            sampled += 1
            unread += bytes
        }
        guard sampled > 0, unread > 0 else { return 0 }
        let total = Double(unread) * Double(writers.count) / Double(sampled)
        return readPerSecond > 0 ? total / readPerSecond * 1_000 : .infinity
    }

    private func closeWindow() {
        let now = LoopRuntime.monotonicNanoseconds, idle = runtime.idleNanoseconds
        let elapsed = now &- windowStartedAt
        let idleShare = elapsed > 0 ? Double(idle &- idleAtWindowStart) / Double(elapsed) : 1
        windowStartedAt = now
        idleAtWindowStart = idle
        let read = bytesRead()
        let readPerSecond = Double(read &- bytesReadAtWindowStart) * 1e9 / Double(max(1, elapsed))
        bytesReadAtWindowStart = read
        var window = WriteShedding.Window(busy: min(1, max(0, 1 - idleShare)), pendingWrites: pendingWrites())
        if shedding.isBusy(window) { window.readDelayMilliseconds = readDelay(readPerSecond: readPerSecond) }
        switch shedding.closeWindow(window) {
        case .started?:
            shedSinceStart = 0
            metrics.writeShedding.record(1)
            logger.notice("past saturation (loop busy \(Int(window.busy * 100))% of the last \(Self.windowMicroseconds / 1_000) ms, input waiting \(Int(window.readDelayMilliseconds.isFinite ? window.readDelayMilliseconds : -1)) ms unread, \(window.pendingWrites) writes not yet durable): refusing a share of data writes with 'unavailable' (REST 503), the heaviest writers first, until the load drops (--shed-busy-percent \(shedding.settings.busyPercent), --shed-read-delay-ms \(Int(shedding.settings.maxReadDelayMilliseconds)), --shed-pending-writes \(shedding.settings.maxPendingWrites))")
        case .stopped?:
            metrics.writeShedding.record(0)
            logger.notice("no longer past saturation: write shedding stopped (\(shedSinceStart) writes refused while it lasted)")
        case nil:
            break
        }
        metrics.writeShedShare.record(shedding.fraction)
        timer?.schedule(afterMicroseconds: Self.windowMicroseconds)
    }
}
