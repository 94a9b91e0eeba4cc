import PresenceCore
import PresenceWire
import Testing
@testable import PresenceClient

/// How large a request may be: the server's default until the server states its own limit in a
/// 1009 close; then what no longer fits is refused, once, and never resent.
@Suite struct RequestLimitTests {
    /// A string value whose `p` request is a little over `bytes` bytes.
    static func value(over bytes: Int) -> JSON { .string(String(repeating: "x", count: bytes)) }

    @Test func requestsAreBoundedByWhatAServerTakesByDefaultAndRepliesByTheClientsLimit() throws {
        let config = ClientConfiguration(server: WebSocketURL("ws://127.0.0.1:9000")!)
        let connection = ClientConnection(configuration: config)
        #expect(connection.maxRequestBytes == FrameAssembler.defaultMaxMessageBytes)
        #expect(connection.maxMessageBytes == ClientConfiguration.defaultMaxMessageBytes)
        #expect(connection.requestLimit == .serverDefault)

        let h = Harness()
        h.connect()
        _ = h.take()
        let p = path("/big")
        let big = h.step { c, now in c.set(p, Self.value(over: FrameAssembler.defaultMaxMessageBytes), now: now) }
        #expect(h.requests(h.take()).isEmpty)  // never sent
        h.step { c, now in c.timerFired(now: now) }
        let refusals = h.events(h.take()).compactMap { event -> RequestFailure? in
            if case .writeCompleted(big, let failure?) = event { return failure }
            return nil
        }
        let refusal = try #require(refusals.first)
        #expect(refusal.message.contains("larger than the 1048576 bytes a presence server takes by default"))
        // Replies up to the client's own limit (16 MiB) are taken: 2 MiB arrives as one message.
        let g = h.step { c, now in c.get(p, now: now) }
        let r = try #require(h.requests(h.take()).first?.r)
        h.reply(r, data: "\"" + String(repeating: "y", count: 2 << 20) + "\"")
        #expect(h.events(h.take()).contains(.getCompleted(g, .string(String(repeating: "y", count: 2 << 20)), nil)))
    }

    @Test func aTooBigCloseStatingTheServersLimitRefusesWhatNoLongerFitsAndResendsTheRest() throws {
        let h = Harness(maxMessageBytes: 4 << 20)
        var config = h.connection.configuration
        config.maxRequestBytes = 4 << 20  // the user said the server takes 4 MiB (the CLI's --max-message-bytes)
        h.connection = ClientConnection(configuration: config, random: { 0.5 })
        #expect(h.connection.requestLimit == .client)
        h.connect(session: "S1")
        let p = path("/users/alice")
        let auth = try #require(h.requests(h.take()).first)
        h.reply(auth.r)
        _ = h.take()
        let small = h.step { c, now in c.set(p.child("name"), "alice", now: now) }
        let big = h.step { c, now in c.set(p.child("avatar"), Self.value(over: 100_000), now: now) }
        let smallOp = h.step { c, now in c.onDisconnectSet(p.child("online"), false, now: now) }
        let bigOp = h.step { c, now in c.onDisconnectSet(p.child("bio"), Self.value(over: 70_000), now: now) }
        #expect(h.requests(h.take()).map(\.a) == ["p", "p", "o", "o"])  // all fit the client's 4 MiB

        // The server takes 64 KiB: it closed with 1009 after the big write.
        let close = ServerClose(code: CloseCode.messageTooBig.rawValue, reason: "message larger than 65536 bytes")
        h.step { c, now in c.transportClosed(reason: "closed by the server (code 1009)", serverClose: close, now: now) }
        var out = h.take()
        #expect(h.connection.maxRequestBytes == 65_536 && h.connection.requestLimit == .server)
        let events = h.events(out)
        guard case .writeCompleted(big, let writeFailure?) = events.first,
              case .onDisconnectCompleted(bigOp, let opFailure?) = events.dropFirst().first else {
            Issue.record("the big write and registration were not refused first: \(events)")
            return
        }
        #expect(writeFailure.message.contains("larger than the server's limit of 65536 bytes"))
        #expect(writeFailure.error == .invalidData(writeFailure.message))
        #expect(opFailure.message.contains("the server's limit of 65536 bytes"))
        #expect(Array(events.dropFirst(2)) == [.status(.disconnected(reason: "closed by the server (code 1009)")),
                                                .status(.reconnecting(inMilliseconds: 500))])
        #expect(h.connection.pendingWrites.map(\.id) == [small])
        #expect(h.connection.onDisconnectRegistrations.map(\.id) == [smallOp])

        // The reconnect resends only what fits.
        h.clock.advance(byMilliseconds: 500)
        h.step { c, now in c.timerFired(now: now) }
        h.step { c, now in c.transportOpened(now: now) }
        h.hello("S2")
        out = h.take()
        let resent = h.requests(out)
        #expect(resent.map(\.a) == ["gauth", "o", "p"])
        #expect(resent[1].b["p"] == "/users/alice/online" && resent[2].b["p"] == "/users/alice/name")
        // A later request over the server's limit is refused here, naming it.
        let later = h.step { c, now in c.set(p, Self.value(over: 65_536), now: now) }
        #expect(h.requests(h.take()).isEmpty)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.events(h.take()).contains { event in
            if case .writeCompleted(later, let failure?) = event { return failure.message.contains("the server's limit of 65536") }
            return false
        })
    }

    @Test func aTooBigCloseThatTeachesNothingEndsTheConnectionInsteadOfResendingForever() {
        for reason in ["", "message larger than 9999999 bytes", "something else"] {
            let h = Harness()
            h.connect()
            _ = h.step { c, now in c.set(path("/a"), "b", now: now) }
            _ = h.take()
            let close = ServerClose(code: 1009, reason: reason)
            h.step { c, now in c.transportClosed(reason: "closed by the server (code 1009)", serverClose: close, now: now) }
            let out = h.take()
            #expect(h.opens(out).isEmpty && h.connection.phase == .stopped, "\(reason)")
            #expect(h.events(out).contains { if case .fatal(let message) = $0 { message.contains("not resending") } else { false } })
            #expect(h.connection.maxRequestBytes == FrameAssembler.defaultMaxMessageBytes)
        }
    }

    @Test func otherServerClosesAreOrdinaryLosses() {
        for code in [CloseCode.goingAway, .replaced, .closedByOperator, .policyViolation] {
            let h = Harness()
            h.connect()
            let write = h.step { c, now in c.set(path("/a"), "b", now: now) }
            _ = h.take()
            let close = ServerClose(code: code.rawValue, reason: "bye")
            h.step { c, now in c.transportClosed(reason: "closed", serverClose: close, now: now) }
            #expect(h.events(h.take()) == [.status(.disconnected(reason: "closed")), .status(.reconnecting(inMilliseconds: 500))])
            #expect(h.connection.pendingWrites.map(\.id) == [write])
        }
    }

    /// Lose the connection (with `close`, or none: the TCP connection just ended), reconnect, and
    /// return the actions sent after the hello.
    static func loseAndReconnect(_ h: Harness, close: ServerClose?, session: String) -> (events: [ClientEvent], sent: [String]) {
        h.step { c, now in c.transportClosed(reason: "connection lost", serverClose: close, now: now) }
        let events = h.events(h.take())
        h.clock.advance(byMilliseconds: 120_000)
        h.step { c, now in c.timerFired(now: now) }
        h.step { c, now in c.transportOpened(now: now) }
        h.hello(session)
        return (events, h.requests(h.take()).map(\.a))
    }

    /// A server that refuses a message for its size may reset the connection before its 1009 close
    /// frame is read: the client never learns the limit. The write is then refused after three
    /// losses in a row with it in flight, not resent for ever; small writes are never suspected.
    @Test func aLargeWriteInFlightAtThreeLossesInARowIsRefusedNotResentForever() throws {
        let h = Harness()
        h.connect()
        let auth = try #require(h.requests(h.take()).first)
        h.reply(auth.r)
        let small = h.step { c, now in c.set(path("/a"), "b", now: now) }
        let big = h.step { c, now in c.set(path("/big"), Self.value(over: ClientConnection.smallestServerLimit), now: now) }
        #expect(h.requests(h.take()).map(\.a) == ["p", "p"])
        for loss in 1..<ClientConnection.lossesBeforeRefusingLargeWrite {
            let (events, sent) = Self.loseAndReconnect(h, close: nil, session: "S\(loss + 1)")
            #expect(!events.contains { if case .writeCompleted = $0 { true } else { false } }, "loss \(loss)")
            #expect(sent == ["gauth", "p", "p"], "loss \(loss): both writes are resent")
        }
        let (events, sent) = Self.loseAndReconnect(h, close: nil, session: "S9")
        let refusals = events.compactMap { event -> RequestFailure? in
            if case .writeCompleted(big, let failure?) = event { return failure }
            return nil
        }
        let refusal = try #require(refusals.first)
        #expect(refusal.message.contains("lost 3 times in a row") && refusal.message.contains("max message size"))
        #expect(refusal.error == .invalidData(refusal.message))
        #expect(sent == ["gauth", "p"])
        #expect(h.connection.pendingWrites.map(\.id) == [small])
        // The small write alone is never suspected, however often the connection drops.
        for loss in 0..<5 {
            let (events, sent) = Self.loseAndReconnect(h, close: nil, session: "T\(loss)")
            #expect(!events.contains { if case .writeCompleted = $0 { true } else { false } })
            #expect(sent == ["gauth", "p"])
        }
    }

    @Test func lossesWithACloseFrameSayingWhyDoNotCountAgainstALargeWrite() throws {
        let h = Harness()
        h.connect()
        let auth = try #require(h.requests(h.take()).first)
        h.reply(auth.r)
        let big = h.step { c, now in c.set(path("/big"), Self.value(over: 100_000), now: now) }
        _ = h.take()
        for (index, code) in [CloseCode.goingAway, .replaced, .goingAway, .closedByOperator, .goingAway].enumerated() {
            let (events, sent) = Self.loseAndReconnect(h, close: ServerClose(code: code.rawValue, reason: "bye"), session: "S\(index)")
            #expect(!events.contains { if case .writeCompleted = $0 { true } else { false } })
            #expect(sent == ["gauth", "p"])
        }
        #expect(h.connection.pendingWrites.map(\.id) == [big])
    }
}
