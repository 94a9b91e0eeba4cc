import Crypto
import Foundation

/// The operator's admin credential (`--admin-token-file`): a credential equal to it gets `.admin`
/// (rules bypassed), over the wire protocol (`auth`/`gauth`) and the REST API (`auth=`).
///
/// Only a SHA-256 digest of the token is kept, and matching compares digests with swift-crypto's
/// constant-time digest equality, so neither the contents nor the length leak through timing.
public struct AdminToken: Sendable {
    /// The shortest admin token accepted.
    public static let minimumLength = 16

    private let digest: SHA256.Digest

    /// `token` is used exactly as given (no trimming); it must be at least 16 characters and must not
    /// contain whitespace or control characters.
    public init(_ token: String) throws(AuthConfigurationError) {
        guard token.count >= AdminToken.minimumLength else {
            throw AuthConfigurationError("admin token must be at least \(AdminToken.minimumLength) characters (got \(token.count))")
        }
        guard !token.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) else {
            throw AuthConfigurationError("admin token must not contain whitespace or control characters")
        }
        self.digest = SHA256.hash(data: Array(token.utf8))
    }

    /// Reads the admin token from a UTF-8 text file; leading and trailing whitespace (such as the final
    /// newline) is trimmed.
    public static func load(fromFile path: String) throws(AuthConfigurationError) -> AdminToken {
        let bytes = try readFile(path, what: "admin token")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AuthConfigurationError("admin token file \(path) is not UTF-8 text")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        do { return try AdminToken(trimmed) } catch {
            throw AuthConfigurationError("admin token file \(path): \(error.message)")
        }
    }

    /// Whether `credential` is exactly this admin token (constant time).
    public func matches(_ credential: String) -> Bool {
        SHA256.hash(data: Array(credential.utf8)) == digest
    }
}

/// Reads a whole file, with an operator-facing error.
func readFile(_ path: String, what: String) throws(AuthConfigurationError) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw AuthConfigurationError("cannot read \(what) file \(path)")
    }
    return Array(data)
}
