import Foundation
import Glibc
import PresenceClient
import Synchronization

/// The self-test's checks of the epoll transport: its framing on hand-made bytes, and live checks
/// against the in-process lws echo server. `begin` opens an idle connection that must still answer
/// the server's pings (1 s, hang-up after 3 s) when `finish` runs, after the lws checks.
final class EpollSelfTest: @unchecked Sendable {
    private let url: WebSocketURL
    private let events = Mutex<[(WebSocketConnectionID, String)]>([])
    private let messages = Mutex<[WebSocketConnectionID: [[UInt8]]]>([:])
    private var client: EpollWebSocketClient!
    private var idle: WebSocketConnectionID = 0
    private var idleOpenedAt: UInt64 = 0

    init(url: WebSocketURL) { self.url = url }

    func begin() throws {
        client = EpollWebSocketClient(configuration: .init()) { [unowned self] _, event in
            switch event {
            case .connected(let id): events.withLock { $0.append((id, "connected")) }
            case .connectFailed(let id, let reason): events.withLock { $0.append((id, "failed: \(reason)")) }
            case .message(let id, let bytes): messages.withLock { $0[id, default: []].append(Array(bytes)) }
            case .closed(let id, let unexpected): events.withLock { $0.append((id, unexpected ? "closed unexpectedly" : "closed")) }
            case .tick: break
            }
        }
        try client.start()
        idle = connect()
        idleOpenedAt = monotonicMicros()
        // Its handshake is done before the lws checks start (one of them reads the last User-Agent).
        _ = waitFor(3) { last(idle) != nil }
    }

    private func connect(source: String? = nil, to target: WebSocketURL? = nil) -> WebSocketConnectionID {
        let id = Box<WebSocketConnectionID>(0)
        let sem = DispatchSemaphore(value: 0)
        client.perform { [self] in id.value = client.connect(to: target ?? url, sourceAddress: source); sem.signal() }
        sem.wait()
        return id.value
    }

    private func send(_ id: WebSocketConnectionID, _ bytes: [UInt8], binary: Bool) {
        client.perform { [self] in
            if binary { bytes.withUnsafeBytes { client.send(id, binary: $0) } } else { client.send(id, text: String(decoding: bytes, as: UTF8.self)) }
        }
    }

    private func last(_ id: WebSocketConnectionID) -> String? { events.withLock { $0.last { $0.0 == id }?.1 } }
    private func received(_ id: WebSocketConnectionID) -> [[UInt8]] { messages.withLock { $0[id] ?? [] } }

    private func waitFor(_ seconds: Double, _ cond: () -> Bool) -> Bool {
        let end = monotonicMicros() + UInt64(seconds * 1e6)
        while !cond() { if monotonicMicros() > end { return false }; usleep(2000) }
        return true
    }

    /// Runs the remaining checks; `peerCloseFrames` reads the echo server's count of close frames.
    func finish(peerCloseFrames: () -> Int, hangupSeconds: Double) -> (checks: [(String, ReportJSON)], ok: Bool) {
        var (checks, allOK) = Self.framingChecks()
        func check(_ name: String, _ ok: Bool, _ detail: [(String, ReportJSON)] = []) {
            allOK = allOK && ok
            checks.append((name, .object([("ok", .bool(ok))] + detail)))
        }
        // The idle connection has been answering pings for at least the hang-up time.
        _ = waitFor(max(0, hangupSeconds + 0.5 - Double(monotonicMicros() - idleOpenedAt) / 1e6)) { false }
        send(idle, Array("still-here".utf8), binary: false)
        let idleOK = waitFor(2) { received(idle).last == Array("still-here".utf8) } && last(idle) == "connected"
        check("epoll_pongs_keep_idle_connection", idleOK, [("idle_s", .double(Double(monotonicMicros() - idleOpenedAt) / 1e6))])

        // Echo, small and 200 KB (the server's reply may come in fragments).
        let a = connect()
        send(a, Array("hello-epoll".utf8), binary: false)
        let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        send(a, big, binary: true)
        let echoOK = waitFor(5) { received(a).count >= 2 }
        check("epoll_echo", echoOK && received(a).first == Array("hello-epoll".utf8) && received(a).last == big,
              [("received_messages", .int(received(a).count)), ("last_bytes", .int(received(a).last?.count ?? 0))])

        // Clean close: the server sees a close frame and we report a closing we asked for.
        let frames0 = peerCloseFrames()
        client.closeAll()
        let closedOK = waitFor(3) { last(a) == "closed" && last(idle) == "closed" }
        check("epoll_clean_close", closedOK && waitFor(2) { peerCloseFrames() >= frames0 + 2 },
              [("server_close_frames", .int(peerCloseFrames() - frames0)), ("state", .string(last(a) ?? ""))])

        // A refused connect is reported; a source address is bound.
        let bad = connect(to: WebSocketURL(host: "127.0.0.1", port: 1, pathAndQuery: "/"))
        check("epoll_connect_failure_reported", waitFor(3) { last(bad)?.hasPrefix("failed") == true }, [("event", .string(last(bad) ?? ""))])
        let s = connect(source: "127.0.0.2")
        send(s, Array("from-127.0.0.2".utf8), binary: false)
        check("epoll_source_address_127.0.0.2", waitFor(3) { received(s).count == 1 }, [("event", .string(last(s) ?? ""))])
        client.closeAll()
        _ = waitFor(3) { client.openConnections == 0 }
        client.shutdown()
        return (checks, allOK)
    }

    /// Frame writer and reader, and the handshake check, on bytes made by hand (RFC 6455 examples).
    static func framingChecks() -> (checks: [(String, ReportJSON)], ok: Bool) {
        var checks: [(String, ReportJSON)] = []
        var allOK = true
        func check(_ name: String, _ ok: Bool) {
            allOK = allOK && ok
            checks.append((name, .object([("ok", .bool(ok))])))
        }

        check("epoll_accept_key_rfc6455", WebSocketHandshake.accept(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
        let wrong = good.replacingOccurrences(of: "s3pP", with: "AAAA")
        let okGood = Array(good.utf8).withUnsafeBytes { WebSocketHandshake.problem(head: $0, key: key, subprotocol: "mqtt") == nil }
        let okWrong = Array(wrong.utf8).withUnsafeBytes { WebSocketHandshake.problem(head: $0, key: key, subprotocol: "mqtt") != nil }
        let okProto = Array(good.utf8).withUnsafeBytes { WebSocketHandshake.problem(head: $0, key: key, subprotocol: "other") != nil }
        check("epoll_handshake_checked", okGood && okWrong && okProto)

        // Masked frames unmask to the payload, at each length encoding (7-bit, 16-bit, 64-bit).
        var masksOK = true
        for n in [0, 5, 125, 126, 65_535, 70_000] {
            let payload = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            var out = ByteBuffer(capacity: 16)
            payload.withUnsafeBytes { WebSocketFrameWriter.append(opcode: WebSocketOpcode.binary, payload: $0, mask: 0xA1B2_C3D4, to: &out) }
            let f = Array(out.readable)
            out.release()
            let header = n < 126 ? 2 : n <= 0xFFFF ? 4 : 10
            let mask = Array(f[header..<(header + 4)])
            let unmasked = f[(header + 4)...].enumerated().map { $0.element ^ mask[$0.offset % 4] }
            masksOK = masksOK && f[0] == 0x82 && f[1] & 0x80 != 0 && unmasked == payload
        }
        check("epoll_masked_frames", masksOK)

        // Reader: a text message in two fragments with a ping between them, then a close.
        let stream: [UInt8] = [0x01, 3] + Array("hel".utf8) + [0x89, 1, UInt8(ascii: "p")] + [0x80, 2] + Array("lo".utf8)
            + [0x88, 2, 0x03, 0xE8] + [0x81, 1, UInt8(ascii: "x")]
        var reader = WebSocketFrameReader(maxMessageBytes: 1000)
        var seen: [String] = []
        let used = try? stream.withUnsafeBytes { b in
            try reader.consume(b) { inbound in
                switch inbound {
                case .message(let m, let binary): seen.append("\(binary ? "binary" : "text") \(String(decoding: m, as: UTF8.self))")
                case .ping(let p): seen.append("ping \(String(decoding: p, as: UTF8.self))")
                case .pong: seen.append("pong")
                case .close(let code): seen.append("close \(code.map(String.init) ?? "-")")
                }
            }
        }
        check("epoll_reader_fragments_ping_close", seen == ["ping p", "text hello", "close 1000"] && used == stream.count - 3)

        // A partial frame waits; a masked server frame and an oversized one are refused.
        var r2 = WebSocketFrameReader(maxMessageBytes: 10)
        let partial = (try? [UInt8]([0x81, 5, 65, 66]).withUnsafeBytes { b in try r2.consume(b) { _ in } }) == 0
        func failure(_ bytes: [UInt8]) -> WebSocketFrameError? {
            var r = WebSocketFrameReader(maxMessageBytes: 10)
            do { _ = try bytes.withUnsafeBytes { b in try r.consume(b) { _ in } } } catch { return error as? WebSocketFrameError }
            return nil
        }
        let masked = failure([0x81, 0x81, 1, 2, 3, 4, 65])
        let large = failure([0x82, 11] + [UInt8](repeating: 0, count: 11))
        let stray = failure([0x80, 1, 65])
        var protocolErrors = true
        for e in [masked, stray] { if case .protocolError = e {} else { protocolErrors = false } }
        check("epoll_reader_refuses_bad_frames", partial && protocolErrors && large == .tooLarge)

        // The RTDB count frame that announces a multi-frame message (at most 6 digits).
        func count(_ text: String) -> Int? { Array(text.utf8).withUnsafeBytes { FanoutLoad.frameCount($0) } }
        check("rtdb_count_frame", count("3") == 3 && count("123456") == 123_456 && count("1234567") == nil
                && count("12a") == nil && count("") == nil && count(#"{"t":"d"}"#) == nil)
        return (checks, allOK)
    }
}
