import PresenceCore
import PresenceWire
import Testing

@Suite struct RequestDecoderTests {
    func decode(_ text: String) throws -> ClientMessage { try RequestDecoder.decode(Array(text.utf8)) }

    @Test func decodesTheActionsOfTheProtocol() throws {
        #expect(try decode(#"{"t":"c","d":{"t":"p","d":{}}}"#) == .ping)
        #expect(try decode(#"{"t":"c","d":{"t":"n","d":{}}}"#) == .ignoredControl)
        #expect(try decode(#"{"t":"d","d":{"r":2,"a":"gauth","b":{"cred":"owner","noauth":true}}}"#)
            == .request(NumberedRequest(number: 2, request: .auth(credential: "owner", authVariable: nil, noAuth: true))))
        #expect(try decode(#"{"t":"d","d":{"r":3,"a":"q","b":{"p":"/a/b","h":""}}}"#)
            == .request(NumberedRequest(number: 3, request: .listen(path: try Path("/a/b"), query: nil, tag: nil))))
        #expect(try decode(#"{"t":"d","d":{"r":4,"a":"l","b":{"p":"a"}}}"#)
            == .request(NumberedRequest(number: 4, request: .listen(path: try Path("/a"), query: nil, tag: nil))))
        #expect(try decode(#"{"t":"d","d":{"r":5,"a":"m","b":{"p":"/a","d":{"x/y":1}}}}"#)
            == .request(NumberedRequest(number: 5, request: .merge(path: try Path("/a"), children: [Request.Update(path: try Path("x/y"), value: 1)]))))
        #expect(try decode(#"{"t":"d","d":{"r":6,"a":"oc","b":{"p":"/a","d":null}}}"#)
            == .request(NumberedRequest(number: 6, request: .onDisconnectCancel(path: try Path("/a")))))
        #expect(try decode(#"{"t":"d","d":{"r":7,"a":"unappeck","b":{}}}"#)
            == .request(NumberedRequest(number: 7, request: .unappCheck)))
    }

    @Test func invalidRequestsKeepTheirNumberForTheErrorReply() throws {
        guard case let .invalidRequest(number, action, _) = try decode(#"{"t":"d","d":{"r":9,"a":"zz","b":{}}}"#) else {
            Issue.record("expected an invalid request")
            return
        }
        #expect(number == 9 && action == "zz")
        guard case .invalidRequest(9, _, .invalidData(let reason)) = try decode(#"{"t":"d","d":{"r":9,"a":"p","b":{"p":"/a.b","d":1}}}"#) else {
            Issue.record("expected an invalid path")
            return
        }
        #expect(reason.contains("a.b"))
        guard case .invalidRequest(1, _, _) = try decode(#"{"t":"d","d":{"r":1,"a":"m","b":{"p":"/","d":{"a":1,"a/b":2}}}}"#) else {
            Issue.record("overlapping update keys must be refused")
            return
        }
    }

    @Test(arguments: [#"{"t":"d""#, #"[1,2]"#, #"{"t":"x","d":{}}"#, #"{"d":{}}"#, "0x"])
    func undecodableMessagesFail(_ text: String) {
        #expect(throws: DecodeFailure.self) { try decode(text) }
    }
}

@Suite struct FramingTests {
    @Test func keepaliveIsIgnoredAndCountPrefixedPiecesAreJoined() throws {
        var assembler = FrameAssembler(maxMessageBytes: 100)
        #expect(try assembler.accept(Array("0".utf8)) == .nothing)
        #expect(try assembler.accept(Array("2".utf8)) == .nothing)
        #expect(try assembler.accept(Array("{\"a\":".utf8)) == .nothing)
        #expect(try assembler.accept(Array("1}".utf8)) == .message(Array("{\"a\":1}".utf8)))
        #expect(try assembler.accept(Array("{}".utf8)) == .message(Array("{}".utf8)))
    }

    @Test func joinedMessagesAreBounded() throws {
        var assembler = FrameAssembler(maxMessageBytes: 10)
        _ = try assembler.accept(Array("3".utf8))
        _ = try assembler.accept(Array("123456".utf8))
        #expect(throws: FrameAssembler.Failure.self) { try assembler.accept(Array("123456".utf8)) }
    }

    @Test func longMessagesAreSplitOnUTF8Boundaries() throws {
        let message = String(repeating: "é€😀", count: 3000)  // 27,000 bytes
        let frames = try #require(FrameSplitter.frames(for: message))
        #expect(String(decoding: frames[0], as: UTF8.self) == String(frames.count - 1))
        for piece in frames.dropFirst() {
            #expect(piece.count <= FrameSplitter.maxFrameBytes)
            #expect(String(validating: piece, as: UTF8.self) != nil)
        }
        #expect(String(decoding: frames.dropFirst().flatMap { $0 }, as: UTF8.self) == message)
        #expect(FrameSplitter.frames(for: "{}")! == [Array("{}".utf8)])
    }
}

@Suite struct OutboundEncoderTests {
    @Test func errorsCarryAStringAndListenOkAnObject() {
        #expect(OutboundEncoder.encode(.reply(number: 1, result: .failure(.permissionDenied)))
            == #"{"t":"d","d":{"r":1,"b":{"s":"permission_denied","d":"Permission denied"}}}"#)
        #expect(OutboundEncoder.encode(.reply(number: 2, result: .success(.emptyObject))) == #"{"t":"d","d":{"r":2,"b":{"s":"ok","d":{}}}}"#)
        #expect(OutboundEncoder.encode(.listenRevoked(path: try! Path("/a"), query: nil)) == #"{"t":"d","d":{"a":"c","b":{"p":"a"}}}"#)
        #expect(OutboundEncoder.encode(.pong) == #"{"t":"c","d":{"t":"o","d":{}}}"#)
    }
}
