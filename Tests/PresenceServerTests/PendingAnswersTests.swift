import PresenceCore
@testable import PresenceServer
import PresenceWire
import Testing

/// REST requests waiting for their ticket's outcome (`PendingAnswers`): a client that leaves first
/// is forgotten at once, and its outcome, when it comes, finds nobody to answer.
@Suite struct PendingAnswersTests {
    static func wsi(_ n: Int) -> OpaquePointer { OpaquePointer(bitPattern: n)! }

    @Test func aClientThatLeavesIsForgottenAndItsOutcomeFindsNobody() {
        let pending = PendingAnswers()
        for n in 1...100 {
            pending.add(DirectTicket(raw: UInt64(n)), .response(Self.wsi(16 * n), { _ in .response(.error(500, "unused")) }))
        }
        // Every other client leaves while its write waits.
        for n in stride(from: 2, through: 100, by: 2) { #expect(pending.closed(Self.wsi(16 * n)) != nil) }
        #expect(pending.count == 50)
        for n in 1...100 {
            let waiter = pending.take(DirectTicket(raw: UInt64(n)))
            #expect((waiter != nil) == (n % 2 == 1))
        }
        #expect(pending.count == 0)
        // A close after the answer, or of a connection that never waited, finds nothing.
        #expect(pending.closed(Self.wsi(16)) == nil && pending.closed(Self.wsi(4096)) == nil)
    }
}
