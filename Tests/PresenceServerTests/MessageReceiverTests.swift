@testable import PresenceServer
import Testing

@Suite struct MessageReceiverTests {
    func feed(_ receiver: inout MessageReceiver, _ text: String, ends: Bool = true) -> MessageReceiver.Output {
        Array(text.utf8).withUnsafeBytes { receiver.receive($0, messageEnds: ends) }
    }

    @Test func fragmentsAreJoined() {
        var receiver = MessageReceiver(maxMessageBytes: 100)
        #expect(feed(&receiver, "{\"t\":", ends: false) == .nothing)
        #expect(feed(&receiver, "1}") == .message(Array("{\"t\":1}".utf8)))
    }

    @Test func countPrefixedPiecesAreJoinedAndTheKeepaliveIgnored() {
        var receiver = MessageReceiver(maxMessageBytes: 100)
        #expect(feed(&receiver, "0") == .nothing)
        #expect(feed(&receiver, "2") == .nothing)
        #expect(feed(&receiver, "{\"a\":") == .nothing)
        #expect(feed(&receiver, "2}") == .message(Array("{\"a\":2}".utf8)))
    }

    @Test func anOversizedMessageIsReadToItsEndThenRefusedOnce() {
        var receiver = MessageReceiver(maxMessageBytes: 10)
        #expect(feed(&receiver, "0123456", ends: false) == .nothing)
        #expect(feed(&receiver, "789abc", ends: false) == .nothing)
        #expect(feed(&receiver, "def") == .tooLarge)
        #expect(feed(&receiver, "{}") == .message(Array("{}".utf8)))
    }

    @Test func piecesOverTheLimitTogetherAreRefused() {
        var receiver = MessageReceiver(maxMessageBytes: 10)
        #expect(feed(&receiver, "2") == .nothing)
        #expect(feed(&receiver, "0123456") == .nothing)
        guard case .piecesTooLarge = feed(&receiver, "789abc") else {
            Issue.record("expected the pieces to be refused")
            return
        }
    }
}
