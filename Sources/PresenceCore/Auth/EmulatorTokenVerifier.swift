/// The Firebase emulator's auth (§5.2): the literal `owner` is admin; an unsigned JWT (`alg: none`)
/// is decoded without checking a signature or expiry, as the emulator does with `mockUserToken`.
public struct EmulatorTokenVerifier: TokenVerifier {
    public init() {}

    public func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
        if credential == "owner" { return .success(.admin) }
        // Tokens are ASCII: split the bytes (a Character split costs ~80k instructions per token).
        let parts: [Substring] = credential.utf8.allSatisfy({ $0 < 0x80 })
            ? credential.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map { Substring($0) }
            : credential.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(.invalidToken("Could not parse auth token: not a JWT"))
        }
        guard let headerBytes = Base64URL.decode(parts[0]),
            let header = try? JSONParser.parse(bytes: headerBytes),
            let payloadBytes = Base64URL.decode(parts[1]),
            let claims = try? JSONParser.parse(bytes: payloadBytes),
            case .object = claims
        else {
            return .failure(.invalidToken("Could not parse auth token: malformed JWT"))
        }
        guard header["alg"]?.stringValue == "none" else {
            return .failure(.invalidToken("Could not parse auth token: emulator mode accepts only unsigned tokens (alg none) or owner"))
        }
        // The emulator never enforces expiry: mockUserToken's exp is 3600 (1970).
        return FirebaseClaims.credentials(from: claims).map { credentials in
            guard case .user(let auth, _) = credentials else { return credentials }
            return .user(auth: auth, expiresAt: nil)
        }
    }
}

/// Builds the rules `auth` variable from ID-token claims as Firebase does (§5.2).
public enum FirebaseClaims {
    public static func credentials(from claims: JSON) -> Result<Credentials, AuthError> {
        // Legacy custom tokens carry the auth object in `d`.
        if let legacy = claims["d"], case .object = legacy, claims["sub"] == nil {
            // The auth object must name its user: without a uid it would pass `auth != null`
            // as nobody in particular (found by fuzzing).
            guard let uid = legacy["uid"]?.stringValue, !uid.isEmpty else {
                return .failure(.invalidToken("Could not parse auth token: the d claim has no uid"))
            }
            return .success(.user(auth: legacy.compacted(), expiresAt: milliseconds(claims["exp"])))
        }
        guard let uid = claims["sub"]?.stringValue ?? claims["user_id"]?.stringValue ?? claims["uid"]?.stringValue, !uid.isEmpty else {
            return .failure(.invalidToken("Could not parse auth token: no sub claim"))
        }
        let provider = claims["firebase"]?["sign_in_provider"]?.stringValue ?? claims["provider"]?.stringValue ?? "custom"
        let auth: JSON = .object([("uid", .string(uid)), ("provider", .string(provider)), ("token", claims.compacted())])
        return .success(.user(auth: auth, expiresAt: milliseconds(claims["exp"])))
    }

    /// A NumericDate claim (seconds) as milliseconds; nil when absent or not a sane time.
    static func milliseconds(_ claim: JSON?) -> Int64? {
        guard let seconds = claim?.numberValue, seconds.isFinite, seconds >= 0, seconds < 1e13 else { return nil }
        return Int64(seconds * 1000)
    }
}

extension JSON {
    /// The same value in less memory, for claims a connection keeps for its lifetime: object and
    /// array storage trimmed to its count (the parser grows them by doubling), and the standard
    /// Firebase claim names longer than a small string (15 bytes) shared instead of allocated per
    /// token.
    func compacted() -> JSON {
        switch self {
        case .object(let members):
            var trimmed: [(String, JSON)] = []
            trimmed.reserveCapacity(members.count)
            for (key, value) in members { trimmed.append((JSON.sharedClaimName(key), value.compacted())) }
            return .object(trimmed)
        case .array(let elements):
            var trimmed: [JSON] = []
            trimmed.reserveCapacity(elements.count)
            for element in elements { trimmed.append(element.compacted()) }
            return .array(trimmed)
        default:
            return self
        }
    }

    private static func sharedClaimName(_ key: String) -> String {
        switch key {
        case "sign_in_provider": return "sign_in_provider"
        case "sign_in_second_factor": return "sign_in_second_factor"
        case "second_factor_identifier": return "second_factor_identifier"
        case "sign_in_attributes": return "sign_in_attributes"
        default: return key
        }
    }
}

/// base64url without padding, as JWTs use it.
public enum Base64URL {
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var bits: UInt32 = 0
        var bitCount = 0
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        for byte in text.utf8 {
            let value: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "-"), UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "_"), UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="): continue
            default: return nil
            }
            bits = bits << 6 | value
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                out.append(UInt8((bits >> UInt32(bitCount)) & 0xFF))
            }
        }
        return out
    }

    public static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index + 2 < bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let n = UInt32(bytes[index]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
        } else if rest == 2 {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
