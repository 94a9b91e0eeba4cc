import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// Collects owned events per connection for the self-test (any thread).
private final class EventLog: Sendable {
    private let events = Mutex<[(UInt64, WebSocketOwnedEvent, UInt64)]>([])

    func add(_ e: WebSocketClientEvent) {
        let owned = WebSocketOwnedEvent(e)
        let id: UInt64
        switch owned {
        case .connected(let i), .connectFailed(let i, _), .message(let i, _, _), .closed(let i, _): id = i
        case .tick: return
        }
        let now = monotonicMicros()
        events.withLock { $0.append((id, owned, now)) }
    }

    func all(_ id: UInt64) -> [(WebSocketOwnedEvent, UInt64)] {
        events.withLock { $0.filter { $0.0 == id }.map { ($0.1, $0.2) } }
    }

    func messages(_ id: UInt64) -> [[UInt8]] {
        all(id).compactMap { if case .message(_, let b, _) = $0.0 { return b } else { return nil } }
    }

    func isConnected(_ id: UInt64) -> Bool {
        all(id).contains { if case .connected = $0.0 { return true } else { return false } }
    }

    func closeInfo(_ id: UInt64) -> (WebSocketCloseInfo, UInt64)? {
        for (e, t) in all(id) { if case .closed(_, let info) = e { return (info, t) } }
        return nil
    }

    func failure(_ id: UInt64) -> String? {
        for (e, _) in all(id) { if case .connectFailed(_, let r) = e { return r } }
        return nil
    }
}

/// `presence-bench selftest`: checks the transport against an in-process echo server.
struct SelfTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "selftest",
        abstract: "Check the lws client transport (echo, fragments, clean close, abort, pause) and the epoll one (framing, echo, pongs, clean close) against an in-process echo server."
    )

    @Option(help: "Port for the in-process echo server (0: a free one).") var port: Int32 = 0
    @Option(help: "Server ping/hang-up seconds used by the half-open (pause) check.") var hangup: UInt16 = 3

    func run() throws {
        var o = EchoServer.Options()
        o.port = port
        o.pingSeconds = 1
        o.hangupSeconds = hangup
        let server = try EchoServer(options: o)
        guard server.startOnThread() else { throw ValidationError("echo server could not listen on port \(port)") }
        defer { server.requestStop(); server.waitStopped() }

        let log = EventLog()
        var cfg = WebSocketClientConfiguration()
        cfg.rxBufferSize = 1024
        cfg.userAgent = "presence-bench-selftest/1"
        if let l = ProcessInfo.processInfo.environment["LWS_LOG"], let v = Int32(l) { cfg.lwsLogLevel = v }
        let client = try WebSocketClient(configuration: cfg) { _, e in log.add(e) }
        try client.start()
        defer { client.shutdown() }
        let url = WebSocketURL(host: "127.0.0.1", port: server.port, pathAndQuery: "/.ws?v=5&ns=selftest")
        var checks: [(String, ReportJSON)] = []
        var allOK = true
        func check(_ name: String, _ ok: Bool, _ detail: [(String, ReportJSON)] = []) {
            allOK = allOK && ok
            checks.append((name, .object([("ok", .bool(ok))] + detail)))
        }
        func waitFor(_ seconds: Double, _ cond: () -> Bool) -> Bool {
            let end = monotonicMicros() + UInt64(seconds * 1e6)
            while !cond() { if monotonicMicros() > end { return false }; usleep(2000) }
            return true
        }
        let c = server.counters
        // The epoll transport's idle connection must outlive the lws checks (pings every 1 s).
        let epoll = EpollSelfTest(url: url)
        try epoll.begin()

        // 1. Echo, with a send queued before the handshake completes.
        let a = client.connect(to: url)
        client.send(a, text: "hello-before-handshake")
        let okA = waitFor(3) { log.messages(a).count >= 1 }
        check("echo_small", okA && log.messages(a).first == Array("hello-before-handshake".utf8))
        check("user_agent_sent", c.lastUserAgent == "presence-bench-selftest/1", [("seen", .string(c.lastUserAgent))])

        // 2. 200 KB message sent as 16 KiB fragments; echoed as one message, read back through a
        //    1 KB rx buffer: both sides reassemble.
        let big = (0..<200_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        client.send(a, bytes: big, fragmentSize: 16_384)
        let okBig = waitFor(5) { log.messages(a).count >= 2 }
        check("echo_fragmented_200k", okBig && log.messages(a).last == big,
              [("received_bytes", .int(log.messages(a).last?.count ?? 0))])

        // 3. Clean close: the server must see a close frame.
        let closeFrames0 = c.peerCloseFrames.load(ordering: .relaxed)
        client.close(a)
        let okClose = waitFor(3) { log.closeInfo(a) != nil }
        let ci = log.closeInfo(a)?.0
        check("clean_close", okClose && c.peerCloseFrames.load(ordering: .relaxed) == closeFrames0 + 1
                && ci?.closedLocally == true,
              [("server_close_frames", .int(c.peerCloseFrames.load(ordering: .relaxed) - closeFrames0)),
               ("peer_close_code", ci?.peerCloseCode.map { .int(Int($0)) } ?? .null)])

        // 4/5. Abort (FIN, then RST): the server must see the connection end with no close frame.
        for (name, mode) in [("abort_fin", WebSocketAbortMode.fin), ("abort_reset", .reset)] {
            let b = client.connect(to: url)
            _ = waitFor(3) { log.isConnected(b) }
            client.send(b, text: "x")
            _ = waitFor(3) { log.messages(b).count == 1 }
            let frames0 = c.peerCloseFrames.load(ordering: .relaxed)
            let abrupt0 = c.closedWithoutCloseFrame.load(ordering: .relaxed)
            let t0 = monotonicMicros()
            client.abort(b, mode: mode)
            let ok = waitFor(3) { c.closedWithoutCloseFrame.load(ordering: .relaxed) == abrupt0 + 1 }
            let seen = c.lastAbruptCloseMicros.load(ordering: .relaxed)
            _ = waitFor(2) { log.closeInfo(b) != nil }
            check(name, ok && c.peerCloseFrames.load(ordering: .relaxed) == frames0 && log.closeInfo(b)?.0.aborted == true,
                  [("server_detect_ms", .double(ok ? Double(seen &- t0) / 1000 : -1)),
                   ("server_close_frames", .int(c.peerCloseFrames.load(ordering: .relaxed) - frames0))])
        }

        // 6. Pause: the server pings every 1 s and hangs up after `hangup` s without a valid pong.
        //    A paused connection must be dropped; an idle unpaused one must survive (lws auto-pongs).
        let p = client.connect(to: url)
        let q = client.connect(to: url)
        _ = waitFor(3) { log.isConnected(p) && log.isConnected(q) }
        let abrupt0 = c.closedWithoutCloseFrame.load(ordering: .relaxed)
        let tp = monotonicMicros()
        client.pause(p)
        let dropped = waitFor(Double(hangup) + 4) { c.closedWithoutCloseFrame.load(ordering: .relaxed) > abrupt0 }
        let detectMs = Double(c.lastAbruptCloseMicros.load(ordering: .relaxed) &- tp) / 1000
        let qAlive = log.closeInfo(q) == nil
        client.send(q, text: "still-here")
        let qEcho = waitFor(2) { log.messages(q).last == Array("still-here".utf8) }
        client.resume(p)
        let pClosed = waitFor(3) { log.closeInfo(p) != nil }
        check("pause_half_open", dropped && qAlive && qEcho,
              [("server_detect_ms", .double(dropped ? detectMs : -1)),
               ("server_policy_ping_s", .int(1)), ("server_policy_hangup_s", .int(Int(hangup))),
               ("unpaused_idle_survived", .bool(qAlive && qEcho)),
               ("client_saw_close_after_resume", .bool(pClosed))])

        // 7. Connect failure is reported.
        let bad = client.connect(to: WebSocketURL(host: "127.0.0.1", port: 1, pathAndQuery: "/"))
        let okFail = waitFor(3) { log.failure(bad) != nil }
        check("connect_failure_reported", okFail, [("reason", .string(log.failure(bad) ?? ""))])

        // 8. Source address binding (127.0.0.2).
        let s = client.connect(to: url, sourceAddress: "127.0.0.2")
        client.send(s, text: "from-127.0.0.2")
        let okSrc = waitFor(3) { log.messages(s).count == 1 }
        check("source_address_127.0.0.2", okSrc, [("failure", .string(log.failure(s) ?? ""))])

        // 9. A message over the receiving client's limit is not buffered: it closes with 1009
        //    (the server sees the close frame) and says why.
        var smallCfg = cfg
        smallCfg.maxMessageBytes = 100_000
        let smallLog = EventLog()  // ids are per client
        let small = try WebSocketClient(configuration: smallCfg) { _, e in smallLog.add(e) }
        try small.start()
        defer { small.shutdown() }
        let m = small.connect(to: url)
        let bigFrames0 = c.peerCloseFrames.load(ordering: .relaxed)
        small.send(m, bytes: big, fragmentSize: 16_384)
        let okLimit = waitFor(5) { smallLog.closeInfo(m) != nil }
        let limitInfo = smallLog.closeInfo(m)?.0
        check("oversized_message_refused", okLimit && limitInfo?.messageTooLarge == true && smallLog.messages(m).isEmpty
                && c.peerCloseFrames.load(ordering: .relaxed) == bigFrames0 + 1,
              [("message_too_large", .bool(limitInfo?.messageTooLarge ?? false)),
               ("messages_delivered", .int(smallLog.messages(m).count))])

        let epollResult = epoll.finish(peerCloseFrames: { c.peerCloseFrames.load(ordering: .relaxed) }, hangupSeconds: Double(hangup))
        checks += epollResult.checks
        allOK = allOK && epollResult.ok

        client.closeAll()
        _ = waitFor(3) { client.statistics.open == 0 }
        printResult([("scenario", .string("selftest")), ("event_loop", .string("libuv")), ("ok", .bool(allOK)), ("checks", .object(checks)),
                     ("server", c.json())])
        if !allOK { throw ExitCode(1) }
    }
}
