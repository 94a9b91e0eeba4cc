@testable import PresenceServer
import Testing

@Suite struct ClientAddressTests {
    @Test func ipv4MappedAddressesArePlain() {
        #expect(ClientAddress.plain("::ffff:10.1.2.3") == "10.1.2.3")
        #expect(ClientAddress.plain("::FFFF:10.1.2.3") == "10.1.2.3")
        #expect(ClientAddress.plain("::1") == "::1")
        #expect(ClientAddress.plain("::ffff:abcd") == "::ffff:abcd")
    }

    @Test func forwardedForIsReadOnlyFromTrustedProxiesAndFromTheRight() {
        let trusted: Set = ["127.0.0.1", "10.0.0.9"]
        #expect(ClientAddress.resolve(peer: "203.0.113.7", forwardedFor: "1.2.3.4", trusted: trusted) == "203.0.113.7")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: nil, trusted: trusted) == "127.0.0.1")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: "1.2.3.4", trusted: trusted) == "1.2.3.4")
        // A client can prepend anything; the nearest untrusted hop is the client.
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: "6.6.6.6, 1.2.3.4,\t10.0.0.9", trusted: trusted) == "1.2.3.4")
        // Only trusted hops: the first one named.
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: "10.0.0.9", trusted: trusted) == "10.0.0.9")
        #expect(ClientAddress.resolve(peer: "127.0.0.1", forwardedFor: " , ", trusted: trusted) == "127.0.0.1")
    }
}

@Suite struct AddressAdmissionTests {
    @Test func unlimitedAdmitsEveryone() {
        var admission = AddressAdmission(maxConnections: 0, maxPerSecond: 0)
        #expect(!admission.isActive)
        #expect(admission.admit("a", live: 10_000, nowMilliseconds: 0) == .admit)
    }

    @Test func tooManyLiveConnectionsAreRefusedAndLoggedOncePerSecond() {
        var admission = AddressAdmission(maxConnections: 2, maxPerSecond: 0)
        #expect(admission.admit("a", live: 1, nowMilliseconds: 1_000) == .admit)
        #expect(admission.admit("a", live: 2, nowMilliseconds: 5_000) == .refuse(reason: "more than 2 connections from this address", log: true))
        #expect(admission.admit("a", live: 2, nowMilliseconds: 5_100) == .refuse(reason: "more than 2 connections from this address", log: false))
        #expect(admission.admit("b", live: 0, nowMilliseconds: 5_100) == .admit)
    }

    @Test func theConnectRateIsPerAddressAndSecond() {
        var admission = AddressAdmission(maxConnections: 0, maxPerSecond: 3)
        for _ in 0..<3 { #expect(admission.admit("a", live: 0, nowMilliseconds: 2_000) == .admit) }
        let reason = "more than 3 new connections per second from this address"
        #expect(admission.admit("a", live: 0, nowMilliseconds: 2_500) == .refuse(reason: reason, log: true))
        #expect(admission.admit("a", live: 0, nowMilliseconds: 2_900) == .refuse(reason: reason, log: false))
        #expect(admission.admit("b", live: 0, nowMilliseconds: 2_900) == .admit)
        #expect(admission.admit("a", live: 0, nowMilliseconds: 3_000) == .admit)
    }
}
