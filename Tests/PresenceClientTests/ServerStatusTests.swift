import PresenceCore
import PresenceWire
import Testing
@testable import PresenceClient

/// Replies' statuses become the engine's typed errors through the server's own table.
@Suite struct ServerStatusTests {
    @Test func everyEngineErrorRoundTripsThroughTheWire() {
        let errors: [EngineError] = [
            .permissionDenied, .invalidData("bad key"), .invalidToken("no"), .expiredToken("old"), .dataStale,
            .tooBig("big"), .notSupported("later"), .unavailable("busy"),
            .rateLimited("refresh: try again in 1:45", retryAfterMilliseconds: nil),
        ]
        for error in errors {
            let wire = WireStatus.failure(for: error)
            let failure = RequestFailure(status: wire.status.rawValue, message: wire.message)
            #expect(failure.error == error)
            #expect(failure.wireStatus == WireStatus(error))
            #expect(RequestFailure(error) == failure)
        }
    }

    @Test func unknownStatusesStayUntyped() {
        #expect(RequestFailure(status: "revoked", message: "").error == nil)
        #expect(RequestFailure(status: "ok", message: "").error == nil)
        #expect(!RequestFailure(status: "revoked", message: "").isCredentialProblem)
        #expect(RequestFailure(status: "revoked", message: "").retry == nil)
    }

    @Test func theQuestionsCommandsAsk() {
        #expect(RequestFailure(.invalidToken("bad signature")).isCredentialProblem)
        #expect(RequestFailure(.expiredToken("expired")).isCredentialProblem)
        #expect(!RequestFailure(.permissionDenied).isCredentialProblem)
        #expect(RequestFailure(.rateLimited("wait", retryAfterMilliseconds: 5)).isRateLimited)
        #expect(!RequestFailure(.unavailable("later")).isRateLimited)
        #expect(RequestFailure(.unavailable("later")).retry == .retryLater)
        #expect(RequestFailure(.permissionDenied).retry == .giveUp)
        // A listen revoked by the server (`c`) reads as permission denied, with its own message.
        #expect(RequestFailure(.permissionDenied, message: "listen revoked by the server")
                == RequestFailure(status: "permission_denied", message: "listen revoked by the server"))
    }
}
