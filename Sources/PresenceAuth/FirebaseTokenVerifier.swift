import Crypto
import CryptoExtras
import PresenceCore

/// Verifies real Firebase ID tokens (RS256) offline, against public keys from a local file
/// (`FirebaseKeys`), following Firebase's "verify ID tokens using a third-party JWT library" rules.
///
/// Checks, in order: admin token (exact match → `.admin`); size and shape; header `alg` is exactly
/// RS256 and `kid` names a loaded key; the RSASSA-PKCS1-v1_5 SHA-256 signature;
/// `aud` is the project id; `iss` is `https://securetoken.google.com/<project id>`; `sub` a non-empty
/// string of at most 128 characters; `exp` present and not passed (→ `expiredToken`, checked strictly);
/// `iat` present and not in the future beyond the skew; `auth_time` and `nbf`, if present, likewise.
///
/// Clock skew: `defaultClockSkewSeconds` = 60 s, allowed for `iat`/`auth_time`/`nbf` only, so that a
/// freshly issued token is not refused when Google's clock is slightly ahead of ours. `exp` gets no
/// allowance so the verdict agrees with `Credentials.user(expiresAt:)` (the server's live expiry);
/// the client SDKs refresh tokens about 5 minutes before they expire anyway.
public struct FirebaseTokenVerifier: TokenVerifier {
    public static let defaultClockSkewSeconds: Int64 = 60

    public let projectID: String
    public let issuer: String
    private let keys: FirebaseKeys
    private let adminToken: AdminToken?
    private let clockSkewSeconds: Int64

    /// `projectID` must be non-empty and contain no whitespace or `/`.
    /// `clockSkewSeconds` (negative is treated as 0) applies to `iat`/`auth_time`/`nbf` only.
    public init(projectID: String, keys: FirebaseKeys, adminToken: AdminToken? = nil, clockSkewSeconds: Int64 = FirebaseTokenVerifier.defaultClockSkewSeconds) throws(AuthConfigurationError) {
        guard !projectID.isEmpty,
            !projectID.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0 == "/" })
        else {
            throw AuthConfigurationError("Firebase project id \(JWT.quoted(projectID)) must be non-empty, without whitespace or '/'")
        }
        self.projectID = projectID
        self.issuer = "https://securetoken.google.com/" + projectID
        self.keys = keys
        self.adminToken = adminToken
        self.clockSkewSeconds = max(0, clockSkewSeconds)
    }

    public init(projectID: String, keys: [String: _RSA.Signing.PublicKey], adminToken: AdminToken? = nil, clockSkewSeconds: Int64 = FirebaseTokenVerifier.defaultClockSkewSeconds) throws(AuthConfigurationError) {
        try self.init(projectID: projectID, keys: FirebaseKeys(keys), adminToken: adminToken, clockSkewSeconds: clockSkewSeconds)
    }

    public func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
        if let adminToken, adminToken.matches(credential) { return .success(.admin) }
        return authResult { () throws(AuthError) in
            let jwt = try JWT(parsing: credential)
            try jwt.requireAlgorithm("RS256")
            guard let kidValue = jwt.header["kid"] else { throw JWT.invalid("header has no kid") }
            guard let kid = kidValue.stringValue else { throw JWT.invalid("header kid is not a string") }
            guard let key = keys[kid] else {
                throw JWT.invalid("no public key with kid \(JWT.quoted(kid)) (key file may be out of date)")
            }
            guard !jwt.signature.isEmpty,
                key.isValidSignature(
                    _RSA.Signing.RSASignature(rawRepresentation: jwt.signature),
                    for: SHA256.hash(data: jwt.signingInput),
                    padding: .insecurePKCS1v1_5
                )
            else {
                throw JWT.invalid("signature does not match")
            }

            let claims = jwt.claims
            guard let aud = claims["aud"] else { throw JWT.invalid("missing aud claim") }
            guard aud.stringValue == projectID else {
                throw JWT.invalid("aud claim \(JWT.describe(aud)) is not the project id \(JWT.quoted(projectID))")
            }
            guard let iss = claims["iss"] else { throw JWT.invalid("missing iss claim") }
            guard iss.stringValue == issuer else {
                throw JWT.invalid("iss claim \(JWT.describe(iss)) is not \(JWT.quoted(issuer))")
            }
            try ClaimChecks.checkSubject(claims)
            let exp = try ClaimChecks.requiredNumericDate(claims, "exp")
            let iat = try ClaimChecks.requiredNumericDate(claims, "iat")
            let authTime = try ClaimChecks.numericDate(claims, "auth_time")
            let nbf = try ClaimChecks.numericDate(claims, "nbf")
            try ClaimChecks.checkNotExpired(exp: exp, now: now)
            try ClaimChecks.checkNotInFuture(iat, name: "iat", what: "issued", now: now, skewSeconds: clockSkewSeconds)
            if let authTime {
                try ClaimChecks.checkNotInFuture(authTime, name: "auth_time", what: "signed in", now: now, skewSeconds: clockSkewSeconds)
            }
            if let nbf {
                try ClaimChecks.checkNotInFuture(nbf, name: "nbf", what: "not valid before", now: now, skewSeconds: clockSkewSeconds)
            }
            return ClaimChecks.credentials(from: claims)
        }
    }
}
