import CLibWebSockets
import Dispatch
import Foundation
import Glibc
import PresenceClient
import PresenceLoop
import Synchronization

/// A minimal lws echo server with the same pattern as a real one: one context on one thread (the
/// server's `PresenceLoop.LoopRuntime` on a thread of its own: a libuv loop lws joins,
/// `lws_cancel_service` wake-up, destroy from inside the loop), per-session `UInt64` id into a
/// Swift table, an outbound queue with one `lws_write` per `SERVER_WRITEABLE`, rx flow control at
/// a high-water mark.
///
/// The text message `__stats__` is answered with the counters as JSON instead of being echoed.
final class EchoServer: @unchecked Sendable {
    struct Options: Sendable {
        /// 0 picks a free port (see ``EchoServer/port``).
        var port: Int32 = 9100
        /// SIGINT and SIGTERM stop it (the `echo-server` command; not inside `selftest`).
        var stopOnSignals = false
        var pingSeconds: UInt16 = 0
        var hangupSeconds: UInt16 = 0
        var rxBufferSize = 4096
    }

    /// Counters readable from any thread.
    final class Counters: Sendable {
        let established = Atomic<Int>(0)
        let closed = Atomic<Int>(0)
        /// Close frames received from peers (`WS_PEER_INITIATED_CLOSE`).
        let peerCloseFrames = Atomic<Int>(0)
        /// Connections that ended with no close frame from the peer (FIN/RST/hang-up/timeout).
        let closedWithoutCloseFrame = Atomic<Int>(0)
        let messages = Atomic<Int>(0)
        let bytes = Atomic<Int>(0)
        let flowPauses = Atomic<Int>(0)
        /// Monotonic µs of the last CLOSED without a close frame.
        let lastAbruptCloseMicros = Atomic<UInt64>(0)
        private let userAgent = Mutex("")
        /// The `User-Agent` of the last handshake.
        var lastUserAgent: String {
            get { userAgent.withLock { $0 } }
            set { userAgent.withLock { $0 = newValue } }
        }

        func json() -> ReportJSON {
            .object([
                ("established", .int(established.load(ordering: .relaxed))),
                ("closed", .int(closed.load(ordering: .relaxed))),
                ("peer_close_frames", .int(peerCloseFrames.load(ordering: .relaxed))),
                ("closed_without_close_frame", .int(closedWithoutCloseFrame.load(ordering: .relaxed))),
                ("messages", .int(messages.load(ordering: .relaxed))),
                ("bytes", .int(bytes.load(ordering: .relaxed))),
                ("flow_pauses", .int(flowPauses.load(ordering: .relaxed))),
            ])
        }
    }

    let options: Options
    let counters = Counters()
    private let runtime: LoopRuntime
    private let listeningPort = Atomic<Int>(0)

    // Loop-confined.
    private final class Conn {
        var queue: [[UInt8]] = []
        var head = 0
        var rx: [UInt8] = []
        var sawCloseFrame = false
        var rxPaused = false
    }
    private var conns: [UInt64: Conn] = [:]
    private var nextID: UInt64 = 1
    private let pre = Int(lwss_pre())

    init(options: Options) throws(LoopRuntime.Failure) {
        self.options = options
        runtime = try LoopRuntime()
    }

    /// The port it listens on (the one picked by the system when `options.port` is 0).
    var port: Int { listeningPort.load(ordering: .acquiring) }

    /// Runs the server on its own thread; returns once it listens (false if it could not start).
    func startOnThread() -> Bool {
        do {
            try runtime.startThread(name: "echo-server") { [self] () throws(LoopRuntime.Failure) in
                try createContext()
            }
            return true
        } catch {
            return false
        }
    }

    /// Asks the loop to stop (any thread): lws's destroy begins inside the loop 1 µs later.
    func requestStop() { runtime.requestStop(afterMicroseconds: 1) }

    /// Waits until the loop has stopped.
    func waitStopped() { runtime.waitStopped() }

    /// Loop thread: the listening context, its port, the signals.
    private func createContext() throws(LoopRuntime.Failure) {
        var info = lws_context_creation_info()
        info.port = options.port
        info.protocols = runtime.keepProtocol(name: "echo", callback: echoServerCallback,
                                              perSessionDataSize: MemoryLayout<UInt64>.size, rxBufferSize: options.rxBufferSize)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        if options.pingSeconds > 0 || options.hangupSeconds > 0 {
            info.retry_and_idle_policy = runtime.keepRetryPolicy(ping: options.pingSeconds, hangup: options.hangupSeconds)
        }
        lws_set_log_level(Int32(LLL_ERR) | Int32(LLL_WARN), nil)
        let context = try runtime.createContext(&info)
        // On a foreign loop lws returns a context even when the vhost could not listen.
        guard let vhost = lws_get_vhost_by_name(context, "default"), lws_get_vhost_listen_port(vhost) > 0 else {
            runtime.abandon()
            throw .context
        }
        listeningPort.store(Int(lws_get_vhost_listen_port(vhost)), ordering: .releasing)
        if options.stopOnSignals {
            runtime.handleSignals([SIGINT, SIGTERM]) { [unowned self] _ in runtime.shutdown(afterMicroseconds: 1) }
        }
    }

    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons,
                            _ pss: UnsafeMutableRawPointer?, _ inp: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            runtime.serviceWake()
            return 0
        case LWS_CALLBACK_ESTABLISHED:
            guard let pss else { return -1 }
            let id = nextID
            nextID += 1
            pss.storeBytes(of: id, as: UInt64.self)
            conns[id] = Conn()
            let length = Int(lwss_hdr_total_length(wsi, Int32(WSI_TOKEN_HTTP_USER_AGENT.rawValue)))
            if length > 0 {
                var agent = [CChar](repeating: 0, count: length + 1)
                if lwss_hdr_copy(wsi, &agent, Int32(length + 1), Int32(WSI_TOKEN_HTTP_USER_AGENT.rawValue)) > 0 {
                    counters.lastUserAgent = String(decoding: agent.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
            }
            counters.established.wrappingAdd(1, ordering: .relaxed)
            return 0
        case LWS_CALLBACK_RECEIVE:
            guard let pss, let c = conns[pss.load(as: UInt64.self)] else { return -1 }
            let final = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            var out: [UInt8]
            if c.rx.isEmpty && final {
                out = [UInt8](repeating: 0, count: pre + len)
                if let inp, len > 0 {
                    out.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: pre).copyMemory(from: inp, byteCount: len) }
                }
            } else {
                if c.rx.isEmpty { c.rx = [UInt8](repeating: 0, count: pre) }
                if let inp, len > 0 { c.rx.append(contentsOf: UnsafeRawBufferPointer(start: inp, count: len)) }
                guard final else { return 0 }
                out = c.rx
                c.rx = []
            }
            counters.messages.wrappingAdd(1, ordering: .relaxed)
            counters.bytes.wrappingAdd(out.count - pre, ordering: .relaxed)
            if out.count - pre == 9, String(decoding: out[pre...], as: UTF8.self) == "__stats__" {
                out = [UInt8](repeating: 0, count: pre) + Array(counters.json().text.utf8)
            }
            c.queue.append(out)
            if c.queue.count - c.head >= 64, !c.rxPaused {
                c.rxPaused = true
                counters.flowPauses.wrappingAdd(1, ordering: .relaxed)
                lws_rx_flow_control(wsi, 0)
            }
            lws_callback_on_writable(wsi)
            return 0
        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let pss, let c = conns[pss.load(as: UInt64.self)] else { return -1 }
            guard c.head < c.queue.count else { return 0 }
            let n = c.queue[c.head].count - pre
            let w = c.queue[c.head].withUnsafeMutableBufferPointer { buf in
                lwss_write(wsi, buf.baseAddress! + pre, n, Int32(LWS_WRITE_TEXT.rawValue))
            }
            c.head += 1
            if c.head == c.queue.count { c.queue.removeAll(keepingCapacity: true); c.head = 0 }
            if w < n { return -1 }
            if c.rxPaused, c.queue.count - c.head <= 16 {
                c.rxPaused = false
                lws_rx_flow_control(wsi, 1)
            }
            if c.head < c.queue.count { lws_callback_on_writable(wsi) }
            return 0
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            counters.peerCloseFrames.wrappingAdd(1, ordering: .relaxed)
            if let pss, let c = conns[pss.load(as: UInt64.self)] { c.sawCloseFrame = true }
            return 0
        case LWS_CALLBACK_CLOSED:
            guard let pss else { return 0 }
            let id = pss.load(as: UInt64.self)
            if let c = conns.removeValue(forKey: id) {
                counters.closed.wrappingAdd(1, ordering: .relaxed)
                if !c.sawCloseFrame {
                    counters.closedWithoutCloseFrame.wrappingAdd(1, ordering: .relaxed)
                    counters.lastAbruptCloseMicros.store(monotonicMicros(), ordering: .relaxed)
                }
            }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, pss, inp, len)
        }
    }
}

/// The protocol callback: a global function so it converts to `@convention(c)`; the server is the
/// context's user pointer.
private func echoServerCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ pss: UnsafeMutableRawPointer?,
                                _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    return Unmanaged<EchoServer>.fromOpaque(raw).takeUnretainedValue().handle(wsi, reason, pss, input, length)
}
