@testable import PresenceServer
import Testing

@Suite struct MessageReceiverTests {
    func feed(_ receiver: inout MessageReceiver, _ text: String, ends: Bool = true, announced: Int = 0) -> MessageReceiver.Output {
        Array(text.utf8).withUnsafeBytes { receiver.receive($0, messageEnds: ends, announced: announced) }
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

    /// Refused the moment the limit is crossed, keeping nothing of it (the connection then closes
    /// with a closing handshake, which discards the rest).
    @Test func anOversizedMessageIsRefusedAsSoonAsItCrossesTheLimit() {
        var receiver = MessageReceiver(maxMessageBytes: 10)
        #expect(feed(&receiver, "0123456", ends: false) == .nothing)
        #expect(feed(&receiver, "789abc", ends: false) == .tooLarge)
        // Nothing of it was kept: a message that fits is whole again.
        #expect(feed(&receiver, "{}") == .message(Array("{}".utf8)))
    }

    /// A frame header announcing more than the limit is refused with its first bytes, before the
    /// payload arrives; a length near Int.max cannot overflow the sum.
    @Test func aFrameAnnouncingMoreThanTheLimitIsRefusedAtOnce() {
        var receiver = MessageReceiver(maxMessageBytes: 10)
        #expect(feed(&receiver, "01", ends: false, announced: 9) == .tooLarge)
        #expect(feed(&receiver, "01", ends: false, announced: Int.max) == .tooLarge)
        #expect(feed(&receiver, "ab", ends: false, announced: 8) == .nothing)
        #expect(feed(&receiver, "cdefghij") == .message(Array("abcdefghij".utf8)))
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
