import Crypto
import CryptoExtras
import PresenceAuth
import PresenceCore
import Testing
import X509

@Suite struct FirebaseTokenVerifierTests {
    let verifier = Fixtures.firebaseVerifier()
    let now = Fixtures.now

    @Test func acceptsAGoodTokenAndBuildsAuth() throws {
        let claims = Fixtures.firebaseClaims(overriding: [("admin_level", 3)])
        let result = verifier.verify(Fixtures.rs256Token(claims), now: now)
        let credentials = try #require(result.credentials)
        #expect(credentials.uid == "alice")
        let auth = try #require(credentials.rulesAuth)
        #expect(auth["uid"] == "alice")
        #expect(auth["provider"] == "password")
        #expect(auth["token"] == claims)
        #expect(auth["token"]?["email"] == "alice@example.com")
        #expect(auth["token"]?["admin_level"] == 3)
        #expect(auth["token"]?["firebase"]?["sign_in_provider"] == "password")
        #expect(credentials == .user(auth: auth, expiresAt: (now / 1000 + 3600) * 1000))
    }

    @Test func acceptsTokensCheckedAgainstAJWKS() throws {
        let keys = try FirebaseKeys.load(fromJWKS: Fixtures.jwksJSON)
        #expect(keys.keyIDs == [Fixtures.kid])
        let jwksVerifier = try FirebaseTokenVerifier(projectID: Fixtures.projectID, keys: keys)
        #expect(jwksVerifier.verify(Fixtures.rs256Token(Fixtures.firebaseClaims()), now: now).credentials?.uid == "alice")
        // The second key is not in the JWKS.
        let other = Fixtures.rs256Token(Fixtures.firebaseClaims(), key: Fixtures.otherRSAKey, kid: Fixtures.otherKid)
        #expect(jwksVerifier.verify(other, now: now).invalidReason?.contains("no public key with kid") == true)
    }

    @Test func loaderDetectsTheFileForm() throws {
        #expect(try FirebaseKeys.load(fromJSON: Fixtures.certificateMapJSON).keyIDs == [Fixtures.kid, Fixtures.otherKid])
        #expect(try FirebaseKeys.load(fromJSON: Fixtures.jwksJSON).keyIDs == [Fixtures.kid])
        let path = try Fixtures.temporaryFile(Fixtures.certificateMapJSON)
        #expect(try FirebaseKeys.load(fromFile: path).keyIDs == [Fixtures.kid, Fixtures.otherKid])
        let jwksPath = try Fixtures.temporaryFile(Fixtures.jwksJSON)
        #expect(try FirebaseKeys.load(fromFile: jwksPath).keyIDs == [Fixtures.kid])
    }

    @Test func acceptsTheSecondKeyOfTheMapByKid() {
        let token = Fixtures.rs256Token(Fixtures.firebaseClaims(uid: "bob"), key: Fixtures.otherRSAKey, kid: Fixtures.otherKid)
        #expect(verifier.verify(token, now: now).credentials?.uid == "bob")
    }

    @Test func refusesAForgedSignature() {
        // Signed by a key that is loaded, but under another key's kid.
        let wrongKey = Fixtures.rs256Token(Fixtures.firebaseClaims(), key: Fixtures.otherRSAKey, kid: Fixtures.kid)
        #expect(verifier.verify(wrongKey, now: now).invalidReason == "Invalid token: signature does not match")
        // A good signature over different claims.
        let good = Fixtures.rs256Token(Fixtures.firebaseClaims())
        let evil = Fixtures.rs256Token(Fixtures.firebaseClaims(uid: "mallory"))
        let goodParts = good.split(separator: ".", omittingEmptySubsequences: false)
        let evilParts = evil.split(separator: ".", omittingEmptySubsequences: false)
        let spliced = "\(goodParts[0]).\(evilParts[1]).\(goodParts[2])"
        #expect(verifier.verify(spliced, now: now).invalidReason == "Invalid token: signature does not match")
        // Signature stripped or truncated.
        #expect(verifier.verify("\(goodParts[0]).\(goodParts[1]).", now: now).invalidReason == "Invalid token: signature does not match")
        let truncated = Base64URL.encode(Array(Base64URL.decode(goodParts[2])!.prefix(255)))
        #expect(verifier.verify("\(goodParts[0]).\(goodParts[1]).\(truncated)", now: now).invalidReason == "Invalid token: signature does not match")
        let padded = Base64URL.encode(Base64URL.decode(goodParts[2])! + [0])
        #expect(verifier.verify("\(goodParts[0]).\(goodParts[1]).\(padded)", now: now).invalidReason == "Invalid token: signature does not match")
        // PSS instead of PKCS#1 v1.5 padding.
        let pss = Fixtures.rs256Token(Fixtures.firebaseClaims(), padding: .PSS)
        #expect(verifier.verify(pss, now: now).invalidReason == "Invalid token: signature does not match")
    }

    @Test func refusesUnknownOrMissingKeyIDs() {
        let unknown = Fixtures.rs256Token(Fixtures.firebaseClaims(), kid: "rotated-away")
        #expect(verifier.verify(unknown, now: now).invalidReason?.hasPrefix("Invalid token: no public key with kid \"rotated-away\"") == true)
        let missing = Fixtures.rs256Token(Fixtures.firebaseClaims(), kid: nil)
        #expect(verifier.verify(missing, now: now).invalidReason == "Invalid token: header has no kid")
    }

    @Test func refusesAlgNoneAndAlgorithmConfusion() throws {
        let unsigned = Fixtures.unsignedToken(Fixtures.firebaseClaims())
        #expect(verifier.verify(unsigned, now: now).invalidReason?.contains("alg none") == true)
        // The classic confusion: HS256 with the RSA public key (in several encodings) as the HMAC secret.
        let publicKey = Fixtures.rsaKey.publicKey
        let pems = [Array(publicKey.pemRepresentation.utf8), Array(publicKey.derRepresentation),
                    Array(Fixtures.certificateMapJSON.utf8)]
        for secret in pems {
            let token = Fixtures.hs256Token(Fixtures.firebaseClaims(), secret: secret, header: ["alg": "HS256", "kid": .string(Fixtures.kid)])
            #expect(verifier.verify(token, now: now).invalidReason == "Invalid token: algorithm \"HS256\" is not accepted; expected RS256")
        }
        for alg in ["RS384", "RS512", "PS256", "ES256", "rs256", "None", ""] {
            let token = Fixtures.rs256Token(Fixtures.firebaseClaims(), alg: alg)
            #expect(verifier.verify(token, now: now).invalidReason != nil, "alg \(alg)")
        }
        // alg that is not a string, or absent.
        let input = JWT.signingInput(header: ["alg": 1, "kid": .string(Fixtures.kid)], claims: Fixtures.firebaseClaims())
        #expect(verifier.verify(input + ".AAAA", now: now).invalidReason == "Invalid token: header alg is not a string")
        let noAlg = JWT.signingInput(header: ["kid": .string(Fixtures.kid)], claims: Fixtures.firebaseClaims())
        #expect(verifier.verify(noAlg + ".AAAA", now: now).invalidReason == "Invalid token: header has no alg")
    }

    @Test func refusesWrongIssuer() {
        for iss: JSON in ["https://securetoken.google.com/other-project", "https://accounts.google.com", 5, .null] {
            let token = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("iss", iss)]))
            #expect(verifier.verify(token, now: now).invalidReason?.hasPrefix("Invalid token: iss claim") == true)
        }
        let missing = Fixtures.rs256Token(Fixtures.firebaseClaims(removing: ["iss"]))
        #expect(verifier.verify(missing, now: now).invalidReason == "Invalid token: missing iss claim")
    }

    @Test func refusesWrongAudience() {
        for aud: JSON in ["other-project", "", ["presence-test"], true] {
            let token = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("aud", aud)]))
            #expect(verifier.verify(token, now: now).invalidReason?.hasPrefix("Invalid token: aud claim") == true)
        }
        let missing = Fixtures.rs256Token(Fixtures.firebaseClaims(removing: ["aud"]))
        #expect(verifier.verify(missing, now: now).invalidReason == "Invalid token: missing aud claim")
    }

    @Test func expiredTokensGetExpiredToken() {
        let exp = Fixtures.nowSeconds - 1
        let token = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("iat", .number(exp - 3600)), ("exp", .number(exp))]))
        #expect(verifier.verify(token, now: now) == .failure(.expiredToken("Auth token is expired.")))
        // exp is strict: expired at exactly exp, valid 1 ms before.
        let fresh = Fixtures.rs256Token(Fixtures.firebaseClaims())
        let expMs = now + 3600 * 1000
        #expect(verifier.verify(fresh, now: expMs - 1).credentials != nil)
        #expect(verifier.verify(fresh, now: expMs).expiredReason == "Auth token is expired.")
    }

    @Test func refusesIssuedAtInTheFutureBeyondTheSkew() {
        let skew = FirebaseTokenVerifier.defaultClockSkewSeconds
        #expect(skew == 60)
        let within = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("iat", .number(Fixtures.nowSeconds + Double(skew)))]))
        #expect(verifier.verify(within, now: now).credentials != nil)
        let beyond = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("iat", .number(Fixtures.nowSeconds + Double(skew) + 1))]))
        #expect(verifier.verify(beyond, now: now).invalidReason?.hasPrefix("Invalid token: iat claim is in the future") == true)
        let authTime = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("auth_time", .number(Fixtures.nowSeconds + 600))]))
        #expect(verifier.verify(authTime, now: now).invalidReason?.hasPrefix("Invalid token: auth_time claim is in the future") == true)
        let noIat = Fixtures.rs256Token(Fixtures.firebaseClaims(removing: ["iat"]))
        #expect(verifier.verify(noIat, now: now).invalidReason == "Invalid token: missing iat claim")
        // A custom skew.
        let strict = try! FirebaseTokenVerifier(projectID: Fixtures.projectID, keys: FirebaseKeys.load(fromJWKS: Fixtures.jwksJSON), clockSkewSeconds: 0)
        let oneAhead = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("iat", .number(Fixtures.nowSeconds + 1))]))
        #expect(strict.verify(oneAhead, now: now).invalidReason != nil)
        #expect(verifier.verify(oneAhead, now: now).credentials != nil)
    }

    @Test func refusesBadSubjects() {
        let cases: [(JSON, String)] = [
            ("", "Invalid token: sub claim is empty"),
            (.string(String(repeating: "u", count: 129)), "Invalid token: sub claim is longer than 128 characters"),
            (42, "Invalid token: sub claim is not a string"),
        ]
        for (sub, reason) in cases {
            let token = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [("sub", sub)]))
            #expect(verifier.verify(token, now: now).invalidReason == reason)
        }
        let missing = Fixtures.rs256Token(Fixtures.firebaseClaims(removing: ["sub"]))
        #expect(verifier.verify(missing, now: now).invalidReason == "Invalid token: missing sub claim")
        let longest = Fixtures.rs256Token(Fixtures.firebaseClaims(uid: String(repeating: "u", count: 128)))
        #expect(verifier.verify(longest, now: now).credentials != nil)
    }

    @Test func refusesBadNumericDates() {
        for (name, value) in [("exp", JSON.string("soon")), ("exp", 1e300), ("exp", -1), ("iat", "0"), ("auth_time", 1e20), ("nbf", .null)] {
            let token = Fixtures.rs256Token(Fixtures.firebaseClaims(overriding: [(name, value)]))
            #expect(verifier.verify(token, now: now).invalidReason == "Invalid token: \(name) claim is not a valid NumericDate")
        }
        let noExp = Fixtures.rs256Token(Fixtures.firebaseClaims(removing: ["exp"]))
        #expect(verifier.verify(noExp, now: now).invalidReason == "Invalid token: missing exp claim")
    }

    @Test func adminTokenGivesAdmin() throws {
        let admin = try AdminToken("operator-token-0123456789")
        let withAdmin = Fixtures.firebaseVerifier(adminToken: admin)
        #expect(withAdmin.verify("operator-token-0123456789", now: now) == .success(.admin))
        #expect(withAdmin.verify("operator-token-012345678", now: now).invalidReason != nil)
        #expect(withAdmin.verify("operator-token-0123456789 ", now: now).invalidReason != nil)
        // Without an admin token configured, nothing is admin; the emulator's "owner" never is.
        #expect(verifier.verify("operator-token-0123456789", now: now).invalidReason != nil)
        #expect(withAdmin.verify("owner", now: now).invalidReason != nil)
    }

    @Test func keyFilesThatAreWrongSayWhy() throws {
        func message(_ text: String) -> String? {
            do { _ = try FirebaseKeys.load(fromJSON: text); return nil } catch { return error.message }
        }
        #expect(message("not json")?.hasPrefix("not valid JSON") == true)
        #expect(message("{}") == "no keys found")
        #expect(message("[]")?.hasPrefix("expected a JSON object") == true)
        #expect(message(#"{"k": 5}"#) == "key k: expected a PEM certificate string")
        #expect(message(#"{"k": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}"#)?.hasPrefix("key k: not a PEM X.509 certificate") == true)
        #expect(message(#"{"keys": []}"#) == "JWKS has no RSA RS256 signing keys")
        #expect(message(#"{"keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB"}]}"#)?.hasPrefix("JWKS key a: not a usable RSA public key") == true)
        #expect(message(#"{"keys": [{"kty": "RSA", "kid": "a", "n": "!!", "e": "AQAB"}]}"#) == "JWKS key a: n and e must be base64url strings")
        #expect(message(#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB"}]}"#) == "JWKS key #0 has no kid")
        // EC keys and encryption keys are skipped.
        var entries: [JSON] = [["kty": "EC", "kid": "ec", "crv": "P-256"]]
        let rsa = Fixtures.jwk(Fixtures.rsaKey.publicKey, kid: "enc")
        entries.append(.object((rsa.objectMembers ?? []).filter { $0.0 != "use" } + [("use", "enc")]))
        entries.append(Fixtures.jwk(Fixtures.rsaKey.publicKey, kid: "sig"))
        #expect(try FirebaseKeys.load(fromJSON: JSONWriter.string(["keys": .array(entries)])).keyIDs == ["sig"])
        // Duplicate kids.
        let dup = JSONWriter.string(["keys": [Fixtures.jwk(Fixtures.rsaKey.publicKey, kid: "x"), Fixtures.jwk(Fixtures.rsaKey.publicKey, kid: "x")]])
        #expect(message(dup) == "key id x appears twice")
        // A certificate whose key is not RSA.
        let p256 = P256.Signing.PrivateKey()
        let ecPEM = try Fixtures.selfSignedCertificatePEM(for: Certificate.PrivateKey(p256), publicKey: Certificate.PublicKey(p256.publicKey))
        #expect(message(JSONWriter.string(["ec": .string(ecPEM)])) == "key ec: the certificate's key is not an RSA key")
        // A missing file.
        #expect(throws: AuthConfigurationError.self) { try FirebaseKeys.load(fromFile: "/nonexistent/keys.json") }
    }

    @Test func projectIDIsValidated() {
        let keys = FirebaseKeys([:])
        #expect(throws: AuthConfigurationError.self) { try FirebaseTokenVerifier(projectID: "", keys: keys) }
        #expect(throws: AuthConfigurationError.self) { try FirebaseTokenVerifier(projectID: "a b", keys: keys) }
        #expect(throws: AuthConfigurationError.self) { try FirebaseTokenVerifier(projectID: "a/b", keys: keys) }
    }
}
