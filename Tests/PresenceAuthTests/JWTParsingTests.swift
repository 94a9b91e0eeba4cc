import Foundation
import PresenceAuth
import PresenceCore
import PresenceTesting
import Testing

@Suite struct JWTParsingTests {
    let hs = Fixtures.hs256Verifier()
    let fb = Fixtures.firebaseVerifier()
    let now = Fixtures.now

    private func reason(_ token: String) -> String? {
        do { _ = try JWT(parsing: token); return nil } catch {
            if case .invalidToken(let reason) = error { return reason }
            return "unexpected \(error)"
        }
    }

    @Test func parsesAGoodToken() throws {
        let token = Fixtures.rs256Token(Fixtures.firebaseClaims())
        let jwt = try JWT(parsing: token)
        #expect(jwt.algorithm == "RS256")
        #expect(jwt.keyID == Fixtures.kid)
        #expect(jwt.claims == Fixtures.firebaseClaims())
        #expect(jwt.signature.count == 256)
        #expect(jwt.signingInput == Array(token.utf8[..<token.utf8.lastIndex(of: UInt8(ascii: "."))!]))
    }

    @Test func malformedTokensHaveClearReasons() {
        let header = Base64URL.encode(Array(#"{"alg":"HS256"}"#.utf8))
        let payload = Base64URL.encode(Array(#"{"sub":"a"}"#.utf8))
        #expect(reason("") == "Invalid token: empty token")
        #expect(reason("owner") == "Invalid token: not a JWT (expected 3 dot-separated parts, found 1)")
        #expect(reason("a.b") == "Invalid token: not a JWT (expected 3 dot-separated parts, found 2)")
        #expect(reason("a.b.c.d") == "Invalid token: not a JWT (expected 3 dot-separated parts, found 4)")
        #expect(reason("\(header).\(payload)=.") == "Invalid token: payload is not base64url")
        #expect(reason("\(header).\(payload).ab+/") == "Invalid token: signature is not base64url")
        #expect(reason("\(header).\(payload).A") == "Invalid token: signature is not canonical base64url")
        #expect(reason("\(header).\(payload).AB") == "Invalid token: signature is not canonical base64url")  // stray bits
        #expect(reason("\(header).\(payload).AA") == nil)
        #expect(reason(".\(payload).")?.hasPrefix("Invalid token: header is not valid JSON") == true)
        #expect(reason("\(Base64URL.encode(Array("[1]".utf8))).\(payload).") == "Invalid token: header is not a JSON object")
        #expect(reason("\(header).\(Base64URL.encode(Array("\"x\"".utf8))).") == "Invalid token: payload is not a JSON object")
        #expect(reason("\(header).\(Base64URL.encode([0xFF, 0xFE, 0x7B])).")?.hasPrefix("Invalid token: payload is not valid JSON") == true)
        #expect(reason("\(header).\(payload).é") == "Invalid token: signature is not base64url")
    }

    @Test func hugeTokensAreRefusedUpFront() throws {
        let big = String(repeating: "A", count: JWT.maxTokenBytes + 1)
        #expect(reason(big) == "Invalid token: token is longer than 8192 bytes")
        // A validly signed token with a giant claim is refused by size alone.
        let claims = Fixtures.firebaseClaims(overriding: [("blob", .string(String(repeating: "x", count: 10_000)))])
        #expect(hs.verify(Fixtures.hs256Token(claims), now: now).invalidReason == "Invalid token: token is longer than 8192 bytes")
        #expect(fb.verify(Fixtures.rs256Token(claims), now: now).invalidReason == "Invalid token: token is longer than 8192 bytes")
        // Deeply nested JSON within the size limit is refused, not a stack overflow.
        let deep = String(repeating: "[", count: 4000) + String(repeating: "]", count: 4000)
        let token = "\(Base64URL.encode(Array(#"{"alg":"HS256"}"#.utf8))).\(Base64URL.encode(Array(deep.utf8)))."
        #expect(hs.verify(token, now: now).invalidReason?.hasPrefix("Invalid token:") == true)
    }

    /// Every prefix of a valid token, every single-character change, and random junk: all refused
    /// with `invalidToken`, and nothing traps.
    @Test func fuzzedTokensAreRefusedWithoutCrashing() throws {
        let hsToken = try HS256TokenMinter(secret: Fixtures.secret).mint(uid: "alice", now: now)
        let rsToken = Fixtures.rs256Token(Fixtures.firebaseClaims())
        #expect(hs.verify(hsToken, now: now).credentials != nil)
        #expect(fb.verify(rsToken, now: now).credentials != nil)

        var rng = SeededRandom(seed: 0x5EED)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\"é\u{0}")
        var cases: [String] = []
        for (token, verifier) in [(hsToken, hs as any TokenVerifier), (rsToken, fb as any TokenVerifier)] {
            let chars = Array(token)
            for length in 0..<chars.count { cases.append(String(chars[..<length])) }
            for index in stride(from: 0, to: chars.count, by: 3) {
                var mutated = chars
                let replacement = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                if mutated[index] == replacement { continue }
                mutated[index] = replacement
                cases.append(String(mutated))
            }
            for variant in cases {
                let result = verifier.verify(variant, now: now)
                // The only way through is the untouched token (a truncation can't equal it).
                if variant != token {
                    #expect(result.credentials == nil, "\(variant)")
                }
                if case .failure(.expiredToken) = result { Issue.record("mutated token reported expired: \(variant)") }
            }
            cases.removeAll()
        }
        // Random strings of random lengths, and random three-part tokens of base64url junk.
        for _ in 0..<500 {
            let length = Int(rng.next() % 300)
            let junk = String((0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            #expect(hs.verify(junk, now: now).invalidReason != nil)
            #expect(fb.verify(junk, now: now).invalidReason != nil)
            let parts = (0..<3).map { _ in Base64URL.encode((0..<Int(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }) }
            let token = parts.joined(separator: ".")
            #expect(hs.verify(token, now: now).invalidReason != nil)
            #expect(fb.verify(token, now: now).invalidReason != nil)
        }
        // Random JSON-ish headers and payloads with random signatures.
        let headers: [JSON] = [["alg": "HS256"], ["alg": "RS256", "kid": .string(Fixtures.kid)], ["alg": "RS256", "kid": 5], ["alg": .null], [:]]
        let payloads: [JSON] = [[:], ["sub": "a"], Fixtures.firebaseClaims(), ["exp": 1e308], ["exp": .number(-.greatestFiniteMagnitude)]]
        for header in headers {
            for payload in payloads {
                for signatureLength in [0, 1, 31, 32, 33, 255, 256, 257, 512] {
                    let signature = (0..<signatureLength).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                    let token = JWT.assemble(signingInput: JWT.signingInput(header: header, claims: payload), signature: signature)
                    #expect(hs.verify(token, now: now).invalidReason != nil)
                    #expect(fb.verify(token, now: now).invalidReason != nil)
                }
            }
        }
    }

    @Test func extremeClockValuesDoNotTrap() throws {
        let hsToken = try HS256TokenMinter(secret: Fixtures.secret).mint(uid: "alice", now: now)
        let rsToken = Fixtures.rs256Token(Fixtures.firebaseClaims())
        for instant in [Int64.min, -1, 0, Int64.max] {
            _ = hs.verify(hsToken, now: instant)
            _ = fb.verify(rsToken, now: instant)
        }
        #expect(hs.verify(hsToken, now: .max).expiredReason == "Auth token is expired.")
        #expect(fb.verify(rsToken, now: .max).expiredReason == "Auth token is expired.")
        #expect(hs.verify(hsToken, now: .min).invalidReason?.contains("in the future") == true)
        let huge = try HS256TokenVerifier(secret: Fixtures.secret, clockSkewSeconds: .max)
        #expect(huge.verify(hsToken, now: now).credentials != nil)
    }
}
