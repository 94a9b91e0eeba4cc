@testable import PresenceServer
import Testing

@Suite struct OutboundQueueTests {
    func frame(_ count: Int) -> OutFrame { OutFrame(payload: [UInt8](repeating: 0x61, count: count)) }

    @Test func framesLeaveInOrderAndTheBytesAreCounted() {
        var queue = OutboundQueue()
        let first = frame(10), second = frame(20)
        queue.append(first)
        queue.append(second)
        #expect(queue.bytes == 30 && queue.count == 2 && !queue.isEmpty)
        #expect(queue.popFirst() === first)
        #expect(queue.bytes == 20)
        #expect(queue.popFirst() === second)
        #expect(queue.isEmpty && queue.bytes == 0 && queue.popFirst() == nil)
    }

    @Test func theSlowReaderLimitIsOnQueuedBytes() {
        var queue = OutboundQueue()
        queue.append(frame(100))
        #expect(!queue.exceeds(100))
        queue.append(frame(1))
        #expect(queue.exceeds(100))
        queue.removeAll()
        #expect(queue.isEmpty && queue.bytes == 0 && !queue.exceeds(100))
    }

    @Test func aFrameKeepsHeadroomForTheLWSHeader() {
        let frame = frame(5)
        #expect(frame.storage.count == OutFrame.headroom + 5 && frame.payloadCount == 5)
        #expect(Array(frame.storage[OutFrame.headroom...]) == [UInt8](repeating: 0x61, count: 5))
    }

    @Test func longMessagesAreSplitIntoCountPrefixedFrames() throws {
        let frames = try #require(OutFrame.frames(for: String(repeating: "x", count: 40_000)))
        #expect(frames.count == 4)
        #expect(Array(frames[0].storage[OutFrame.headroom...]) == Array("3".utf8))
    }
}
