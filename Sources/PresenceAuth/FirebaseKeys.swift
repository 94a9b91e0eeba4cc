import CryptoExtras
import Foundation
import PresenceCore
import X509

/// The RSA public keys that Firebase ID tokens are checked against, by key id (`kid`).
///
/// Loaded offline from a local file in either of Google's two publications of the same keys:
/// - the X.509 certificate map (`https://www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com`):
///   `{"<kid>": "-----BEGIN CERTIFICATE-----\n…", …}`;
/// - a JWKS (`https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com`):
///   `{"keys": [{"kty": "RSA", "kid": "…", "n": "…", "e": "…", "alg": "RS256", "use": "sig"}, …]}`.
///
/// Keys must be RSA and at least 2048 bits. Certificate validity dates are not checked (as in the
/// Firebase Admin SDKs); refreshing the file when Google rotates keys is the operator's job.
public struct FirebaseKeys: Sendable {
    public let keys: [String: _RSA.Signing.PublicKey]

    public init(_ keys: [String: _RSA.Signing.PublicKey]) {
        self.keys = keys
    }

    public var keyIDs: [String] { keys.keys.sorted() }

    public subscript(kid: String) -> _RSA.Signing.PublicKey? { keys[kid] }

    /// Google's `{kid: PEM certificate}` map.
    public static func load(fromCertificateMapJSON text: String) throws(AuthConfigurationError) -> FirebaseKeys {
        try fromCertificateMap(parse(text))
    }

    /// A JSON Web Key Set. Keys whose `kty` is not RSA, or whose `use`/`alg` say they are not RS256
    /// signing keys, are skipped; at least one usable key must remain.
    public static func load(fromJWKS text: String) throws(AuthConfigurationError) -> FirebaseKeys {
        try fromJWKS(parse(text))
    }

    /// Either form, told apart by shape: an object with a `keys` array is a JWKS, otherwise a
    /// certificate map.
    public static func load(fromJSON text: String) throws(AuthConfigurationError) -> FirebaseKeys {
        let json = try parse(text)
        if case .array = json["keys"] { return try fromJWKS(json) }
        return try fromCertificateMap(json)
    }

    /// Reads a key file (either form).
    public static func load(fromFile path: String) throws(AuthConfigurationError) -> FirebaseKeys {
        let bytes = try readFile(path, what: "Firebase public keys")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AuthConfigurationError("Firebase public keys file \(path) is not UTF-8 text")
        }
        do { return try load(fromJSON: text) } catch {
            throw AuthConfigurationError("Firebase public keys file \(path): \(error.message)")
        }
    }

    // MARK: - Parsing

    private static func parse(_ text: String) throws(AuthConfigurationError) -> JSON {
        do { return try JSONParser.parse(text) } catch {
            throw AuthConfigurationError("not valid JSON: \(error.description)")
        }
    }

    private static func fromCertificateMap(_ json: JSON) throws(AuthConfigurationError) -> FirebaseKeys {
        guard let members = json.objectMembers else {
            throw AuthConfigurationError("expected a JSON object mapping key ids to PEM certificates, or a JWKS")
        }
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for (kid, value) in members {
            guard !kid.isEmpty else { throw AuthConfigurationError("empty key id") }
            guard keys[kid] == nil else { throw AuthConfigurationError("key id \(kid) appears twice") }
            guard let pem = value.stringValue else {
                throw AuthConfigurationError("key \(kid): expected a PEM certificate string")
            }
            let certificate: Certificate
            do { certificate = try Certificate(pemEncoded: pem) } catch {
                throw AuthConfigurationError("key \(kid): not a PEM X.509 certificate (\(error))")
            }
            guard let key = _RSA.Signing.PublicKey(certificate.publicKey) else {
                throw AuthConfigurationError("key \(kid): the certificate's key is not an RSA key")
            }
            guard key.keySizeInBits >= 2048 else {
                throw AuthConfigurationError("key \(kid): RSA key is shorter than 2048 bits")
            }
            keys[kid] = key
        }
        guard !keys.isEmpty else { throw AuthConfigurationError("no keys found") }
        return FirebaseKeys(keys)
    }

    private static func fromJWKS(_ json: JSON) throws(AuthConfigurationError) -> FirebaseKeys {
        guard case .array(let entries) = json["keys"] else {
            throw AuthConfigurationError("JWKS has no keys array")
        }
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for (index, entry) in entries.enumerated() {
            guard case .object = entry else { throw AuthConfigurationError("JWKS key #\(index) is not an object") }
            guard entry["kty"]?.stringValue == "RSA" else { continue }
            if let use = entry["use"], use.stringValue != "sig" { continue }
            if let alg = entry["alg"], alg.stringValue != "RS256" { continue }
            guard let kid = entry["kid"]?.stringValue, !kid.isEmpty else {
                throw AuthConfigurationError("JWKS key #\(index) has no kid")
            }
            guard keys[kid] == nil else { throw AuthConfigurationError("key id \(kid) appears twice") }
            guard let nText = entry["n"]?.stringValue, let n = strictBase64URL(nText), !n.isEmpty,
                let eText = entry["e"]?.stringValue, let e = strictBase64URL(eText), !e.isEmpty
            else {
                throw AuthConfigurationError("JWKS key \(kid): n and e must be base64url strings")
            }
            let key: _RSA.Signing.PublicKey
            do { key = try _RSA.Signing.PublicKey(n: n, e: e) } catch {
                throw AuthConfigurationError("JWKS key \(kid): not a usable RSA public key of at least 2048 bits (\(error))")
            }
            keys[kid] = key
        }
        guard !keys.isEmpty else { throw AuthConfigurationError("JWKS has no RSA RS256 signing keys") }
        return FirebaseKeys(keys)
    }

    /// base64url with or without padding, URL-safe alphabet only.
    private static func strictBase64URL(_ text: String) -> [UInt8]? {
        var body = Substring(text)
        while body.last == "=" { body = body.dropLast() }
        guard body.utf8.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }), body.utf8.count % 4 != 1 else { return nil }
        return Base64URL.decode(body)
    }
}
