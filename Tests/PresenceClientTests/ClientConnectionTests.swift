import PresenceCore
import Testing
@testable import PresenceClient

@Suite struct ClientConnectionTests {
    @Test func connectsThenAuthenticatesAndListensAfterTheHello() {
        let h = Harness(credential: DevToken.unsigned(uid: "alice"))
        h.step { c, now in c.start(now: now) }
        var out = h.take()
        #expect(h.opens(out).map(\.description) == ["ws://127.0.0.1:9000/.ws?v=5&ns=demo"])
        #expect(h.events(out) == [.status(.connecting(attempt: 1))])
        // Requests made before the hello wait for it.
        let listener = h.step { c, now in c.listen(path("/users/alice/presence"), now: now) }
        #expect(h.requests(h.take()).isEmpty)
        h.step { c, now in c.transportOpened(now: now) }
        h.hello("S1")
        out = h.take()
        let sent = h.requests(out)
        #expect(sent.map(\.a) == ["auth", "q"])
        #expect(sent[0].b["cred"]?.stringValue == DevToken.unsigned(uid: "alice"))
        #expect(sent[1].b == ["p": "/users/alice/presence", "h": ""])
        #expect(h.events(out).last == .status(.connected(session: "S1")))
        #expect(h.connection.serverTimeOffset == 5)
        // Initial data before the ok; the ok alone does not repeat it.
        h.reply(sent[0].r, data: "{\"auth\":{\"uid\":\"alice\"}}")
        h.push("users/alice/presence", "null")
        h.reply(sent[1].r, data: "{}")
        let events = h.events(h.take())
        #expect(events == [
            .authenticated(["auth": ["uid": "alice"]]),
            .value(listener: listener, path: path("/users/alice/presence"), value: .null),
        ])
    }

    @Test func gauthForNonJWTCredentials() {
        let h = Harness(credential: "owner")
        h.connect()
        #expect(h.requests(h.take()).map(\.a) == ["gauth"])
    }

    @Test func pushesUpdateTheListenedValue() {
        let h = Harness()
        let all = h.step { c, now in c.listen(path("/users"), now: now) }
        h.connect()
        _ = h.take()
        h.push("users", "{\"alice\":{\"presence\":{\"online\":true,\"lastSeen\":1}}}")
        h.push("users/bob/presence", "{\"online\":false,\"lastSeen\":2}")
        h.push("users/alice/presence", "{\"online\":false}", action: "m")
        h.push("users/bob", "null")
        let values = h.events(h.take()).compactMap { e -> JSON? in
            if case .value(let id, _, let v) = e, id == all { return v } else { return nil }
        }
        #expect(values == [
            ["alice": ["presence": ["online": true, "lastSeen": 1]]],
            ["alice": ["presence": ["online": true, "lastSeen": 1]], "bob": ["presence": ["online": false, "lastSeen": 2]]],
            ["alice": ["presence": ["online": false, "lastSeen": 1]], "bob": ["presence": ["online": false, "lastSeen": 2]]],
            ["alice": ["presence": ["online": false, "lastSeen": 1]]],
        ])
    }

    @Test func writesAndOnDisconnectAreSentInOrderAndAcked() {
        let h = Harness()
        h.connect()
        _ = h.take()
        let p = path("/users/alice/presence")
        let od = h.step { c, now in c.onDisconnectSet(p, AppPresence.presenceValue(online: false), now: now) }
        let w = h.step { c, now in c.set(p, AppPresence.presenceValue(online: true), now: now) }
        let sent = h.requests(h.take())
        #expect(sent.map(\.a) == ["o", "p"])
        #expect(sent[1].b["d"] == ["online": true, "lastSeen": [".sv": "timestamp"]])
        h.reply(sent[0].r)
        h.reply(sent[1].r)
        #expect(h.events(h.take()) == [.onDisconnectCompleted(od, nil), .writeCompleted(w, nil)])
        #expect(h.connection.pendingWrites.isEmpty)
        #expect(h.connection.onDisconnectRegistrations.count == 1)
    }

    @Test func refusedWritesAndListensAreReported() {
        let h = Harness()
        h.connect()
        _ = h.take()
        let w = h.step { c, now in c.set(path("/users/bob/presence"), ["online": true], now: now) }
        let l = h.step { c, now in c.listen(path("/secret"), now: now) }
        let sent = h.requests(h.take())
        h.reply(sent[0].r, status: "permission_denied", data: "\"Permission denied\"")
        h.reply(sent[1].r, status: "permission_denied", data: "\"Permission denied\"")
        let denied = RequestFailure(status: "permission_denied", message: "Permission denied")
        #expect(h.events(h.take()) == [.writeCompleted(w, denied), .listenFailed(listener: l, path: path("/secret"), denied)])
        #expect(h.connection.pendingWrites.isEmpty && h.connection.listenedPaths.isEmpty)
    }

    @Test func listenersComeAndGoWithoutReconnecting() {
        let h = Harness()
        h.connect()
        _ = h.take()
        let a = h.step { c, now in c.listen(path("/users/alice/presence"), now: now) }
        let a2 = h.step { c, now in c.listen(path("/users/alice/presence"), now: now) }  // shares the server listen
        let b = h.step { c, now in c.listen(path("/users/bob/presence"), now: now) }
        h.step { c, now in c.unlisten(a, now: now) }
        h.step { c, now in c.unlisten(b, now: now) }
        h.step { c, now in c.unlisten(a2, now: now) }
        let out = h.take()
        #expect(h.requests(out).map(\.a) == ["q", "q", "n", "n"])
        #expect(h.requests(out)[2].b["p"] == "/users/bob/presence")
        #expect(h.opens(out).isEmpty)
        #expect(!out.contains(.close) && !out.contains(.abort))
        #expect(h.connection.isConnected)
    }

    @Test func reconnectRestoresEverythingAndSendsOfflineWritesInOrder() {
        let h = Harness(credential: "tok.en.x", random: [0.5])
        let p = path("/users/alice/presence")
        h.connect(session: "S1")
        let l = h.step { c, now in c.listen(p, now: now) }
        let od = h.step { c, now in c.onDisconnectSet(p, ["online": false], now: now) }
        var sent = h.requests(h.take())
        h.reply(sent[0].r)  // auth
        h.reply(sent[2].r)  // o
        _ = h.take()
        let first = h.step { c, now in c.set(p, ["online": true], now: now) }  // sent, never acked
        _ = h.take()

        h.clock.advance(byMilliseconds: 5000)
        h.step { c, now in c.transportClosed(reason: "connection lost", now: now) }
        var out = h.take()
        #expect(h.events(out) == [.status(.disconnected(reason: "connection lost")), .status(.reconnecting(inMilliseconds: 500))])
        #expect(h.connection.phase == .waitingToReconnect(at: h.now + 500))
        #expect(h.connection.nextDeadline == h.now + 500)

        // Issued while offline: queued, in order.
        let second = h.step { c, now in c.set(p, ["online": false], now: now) }
        let third = h.step { c, now in c.update(path("/users/alice"), [("presence/online", true)], now: now) }
        #expect(h.requests(h.take()).isEmpty)

        h.clock.advance(byMilliseconds: 499)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take().isEmpty)
        h.clock.advance(byMilliseconds: 1)
        h.step { c, now in c.timerFired(now: now) }
        out = h.take()
        #expect(h.opens(out).map(\.description) == ["ws://127.0.0.1:9000/.ws?v=5&ls=S1&ns=demo"])
        h.step { c, now in c.transportOpened(now: now) }
        h.hello("S2")
        out = h.take()
        sent = h.requests(out)
        #expect(sent.map(\.a) == ["auth", "q", "o", "p", "p", "m"])
        #expect(sent[0].b["cred"] == "tok.en.x")
        #expect(sent[1].b["p"] == "/users/alice/presence")
        #expect(sent[2].b == ["p": "/users/alice/presence", "d": ["online": false]])
        #expect(sent[3].b["d"] == ["online": true])
        #expect(sent[4].b["d"] == ["online": false])
        #expect(sent[5].b == ["p": "/users/alice", "d": ["presence/online": true]])
        // Request numbers carry on across connections.
        #expect(sent.map(\.r) == Array(sent[0].r..<(sent[0].r + 6)))
        #expect(h.events(out).contains(.writeSent(first, request: sent[3].r)))
        #expect(h.events(out).last == .status(.connected(session: "S2")))
        for s in sent.dropFirst(2) { h.reply(s.r) }
        #expect(h.events(h.take()) == [
            .onDisconnectCompleted(od, nil), .writeCompleted(first, nil), .writeCompleted(second, nil), .writeCompleted(third, nil),
        ])
        _ = l
    }

    @Test func backoffGrowsAcrossFailedAttemptsAndResetsAfterAStableConnection() {
        let h = Harness(random: [0.999_999])
        h.connect()
        var delays: [Int64] = []
        for _ in 0..<4 {
            h.step { c, now in c.transportClosed(reason: "lost", now: now) }
            for e in h.events(h.take()) { if case .status(.reconnecting(let ms)) = e { delays.append(ms) } }
            h.clock.advance(byMilliseconds: delays.last!)
            h.step { c, now in c.timerFired(now: now) }
            h.step { c, now in c.transportFailed(reason: "refused", now: now) }  // the attempt fails
            for e in h.events(h.take()) { if case .status(.reconnecting(let ms)) = e { delays.append(ms) } }
            h.clock.advance(byMilliseconds: delays.last!)
            h.step { c, now in c.timerFired(now: now) }
            h.step { c, now in c.transportOpened(now: now) }
            h.hello("S")
            _ = h.take()
            if delays.count == 4 { break }
        }
        #expect(delays == [999, 1299, 1689, 2196])
        // A connection that lasted 30 s resets the ceiling to 1 s.
        h.clock.advance(byMilliseconds: 30_000)
        h.step { c, now in c.transportClosed(reason: "lost", now: now) }
        #expect(h.events(h.take()).contains(.status(.reconnecting(inMilliseconds: 999))))
    }

    @Test func jitterComesFromTheInjectedSource() {
        let h = Harness(random: [0.0, 0.25])
        h.connect()
        h.step { c, now in c.transportClosed(reason: "lost", now: now) }
        #expect(h.events(h.take()).contains(.status(.reconnecting(inMilliseconds: 0))))
        h.step { c, now in c.timerFired(now: now) }
        h.step { c, now in c.transportFailed(reason: "refused", now: now) }
        #expect(h.events(h.take()).contains(.status(.reconnecting(inMilliseconds: 325))))  // 0.25 × 1300
        #expect(h.random.calls == 2)
    }

    @Test func networkOffPausesAndNetworkOnProbesThenReplacesADeadConnection() {
        let h = Harness(random: [0.1])
        h.connect()
        _ = h.take()
        h.step { c, now in c.networkOff(now: now) }
        #expect(h.take() == [.pause])
        // No keepalive while the network is off.
        h.clock.advance(byMilliseconds: 60_000)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take().isEmpty)
        h.step { c, now in c.networkOn(now: now) }
        #expect(h.take() == [.resume, .send(ClientCodec.ping)])
        h.clock.advance(byMilliseconds: 2999)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take().isEmpty)
        h.clock.advance(byMilliseconds: 1)
        h.step { c, now in c.timerFired(now: now) }
        let out = h.take()
        #expect(out.first == .abort)
        #expect(h.events(out).contains(.status(.reconnecting(inMilliseconds: 100))))
    }

    @Test func aPongAfterNetworkOnKeepsTheConnection() {
        let h = Harness()
        h.connect()
        h.step { c, now in c.networkOff(now: now) }
        h.step { c, now in c.networkOn(now: now) }
        _ = h.take()
        h.receive("{\"t\":\"c\",\"d\":{\"t\":\"o\",\"d\":{}}}")
        h.clock.advance(byMilliseconds: 10_000)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take().isEmpty)
        #expect(h.connection.isConnected)
    }

    @Test func lossWhileTheNetworkIsOffWaitsForTheNetwork() {
        let h = Harness()
        h.connect()
        h.step { c, now in c.networkOff(now: now) }
        h.step { c, now in c.transportClosed(reason: "lost", now: now) }
        #expect(h.events(h.take()).last == .status(.waitingForNetwork))
        #expect(h.connection.nextDeadline == nil)
        h.step { c, now in c.networkOn(now: now) }
        #expect(h.opens(h.take()).count == 1)
    }

    @Test func keepaliveAfterFortyFiveIdleSeconds() {
        let h = Harness()
        h.connect()
        _ = h.take()
        h.clock.advance(byMilliseconds: 44_999)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take().isEmpty)
        h.clock.advance(byMilliseconds: 1)
        h.step { c, now in c.timerFired(now: now) }
        #expect(h.take() == [.send("0")])
    }

    @Test func failFastGivesUpOnTheFirstRefusedConnection() {
        let h = Harness(failFast: true)
        h.step { c, now in c.start(now: now) }
        h.step { c, now in c.transportFailed(reason: "connection refused", now: now) }
        let events = h.events(h.take())
        #expect(events.contains { if case .fatal(let m) = $0 { m.contains("connection refused") } else { false } })
        #expect(h.connection.phase == .stopped)
    }

    @Test func aRefusedCredentialStopsTheClient() {
        let h = Harness(credential: "bad.to.ken")
        h.connect()
        let sent = h.requests(h.take())
        h.reply(sent[0].r, status: "invalid_token", data: "\"Could not parse auth token.\"")
        let out = h.take()
        #expect(h.events(out).first == .authFailed(RequestFailure(status: "invalid_token", message: "Could not parse auth token.")))
        #expect(out.contains(.close))
        h.step { c, now in c.transportClosed(reason: "closed", now: now) }
        #expect(h.events(h.take()) == [.status(.stopped)])
    }

    @Test func stopClosesCleanlyAndKillAborts() {
        let a = Harness()
        a.connect()
        _ = a.take()
        a.step { c, now in c.stop(now: now) }
        #expect(a.take() == [.close])
        a.step { c, now in c.transportClosed(reason: "closed", now: now) }
        #expect(a.events(a.take()) == [.status(.stopped)])

        let b = Harness()
        b.connect()
        _ = b.take()
        b.step { c, now in c.kill(now: now) }
        #expect(b.take() == [.abort, .deliver(.status(.stopped))])
    }

    @Test func onDisconnectCancelForgetsRegistrationsBelow() {
        let h = Harness()
        h.connect()
        _ = h.take()
        _ = h.step { c, now in c.onDisconnectSet(path("/users/alice/presence"), ["online": false], now: now) }
        _ = h.step { c, now in c.onDisconnectSet(path("/users/alice/presence/online"), false, now: now) }
        #expect(h.connection.onDisconnectRegistrations.count == 2)
        _ = h.step { c, now in c.onDisconnectSet(path("/users/alice"), ["x": 1], now: now) }  // replaces both below
        #expect(h.connection.onDisconnectRegistrations.map(\.path) == [path("/users/alice")])
        _ = h.step { c, now in c.onDisconnectCancel(path("/users/alice"), now: now) }
        #expect(h.connection.onDisconnectRegistrations.isEmpty)
        #expect(h.requests(h.take()).map(\.a) == ["o", "o", "o", "oc"])
    }
}

@Suite struct ClientCodecTests {
    @Test func requestsAndServerMessages() {
        #expect(ClientCodec.request(7, action: "p", body: ["p": "/a", "d": 1]) == "{\"t\":\"d\",\"d\":{\"r\":7,\"a\":\"p\",\"b\":{\"p\":\"/a\",\"d\":1}}}")
        #expect(ClientCodec.decode("{\"t\":\"c\",\"d\":{\"t\":\"h\",\"d\":{\"ts\":12,\"v\":\"5\",\"h\":\"x:1\",\"s\":\"S\"}}}")
            == .hello(timestamp: 12, version: "5", host: "x:1", session: "S"))
        #expect(ClientCodec.decode("{\"t\":\"d\",\"d\":{\"r\":3,\"b\":{\"s\":\"ok\",\"d\":{}}}}") == .reply(request: 3, status: "ok", data: .object([])))
        #expect(ClientCodec.decode("{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":\"a\",\"d\":null}}}") == .push(action: "d", body: ["p": "a", "d": nil]))
        #expect(ClientCodec.decode("nonsense") == nil)
    }

    @Test func serverValueShorthands() {
        #expect(ServerValueSyntax.parse(".sv:timestamp") == [".sv": "timestamp"])
        #expect(ServerValueSyntax.parse("{\"a\":\".sv:increment:2\"}") == ["a": [".sv": ["increment": 2]]])
        #expect(ServerValueSyntax.parse("hello") == "hello")
        #expect(ServerValueSyntax.parse("42") == 42)
    }

    @Test func unsignedDevTokens() {
        let token = DevToken.unsigned(uid: "alice")
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts[2].isEmpty)
        let payload = try? JSONParser.parse(bytes: Base64URL.decode(parts[1]) ?? [])
        #expect(payload?["sub"] == "alice")
    }
}

@Suite struct PresenceBoardTests {
    @Test func rowsFromUserValuesAndTheWholeUsersNode() {
        var board = PresenceBoard(uids: ["alice"])
        #expect(board.apply(uid: "alice", presence: ["online": true, "lastSeen": 5]) == [PresenceRecord(uid: "alice", online: true, lastSeen: 5)])
        #expect(board.apply(uid: "alice", presence: ["online": true, "lastSeen": 5]).isEmpty)
        let changed = board.apply(users: ["bob": ["presence": ["online": false, "lastSeen": 7]]])
        #expect(changed == [PresenceRecord(uid: "bob", online: false, lastSeen: 7), PresenceRecord(uid: "alice")])
        #expect(board.order == ["alice", "bob"])
    }
}
