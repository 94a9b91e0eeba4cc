@testable import PresenceClient
import PresenceCore
import PresenceTesting
import Synchronization
import Testing

/// An ``HTTPGetting`` that records requests and answers them when the test says so.
final class FakeHTTP: HTTPGetting {
    private let pending = Mutex<[(HTTPGetRequest, @Sendable (HTTPGetResult) -> Void)]>([])

    func get(_ request: HTTPGetRequest, completion: @escaping @Sendable (HTTPGetResult) -> Void) {
        pending.withLock { $0.append((request, completion)) }
    }

    var urls: [String] { pending.withLock { $0.map(\.0.url) } }

    /// Answers the oldest request still pending.
    func answer(_ result: HTTPGetResult) {
        let first = pending.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        first?.1(result)
    }
}

/// Drives a ``WatchPoller`` as the watch command does (send through the HTTP seam, apply the result
/// on "the service thread", here the test's), with a manual clock.
final class PollingRig {
    let clock = ManualClock()
    let http = FakeHTTP()
    var poller: WatchPoller
    var board: PresenceBoard
    var notes: [String] = []
    var fatal: String?
    var changed: [PresenceRecord] = []
    /// Results handed back by the HTTP seam, waiting to be applied (as `runtime.perform` would queue them).
    let inbox = Inbox()

    final class Inbox: Sendable {
        let items = Mutex<[(Int, HTTPGetResult)]>([])
    }

    init(users: [String] = ["alice"], all: Bool = false, credential: String? = "owner") {
        let endpoint = RESTEndpoint(server: WebSocketURL("ws://127.0.0.1:9000")!, namespace: "demo", credential: credential)
        poller = WatchPoller(endpoint: endpoint, users: users, all: all, random: { 0.5 })
        board = PresenceBoard(uids: users)
    }

    /// Three failed connection attempts: polling starts.
    func failThreeTimes() {
        for _ in 0..<2 { #expect(poller.disconnected(now: clock.now) == nil) }
        #expect(poller.disconnected(now: clock.now) == .started)
    }

    /// A tick: sends the due polls.
    func tick() {
        _ = poller.tick(now: clock.now)
        for poll in poller.takeDue(now: clock.now) {
            http.get(poll.request) { [inbox] result in inbox.items.withLock { $0.append((poll.id, result)) } }
        }
    }

    /// Answers the oldest request and applies its result.
    func answer(_ result: HTTPGetResult) {
        http.answer(result)
        let results = inbox.items.withLock { box in defer { box = [] }; return box }
        for (id, result) in results {
            let c = poller.complete(id, result, now: clock.now, board: &board)
            if let note = c.note { notes.append(note) }
            if let f = c.fatal { fatal = f }
            changed += c.changed
        }
    }
}

@Suite struct RESTPollingTests {
    @Test func urlsUseTheSameHostPortNamespaceAndCredential() {
        let ws = RESTEndpoint(server: WebSocketURL("ws://example.org:9000/ignored")!, namespace: "demo", credential: "owner")
        #expect(ws.pollURL(uid: "alice") == "http://example.org:9000/users/alice/presence.json?ns=demo")
        #expect(ws.pollURL(uid: nil) == "http://example.org:9000/users.json?ns=demo")
        // The credential travels as a Bearer header, never in the URL.
        #expect(ws.pollRequest(uid: "alice") == HTTPGetRequest(url: "http://example.org:9000/users/alice/presence.json?ns=demo", bearer: "owner"))
        let wss = RESTEndpoint(server: WebSocketURL("wss://example.org")!, namespace: nil, credential: nil)
        #expect(wss.pollURL(uid: "bob") == "https://example.org:443/users/bob/presence.json")
        #expect(wss.url(for: .root) == "https://example.org:443/.json")
    }

    @Test func urlPartsArePercentEncoded() {
        let token = "eyJh.eyJz+/=.sig"
        let e = RESTEndpoint(server: WebSocketURL("ws://127.0.0.1:9000")!, namespace: "my db&x", credential: token)
        #expect(e.pollURL(uid: "ali ce%é") == "http://127.0.0.1:9000/users/ali%20ce%25%C3%A9/presence.json?ns=my%20db%26x")
        #expect(e.pollRequest(uid: "x").bearer == token)
        #expect(RESTEndpoint.percentEncoded("A-z_0.9~") == "A-z_0.9~")
        #expect(RESTEndpoint.percentEncoded("?#&=") == "%3F%23%26%3D")
        // The configuration's credential and namespace are the ones used.
        let config = ClientConfiguration(server: WebSocketURL("ws://h:1")!, namespace: "n", credential: "c")
        #expect(RESTEndpoint(configuration: config).pollRequest(uid: nil) == HTTPGetRequest(url: "http://h:1/users.json?ns=n", bearer: "c"))
    }

    @Test func noPollsUntilThreeFailedAttempts() {
        let rig = PollingRig()
        rig.tick()
        #expect(rig.http.urls.isEmpty && rig.poller.statusText(now: rig.clock.now) == nil)
        rig.failThreeTimes()
        rig.tick()
        #expect(rig.http.urls == ["http://127.0.0.1:9000/users/alice/presence.json?ns=demo"])
        #expect(rig.poller.statusText(now: rig.clock.now) == "updating")
    }

    @Test func aSuccessfulPollIsAppliedToTheBoardAndMovesTheTimestamp() {
        let rig = PollingRig(users: ["alice", "bob"])
        rig.failThreeTimes()
        rig.tick()
        #expect(rig.http.urls.count == 2)
        rig.answer(.response(status: 200, body: #"{"online":true,"lastSeen":1700000000000}"#))
        rig.answer(.response(status: 200, body: "null"))
        #expect(rig.board.records["alice"] == PresenceRecord(uid: "alice", online: true, lastSeen: 1_700_000_000_000))
        #expect(rig.changed.map(\.uid) == ["alice"])  // bob stays unknown: nothing changed
        #expect(rig.notes.isEmpty)
        let kind = WatchRefresh.pollKind("alice")
        #expect(rig.poller.scheduler.lastSuccess(kind) == rig.clock.now)
        // 15 s plus half of the 3 s jitter span.
        #expect(rig.poller.statusText(now: rig.clock.now) == "next update in 17 s")
        rig.clock.advance(byMilliseconds: 16_499)
        rig.tick()
        #expect(rig.http.urls.isEmpty)
        rig.clock.advance(byMilliseconds: 1)
        rig.tick()
        #expect(rig.http.urls.count == 2)
        rig.answer(.response(status: 200, body: #"{"online":false,"lastSeen":1700000016000}"#))
        #expect(rig.board.records["alice"]?.online == false && rig.changed.count == 2)
    }

    @Test func allPollsTheUsersNode() {
        let rig = PollingRig(users: [], all: true)
        rig.failThreeTimes()
        rig.tick()
        #expect(rig.http.urls == ["http://127.0.0.1:9000/users.json?ns=demo"])
        rig.answer(.response(status: 200, body: #"{"alice":{"presence":{"online":true,"lastSeen":5}},"bob":{"x":1}}"#))
        #expect(rig.board.order == ["alice", "bob"])
        #expect(rig.board.records["alice"]?.online == true && rig.board.records["bob"]?.online == nil)
    }

    @Test func failuresAreReportedOncePerChangeAndDoNotMoveTheTimestamp() {
        let rig = PollingRig()
        rig.poller.connected(now: rig.clock.now)  // the server was reached once: failures are not fatal
        rig.failThreeTimes()
        let kind = WatchRefresh.pollKind("alice")
        let denied = HTTPGetResult.response(status: 401, body: #"{"error":"Permission denied"}"#)
        rig.tick()
        rig.answer(denied)
        #expect(rig.notes == ["poll users/alice/presence failed: HTTP 401: Permission denied"])
        #expect(rig.poller.scheduler.lastSuccess(kind) == nil && rig.fatal == nil)
        #expect(rig.board.records["alice"] == PresenceRecord(uid: "alice"))
        // Retried after 5 s, not before.
        #expect(rig.poller.statusText(now: rig.clock.now) == "next update in 5 s")
        rig.clock.advance(byMilliseconds: 4_999)
        rig.tick()
        #expect(rig.http.urls.isEmpty)
        rig.clock.advance(byMilliseconds: 1)
        rig.tick()
        rig.answer(denied)
        #expect(rig.notes.count == 1)  // the same failure again: not repeated
        rig.clock.advance(byMilliseconds: 5_000)
        rig.tick()
        rig.answer(.failed("Could not connect to the server."))
        rig.clock.advance(byMilliseconds: 5_000)
        rig.tick()
        rig.answer(.response(status: 200, body: "not json"))
        #expect(rig.notes.dropFirst() == [
            "poll users/alice/presence failed: cannot reach http://127.0.0.1:9000: Could not connect to the server.",
            "poll users/alice/presence failed: the server's answer is not JSON",
        ])
        #expect(rig.poller.scheduler.lastSuccess(kind) == nil && rig.fatal == nil)
        rig.clock.advance(byMilliseconds: 5_000)
        rig.tick()
        rig.answer(.response(status: 200, body: #"{"online":true,"lastSeen":1}"#))
        #expect(rig.notes.last == "poll users/alice/presence: ok")
        #expect(rig.poller.scheduler.lastSuccess(kind) == rig.clock.now)
        #expect(rig.board.records["alice"]?.online == true)
    }

    @Test func anUnreachableServerThatNeverAnsweredIsFatal() {
        let rig = PollingRig()
        rig.failThreeTimes()
        rig.tick()
        rig.answer(.failed("Connection refused"))
        #expect(rig.fatal == "cannot connect to 127.0.0.1:9000: Connection refused (is presence-server running there?)")
        // An HTTP answer, even an error, means the server is there.
        let other = PollingRig()
        other.failThreeTimes()
        other.tick()
        other.answer(.response(status: 503, body: "busy"))
        other.clock.advance(byMilliseconds: 5_000)
        other.tick()
        other.answer(.failed("Connection refused"))
        #expect(other.fatal == nil && other.notes.count == 2 && other.notes[0].hasSuffix("HTTP 503: busy"))
    }

    @Test func aStableWebSocketStopsPollingAndLateResultsAreIgnored() {
        let rig = PollingRig()
        rig.failThreeTimes()
        rig.tick()
        rig.poller.connected(now: rig.clock.now)
        rig.clock.advance(byMilliseconds: 29_999)
        #expect(rig.poller.tick(now: rig.clock.now) == nil && rig.poller.isPolling)
        rig.clock.advance(byMilliseconds: 1)
        #expect(rig.poller.tick(now: rig.clock.now) == .stopped)
        #expect(rig.poller.statusText(now: rig.clock.now) == nil && rig.poller.idle)
        rig.answer(.response(status: 200, body: #"{"online":true,"lastSeen":1}"#))  // the poll sent before
        #expect(rig.changed.isEmpty && rig.board.records["alice"]?.online == nil)
        rig.tick()
        #expect(rig.http.urls.isEmpty)
    }

    @Test func pollsStayUnderTheConcurrencyLimit() {
        let rig = PollingRig(users: ["a", "b", "c", "d", "e", "f"])
        rig.failThreeTimes()
        rig.tick()
        #expect(rig.http.urls.count == 4)
        rig.tick()
        #expect(rig.http.urls.count == 4)
        rig.answer(.response(status: 200, body: "null"))
        rig.tick()
        #expect(rig.http.urls.count == 4)  // three left from the first round, one more started
        #expect(rig.http.urls.last == "http://127.0.0.1:9000/users/e/presence.json?ns=demo")
    }
}
