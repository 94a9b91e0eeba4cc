import Logging
import PresenceLoop

/// Liveness in the shell instead of lws's per-connection validity timers.
///
/// lws 4.1 keeps one validity timer per connection and re-inserts it into a sorted linked list on
/// every establish and every PONG: O(connections) each, which showed up as the first lws symbol in
/// churn profiles (`lws_dll2_add_sorted`). Here lws gets a zeroed retry policy (no validity timers)
/// and one timer walks the connections a few times per ping interval instead, asking each
/// connection's `LivenessClock` what to do: ping it through the outbound path, or drop it (lws then
/// reports the close, which runs its onDisconnect ops as for any other drop). Detection is the idle
/// timeout plus at most one sweep period (a quarter of the ping interval, 250 ms to 1 s).
///
/// The same sweep ends streams whose client has left (their sockets are not read), and drops
/// connections the server closed whose client never answered with its close frame.
final class LivenessSweep {
    private let pingAfter: Int64
    private let hangUpAfter: Int64
    private let period: Int64
    private let logger: Logger
    private let table: ConnectionTable
    private let outbox: Outbox
    private let streams: EventStreams
    private var timer: LoopTimer!

    init(configuration: ServerConfiguration, logger: Logger, table: ConnectionTable, outbox: Outbox, streams: EventStreams,
         runtime: LoopRuntime) {
        pingAfter = Int64(configuration.pingIntervalSeconds) * 1_000
        hangUpAfter = Int64(configuration.idleTimeoutSeconds) * 1_000
        period = Self.period(pingIntervalSeconds: configuration.pingIntervalSeconds)
        self.logger = logger
        self.table = table
        self.outbox = outbox
        self.streams = streams
        timer = runtime.makeTimer { [unowned self] in
            sweep()
            start()
        }
    }

    /// A quarter of the ping interval, between 250 ms and 1 s.
    static func period(pingIntervalSeconds: Int) -> Int64 {
        min(1_000, max(250, Int64(pingIntervalSeconds) * 1_000 / 4))
    }

    func start() {
        timer.schedule(afterMicroseconds: period * 1_000)
    }

    private func sweep() {
        let now = WallClock.nowMilliseconds()
        for connection in table.all {
            if let sentAt = connection.closeSentAt {
                // The server closed it and the client has not answered with its close in time.
                if now - sentAt >= Outbox.closeLingerMilliseconds { LWSWrite.drop(connection.wsi) }
                continue
            }
            // Pushed back: the server does not read it, so silence says nothing (resuming counts
            // as hearing from it).
            if connection.pushedBack { continue }
            switch connection.liveness.check(now: now, pingAfter: pingAfter, hangUpAfter: hangUpAfter, closing: connection.closing != nil) {
            case .none:
                break
            case .ping:
                outbox.ping(connection)
            case .hangUp(let quiet):
                logger.info("connection \(connection.id) (\(connection.remote)) silent for \(quiet) ms: dropping it")
                LWSWrite.drop(connection.wsi)
            }
        }
        if streams.isOpen { streams.checkPeers() }
    }
}
