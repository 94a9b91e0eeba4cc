import ArgumentParser
import Foundation
import PresenceAuth
import PresenceClient
import PresenceCore

/// `--server`, `--ns` and the auth options shared by every command that talks to a server.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The server, ws://host:port or wss://host:port (TLS).")
    var server = "ws://127.0.0.1:9000"

    @Option(help: "TLS: a PEM file of certificate authorities to trust (for a private CA); default: the system's.")
    var caFile: String?

    @Flag(help: "TLS: accept any server certificate (self-signed, expired, other host). Development only.")
    var insecureSkipVerify = false

    @Option(help: "The database (namespace); empty means the server's default database.")
    var ns = ""

    @Option(help: "The credential to authenticate with (a JWT, or owner for admin in emulator mode).")
    var token: String?

    @Option(help: "A file holding the credential.")
    var tokenFile: String?

    @Option(help: "Mint an HS256 token for --uid with this shared secret (servers running --auth hs256).")
    var secretFile: String?

    @Option(help: "The user id. Alone, it sends an unsigned token for that uid (emulator auth mode, like mockUserToken).")
    var uid: String?

    @Flag(help: "Authenticate as the emulator's admin (the credential owner).")
    var admin = false

    @Option(help: ArgumentHelp(
        "The largest message taken from the server or sent to it, in bytes: a larger one from the server ends the command with an error, a larger request is refused before it is sent. Default: \(ClientConfiguration.defaultMaxMessageBytes) from the server, \(ClientConfiguration.defaultMaxRequestBytes) to it (a presence server's default --max-message-bytes; a server that closes with 1009 and states a smaller limit lowers it).",
        valueName: "bytes"))
    var maxMessageBytes: Int?

    @Option(help: ArgumentHelp(
        "An extra token claim as key=value for the token made for --uid (unsigned, or minted with --secret-file); the value is read as JSON when it parses, else as a string. Repeatable.",
        valueName: "key=value"))
    var claim: [String] = []

    func validate() throws {
        if WebSocketURL(Self.normalizedServer(server)) == nil {
            throw ValidationError("--server must look like ws://host:port or wss://host:port (got \(server))")
        }
        if let caFile, access(caFile, R_OK) != 0 { throw ValidationError("cannot read --ca-file \(caFile)") }
        if let maxMessageBytes, !(1024...ClientConfiguration.largestMessageBytes).contains(maxMessageBytes) {
            throw ValidationError("--max-message-bytes must be between 1024 and \(ClientConfiguration.largestMessageBytes)")
        }
        let sources = [token != nil, tokenFile != nil, secretFile != nil, admin].filter { $0 }.count
        if sources > 1 {
            throw ValidationError("use only one of --token, --token-file, --secret-file and --admin")
        }
        if secretFile != nil, uid == nil {
            throw ValidationError("--secret-file needs --uid (the user to mint a token for)")
        }
        if let uid, !Path.isValidKey(uid) {
            throw ValidationError("--uid \(uid) is not a valid key (no . $ # [ ] / or control characters)")
        }
        if !claim.isEmpty {
            if uid == nil || token != nil || tokenFile != nil || admin {
                throw ValidationError("--claim applies to the token made for --uid (alone or with --secret-file)")
            }
            _ = try claims()
        }
    }

    /// The `--claim` arguments, parsed.
    func claims() throws -> [(String, JSON)] {
        var out: [(String, JSON)] = []
        for item in claim {
            do {
                let parsed = try HS256TokenMinter.parseClaim(item)
                if parsed.0 == "sub" || parsed.0 == "user_id" {
                    throw ValidationError("--claim \(parsed.0) is set from --uid")
                }
                out.append(parsed)
            } catch let error as ValidationError {
                throw error
            } catch {
                throw ValidationError("--claim: \(error)")
            }
        }
        return out
    }

    static func normalizedServer(_ text: String) -> String {
        text.contains("://") ? text : "ws://" + text
    }

    /// The credential to send, or nil for none.
    func credential() throws -> String? {
        if let token { return token }
        if let tokenFile {
            guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
                throw ValidationError("cannot read --token-file \(tokenFile)")
            }
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { throw ValidationError("--token-file \(tokenFile) is empty") }
            return trimmed
        }
        if let secretFile, let uid {
            do {
                let minter = HS256TokenMinter(secret: try HS256Secret.load(fromFile: secretFile))
                return try minter.mint(uid: uid, claims: try claims(), ttlSeconds: 24 * 3600,
                                       now: ClientRuntime.realTimeMilliseconds())
            } catch {
                throw ValidationError("--secret-file: \(error)")
            }
        }
        if admin { return "owner" }
        if let uid { return DevToken.unsigned(uid: uid, claims: try claims()) }
        return nil
    }

    func configuration(failFast: Bool) throws -> ClientConfiguration {
        guard let url = WebSocketURL(Self.normalizedServer(server)) else {
            throw ValidationError("--server must look like ws://host:port (got \(server))")
        }
        var config = ClientConfiguration(server: url, namespace: ns.isEmpty ? nil : ns, credential: try credential())
        config.failFast = failFast
        config.caFile = caFile
        config.insecureSkipVerify = insecureSkipVerify
        // Given, it bounds both directions: the user says what their server takes.
        if let maxMessageBytes {
            config.maxMessageBytes = maxMessageBytes
            config.maxRequestBytes = maxMessageBytes
        }
        return config
    }
}

/// Parses a path argument (`users/alice`, `/users/alice`, `/`).
func parsePath(_ text: String) throws -> Path {
    do {
        return try Path(text)
    } catch {
        throw ValidationError("bad path \(text): \(error)")
    }
}
