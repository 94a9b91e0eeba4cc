import PresenceCore
import PresenceWire
import Testing
@testable import PresenceClient

/// The client frames with `PresenceWire`'s splitter and assembler (the server's own) and refuses
/// messages over its limit both ways, before they are buffered or sent.
@Suite struct ClientFramingTests {
    /// A push of `value` at `path` as the server encodes it.
    private func pushMessage(_ path: String, _ value: JSON) -> String {
        "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":\"\(path)\",\"d\":\(JSONWriter.string(value))}}}"
    }

    @Test func largeMessagesAreSplitAndJoined() throws {
        let h = Harness()
        let listener = h.step { c, now in c.listen(path("/big"), now: now) }
        h.connect()
        _ = h.take()
        // From the server: 80,000 bytes of two-byte characters, cut on UTF-8 boundaries.
        let big = String(repeating: "é", count: 40_000)
        let frames = try #require(FrameSplitter.frames(for: pushMessage("big", .string(big))))
        #expect(frames.first == Array("5".utf8))
        #expect(frames.dropFirst().allSatisfy { $0.count <= FrameSplitter.maxFrameBytes && String(validating: $0, as: UTF8.self) != nil })
        for frame in frames { h.receive(frame: frame) }
        #expect(h.events(h.take()) == [.value(listener: listener, path: path("/big"), value: .string(big))])

        // To the server: the same value in a write, split by the shell with the same splitter.
        _ = h.step { c, now in c.set(path("/big"), .string(big), now: now) }
        let sent = h.take().compactMap { effect -> String? in if case .send(let text) = effect { text } else { nil } }
        #expect(sent.count == 1)
        let pieces = try #require(FrameSplitter.frames(for: sent[0]))
        var assembler = FrameAssembler(maxMessageBytes: h.connection.maxMessageBytes)
        var joined: [UInt8]?
        for piece in pieces { if case .message(let bytes) = try assembler.accept(piece) { joined = bytes } }
        #expect(joined == Array(sent[0].utf8))
        #expect(FrameSplitter.frames(for: "small") == [Array("small".utf8)])
    }

    @Test func theKeepaliveFrameIsIgnored() {
        let h = Harness()
        h.connect()
        _ = h.take()
        h.receive("0")
        #expect(h.take().isEmpty)
        #expect(h.connection.isConnected)
    }

    @Test func anOversizedMultiFrameMessageEndsTheConnectionWithAClearError() throws {
        let h = Harness(maxMessageBytes: 20_000)
        let listener = h.step { c, now in c.listen(path("/big"), now: now) }
        h.connect()
        _ = h.take()
        let frames = try #require(FrameSplitter.frames(for: pushMessage("big", .string(String(repeating: "x", count: 40_000)))))
        #expect(frames.count == 4)  // the count, then three pieces
        for frame in frames.prefix(2) { h.receive(frame: frame) }
        #expect(h.take().isEmpty)  // 16 KiB so far: under the limit, still collecting
        h.receive(frame: frames[2])  // past 20,000 bytes: refused before it is buffered
        let out = h.take()
        #expect(out.contains(.abort))
        #expect(h.events(out).contains(.fatal("the server sent a message larger than this client's limit of 20000 bytes (max message size)")))
        #expect(h.connection.phase == .stopped)
        // What is left of it (or anything else) is not taken in any more.
        h.receive(frame: frames[3])
        h.push("big", "1")
        #expect(h.take().isEmpty)
        _ = listener
    }

    @Test func anOversizedSingleFrameIsRefusedToo() {
        let h = Harness(maxMessageBytes: 1_000)
        h.connect()
        _ = h.take()
        h.receive(pushMessage("a", .string(String(repeating: "y", count: 2_000))))
        let out = h.take()
        #expect(out.contains(.abort))
        #expect(h.events(out).last == .status(.stopped))
        #expect(h.events(out).contains { if case .fatal(let message) = $0 { message.contains("1000 bytes") } else { false } })
    }

    @Test func theTransportReportsAnOversizedMessageTheSameWay() {
        let h = Harness(maxMessageBytes: 1_000)
        h.connect()
        _ = h.take()
        h.step { c, now in c.messageTooLarge(now: now) }
        #expect(h.events(h.take()).contains(.fatal("the server sent a message larger than this client's limit of 1000 bytes (max message size)")))
        #expect(h.connection.phase == .stopped)
    }

    @Test func anOversizedWriteIsRefusedBeforeItIsSentOrKept() {
        let h = Harness(maxMessageBytes: 1_000)
        h.connect()
        _ = h.take()
        let p = path("/users/alice/presence")
        let small = h.step { c, now in c.onDisconnectSet(p, ["online": false], now: now) }
        let huge: JSON = .string(String(repeating: "z", count: 1_000))
        let write = h.step { c, now in c.set(p, huge, now: now) }
        let registration = h.step { c, now in c.onDisconnectSet(p, huge, now: now) }
        var out = h.take()
        #expect(h.requests(out).map(\.a) == ["o"])  // only the small registration went out
        // Reported on the next timer, as a reply would be: after the calls returned their ids.
        #expect(h.events(out).isEmpty)
        #expect(h.connection.nextDeadline == 0)
        h.step { c, now in c.timerFired(now: now) }
        out = h.take()
        #expect(h.requests(out).isEmpty)
        let events = h.events(out)
        guard case .writeCompleted(write, let writeFailure?) = events.first(where: { if case .writeCompleted = $0 { true } else { false } }),
              case .onDisconnectCompleted(registration, let registrationFailure?) = events.last else {
            Issue.record("no refusals in \(events)")
            return
        }
        #expect(writeFailure.status == "invalid_data" && writeFailure.message.contains("limit of 1000 bytes"))
        #expect(registrationFailure.error == .invalidData(registrationFailure.message))
        #expect(h.connection.pendingWrites.isEmpty)
        // The refused registration did not replace the one already in force.
        #expect(h.connection.onDisconnectRegistrations.map(\.id) == [small])
        #expect(h.connection.nextDeadline != 0)
    }

    @Test func theLimitIsCappedAtWhatTheSplitterCanAlwaysSend() {
        var config = ClientConfiguration(server: WebSocketURL("ws://127.0.0.1:9000")!)
        config.maxMessageBytes = Int.max
        #expect(ClientConnection(configuration: config).maxMessageBytes == ClientConfiguration.largestMessageBytes)
        // Every piece but the last carries at least maxFrameBytes - 3 bytes, so this many always fit.
        #expect(ClientConfiguration.largestMessageBytes == (FrameSplitter.maxFrameBytes - 3) * FrameSplitter.maxPieces)
        config.maxMessageBytes = 0
        #expect(ClientConnection(configuration: config).maxMessageBytes == 1)
    }
}
