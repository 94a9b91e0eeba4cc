import PresenceCore

/// A compact-serialised JSON Web Token (RFC 7519), split and decoded but NOT verified.
///
/// Parsing is strict and never traps: the token must be at most `JWT.maxTokenBytes` long, have exactly
/// three dot-separated parts, each part canonical unpadded base64url, and a header and payload that are
/// JSON objects. A header naming `crit` extensions is refused (we understand none of them).
/// Verifiers then check `alg` against the one algorithm they accept (`requireAlgorithm`), so `none`
/// and algorithm confusion (an HS256 token shown to an RS256 verifier, or the reverse) are refused.
public struct JWT: Sendable {
    /// Tokens longer than this (in UTF-8 bytes) are refused before any decoding. Firebase ID tokens are
    /// about 1 KiB, and ones with many custom claims stay well under 8 KiB.
    public static let maxTokenBytes = 8 * 1024

    /// The decoded JOSE header (always a JSON object).
    public let header: JSON
    /// The decoded claims (always a JSON object).
    public let claims: JSON
    /// The bytes the signature covers: the ASCII text `<header part>.<payload part>`.
    public let signingInput: [UInt8]
    /// The decoded signature (empty for unsigned `alg: none` tokens).
    public let signature: [UInt8]

    /// The header's `alg`, if it is a string.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// The header's `kid`, if it is a string.
    public var keyID: String? { header["kid"]?.stringValue }

    /// Splits and decodes `token`. Errors are `.invalidToken` with a reason starting "Invalid token:".
    public init(parsing token: String) throws(AuthError) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw JWT.invalid("empty token") }
        guard utf8.count <= JWT.maxTokenBytes else {
            throw JWT.invalid("token is longer than \(JWT.maxTokenBytes) bytes")
        }
        let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw JWT.invalid("not a JWT (expected 3 dot-separated parts, found \(parts.count))")
        }
        let headerBytes = try JWT.decodePart(parts[0], name: "header")
        let payloadBytes = try JWT.decodePart(parts[1], name: "payload")
        let signatureBytes = try JWT.decodePart(parts[2], name: "signature")

        let header: JSON
        do { header = try JSONParser.parse(bytes: headerBytes) } catch {
            throw JWT.invalid("header is not valid JSON (\(error.reason))")
        }
        guard case .object = header else { throw JWT.invalid("header is not a JSON object") }
        let claims: JSON
        do { claims = try JSONParser.parse(bytes: payloadBytes) } catch {
            throw JWT.invalid("payload is not valid JSON (\(error.reason))")
        }
        guard case .object = claims else { throw JWT.invalid("payload is not a JSON object") }
        if header["crit"] != nil {
            throw JWT.invalid("header has unsupported critical extensions (crit)")
        }

        self.header = header
        self.claims = claims
        self.signingInput = Array(token.utf8[parts[0].startIndex..<parts[1].endIndex])
        self.signature = signatureBytes
    }

    /// Refuses the token unless its header `alg` is exactly `expected` (e.g. "HS256", "RS256").
    /// This is what blocks `alg: none` and algorithm-confusion attacks.
    public func requireAlgorithm(_ expected: String) throws(AuthError) {
        guard let alg = header["alg"] else { throw JWT.invalid("header has no alg") }
        guard let name = alg.stringValue else { throw JWT.invalid("header alg is not a string") }
        guard name == expected else {
            if name.lowercased() == "none" {
                throw JWT.invalid("unsigned tokens (alg none) are not accepted; expected \(expected)")
            }
            throw JWT.invalid("algorithm \(JWT.quoted(name)) is not accepted; expected \(expected)")
        }
    }

    // MARK: - Encoding (for minting tokens and for tests)

    /// `base64url(header) + "." + base64url(claims)`, the text a signature is computed over.
    public static func signingInput(header: JSON, claims: JSON) -> String {
        Base64URL.encode(Array(JSONWriter.string(header).utf8)) + "." + Base64URL.encode(Array(JSONWriter.string(claims).utf8))
    }

    /// Joins a signing input and signature bytes into a compact token.
    public static func assemble(signingInput: String, signature: [UInt8]) -> String {
        signingInput + "." + Base64URL.encode(signature)
    }

    // MARK: - Helpers

    static func invalid(_ detail: String) -> AuthError {
        .invalidToken("Invalid token: \(detail)")
    }

    /// A string for an error message: quoted and cut to 40 characters, so hostile input stays short.
    static func quoted(_ text: String) -> String {
        let cut = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return "\"\(cut)\""
    }

    /// A JSON claim value for an error message: a string quoted, anything else as (cut) JSON.
    static func describe(_ value: JSON) -> String {
        if let text = value.stringValue { return quoted(text) }
        let json = JSONWriter.string(value)
        return json.count > 40 ? String(json.prefix(40)) + "…" : json
    }

    /// Strict base64url: only the URL-safe alphabet, no padding, and canonical (re-encoding gives back
    /// the same text, so there are no stray bits and no alternative spellings of the same bytes).
    private static func decodePart(_ part: Substring.UTF8View, name: String) throws(AuthError) -> [UInt8] {
        for byte in part {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default:
                throw JWT.invalid("\(name) is not base64url")
            }
        }
        let text = String(Substring(part))
        guard let bytes = Base64URL.decode(text), Base64URL.encode(bytes) == text else {
            throw JWT.invalid("\(name) is not canonical base64url")
        }
        return bytes
    }
}
