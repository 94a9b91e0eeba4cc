import Crypto
import CryptoExtras
import PresenceAuth
import PresenceCore

/// Token parsing: the input is a credential as a client sends it (`auth` `cred`, REST `auth=`).
/// It goes through the emulator verifier (unsigned tokens), JWT parsing, the HS256 verifier and
/// the Firebase (RS256) verifier. Then the input read as a JSON object of extra claims is minted
/// into an HS256 token and verified.
///
/// Invariants: nothing traps; an HS256 token is accepted only when its MAC is right (checked
/// again independently) and it is unexpired with a valid `sub`; a Firebase token (which no input
/// can sign) is never accepted; a minted token without `nbf` verifies, as its uid and claims;
/// base64url decoding then encoding gives canonical text back.
enum TokenFuzzing {
    static let target = FuzzTarget(
        name: "token",
        summary: "credential text → emulator, JWT, HS256, Firebase verifiers; HS256 accepts only valid MACs, Firebase never; mint→verify round trip",
        run: run)

    static let secret = Array("fuzzing-secret-that-is-at-least-32-bytes".utf8)
    // swiftlint:disable force_try
    static let hs256 = try! HS256TokenVerifier(secret: secret)
    static let minter = try! HS256TokenMinter(secret: secret)
    static let firebase = try! FirebaseTokenVerifier(
        projectID: "fuzz-project", keys: ["k1": try! _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey])
    // swiftlint:enable force_try

    static func run(_ bytes: [UInt8]) {
        let credential = String(decoding: bytes, as: UTF8.self)
        if case .success(let credentials) = EmulatorTokenVerifier().verify(credential, now: FuzzWorld.now), !credentials.isAdmin {
            invariant(credentials.uid?.isEmpty == false, "the emulator accepted a token without a uid")
        }
        if let jwt = try? JWT(parsing: credential) {
            invariant(credential.utf8.starts(with: jwt.signingInput), "the signing input is not the token's first two parts")
        }
        if case .success(let credentials) = hs256.verify(credential, now: FuzzWorld.now) {
            checkAcceptedHS256(credential, credentials)
        }
        invariant((try? firebase.verify(credential, now: FuzzWorld.now).get()) == nil, "a Firebase token nobody signed was accepted")
        if let decoded = Base64URL.decode(credential) {
            invariant(Base64URL.decode(Base64URL.encode(decoded)) == decoded, "base64url encode→decode changed the bytes")
        }
        mintAndVerify(bytes)
    }

    static func checkAcceptedHS256(_ credential: String, _ credentials: Credentials) {
        guard let jwt = try? JWT(parsing: credential) else { return invariant(false, "HS256 accepted a token that does not parse") }
        invariant(jwt.algorithm == "HS256", "HS256 accepted alg \(jwt.algorithm ?? "nil")")
        let mac = HMAC<SHA256>.authenticationCode(for: jwt.signingInput, using: SymmetricKey(data: secret))
        invariant(Array(mac) == jwt.signature, "HS256 accepted a token whose MAC is wrong")
        guard let exp = jwt.claims["exp"]?.numberValue else { return invariant(false, "HS256 accepted a token without exp") }
        invariant(exp * 1000 > Double(FuzzWorld.now), "HS256 accepted an expired token")
        invariant(credentials.uid == jwt.claims["sub"]?.stringValue, "auth.uid is not the sub claim")
    }

    /// The input as extra claims: a minted token verifies unless a claim makes it invalid.
    static func mintAndVerify(_ bytes: [UInt8]) {
        guard case .object(let members)? = try? JSONParser.parse(bytes: bytes) else { return }
        let extra = members.filter { !HS256TokenMinter.reservedClaims.contains($0.0) }
        guard let token = try? minter.mint(uid: "fuzz-user", claims: extra, now: FuzzWorld.now) else { return }
        let result = hs256.verify(token, now: FuzzWorld.now)
        if extra.contains(where: { $0.0 == "nbf" }) { return }
        guard case .success(let credentials) = result else {
            return invariant(false, "a freshly minted token was refused: \(result)")
        }
        invariant(credentials.uid == "fuzz-user", "the minted uid did not come back")
        for (key, value) in Dictionary(extra, uniquingKeysWith: { _, last in last }) {
            invariant(credentials.rulesAuth?["token"]?[key] == value, "claim \(ClientInput.quoted(key)) did not come back")
        }
    }
}
