import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Issue 16: no error echoes more than a short prefix of what the client sent (a 1 MB invalid
/// path used to come back whole). Each case sends a megabyte of text where the client controls a
/// string and checks the answer quotes at most 40 characters and says how long the original was.
@Suite struct HostileEchoTests {
    static let huge = String(repeating: "x", count: 1 << 20)
    static let hugeInvalidKey = String(repeating: "x", count: 1 << 20) + ".$#"
    static let maxErrorBytes = 400

    static let wireMessages: [(name: String, message: String)] = [
        ("path", #"{"t":"d","d":{"r":1,"a":"p","b":{"p":"/\#(hugeInvalidKey)","d":1}}}"#),
        ("action", #"{"t":"d","d":{"r":1,"a":"\#(huge)","b":{}}}"#),
        ("index", #"{"t":"d","d":{"r":1,"a":"g","b":{"p":"/x","q":{"i":"\#(hugeInvalidKey)"}}}}"#),
        ("data key", #"{"t":"d","d":{"r":1,"a":"p","b":{"p":"/x","d":{"\#(hugeInvalidKey)":1}}}}"#),
        ("update key", #"{"t":"d","d":{"r":1,"a":"m","b":{"p":"/x","d":{"\#(hugeInvalidKey)":1}}}}"#),
    ]

    @Test(arguments: wireMessages.map(\.name))
    func wireErrorsQuoteAShortPrefix(field: String) throws {
        let message = try #require(Self.wireMessages.first { $0.name == field }).message
        let harness = EngineHarness()
        let id = harness.connect()
        _ = harness.take(id)
        harness.send(message, from: id)
        let replies = harness.take(id)
        #expect(replies.count == 1)
        let reply = try #require(replies.first)
        #expect(reply.contains(#""s":"invalid_data""#))
        #expect(reply.utf8.count < Self.maxErrorBytes, "\(reply.prefix(200))")
        #expect(reply.contains("bytes)"))
    }

    @Test func unknownMessageLayerIsQuotedShort() {
        #expect {
            try RequestDecoder.decode(Array(#"{"t":"\#(Self.huge)","d":{}}"#.utf8))
        } throws: { error in
            let reason = (error as? DecodeFailure)?.reason ?? ""
            return reason.utf8.count < Self.maxErrorBytes && reason.contains("(1048576 bytes)")
        }
    }

    func rest(_ method: String, _ path: String, query: [String: String] = [:], headers: [String: String] = [:], body: String = "") -> HTTPResponse {
        let handler = RESTHandler(engine: EngineHarness().engine, defaultNamespace: "test")
        return handler.handle(HTTPRequest(method: method, path: path, query: query, headers: headers, body: Array(body.utf8)),
                              now: 1_700_000_000_000)
    }

    @Test func restErrorsQuoteAShortPrefix() {
        let responses = [
            rest("GET", "/\(Self.hugeInvalidKey).json"),
            rest("PATCH", "/x.json", body: #"{"\#(Self.hugeInvalidKey)":1}"#),
            rest(Self.huge, "/x.json"),
            rest("GET", "/x.json", query: ["orderBy": "\"\(Self.hugeInvalidKey)\""]),
            rest("GET", "/x.json", query: ["timeout": Self.huge]),
            rest("PUT", "/.settings/rules.json", query: ["ns": Self.huge], headers: ["authorization": "Bearer owner"],
                 body: #"{"rules":{".read":true},"\#(Self.huge)":1}"#),
        ]
        for response in responses {
            #expect(response.status >= 400 && response.status < 500)
            #expect(response.body.utf8.count < 2 * Self.maxErrorBytes, "\(response.body.prefix(200))")
            #expect(response.body.contains("bytes)"), "\(response.body.prefix(200))")
        }
    }
}
