import Crypto
import Foundation
import PresenceCore

/// A shared secret for HS256 tokens (`--secret-file`).
public struct HS256Secret: Sendable {
    /// RFC 7518 §3.2: an HS256 key must be at least as long as the hash output (32 bytes).
    public static let minimumBytes = 32

    let key: SymmetricKey

    public init(bytes: [UInt8]) throws(AuthConfigurationError) {
        guard bytes.count >= HS256Secret.minimumBytes else {
            throw AuthConfigurationError(
                "HS256 secret must be at least \(HS256Secret.minimumBytes) bytes (got \(bytes.count)); make one with e.g. `openssl rand -base64 48`"
            )
        }
        self.key = SymmetricKey(data: bytes)
    }

    /// Reads a secret file. The secret is the file's bytes with leading and trailing ASCII whitespace
    /// (space, tab, CR, LF) removed, so a text file with a final newline works; the server and
    /// `presence-client token` must both use this loader so they agree on the bytes.
    public static func load(fromFile path: String) throws(AuthConfigurationError) -> HS256Secret {
        var bytes = try readFile(path, what: "HS256 secret")[...]
        let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        while let first = bytes.first, whitespace.contains(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, whitespace.contains(last) { bytes = bytes.dropLast() }
        do { return try HS256Secret(bytes: Array(bytes)) } catch {
            throw AuthConfigurationError("secret file \(path): \(error.message)")
        }
    }
}

/// Verifies HS256 tokens signed with a shared secret (our own option, not a Firebase feature), such as
/// the ones `HS256TokenMinter` / `presence-client token` make.
///
/// Checks, in order: admin token (exact match → `.admin`); size and shape; `alg` is exactly HS256;
/// signature (constant-time HMAC-SHA256 comparison); `sub` a non-empty string of at most 128
/// characters; `exp` present and not passed (→ `expiredToken`); `iat` and `nbf`, if present, not in the
/// future beyond the skew. The rules `auth` is built by `FirebaseClaims.credentials(from:)`.
public struct HS256TokenVerifier: TokenVerifier {
    public static let defaultClockSkewSeconds: Int64 = 60

    private let secret: HS256Secret
    private let adminToken: AdminToken?
    private let clockSkewSeconds: Int64

    /// `clockSkewSeconds` (negative is treated as 0) is allowed for `iat`/`nbf` only; `exp` is strict.
    public init(secret: HS256Secret, adminToken: AdminToken? = nil, clockSkewSeconds: Int64 = HS256TokenVerifier.defaultClockSkewSeconds) {
        self.secret = secret
        self.adminToken = adminToken
        self.clockSkewSeconds = max(0, clockSkewSeconds)
    }

    /// Convenience: fails if `secret` is shorter than 32 bytes.
    public init(secret: [UInt8], adminToken: AdminToken? = nil, clockSkewSeconds: Int64 = HS256TokenVerifier.defaultClockSkewSeconds) throws(AuthConfigurationError) {
        self.init(secret: try HS256Secret(bytes: secret), adminToken: adminToken, clockSkewSeconds: clockSkewSeconds)
    }

    public func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
        if let adminToken, adminToken.matches(credential) { return .success(.admin) }
        return authResult { () throws(AuthError) in
            let jwt = try JWT(parsing: credential)
            try jwt.requireAlgorithm("HS256")
            guard jwt.signature.count == SHA256.byteCount,
                HMAC<SHA256>.isValidAuthenticationCode(jwt.signature, authenticating: jwt.signingInput, using: secret.key)
            else {
                throw JWT.invalid("signature does not match")
            }
            let claims = jwt.claims
            try ClaimChecks.checkSubject(claims)
            let exp = try ClaimChecks.requiredNumericDate(claims, "exp")
            let iat = try ClaimChecks.numericDate(claims, "iat")
            let nbf = try ClaimChecks.numericDate(claims, "nbf")
            try ClaimChecks.checkNotExpired(exp: exp, now: now)
            if let nbf {
                try ClaimChecks.checkNotInFuture(nbf, name: "nbf", what: "not valid before", now: now, skewSeconds: clockSkewSeconds)
            }
            if let iat {
                try ClaimChecks.checkNotInFuture(iat, name: "iat", what: "issued", now: now, skewSeconds: clockSkewSeconds)
            }
            return ClaimChecks.credentials(from: claims)
        }
    }
}

/// Mints HS256 tokens for development and tests (`presence-client token --uid alice --secret-file F
/// [--claim key=value] [--ttl 1h]`).
///
/// Claims follow the Firebase ID-token layout, so rules see the same `auth` shape as in production:
/// `{sub, user_id, iat, exp, auth_time, firebase: {sign_in_provider: "custom", identities: {}}}`,
/// then the extra claims (which may replace `firebase`, `auth_time`, `user_id` or add anything else,
/// but not `sub`, `iat` or `exp`).
public struct HS256TokenMinter: Sendable {
    /// Claims the minter sets itself and extra claims may not replace.
    public static let reservedClaims: Set<String> = ["sub", "iat", "exp"]

    private let secret: HS256Secret

    public init(secret: HS256Secret) {
        self.secret = secret
    }

    public init(secret: [UInt8]) throws(AuthConfigurationError) {
        self.secret = try HS256Secret(bytes: secret)
    }

    /// - Parameters:
    ///   - uid: becomes `sub`/`user_id` (`auth.uid`); non-empty, at most 128 characters.
    ///   - claims: extra claims, in order (a later one with the same name wins).
    ///   - ttlSeconds: lifetime; `exp = iat + ttlSeconds`. Must be positive.
    ///   - now: the issue time in ms since the epoch; `iat = floor(now / 1000)`.
    public func mint(uid: String, claims extra: [(String, JSON)] = [], ttlSeconds: Int64 = 3600, now: Int64) throws(AuthConfigurationError) -> String {
        guard !uid.isEmpty else { throw AuthConfigurationError("uid must not be empty") }
        guard uid.count <= ClaimChecks.maxSubjectLength else {
            throw AuthConfigurationError("uid must be at most \(ClaimChecks.maxSubjectLength) characters")
        }
        guard ttlSeconds > 0, ttlSeconds <= 10 * 365 * 24 * 3600 else {
            throw AuthConfigurationError("ttl must be between 1 second and 10 years")
        }
        guard now >= 0, now <= Int64(ClaimChecks.maxNumericDate / 2) else {
            throw AuthConfigurationError("now is out of range")
        }
        if let reserved = extra.first(where: { HS256TokenMinter.reservedClaims.contains($0.0) }) {
            throw AuthConfigurationError("claim \(reserved.0) is set by the minter and cannot be overridden")
        }
        let iat = now / 1000
        var members: [(String, JSON)] = [
            ("sub", .string(uid)),
            ("user_id", .string(uid)),
            ("iat", .number(Double(iat))),
            ("exp", .number(Double(iat + ttlSeconds))),
            ("auth_time", .number(Double(iat))),
            ("firebase", .object([("sign_in_provider", "custom"), ("identities", .object([]))])),
        ]
        for (key, value) in extra {
            members.removeAll { $0.0 == key }
            members.append((key, value))
        }
        let header: JSON = .object([("alg", "HS256"), ("typ", "JWT")])
        let input = JWT.signingInput(header: header, claims: .object(members))
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: secret.key)
        return JWT.assemble(signingInput: input, signature: Array(mac))
    }

    /// Parses a `--claim key=value` argument. The value is read as JSON when it is valid JSON
    /// (`admin=true`, `level=3`, `roles=["a","b"]`, `name="Al"`), otherwise as a plain string (`team=red`).
    public static func parseClaim(_ argument: String) throws(AuthConfigurationError) -> (String, JSON) {
        guard let eq = argument.firstIndex(of: "=") else {
            throw AuthConfigurationError("claim \(JWT.quoted(argument)) must look like key=value")
        }
        let key = String(argument[..<eq])
        let raw = String(argument[argument.index(after: eq)...])
        guard !key.isEmpty else { throw AuthConfigurationError("claim \(JWT.quoted(argument)) has an empty key") }
        if let json = try? JSONParser.parse(raw) { return (key, json) }
        return (key, .string(raw))
    }

    /// Parses a `--ttl` value: a positive whole number with an optional unit `s`, `m`, `h` or `d`
    /// (`3600`, `90s`, `30m`, `1h`, `7d`). Returns seconds.
    public static func parseTTL(_ text: String) throws(AuthConfigurationError) -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var multiplier: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            multiplier = unit
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int64(digits), value > 0 else {
            throw AuthConfigurationError("ttl \(JWT.quoted(text)) must be a positive number with an optional unit s, m, h or d (e.g. 1h)")
        }
        let (seconds, overflow) = value.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw AuthConfigurationError("ttl \(JWT.quoted(text)) is too large") }
        return seconds
    }
}
