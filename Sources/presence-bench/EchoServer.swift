import CLibWebSockets
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// A minimal lws echo server with the same pattern as a real one: one context on one thread,
/// libuv backend, per-session `UInt64` id into a Swift table, an outbound queue with one
/// `lws_write` per `SERVER_WRITEABLE`, rx flow control at a high-water mark, inbox +
/// `lws_cancel_service` for stopping, two-stage destroy from inside the loop.
///
/// The text message `__stats__` is answered with the counters as JSON instead of being echoed.
final class EchoServer: @unchecked Sendable {
    struct Options: Sendable {
        var port: Int32 = 9100
        var libuv = true
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

        func json() -> JSON {
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

    private struct ContextRef: @unchecked Sendable { let raw: OpaquePointer }
    private let inbox = Mutex<(stop: Bool, ctx: ContextRef?)>((false, nil))
    private let done = DispatchSemaphore(value: 0)

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
    private var ctx: OpaquePointer?
    private var stopping = false
    private var stopTimer: UnsafeMutablePointer<lwss_timer_t>?
    private let pre = Int(lwss_pre())

    init(options: Options) { self.options = options }

    /// Runs the server on a new thread; returns once it listens (false if it could not start).
    func startOnThread() -> Bool {
        let ready = DispatchSemaphore(value: 0)
        let ok = Atomic<Bool>(false)
        let t = Thread { [self] in
            run { ok.store($0, ordering: .relaxed); ready.signal() }
        }
        t.name = "echo-server"
        t.start()
        ready.wait()
        return ok.load(ordering: .relaxed)
    }

    /// Asks the loop to stop (any thread, signal-safe enough: one lock + eventfd write).
    func requestStop() {
        inbox.withLock { box in
            box.stop = true
            if let c = box.ctx { lws_cancel_service(c.raw) }
        }
    }

    /// Waits until `run` has returned.
    func waitStopped() { done.wait(); done.signal() }

    /// Creates the context and services it on the calling thread until stopped.
    func run(started: (Bool) -> Void) {
        lws_set_log_level(3, nil)
        let protos = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protos.initialize(repeating: lws_protocols(), count: 2)
        let name = strdup("echo")!
        protos[0].name = UnsafePointer(name)
        protos[0].callback = echoServerCallback
        protos[0].per_session_data_size = MemoryLayout<UInt64>.size
        protos[0].rx_buffer_size = options.rxBufferSize
        var retry: UnsafeMutablePointer<lws_retry_bo_t>?
        var info = lws_context_creation_info()
        info.port = options.port
        info.protocols = UnsafePointer(protos)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        if options.libuv {
            info.options |= UInt64(LWS_SERVER_OPTION_LIBUV) | UInt64(LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN)
            info.signal_cb = echoServerSignal  // lws owns SIGINT/SIGTERM under libuv
        }
        if options.pingSeconds > 0 || options.hangupSeconds > 0 {
            let r = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
            r.initialize(to: lws_retry_bo_t())
            r.pointee.secs_since_valid_ping = options.pingSeconds
            r.pointee.secs_since_valid_hangup = options.hangupSeconds
            info.retry_and_idle_policy = UnsafePointer(r)
            retry = r
        }
        guard let c = lws_create_context(&info) else {
            started(false)
            protos.deallocate(); free(name); retry?.deallocate()
            done.signal()
            return
        }
        ctx = c
        let stopEarly = inbox.withLock { box -> Bool in box.ctx = ContextRef(raw: c); return box.stop }
        started(true)
        if stopEarly { beginStop() }
        // poll: lws_service returns after each wait. libuv: it returns once the stage-1
        // destroy has run inside the loop (beginStop), by which time `stopping` is set.
        while !stopping {
            if lws_service(c, 0) < 0 { break }
            if options.libuv { break }
        }
        inbox.withLock { $0.ctx = nil }
        lws_context_destroy(c)
        ctx = nil
        protos.deallocate()
        free(name)
        retry?.deallocate()
        stopTimer?.deallocate()
        done.signal()
    }

    private func beginStop() {
        guard !stopping, let c = ctx else { return }
        stopping = true
        inbox.withLock { $0.ctx = nil }
        if options.libuv {
            let t = UnsafeMutablePointer<lwss_timer_t>.allocate(capacity: 1)
            t.initialize(to: lwss_timer_t())
            t.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
            stopTimer = t
            lws_sul_schedule(c, 0, &t.pointee.sul, echoServerStopSul, 1)
        }
    }

    fileprivate func destroyFromLoop() {
        if let c = ctx { lws_context_destroy(c) }
    }

    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons,
                            _ pss: UnsafeMutableRawPointer?, _ inp: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            if inbox.withLock({ $0.stop }) { beginStop() }
            return 0
        case LWS_CALLBACK_ESTABLISHED:
            guard let pss else { return -1 }
            let id = nextID
            nextID += 1
            pss.storeBytes(of: id, as: UInt64.self)
            conns[id] = Conn()
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

private func echoServerCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                                _ user: UnsafeMutableRawPointer?, _ inp: UnsafeMutableRawPointer?,
                                _ len: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    return Unmanaged<EchoServer>.fromOpaque(raw).takeUnretainedValue().handle(wsi, reason, user, inp, len)
}

private func echoServerStopSul(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let t = lwss_timer_from_sul(sul), let owner = t.pointee.owner else { return }
    Unmanaged<EchoServer>.fromOpaque(owner).takeUnretainedValue().destroyFromLoop()
}

/// libuv signal watcher callback: the handle's first field (`uv_handle_t.data`) is the context.
private func echoServerSignal(_ handle: UnsafeMutableRawPointer?, _ signum: Int32) {
    guard let handle, let context = handle.load(as: OpaquePointer?.self),
          let raw = lws_context_user(context) else { return }
    Unmanaged<EchoServer>.fromOpaque(raw).takeUnretainedValue().requestStop()
}
