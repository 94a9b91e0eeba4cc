@testable import PresenceServer
import Testing

/// A connection's share of a turn of the loop: it yields once its messages have taken more than the
/// share in one turn, once, and starts afresh in the next.
@Suite struct TurnShareTests {
    func spend(_ share: inout TurnShare, _ nanoseconds: UInt64, turn: UInt64, limit: UInt64 = 250_000) -> Bool {
        share.spend(nanoseconds, turn: turn, share: limit)
    }

    @Test func yieldsOnlyOnceItsMessagesTookMoreThanTheShareOfOneTurn() {
        var share = TurnShare()
        var yields: [Bool] = []
        for _ in 0..<5 { yields.append(spend(&share, 60_000, turn: 1)) }
        // 60, 120, 180, 240 µs: within 250; the fifth makes 300.
        #expect(yields == [false, false, false, false, true])
        #expect(share.yielded)
        let again = spend(&share, 60_000, turn: 1)
        #expect(!again, "yields once per turn, not once per message after it")
    }

    @Test func theNextTurnStartsAfresh() {
        var share = TurnShare()
        _ = spend(&share, 200_000, turn: 1)
        let second = spend(&share, 200_000, turn: 2)
        #expect(!second, "200 µs in each of two turns is never more than 250 µs in one")
        #expect(!share.yielded)
        let yielded = spend(&share, 300_000, turn: 3)
        #expect(yielded)
        share.resumed()
        #expect(!share.yielded)
    }

    @Test func oneCostlyMessageYieldsAtOnceAndNoShareMeansNoLimit() {
        var share = TurnShare()
        let costly = spend(&share, 5_000_000, turn: 7)
        #expect(costly)
        var unlimited = TurnShare()
        let never = spend(&unlimited, .max, turn: 1, limit: 0)
        #expect(!never)
        let overflow = spend(&unlimited, .max, turn: 1, limit: 0)
        #expect(!overflow, "use saturates instead of trapping")
    }
}
