/// What a connection or request is allowed to do, once its token has been checked.
public enum Credentials: Sendable, Equatable {
    /// No token: rules run with `auth == null`.
    case unauthenticated
    /// The admin credential: rules are bypassed.
    case admin
    /// Rules run with this `auth` variable (`{uid, provider, token}`), optionally until `expires` (ms).
    case user(auth: JSON, expiresAt: Int64?)

    /// The rules `auth` variable, or nil when the rules see `auth == null`.
    public var rulesAuth: JSON? {
        if case .user(let auth, _) = self { return auth }
        return nil
    }

    public var isAdmin: Bool { self == .admin }

    public var uid: String? { rulesAuth?["uid"]?.stringValue }
}

/// Why a credential was refused. Mapped to `invalid_token` / `expired_token` on the wire.
public enum AuthError: Error, Equatable, Sendable {
    case invalidToken(String)
    case expiredToken(String)
}

/// Checks a credential sent with `auth`/`gauth` (or REST `auth=`) and yields the credentials.
public protocol TokenVerifier: Sendable {
    func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError>
}
