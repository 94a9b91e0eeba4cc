import Foundation
import PresenceAuth
import PresenceCore
import Testing

@Suite struct HS256Tests {
    let verifier = Fixtures.hs256Verifier()
    let minter = try! HS256TokenMinter(secret: Fixtures.secret)
    let now = Fixtures.now

    @Test func mintedTokenRoundTrips() throws {
        let token = try minter.mint(uid: "alice", claims: [("role", "editor"), ("level", 3)], ttlSeconds: 3600, now: now)
        let credentials = try #require(verifier.verify(token, now: now).credentials)
        let auth = try #require(credentials.rulesAuth)
        #expect(auth["uid"] == "alice")
        #expect(auth["provider"] == "custom")
        #expect(auth["token"]?["sub"] == "alice")
        #expect(auth["token"]?["user_id"] == "alice")
        #expect(auth["token"]?["role"] == "editor")
        #expect(auth["token"]?["level"] == 3)
        #expect(auth["token"]?["iat"] == .number(Fixtures.nowSeconds))
        #expect(auth["token"]?["exp"] == .number(Fixtures.nowSeconds + 3600))
        #expect(credentials == .user(auth: auth, expiresAt: now + 3600 * 1000))
        // The header is the standard one.
        let jwt = try JWT(parsing: token)
        #expect(jwt.header == ["alg": "HS256", "typ": "JWT"])
    }

    @Test func extraClaimsCanReplaceTheProvider() throws {
        let token = try minter.mint(uid: "bob", claims: [("firebase", ["sign_in_provider": "password", "identities": [:]])], now: now)
        #expect(verifier.verify(token, now: now).credentials?.rulesAuth?["provider"] == "password")
    }

    @Test func minterRefusesBadInput() {
        #expect(throws: AuthConfigurationError("uid must not be empty")) { try minter.mint(uid: "", now: now) }
        #expect(throws: AuthConfigurationError.self) { try minter.mint(uid: String(repeating: "x", count: 129), now: now) }
        #expect(throws: AuthConfigurationError.self) { try minter.mint(uid: "a", ttlSeconds: 0, now: now) }
        #expect(throws: AuthConfigurationError.self) { try minter.mint(uid: "a", now: -1) }
        for reserved in ["sub", "iat", "exp"] {
            #expect(throws: AuthConfigurationError("claim \(reserved) is set by the minter and cannot be overridden")) {
                try minter.mint(uid: "a", claims: [(reserved, 1)], now: now)
            }
        }
    }

    private func parsed(_ argument: String) throws -> JSON {
        let (key, value) = try HS256TokenMinter.parseClaim(argument)
        return .object([(key, value)])
    }

    @Test func claimAndTTLArgumentsParse() throws {
        #expect(try parsed("admin=true") == ["admin": true])
        #expect(try parsed("level=3") == ["level": 3])
        #expect(try parsed("team=red") == ["team": "red"])
        #expect(try parsed("name=\"Al\"") == ["name": "Al"])
        #expect(try parsed("roles=[\"a\",\"b\"]") == ["roles": ["a", "b"]])
        #expect(try parsed("eq=a=b") == ["eq": "a=b"])
        #expect(try parsed("empty=") == ["empty": ""])
        #expect(throws: AuthConfigurationError.self) { try HS256TokenMinter.parseClaim("novalue") }
        #expect(throws: AuthConfigurationError.self) { try HS256TokenMinter.parseClaim("=x") }

        #expect(try HS256TokenMinter.parseTTL("3600") == 3600)
        #expect(try HS256TokenMinter.parseTTL("90s") == 90)
        #expect(try HS256TokenMinter.parseTTL("30m") == 1800)
        #expect(try HS256TokenMinter.parseTTL("1h") == 3600)
        #expect(try HS256TokenMinter.parseTTL("7d") == 604_800)
        for bad in ["", "h", "0", "-1h", "1.5h", "1w", "١h", "99999999999999999999d", "9223372036854775807d"] {
            #expect(throws: AuthConfigurationError.self, "ttl \(bad)") { try HS256TokenMinter.parseTTL(bad) }
        }
    }

    @Test func refusesAWrongSecretOrForgedSignature() throws {
        let other = try HS256TokenMinter(secret: Fixtures.otherSecret).mint(uid: "alice", now: now)
        #expect(verifier.verify(other, now: now).invalidReason == "Invalid token: signature does not match")
        let good = try minter.mint(uid: "alice", now: now)
        let evil = try minter.mint(uid: "mallory", now: now)
        let g = good.split(separator: ".", omittingEmptySubsequences: false)
        let e = evil.split(separator: ".", omittingEmptySubsequences: false)
        #expect(verifier.verify("\(g[0]).\(e[1]).\(g[2])", now: now).invalidReason == "Invalid token: signature does not match")
        #expect(verifier.verify("\(g[0]).\(g[1]).", now: now).invalidReason == "Invalid token: signature does not match")
        #expect(verifier.verify("\(g[0]).\(g[1]).\(g[2].dropLast(2))", now: now).invalidReason != nil)
    }

    @Test func refusesAlgNoneAndOtherAlgorithms() {
        let claims = Fixtures.firebaseClaims()
        #expect(verifier.verify(Fixtures.unsignedToken(claims), now: now).invalidReason?.contains("alg none") == true)
        // An RS256 token (even validly signed) is not accepted by the HS256 verifier.
        #expect(verifier.verify(Fixtures.rs256Token(claims), now: now).invalidReason == "Invalid token: algorithm \"RS256\" is not accepted; expected HS256")
        for alg in ["HS384", "HS512", "hs256", "none", "NONE"] {
            let token = Fixtures.hs256Token(claims, header: ["alg": .string(alg)])
            #expect(verifier.verify(token, now: now).invalidReason != nil, "alg \(alg)")
        }
        // A correctly HS256-signed token with a header declaring `crit`.
        let crit = Fixtures.hs256Token(claims, header: ["alg": "HS256", "crit": ["b64"], "b64": false])
        #expect(verifier.verify(crit, now: now).invalidReason == "Invalid token: header has unsupported critical extensions (crit)")
    }

    @Test func expiredTokensGetExpiredToken() throws {
        let token = try minter.mint(uid: "alice", ttlSeconds: 60, now: now)
        #expect(verifier.verify(token, now: now + 59_999).credentials != nil)
        #expect(verifier.verify(token, now: now + 60_000) == .failure(.expiredToken("Auth token is expired.")))
        #expect(verifier.verify(token, now: now + 86_400_000).expiredReason == "Auth token is expired.")
    }

    @Test func timeClaimsAreChecked() throws {
        let base = Fixtures.firebaseClaims()
        func token(_ extra: [(String, JSON)], removing: Set<String> = []) -> String {
            Fixtures.hs256Token(Fixtures.firebaseClaims(overriding: extra, removing: removing))
        }
        #expect(verifier.verify(Fixtures.hs256Token(base), now: now).credentials != nil)
        // Minted "in the future" (the issuer's clock is 2 minutes ahead): beyond the 60 s skew.
        let future = try minter.mint(uid: "alice", now: now + 120_000)
        #expect(verifier.verify(future, now: now).invalidReason?.hasPrefix("Invalid token: iat claim is in the future") == true)
        let slightlyAhead = try minter.mint(uid: "alice", now: now + 30_000)
        #expect(verifier.verify(slightlyAhead, now: now).credentials != nil)
        #expect(verifier.verify(token([("nbf", .number(Fixtures.nowSeconds + 3000))]), now: now).invalidReason?.hasPrefix("Invalid token: nbf claim is in the future") == true)
        #expect(verifier.verify(token([], removing: ["exp"]), now: now).invalidReason == "Invalid token: missing exp claim")
        // iat is optional for HS256.
        #expect(verifier.verify(token([], removing: ["iat"]), now: now).credentials != nil)
        for bad: JSON in [1e300, -5, "1700000000", .null, [1]] {
            #expect(verifier.verify(token([("exp", bad)]), now: now).invalidReason == "Invalid token: exp claim is not a valid NumericDate")
        }
        // Skew 0: a token issued 1 s ahead is refused.
        let strict = try HS256TokenVerifier(secret: Fixtures.secret, clockSkewSeconds: 0)
        let oneAhead = try minter.mint(uid: "alice", now: now + 1000)
        #expect(strict.verify(oneAhead, now: now).invalidReason != nil)
        #expect(verifier.verify(oneAhead, now: now).credentials != nil)
    }

    @Test func refusesBadSubjects() {
        for sub: JSON in ["", 7, .null, .string(String(repeating: "é", count: 129))] {
            let token = Fixtures.hs256Token(Fixtures.firebaseClaims(overriding: [("sub", sub)]))
            #expect(verifier.verify(token, now: now).invalidReason?.hasPrefix("Invalid token: sub claim") == true)
        }
        // No sub: a legacy `d` object does not stand in for it.
        let legacy = Fixtures.hs256Token(["v": 0, "iat": .number(Fixtures.nowSeconds), "exp": .number(Fixtures.nowSeconds + 60), "d": ["uid": "x"]])
        #expect(verifier.verify(legacy, now: now).invalidReason == "Invalid token: missing sub claim")
    }

    @Test func secretMustBeLongEnough() {
        #expect(throws: AuthConfigurationError.self) { try HS256TokenVerifier(secret: Array(repeating: 1, count: 31)) }
        do {
            _ = try HS256Secret(bytes: Array("short".utf8))
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("at least 32 bytes"))
            #expect(error.message.contains("got 5"))
        }
        #expect(throws: Never.self) { try HS256Secret(bytes: Array(repeating: 1, count: 32)) }
    }

    @Test func secretFileIsTrimmedAndSharedByMinterAndVerifier() throws {
        let path = try Fixtures.temporaryFile("  " + String(decoding: Fixtures.secret, as: UTF8.self) + "\n\n")
        let secret = try HS256Secret.load(fromFile: path)
        let token = try HS256TokenMinter(secret: secret).mint(uid: "carol", now: now)
        // A verifier made from the raw (untrimmed) bytes agrees, so the whitespace was dropped.
        #expect(verifier.verify(token, now: now).credentials?.uid == "carol")
        let shortPath = try Fixtures.temporaryFile("tooshort\n")
        #expect(throws: AuthConfigurationError.self) { try HS256Secret.load(fromFile: shortPath) }
        #expect(throws: AuthConfigurationError.self) { try HS256Secret.load(fromFile: "/nonexistent/secret") }
    }

    @Test func adminTokenGivesAdmin() throws {
        let admin = try AdminToken("0123456789abcdef")
        let withAdmin = Fixtures.hs256Verifier(adminToken: admin)
        #expect(withAdmin.verify("0123456789abcdef", now: now) == .success(.admin))
        #expect(withAdmin.verify("0123456789abcdeF", now: now).invalidReason != nil)
        #expect(withAdmin.verify("owner", now: now).invalidReason != nil)
        // Ordinary tokens still work next to it.
        let token = try minter.mint(uid: "alice", now: now)
        #expect(withAdmin.verify(token, now: now).credentials?.uid == "alice")
    }
}

@Suite struct AdminTokenTests {
    @Test func loadsAndTrimsAFile() throws {
        let path = try Fixtures.temporaryFile("\n  s3cret-admin-token-value \n")
        let token = try AdminToken.load(fromFile: path)
        #expect(token.matches("s3cret-admin-token-value"))
        #expect(!token.matches("s3cret-admin-token-value "))
        #expect(!token.matches(""))
    }

    @Test func refusesShortOrOddTokens() {
        #expect(throws: AuthConfigurationError("admin token must be at least 16 characters (got 15)")) { try AdminToken("123456789012345") }
        #expect(throws: AuthConfigurationError.self) { try AdminToken("has a space in it ok") }
        #expect(throws: AuthConfigurationError.self) { try AdminToken("tab\there-0123456789") }
        #expect(throws: Never.self) { try AdminToken("1234567890123456") }
    }

    @Test func fileErrorsNameTheFile() throws {
        let path = try Fixtures.temporaryFile("short\n")
        do {
            _ = try AdminToken.load(fromFile: path)
            Issue.record("expected an error")
        } catch {
            #expect(error.message.hasPrefix("admin token file \(path):"))
            #expect(error.message.contains("at least 16 characters"))
        }
        #expect(throws: AuthConfigurationError("cannot read admin token file /nonexistent/admin")) { try AdminToken.load(fromFile: "/nonexistent/admin") }
    }
}
