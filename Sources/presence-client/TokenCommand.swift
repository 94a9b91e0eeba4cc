import ArgumentParser
import PresenceAuth
import PresenceCore

#if canImport(Glibc)
import Glibc
#endif

/// `presence-client token`: mints an HS256 token for a server running `--auth hs256`.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint a development token (HS256) for a server started with --auth hs256.",
        discussion: """
            Examples:
              presence-client token --uid alice --secret-file secret.txt
              presence-client token --uid bob --secret-file secret.txt --ttl 30m --claim subscription=lite --claim created_at=1700000000000
            """
    )

    @Option(help: "The user id (the token's sub claim).")
    var uid: String

    @Option(help: "File holding the server's shared secret (at least 32 bytes).")
    var secretFile: String

    @Option(help: "An extra claim as key=value; the value is read as JSON when it parses, else as a string. Repeatable.")
    var claim: [String] = []

    @Option(help: "Lifetime: seconds, or a number with s, m, h or d.")
    var ttl = "1h"

    func run() throws {
        do {
            let minter = HS256TokenMinter(secret: try HS256Secret.load(fromFile: secretFile))
            var claims: [(String, PresenceCore.JSON)] = []
            for item in claim { claims.append(try HS256TokenMinter.parseClaim(item)) }
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let token = try minter.mint(uid: uid, claims: claims, ttlSeconds: try HS256TokenMinter.parseTTL(ttl),
                                        now: Int64(now.tv_sec) * 1000)
            print(token)
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
