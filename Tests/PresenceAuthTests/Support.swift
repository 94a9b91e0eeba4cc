import Crypto
import CryptoExtras
import Foundation
import PresenceAuth
import PresenceCore
import X509

/// Keys and helpers shared by the tests. Everything is generated at test time; nothing is checked in.
enum Fixtures {
    static let projectID = "presence-test"
    static let issuer = "https://securetoken.google.com/presence-test"
    /// 2023-11-14T22:13:20Z in ms: a fixed "now" so the tests do not read the clock.
    static let now: Int64 = 1_700_000_000_000
    static var nowSeconds: Double { Double(now / 1000) }

    static let secret: [UInt8] = Array("test-secret-0123456789-abcdefghijklmnop".utf8)
    static let otherSecret: [UInt8] = Array("another-secret-0123456789-abcdefghijklm".utf8)

    // RSA key generation takes ~0.1 s each in debug builds, so make each key once.
    static let rsaKey: _RSA.Signing.PrivateKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let otherRSAKey: _RSA.Signing.PrivateKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let kid = "test-key-1"
    static let otherKid = "test-key-2"

    /// Google's `{kid: PEM certificate}` form, with a self-signed certificate made now.
    static let certificateMapJSON: String = {
        let pem = try! selfSignedCertificatePEM(for: Certificate.PrivateKey(rsaKey), publicKey: Certificate.PublicKey(rsaKey.publicKey))
        let pem2 = try! selfSignedCertificatePEM(for: Certificate.PrivateKey(otherRSAKey), publicKey: Certificate.PublicKey(otherRSAKey.publicKey))
        return JSONWriter.string(.object([(kid, .string(pem)), (otherKid, .string(pem2))]))
    }()

    /// The JWKS form of `rsaKey`.
    static let jwksJSON: String = {
        JSONWriter.string(.object([("keys", .array([jwk(rsaKey.publicKey, kid: kid)]))]))
    }()

    static func jwk(_ key: _RSA.Signing.PublicKey, kid: String) -> JSON {
        let primitives = try! key.getKeyPrimitives()
        return .object([
            ("kty", "RSA"), ("alg", "RS256"), ("use", "sig"), ("kid", .string(kid)),
            ("n", .string(Base64URL.encode(Array(primitives.modulus)))),
            ("e", .string(Base64URL.encode(Array(primitives.publicExponent)))),
        ])
    }

    static func selfSignedCertificatePEM(for privateKey: Certificate.PrivateKey, publicKey: Certificate.PublicKey) throws -> String {
        let name = try DistinguishedName { CommonName("securetoken.system.gserviceaccount.com") }
        let start = Date(timeIntervalSince1970: nowSeconds - 86400)
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: publicKey,
            notValidBefore: start,
            notValidAfter: start.addingTimeInterval(14 * 86400),
            issuer: name,
            subject: name,
            extensions: Certificate.Extensions(),
            issuerPrivateKey: privateKey
        )
        return try certificate.serializeAsPEM().pemString
    }

    /// Standard Firebase ID-token claims for `uid`, issued at `Fixtures.now`, valid for an hour.
    static func firebaseClaims(uid: String = "alice", overriding extra: [(String, JSON)] = [], removing: Set<String> = []) -> JSON {
        let iat = nowSeconds
        var members: [(String, JSON)] = [
            ("iss", .string(issuer)),
            ("aud", .string(projectID)),
            ("auth_time", .number(iat - 100)),
            ("user_id", .string(uid)),
            ("sub", .string(uid)),
            ("iat", .number(iat)),
            ("exp", .number(iat + 3600)),
            ("email", "alice@example.com"),
            ("email_verified", true),
            ("firebase", .object([
                ("identities", .object([("email", .array(["alice@example.com"]))])),
                ("sign_in_provider", "password"),
            ])),
        ]
        for (key, value) in extra {
            members.removeAll { $0.0 == key }
            members.append((key, value))
        }
        members.removeAll { removing.contains($0.0) }
        return .object(members)
    }

    /// Signs `claims` with RS256 (RSASSA-PKCS1-v1_5 + SHA-256), as Google does.
    static func rs256Token(_ claims: JSON, key: _RSA.Signing.PrivateKey = rsaKey, kid: String? = Fixtures.kid, alg: String = "RS256",
                           padding: _RSA.Signing.Padding = .insecurePKCS1v1_5) -> String {
        var header: [(String, JSON)] = [("alg", .string(alg))]
        if let kid { header.append(("kid", .string(kid))) }
        header.append(("typ", "JWT"))
        let input = JWT.signingInput(header: .object(header), claims: claims)
        let signature = try! key.signature(for: SHA256.hash(data: Array(input.utf8)), padding: padding)
        return JWT.assemble(signingInput: input, signature: Array(signature.rawRepresentation))
    }

    /// Signs `claims` with HS256 under `secret` with any header.
    static func hs256Token(_ claims: JSON, secret: [UInt8] = Fixtures.secret, header: JSON = ["alg": "HS256", "typ": "JWT"]) -> String {
        let input = JWT.signingInput(header: header, claims: claims)
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: secret))
        return JWT.assemble(signingInput: input, signature: Array(mac))
    }

    /// An unsigned token, as the emulator accepts.
    static func unsignedToken(_ claims: JSON) -> String {
        JWT.signingInput(header: ["alg": "none", "type": "JWT"], claims: claims) + "."
    }

    static func firebaseVerifier(adminToken: AdminToken? = nil) -> FirebaseTokenVerifier {
        try! FirebaseTokenVerifier(projectID: projectID, keys: FirebaseKeys.load(fromCertificateMapJSON: certificateMapJSON), adminToken: adminToken)
    }

    static func hs256Verifier(adminToken: AdminToken? = nil) -> HS256TokenVerifier {
        try! HS256TokenVerifier(secret: secret, adminToken: adminToken)
    }

    static func temporaryFile(_ contents: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("presence-auth-\(UUID().uuidString)").path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

extension Result where Success == Credentials, Failure == AuthError {
    var invalidReason: String? {
        if case .failure(.invalidToken(let reason)) = self { return reason }
        return nil
    }

    var expiredReason: String? {
        if case .failure(.expiredToken(let reason)) = self { return reason }
        return nil
    }

    var credentials: Credentials? {
        if case .success(let credentials) = self { return credentials }
        return nil
    }
}
