@testable import PresenceServer
import Testing

/// One connection's inbound message budget (a token bucket).
@Suite struct MessageBudgetTests {
    /// Spends outside the #expect macro (which cannot take a mutating call).
    func spends(_ budget: inout MessageBudget, _ cost: Double = 1, now: Int64) -> Bool { budget.spend(cost, now: now) }

    @Test func aBurstPassesThenTheRateHolds() {
        var budget = MessageBudget(perSecond: 100, burst: 50, now: 0)
        for _ in 0..<49 { #expect(spends(&budget, now: 0)) }
        #expect(!spends(&budget, now: 0), "the 50th message empties the bucket")
        // Reading resumes once a tenth of a second's worth is back (10 messages at 100/s).
        #expect(budget.resumeAt(now: 0) == 100)
        for _ in 0..<9 { #expect(spends(&budget, now: 100)) }
        #expect(!spends(&budget, now: 100))
        // Refilled at the rate, never beyond the burst.
        #expect(budget.resumeAt(now: 10_000) == 10_000)
        for _ in 0..<49 { #expect(spends(&budget, now: 10_000)) }
        #expect(!spends(&budget, now: 10_000))
    }

    @Test func largeMessagesCostTheirSize() {
        #expect(MessageBudget.cost(bytes: 100, endsMessage: true) < 1.01)
        #expect(MessageBudget.cost(bytes: 16_384, endsMessage: false) == 1)
        #expect(MessageBudget.cost(bytes: 1_048_576, endsMessage: true) == 65)
        var budget = MessageBudget(perSecond: 1_000, burst: 2_000, now: 0)
        var sent = 0
        while budget.spend(MessageBudget.cost(bytes: 1_048_576, endsMessage: true), now: 0) { sent += 1 }
        #expect(sent == 30, "2,000 tokens are 30 whole messages of 1 MiB")
    }

    @Test func messagesCostTheLoopTimeTheirHandlingTook() {
        #expect(MessageBudget.cost(bytes: 0, endsMessage: true, handlingNanoseconds: 100_000) == 2)
        // A read that held the loop for 300 ms costs 3,001 tokens: past a 2,000 burst, so the bucket
        // goes below zero and reading stays paused until it has refilled that debt (about 1.1 s at
        // 1,000 a second, plus the tenth of a second's worth resumption waits for).
        var budget = MessageBudget(perSecond: 1_000, burst: 2_000, now: 0)
        #expect(!spends(&budget, MessageBudget.cost(bytes: 0, endsMessage: true, handlingNanoseconds: 300_000_000), now: 0))
        #expect(budget.resumeAt(now: 0) == 1_101)
        #expect(!spends(&budget, now: 1_000))
        #expect(spends(&budget, now: 1_200))
    }

    @Test func zeroMeansUnlimited() {
        var budget = MessageBudget(perSecond: 0, burst: 1, now: 0)
        #expect(!budget.isLimited)
        for _ in 0..<10_000 { #expect(spends(&budget, now: 0)) }
    }

    @Test func aClockThatGoesBackRefillsNothing() {
        var budget = MessageBudget(perSecond: 10, burst: 2, now: 1_000)
        #expect(spends(&budget, now: 1_000))
        #expect(!spends(&budget, now: 0))
        #expect(!spends(&budget, now: 500))
    }
}
