import PresenceCore
import PresenceWire
import Testing

/// The one error table: every engine error has one status, one REST answer, one stream behaviour.
@Suite struct WireStatusTests {
    static let everyError: [EngineError] = [
        .permissionDenied, .invalidData("bad"), .invalidToken("bad token"), .expiredToken("Auth token is expired."),
        .dataStale, .tooBig("read less"), .notSupported("no"), .unavailable("later"),
        .rateLimited("try again in 2:00", retryAfterMilliseconds: 119_001),
    ]

    @Test func everyErrorHasOneStatusThatClientsDecode() {
        let statuses = Self.everyError.map(WireStatus.init)
        #expect(Set(statuses) == Set(WireStatus.allCases))
        for status in WireStatus.allCases { #expect(WireStatus(rawValue: status.rawValue) == status) }
        #expect(WireStatus(rawValue: "ok") == nil)
        #expect(WireStatus.failure(for: .permissionDenied) == (.permissionDenied, "Permission denied"))
        #expect(WireStatus.failure(for: .invalidToken("bad token")).message == "bad token")
    }

    @Test func clientsReadTheEngineErrorBackFromStatusAndMessage() {
        for error in Self.everyError {
            let (status, message) = WireStatus.failure(for: error)
            // The wait of a rate-limited refusal travels in its message only.
            var expected = error
            if case .rateLimited(let text, _) = error { expected = .rateLimited(text, retryAfterMilliseconds: nil) }
            #expect(status.error(message: message) == expected)
        }
    }

    @Test func restAnswersWithTheTablesStatusAndRetryAfterWhenKnown() {
        let expected: [WireStatus: Int] = [
            .permissionDenied: 401, .invalidData: 400, .invalidToken: 401, .expiredToken: 401, .dataStale: 412,
            .tooBig: 413, .notSupported: 501, .unavailable: 503, .rateLimited: 429,
        ]
        for error in Self.everyError {
            let response = HTTPResponse.refusal(for: error)
            let status = WireStatus(error)
            #expect(response.status == expected[status])
            #expect(response.body.contains(WireStatus.failure(for: error).message))
            let retryAfter = response.headers.first { $0.0 == "Retry-After" }?.1
            #expect(retryAfter == (status == .rateLimited ? "120" : nil))
        }
        #expect(HTTPResponse.refusal(for: .rateLimited("x", retryAfterMilliseconds: nil)).headers.allSatisfy { $0.0 != "Retry-After" })
        #expect(WireStatus.retryAfterSeconds(for: .rateLimited("x", retryAfterMilliseconds: Int64.max)) == Int64.max / 1000 + 1)
        #expect(WireStatus.retryAfterSeconds(for: .rateLimited("x", retryAfterMilliseconds: -5)) == 0)
    }

    @Test func streamsEndWithTheEventOfTheirRefusal() {
        #expect(WireStatus.permissionDenied.streamEvent == .cancel)
        #expect(WireStatus.expiredToken.streamEvent == .authRevoked && WireStatus.invalidToken.streamEvent == .authRevoked)
        #expect(WireStatus.rateLimited.streamEvent == nil)
        let revoked = ServerSentEvents.events(for: .authRevoked(.expiredToken("x")), location: .root)
        #expect(revoked?.text.hasPrefix("event: auth_revoked\n") == true && revoked?.ends == true)
    }

    @Test func retryAdviceIsOnePerStatus() {
        #expect(WireStatus.permissionDenied.retry == .giveUp)
        #expect(WireStatus.expiredToken.retry == .renewTokenThenRetry)
        #expect(WireStatus.dataStale.retry == .rereadThenRetry)
        #expect(WireStatus.unavailable.retry == .retryLater)
        #expect(WireStatus.rateLimited.retry == .retryAfterWaiting)
    }

    @Test func closeCodesAreNamed() {
        #expect(CloseCode.replaced.rawValue == 4001 && CloseCode.closedByOperator.rawValue == 4002)
        #expect(CloseCode(rawValue: 1002) == .protocolError && CloseCode(rawValue: 1009) == .messageTooBig)
    }

    @Test func aTooBigCloseReasonStatesTheLimitClientsAdopt() {
        let reason = FrameAssembler.Failure.tooLarge(limit: 65_536).description
        #expect(reason == "message larger than 65536 bytes")
        #expect(FrameAssembler.Failure(reason: reason) == .tooLarge(limit: 65_536))
        for other in ["", "message larger than bytes", "message larger than -5 bytes", "message larger than 0 bytes",
                      "message larger than 99999999999999999999999 bytes", "replaced by a newer connection"] {
            #expect(FrameAssembler.Failure(reason: other) == nil, "\(other)")
        }
    }
}
