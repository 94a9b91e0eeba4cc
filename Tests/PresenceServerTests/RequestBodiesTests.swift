@testable import PresenceServer
import PresenceWire
import Testing

/// The bounds on REST bodies in flight: size, the shared room, deadlines, refused bodies dropped.
@Suite struct RequestBodiesTests {
    let limits = RequestBodies<Int>.Limits(maxBodyBytes: 1_000, maxPendingBytes: 2_500, timeoutMilliseconds: 10_000,
                                           minBytesPerSecond: 100)
    let put = HTTPRequest(method: "PUT", path: "/a.json")

    func arrive(_ bodies: inout RequestBodies<Int>, _ key: Int, _ count: Int) -> RequestBodies<Int>.Arrival {
        [UInt8](repeating: 0x31, count: count).withUnsafeBytes { bodies.arrived(key, $0) }
    }

    @Test func bodiesShareABoundedRoomReservedFromTheirLength() {
        var bodies = RequestBodies<Int>(limits: limits)
        #expect(bodies.admit(1, request: put, length: 1_000, now: 0) == .read)
        #expect(bodies.admit(2, request: put, length: 1_000, now: 0) == .read)
        guard case .refuse(503, _) = bodies.admit(3, request: put, length: 1_000, now: 0) else {
            Issue.record("a third body fit")
            return
        }
        #expect(bodies.admit(4, request: put, length: 500, now: 0) == .read)
        #expect(bodies.reservedBytes == 2_500)
        // A finished body frees its room; so does a connection that went away.
        #expect(arrive(&bodies, 1, 1_000) == .kept)
        guard case .request(let request)? = bodies.complete(1) else {
            Issue.record("the body was not handed over")
            return
        }
        #expect(request.body.count == 1_000 && request.path == "/a.json")
        bodies.closed(2)
        #expect(bodies.reservedBytes == 500)
        #expect(bodies.admit(5, request: put, length: 1_000, now: 0) == .read)
    }

    @Test func aBodyOverTheLimitIsRefusedAndWhatItSendsDropped() {
        var bodies = RequestBodies<Int>(limits: limits)
        guard case .refuse(413, let message) = bodies.admit(1, request: put, length: 1_001, now: 0) else {
            Issue.record("an oversized body was admitted")
            return
        }
        #expect(message.contains("1001") && message.contains("--max-message-bytes"))
        #expect(bodies.reservedBytes == 0)
        #expect(arrive(&bodies, 1, 600) == .dropped)
        // No more than one body's worth is read to let the answer through.
        #expect(arrive(&bodies, 1, 600) == .tooMuch)
        bodies.refuse(2, length: 10, now: 0)
        #expect(arrive(&bodies, 2, 10) == .dropped)
        guard case .refused? = bodies.complete(2) else {
            Issue.record("a refused body was handed over")
            return
        }
        #expect(bodies.complete(99) == nil)
    }

    @Test func aBodyGetsTheTimeoutPlusTheTimeItsLengthTakes() {
        var bodies = RequestBodies<Int>(limits: limits)
        #expect(bodies.admit(1, request: put, length: 100, now: 0) == .read)  // due at 10 s + 1 s
        #expect(bodies.admit(2, request: put, length: 1_000, now: 0) == .read)  // due at 10 s + 10 s
        bodies.refuse(3, length: 50_000, now: 0)  // a refused body is given at most one body's time
        #expect(bodies.expire(now: 10_999).isEmpty)
        #expect(bodies.expire(now: 11_000).map(\.key) == [1])
        let late = bodies.expire(now: 20_000).sorted { $0.key < $1.key }
        #expect(late.map(\.key) == [2, 3] && late.map(\.refused) == [false, true])
        #expect(bodies.isEmpty && bodies.reservedBytes == 0)
    }

    /// A byte that arrives after the deadline closes the connection: lws re-arms its own timeout
    /// on every piece of a body, so the drop the route asked for at the deadline could be undone.
    @Test func aBodyPastItsDeadlineIsRefusedWhateverArrivesAfterUntilItCloses() {
        var bodies = RequestBodies<Int>(limits: limits)
        let put = HTTPRequest(method: "PUT", path: "/a.json")
        #expect(bodies.admit(1, request: put, length: 100, now: 0) == .read)
        #expect(arrive(&bodies, 1, 1) == .kept)
        #expect(bodies.expire(now: 11_000).map(\.key) == [1])
        #expect(bodies.isLate(1) && bodies.reservedBytes == 0)
        #expect(arrive(&bodies, 1, 1) == .late)
        #expect(arrive(&bodies, 2, 1) == .dropped, "a connection with no body expected")
        bodies.closed(1)
        #expect(!bodies.isLate(1))
        #expect(arrive(&bodies, 1, 1) == .dropped, "a new connection may reuse the key")
    }
}
