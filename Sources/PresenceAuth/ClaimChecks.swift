import PresenceCore

/// Time and subject checks shared by the verifiers. Times are compared in milliseconds.
///
/// Clock skew: `exp` is checked strictly (a token is expired once `now >= exp`), so the verdict agrees
/// with `Credentials.user(expiresAt:)`, which the server uses to push `expired_token` on a live
/// connection. The skew allowance applies only to claims that must not lie in the future (`iat`,
/// `nbf`, `auth_time`), which an issuer whose clock runs slightly ahead of ours would otherwise trip.
enum ClaimChecks {
    /// Firebase caps uids at 128 characters.
    static let maxSubjectLength = 128
    /// NumericDate claims beyond this (about the year 318,000) are refused, so converting them to
    /// Int64 milliseconds can never overflow.
    static let maxNumericDate: Double = 1e13

    /// A NumericDate claim (seconds since the epoch, possibly fractional), or nil when absent.
    /// Present but not a finite, non-negative, sane number → invalid.
    static func numericDate(_ claims: JSON, _ name: String) throws(AuthError) -> Double? {
        guard let value = claims[name] else { return nil }
        guard let seconds = value.numberValue, seconds.isFinite, seconds >= 0, seconds <= maxNumericDate else {
            throw JWT.invalid("\(name) claim is not a valid NumericDate")
        }
        return seconds
    }

    static func requiredNumericDate(_ claims: JSON, _ name: String) throws(AuthError) -> Double {
        guard let seconds = try numericDate(claims, name) else {
            throw JWT.invalid("missing \(name) claim")
        }
        return seconds
    }

    /// `exp`: the token is expired once `now >= exp` (no skew; see the type's comment).
    static func checkNotExpired(exp: Double, now: Int64) throws(AuthError) {
        if Double(now) >= exp * 1000 {
            throw AuthError.expiredToken("Auth token is expired.")
        }
    }

    /// A claim that must not be in the future by more than the skew allowance.
    static func checkNotInFuture(_ seconds: Double, name: String, what: String, now: Int64, skewSeconds: Int64) throws(AuthError) {
        if seconds * 1000 > Double(now) + Double(skewSeconds) * 1000 {
            throw JWT.invalid("\(name) claim is in the future (\(what) more than \(skewSeconds) s from now)")
        }
    }

    /// `sub` must be a non-empty string of at most 128 characters; it becomes `auth.uid`.
    static func checkSubject(_ claims: JSON) throws(AuthError) {
        guard let sub = claims["sub"] else { throw JWT.invalid("missing sub claim") }
        guard let uid = sub.stringValue else { throw JWT.invalid("sub claim is not a string") }
        guard !uid.isEmpty else { throw JWT.invalid("sub claim is empty") }
        guard uid.count <= maxSubjectLength else {
            throw JWT.invalid("sub claim is longer than \(maxSubjectLength) characters")
        }
    }

    /// Builds the credentials once every check has passed.
    static func credentials(from claims: JSON) -> Result<Credentials, AuthError> {
        FirebaseClaims.credentials(from: claims)
    }
}

/// Runs a throwing check and turns it into the `TokenVerifier` result shape.
@inline(__always)
func authResult(_ body: () throws(AuthError) -> Result<Credentials, AuthError>) -> Result<Credentials, AuthError> {
    do { return try body() } catch { return .failure(error) }
}
