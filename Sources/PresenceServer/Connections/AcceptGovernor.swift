import CLibUV
import CLibWebSockets
import PresenceLoop

#if canImport(Glibc)
import Glibc
#endif

/// At most `perTurn` new connections a turn of the loop (`--max-accepts-per-turn`), so that a
/// burst of new connections is handshaken between other clients' messages instead of all before
/// them (issue 16: 300 connections waiting were all accepted in one turn). It bounds a turn, not
/// the rate: a storm still gets every turn's share (docs/robustness.md, "The connection storm, a
/// few per turn").
///
/// lws 4.1 has no such setting: when its listening socket is readable it accepts until the
/// kernel's queue is empty. So the governor wraps lws's callback on that socket's libuv poll
/// handle (found on the loop, as `LWSTimerGuard` finds lws's timer; re-wrapped each turn, since
/// lws re-arms the handle with its own callback when it changes its events), and counts accepts
/// in `LWS_CALLBACK_FILTER_NETWORK_CONNECTION`. Past the turn's share it refuses the next one,
/// which is the only way to stop lws's accept loop, but first keeps a duplicate of its socket: lws
/// closes its copy, and the connection is handed to lws (`lws_adopt_descriptor_vhost`) at the
/// start of the next turn, as if it had been accepted then. What is not accepted stays in the
/// kernel's queue (level-triggered: the loop sees the listener again next turn); when that queue
/// is full the kernel stops completing new connections. Nothing is refused. Loop thread only.
final class AcceptGovernor {
    let perTurn: Int
    private let vhost: OpaquePointer
    private let adoption: lws_adoption_type
    private let metrics: ServerMetrics
    private var listeners: [UnsafeMutablePointer<uv_poll_t>] = []
    /// lws's callback for its listeners (the same function for every poll handle it has).
    private var lwsCallback: uv_poll_cb?
    /// Accepts left in the lws accept loop running now; nil outside one (no limit).
    private var allowance: Int?
    private var acceptedThisTurn = 0
    /// A duplicate of the socket of the connection accepted past the turn's share, or -1.
    private var parked: Int32 = -1
    /// The most connections accepted in one turn so far (`presence_accepts_most_in_one_turn`).
    private var mostInOneTurn = 0

    init(perTurn: Int, vhost: OpaquePointer, tls: Bool, metrics: ServerMetrics) {
        self.perTurn = max(1, perTurn)
        self.vhost = vhost
        self.metrics = metrics
        var type = LWS_ADOPT_SOCKET.rawValue | LWS_ADOPT_HTTP.rawValue
        if tls { type |= LWS_ADOPT_ALLOW_SSL.rawValue }
        adoption = lws_adoption_type(rawValue: type)
    }

    /// lws's listeners on `loop` (after the context is created): how many were found (1 here).
    @discardableResult
    func attach(to loop: UnsafeMutablePointer<uv_loop_t>) -> Int {
        listeners = LoopHandles.find(on: loop, type: UV_POLL, listening: true)
            .map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: uv_poll_t.self) }
        wrap()
        return listeners.count
    }

    /// Before the loop polls: a new turn's share, the connection parked last turn handed to lws,
    /// and lws's callback wrapped again if lws re-armed its handle. True when a connection was
    /// handed over (lws then needs a wake to arm its timeouts).
    func turnBegins() -> Bool {
        acceptedThisTurn = 0
        wrap()
        guard parked >= 0 else { return false }
        let socket = parked
        parked = -1
        MaskTap.accepted(socket: socket)
        var descriptor = lws_sock_file_fd_type()
        descriptor.sockfd = socket
        // On failure lws closes the socket itself.
        _ = lws_adopt_descriptor_vhost(vhost, adoption, descriptor, nil, nil)
        count()
        return true
    }

    /// `LWS_CALLBACK_FILTER_NETWORK_CONNECTION` for `socket`: false when it must be refused, lws's
    /// only way out of its accept loop, after keeping a duplicate for the next turn.
    func admit(_ socket: Int32) -> Bool {
        guard let left = allowance else {
            count()
            return true
        }
        if left > 0 {
            allowance = left - 1
            count()
            return true
        }
        allowance = nil
        // Without a descriptor to spare the connection is refused (lws closes it).
        let copy = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        if copy >= 0 {
            parked = copy
            metrics.acceptsDeferred.increment()
        }
        return false
    }

    /// The listener is readable: lws accepts the turn's share, or nothing when it is used up or a
    /// connection is still parked (both wait for the next turn).
    fileprivate func listenerReady(_ handle: UnsafeMutablePointer<uv_poll_t>, status: Int32, events: Int32) {
        guard let lwsCallback else { return }
        let left = perTurn - acceptedThisTurn
        guard status != 0 || (left > 0 && parked < 0) else { return }
        allowance = left
        lwsCallback(handle, status, events)
        allowance = nil
    }

    deinit {
        if parked >= 0 { close(parked) }
    }

    private func count() {
        acceptedThisTurn += 1
        if acceptedThisTurn > mostInOneTurn {
            mostInOneTurn = acceptedThisTurn
            metrics.acceptsMostInOneTurn.record(mostInOneTurn)
        }
    }

    private func wrap() {
        for handle in listeners {
            guard let current = handle.pointee.poll_cb else { continue }
            // Compared by address: Swift cannot compare C function pointers directly.
            if unsafeBitCast(current, to: UInt.self) == unsafeBitCast(governedListenerReady as uv_poll_cb, to: UInt.self) { continue }
            lwsCallback = current
            handle.pointee.poll_cb = governedListenerReady
        }
    }
}

/// The wrapped callback of lws's listeners: the governor is the server's, found through the
/// listener's lws connection (lws keeps it in the handle's `data`), as `presenceCallback` finds it.
private func governedListenerReady(_ handle: UnsafeMutablePointer<uv_poll_t>?, _ status: Int32, _ events: Int32) {
    guard let handle, let wsi = handle.pointee.data.map({ OpaquePointer($0) }),
          let raw = lws_context_user(lws_get_context(wsi)) else { return }
    Unmanaged<LWSServer>.fromOpaque(raw).takeUnretainedValue().acceptGovernor?.listenerReady(handle, status: status, events: events)
}
