import PresenceCore
import Testing
@testable import PresenceClient

@Suite struct BackoffTests {
    @Test func ceilingGrowsByOnePointThreeUpToThirtySeconds() {
        var backoff = Backoff()
        var ceilings: [Int64] = []
        for _ in 0..<20 {
            ceilings.append(backoff.ceilingMilliseconds)
            _ = backoff.nextDelay(unit: 0.999)
        }
        #expect(Array(ceilings.prefix(4)) == [1000, 1300, 1690, 2197])
        #expect(ceilings.allSatisfy { $0 <= 30_000 })
        #expect(ceilings.last == 30_000)
        for i in 1..<ceilings.count { #expect(ceilings[i] >= ceilings[i - 1]) }
    }

    @Test func fullJitterIsUniformBelowTheCeiling() {
        var a = Backoff(), b = Backoff(), c = Backoff()
        #expect(a.nextDelay(unit: 0) == 0)
        #expect(b.nextDelay(unit: 0.5) == 500)
        #expect(c.nextDelay(unit: 0.999_999) == 999)
        // Bounds hold for any source value over many attempts.
        var d = Backoff()
        for i in 0..<50 {
            let ceiling = d.ceilingMilliseconds
            let delay = d.nextDelay(unit: Double(i % 10) / 10)
            #expect(delay >= 0 && delay < max(ceiling, 1) && delay <= 30_000)
        }
    }

    @Test func resetsOnlyAfterThirtySecondsConnected() {
        var backoff = Backoff()
        for _ in 0..<5 { _ = backoff.nextDelay(unit: 0.5) }
        let grown = backoff.ceilingMilliseconds
        backoff.connectionEnded(lastedMilliseconds: 29_999)
        #expect(backoff.ceilingMilliseconds == grown)
        backoff.connectionEnded(lastedMilliseconds: 30_000)
        #expect(backoff.ceilingMilliseconds == 1000)
    }
}
