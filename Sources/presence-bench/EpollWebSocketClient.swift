import CEpoll
import Dispatch
import Foundation
import Glibc
import PresenceClient
import PresenceLoop
import Synchronization

/// A lean WebSocket client for the load generator: one thread, one level-triggered epoll set, no
/// lws. Each connection keeps a receive buffer and a send buffer that are allocated once and
/// reused; a message in one frame is handed to the handler in place. Frames queued during a loop
/// turn go out in one `send` per connection at the end of the turn. Loopback IPv4 only (`ws://`).
///
/// Threading: `perform`, `closeAll`, `shutdown`, `openConnections` from any thread; everything
/// else (`connect`, `send`, `counters`) on the loop thread, i.e. in the handler or in `perform`.
final class EpollWebSocketClient: FanoutClient, @unchecked Sendable {
    struct Configuration: Sendable {
        var maxHandshakesInFlight = 200
        /// Period of `.tick` events (0: none).
        var tickMicros: UInt64 = 1000
        var maxMessageBytes = 16 << 20
        var connectTimeoutSeconds = 30.0
        var closeTimeoutSeconds = 5.0
        var subprotocol: String?
        var userAgent = "presence-bench-epoll/1"
    }

    enum StartError: Error { case epoll(Int32) }

    let transport = TransportChoice.epoll
    let configuration: Configuration
    private let handler: FanoutHandler

    private enum Phase { case queued, connecting, handshaking, open, closing, closed }

    private final class Connection {
        let id: WebSocketConnectionID
        let url: WebSocketURL
        let source: String?
        var phase = Phase.queued
        var fd: Int32 = -1
        var key = ""
        var rx = ByteBuffer(capacity: 0)
        var tx = ByteBuffer(capacity: 0)
        /// Frames sent before the handshake completed; they follow it.
        var held = ByteBuffer(capacity: 0)
        var reader: WebSocketFrameReader
        var dirty = false
        var watchingWritable = false
        var closedLocally = false
        var deadline: UInt64 = 0

        init(id: WebSocketConnectionID, url: WebSocketURL, source: String?, maxMessageBytes: Int) {
            self.id = id
            self.url = url
            self.source = source
            reader = WebSocketFrameReader(maxMessageBytes: maxMessageBytes)
        }
    }

    // Loop-confined.
    private var connections: [Connection] = []
    private var dirty: [Int] = []
    private var queued: [Int] = []
    private var queuedHead = 0
    private var handshaking = 0
    private var stats = TransportCounters()
    private var maskState: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var nextTick: UInt64 = 0
    private var nextSweep: UInt64 = 0

    private var epfd: Int32 = -1
    private var wakefd: Int32 = -1
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let stopRequested = Atomic<Bool>(false)
    private let openCount = Atomic<Int>(0)
    private let stopped = DispatchSemaphore(value: 0)
    private var started = false

    init(configuration: Configuration, handler: @escaping FanoutHandler) {
        self.configuration = configuration
        self.handler = handler
        maskState ^= monotonicMicros()
    }

    func start() throws {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakefd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epfd >= 0, wakefd >= 0 else { throw StartError.epoll(errno) }
        var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: 0))
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev) == 0 else { throw StartError.epoll(errno) }
        FileDescriptorLimit.raiseSoftToHard()
        started = true
        let thread = Thread { [self] in loop() }
        thread.name = "epoll-ws"
        thread.start()
    }

    // MARK: any thread

    func perform(_ body: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(body) }
        var one: UInt64 = 1
        _ = write(wakefd, &one, 8)
    }

    func closeAll() {
        perform { [self] in
            for c in connections {
                switch c.phase {
                case .open: sendClose(c, code: 1000)
                case .queued, .connecting, .handshaking: finish(c, failure: "closed before the handshake completed")
                case .closing, .closed: break
                }
            }
        }
    }

    var openConnections: Int { openCount.load(ordering: .relaxed) }

    func shutdown() {
        guard started else { return }
        started = false
        stopRequested.store(true, ordering: .relaxed)
        var one: UInt64 = 1
        _ = write(wakefd, &one, 8)
        stopped.wait()
    }

    // MARK: loop thread

    var counters: TransportCounters { stats }

    func resetPeaks() {
        stats.maxQueuedBytes = 0
        stats.longestTurnMicros = 0
        stats.longestWaitMicros = 0
    }

    func connect(to url: WebSocketURL, sourceAddress: String?) -> WebSocketConnectionID {
        let c = Connection(id: WebSocketConnectionID(connections.count + 1), url: url, source: sourceAddress,
                           maxMessageBytes: configuration.maxMessageBytes)
        connections.append(c)
        queued.append(connections.count - 1)
        return c.id
    }

    func send(_ id: WebSocketConnectionID, text: String) {
        var s = text
        s.withUTF8 { queue(id, opcode: WebSocketOpcode.text, UnsafeRawBufferPointer($0)) }
    }

    func send(_ id: WebSocketConnectionID, binary: UnsafeRawBufferPointer) {
        queue(id, opcode: WebSocketOpcode.binary, binary)
    }

    private func connection(_ id: WebSocketConnectionID) -> Connection? {
        id >= 1 && id <= connections.count ? connections[Int(id - 1)] : nil
    }

    private func nextMask() -> UInt32 {
        maskState ^= maskState << 13
        maskState ^= maskState >> 7
        maskState ^= maskState << 17
        return UInt32(truncatingIfNeeded: maskState)
    }

    private func queue(_ id: WebSocketConnectionID, opcode: UInt8, _ payload: UnsafeRawBufferPointer) {
        guard let c = connection(id) else { return }
        switch c.phase {
        case .open:
            WebSocketFrameWriter.append(opcode: opcode, payload: payload, mask: nextMask(), to: &c.tx)
            stats.maxQueuedBytes = max(stats.maxQueuedBytes, c.tx.count)
            markDirty(c)
        case .queued, .connecting, .handshaking:
            WebSocketFrameWriter.append(opcode: opcode, payload: payload, mask: nextMask(), to: &c.held)
        case .closing, .closed:
            return
        }
        stats.messagesSent += 1
    }

    private func markDirty(_ c: Connection) {
        guard !c.dirty else { return }
        c.dirty = true
        dirty.append(Int(c.id - 1))
    }

    private func loop() {
        let capacity: Int32 = 512
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: Int(capacity))
        defer { events.deallocate() }
        let tick = configuration.tickMicros
        nextTick = monotonicMicros() + tick
        while !stopRequested.load(ordering: .relaxed) {
            var timeout: Int32 = 100
            if tick > 0 {
                let now = monotonicMicros()
                timeout = nextTick > now ? Int32(min((nextTick - now + 999) / 1000, 100)) : 0
            }
            let waitStart = monotonicMicros()
            let n = epoll_wait(epfd, events, capacity, timeout)
            if n < 0 && errno != EINTR { fatalError("epoll_wait: \(String(cString: strerror(errno)))") }
            let turnStart = monotonicMicros()
            stats.loopTurns += 1
            stats.longestWaitMicros = max(stats.longestWaitMicros, Int(turnStart - waitStart))
            for k in 0..<max(0, Int(n)) {
                let token = events[k].data.u64
                if token == 0 { runJobs() } else { service(connections[Int(token - 1)], events[k].events) }
            }
            let now = monotonicMicros()
            if tick > 0, now >= nextTick {
                handler(self, .tick(nowMicros: now))
                nextTick += tick
                if nextTick <= now { nextTick = now + tick }
            }
            if now >= nextSweep {
                sweepDeadlines(now)
                nextSweep = now + 100_000
            }
            startQueuedConnects()
            flushDirty()
            stats.longestTurnMicros = max(stats.longestTurnMicros, Int(monotonicMicros() - turnStart))
        }
        for c in connections where c.fd >= 0 { close(c.fd); c.fd = -1 }
        close(epfd)
        close(wakefd)
        stopped.signal()
    }

    private func runJobs() {
        var count: UInt64 = 0
        _ = read(wakefd, &count, 8)
        for job in jobs.withLock({ j -> [@Sendable () -> Void] in defer { j.removeAll() }; return j }) { job() }
    }

    private func flushDirty() {
        for i in dirty {
            let c = connections[i]
            c.dirty = false
            if c.phase == .open || c.phase == .closing || c.phase == .handshaking { flush(c) }
        }
        dirty.removeAll(keepingCapacity: true)
    }

    /// One `send` of everything queued; what the socket does not take waits for EPOLLOUT.
    private func flush(_ c: Connection) {
        let r = c.tx.readable
        if r.count > 0 {
            let n = Glibc.send(c.fd, r.baseAddress, r.count, Int32(MSG_NOSIGNAL))
            stats.sendCalls += 1
            if n > 0 {
                c.tx.consume(n)
            } else if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                finish(c, failure: "send: \(String(cString: strerror(errno)))")
                return
            }
            if !c.tx.isEmpty { stats.blockedSends += 1 }
        }
        let wantWritable = !c.tx.isEmpty
        if wantWritable != c.watchingWritable { watch(c, writable: wantWritable) }
    }

    private func watch(_ c: Connection, writable: Bool) {
        c.watchingWritable = writable
        var ev = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0),
                             data: epoll_data_t(u64: c.id))
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, c.fd, &ev)
    }

    private func startQueuedConnects() {
        while handshaking < configuration.maxHandshakesInFlight, queuedHead < queued.count {
            let c = connections[queued[queuedHead]]
            queuedHead += 1
            if c.phase == .queued { startConnect(c) }
        }
        if queuedHead == queued.count { queued.removeAll(keepingCapacity: true); queuedHead = 0 }
    }

    private func startConnect(_ c: Connection) {
        handshaking += 1
        c.phase = .connecting
        c.deadline = monotonicMicros() + UInt64(configuration.connectTimeoutSeconds * 1e6)
        let host = c.url.host == "localhost" ? "127.0.0.1" : c.url.host
        guard var to = Self.address(host, port: c.url.port) else { finish(c, failure: "not an IPv4 address: \(host)"); return }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { finish(c, failure: "socket: \(String(cString: strerror(errno)))"); return }
        c.fd = fd
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source = c.source {
            guard var from = Self.address(source, port: 0),
                  withUnsafePointer(to: &from, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                      bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }) == 0
            else { finish(c, failure: "bind \(source): \(String(cString: strerror(errno)))"); return }
        }
        let r = withUnsafePointer(to: &to) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 || errno == EINPROGRESS else { finish(c, failure: "connect: \(String(cString: strerror(errno)))"); return }
        var ev = epoll_event(events: EPOLLOUT.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(u64: c.id))
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 else { finish(c, failure: "epoll_ctl: \(String(cString: strerror(errno)))"); return }
        c.watchingWritable = true
        c.key = WebSocketHandshake.makeKey()
        var request = WebSocketHandshake.request(host: host, port: c.url.port, path: c.url.pathAndQuery, key: c.key,
                                                 subprotocol: configuration.subprotocol, userAgent: configuration.userAgent)
        request.withUTF8 { c.tx.append(UnsafeRawBufferPointer($0)) }
    }

    private static func address(_ ip: String, port: Int) -> sockaddr_in? {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        return inet_pton(AF_INET, ip, &a.sin_addr) == 1 ? a : nil
    }

    private func service(_ c: Connection, _ events: UInt32) {
        switch c.phase {
        case .connecting:
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err != 0 { finish(c, failure: "connect: \(String(cString: strerror(err)))"); return }
            c.phase = .handshaking
            flush(c)
        case .handshaking, .open, .closing:
            if events & EPOLLOUT.rawValue != 0 { flush(c) }
            if c.phase != .closed, events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                receive(c)
            }
        case .queued, .closed:
            break
        }
    }

    /// Reads until the socket has no more (a short read), parsing after each read; at most four
    /// reads per turn, so one busy connection cannot starve the others (epoll reports it again).
    private func receive(_ c: Connection) {
        for _ in 0..<4 {
            let p = c.rx.ensureFree(16_384)
            let room = c.rx.freeBytes
            let n = recv(c.fd, p, room, 0)
            if n > 0 {
                c.rx.commit(n)
                stats.bytesReceived += n
                guard parse(c), c.phase != .closed else { return }
                if n < room { return }
            } else if n == 0 {
                finish(c, failure: c.phase == .closing ? nil : "connection closed by the server without a close frame")
                return
            } else if errno == EINTR {
                continue
            } else {
                if errno != EAGAIN && errno != EWOULDBLOCK { finish(c, failure: "recv: \(String(cString: strerror(errno)))") }
                return
            }
        }
    }

    /// Handles what is in the receive buffer; false when the connection is gone.
    private func parse(_ c: Connection) -> Bool {
        if c.phase == .handshaking {
            guard let head = WebSocketHandshake.headLength(c.rx.readable) else {
                if c.rx.count > 16_384 { finish(c, failure: "handshake response too long") }
                return c.phase != .closed
            }
            if let problem = WebSocketHandshake.problem(head: UnsafeRawBufferPointer(rebasing: c.rx.readable[0..<head]),
                                                        key: c.key, subprotocol: configuration.subprotocol) {
                finish(c, failure: problem)
                return false
            }
            c.rx.consume(head)
            c.phase = .open
            c.deadline = 0
            handshaking -= 1
            openCount.add(1, ordering: .relaxed)
            c.tx.append(c.held.readable)
            c.held.release()
            markDirty(c)
            handler(self, .connected(c.id))
        }
        var peerClose: UInt16?? = nil
        do {
            let used = try c.reader.consume(c.rx.readable) { inbound in
                switch inbound {
                case .message(let bytes, _):
                    stats.messagesReceived += 1
                    if c.phase == .open { handler(self, .message(c.id, bytes)) }
                case .ping(let payload):
                    WebSocketFrameWriter.append(opcode: WebSocketOpcode.pong, payload: payload, mask: nextMask(), to: &c.tx)
                    markDirty(c)
                case .pong:
                    break
                case .close(let code):
                    peerClose = .some(code)
                }
            }
            c.rx.consume(used)
        } catch {
            let code: UInt16 = error == .tooLarge ? 1009 : 1002
            if c.phase == .open { sendClose(c, code: code); flush(c) }
            finish(c, failure: "\(error)", unexpected: true)
            return false
        }
        if let code = peerClose {
            if c.phase == .open {
                // The server closes: answer with its code and end the connection.
                sendClose(c, code: code ?? 1000)
                flush(c)
                finish(c, failure: nil, unexpected: true)
            } else {
                finish(c, failure: nil)
            }
            return false
        }
        return true
    }

    private func sendClose(_ c: Connection, code: UInt16) {
        var payload = code.bigEndian
        withUnsafeBytes(of: &payload) { WebSocketFrameWriter.append(opcode: WebSocketOpcode.close, payload: $0, mask: nextMask(), to: &c.tx) }
        c.phase = .closing
        c.closedLocally = true
        c.deadline = monotonicMicros() + UInt64(configuration.closeTimeoutSeconds * 1e6)
        markDirty(c)
    }

    /// Ends a connection: reports `connectFailed` if it never opened, else `closed` (unexpected
    /// unless we closed it, or `unexpected` says so).
    private func finish(_ c: Connection, failure: String?, unexpected: Bool? = nil) {
        guard c.phase != .closed else { return }
        let previous = c.phase
        c.phase = .closed
        if c.fd >= 0 { close(c.fd); c.fd = -1 }
        c.rx.release()
        c.tx.release()
        c.held.release()
        switch previous {
        case .queued, .connecting, .handshaking:
            if previous != .queued { handshaking -= 1 }
            handler(self, .connectFailed(c.id, reason: failure ?? "closed"))
        case .open, .closing:
            openCount.subtract(1, ordering: .relaxed)
            handler(self, .closed(c.id, unexpected: unexpected ?? (!c.closedLocally || failure != nil)))
        case .closed:
            break
        }
    }

    private func sweepDeadlines(_ now: UInt64) {
        for c in connections where c.deadline > 0 && c.deadline < now {
            switch c.phase {
            case .connecting, .handshaking: finish(c, failure: "timed out")
            case .closing: finish(c, failure: nil)
            default: c.deadline = 0
            }
        }
    }
}
