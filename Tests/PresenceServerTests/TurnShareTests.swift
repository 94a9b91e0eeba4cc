@testable import PresenceServer
import Testing

/// Each connection's share of a turn of the loop: it yields once its messages have taken more than
/// the share in one turn, once, and starts afresh in the next.
@Suite struct TurnShareTests {
    func spend(_ share: inout TurnShare, _ nanoseconds: UInt64, by id: UInt64 = 1) -> Bool {
        share.spend(nanoseconds, by: id)
    }

    @Test func yieldsOnlyOnceItsMessagesTookMoreThanTheShareOfOneTurn() {
        var share = TurnShare(shareNanoseconds: 250_000)
        var yields: [Bool] = []
        for _ in 0..<5 { yields.append(spend(&share, 60_000)) }
        // 60, 120, 180, 240 µs: within 250; the fifth makes 300.
        #expect(yields == [false, false, false, false, true])
        #expect(share.yielded == [1])
        let again = spend(&share, 60_000)
        #expect(!again, "yields once per turn, not once per message after it")
        let other = spend(&share, 200_000, by: 2)
        #expect(!other, "each connection has its own share")
    }

    @Test func theNextTurnStartsAfresh() {
        var share = TurnShare(shareNanoseconds: 250_000)
        _ = spend(&share, 200_000)
        #expect(share.turnEnded().isEmpty)
        let second = spend(&share, 200_000)
        #expect(!second, "200 µs in each of two turns is never more than 250 µs in one")
        let yielded = spend(&share, 100_000)
        #expect(yielded)
        #expect(share.turnEnded() == [1])
        #expect(share.yielded.isEmpty)
    }

    @Test func oneCostlyMessageYieldsAtOnceAndNoShareMeansNoLimit() {
        var share = TurnShare(shareNanoseconds: 250_000)
        let costly = spend(&share, 5_000_000)
        #expect(costly)
        var unlimited = TurnShare(shareNanoseconds: 0)
        let never = spend(&unlimited, .max)
        #expect(!never)
        var saturating = TurnShare(shareNanoseconds: .max)
        _ = spend(&saturating, .max)
        let overflow = spend(&saturating, .max)
        #expect(!overflow, "use saturates at the share instead of trapping")
    }
}
