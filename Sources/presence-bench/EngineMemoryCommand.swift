import ArgumentParser
import Foundation
import PresenceCore

/// `presence-bench engine-memory`: the memory the engine alone holds per connection that opens,
/// authenticates and listens to its own presence node (`--steps` 1, 2, 3 stop earlier), as the
/// process's resident size before and after, in process (no sockets, no lws).
struct EngineMemoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "engine-memory", abstract: "Resident bytes the engine holds per connection (in process).")

    @Option(help: "Connections.")
    var count = 20_000

    @Option(help: "1: open only, 2: and authenticate, 3: and listen.")
    var steps = 3

    struct Verifier: TokenVerifier {
        func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
            .success(.user(auth: .object([("uid", .string(credential)), ("provider", "custom"),
                                          ("token", .object([("sub", .string(credential)), ("firebase", .object([("sign_in_provider", "custom")]))]))]),
                           expiresAt: nil))
        }
    }

    /// Resident bytes of this process (/proc/self/statm).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * 4096 : 0
    }

    func run() throws {
        let engine = Engine(verifier: Verifier(), policy: OpenAccessPolicy(), makeSessionID: { UUID().uuidString })
        let now: Int64 = 1_800_000_000_000
        engine.open(ConnectionID(999_999), namespace: "bench", lastSession: nil, host: "h", now: now)
        _ = engine.drainEffects()
        let before = Self.residentBytes()
        for index in 0..<count {
            let id = ConnectionID(UInt64(index + 1))
            let uid = "user\(index)"
            engine.open(id, namespace: "bench", lastSession: nil, host: "h", now: now)
            if steps > 1 { engine.handle(NumberedRequest(number: 1, request: .auth(credential: uid, authVariable: nil, noAuth: false)), from: id, now: now) }
            if steps > 2 { engine.handle(NumberedRequest(number: 2, request: .listen(path: Path(validated: ["users", uid, "presence"]), query: nil, tag: nil)), from: id, now: now) }
            _ = engine.drainEffects()
        }
        let after = Self.residentBytes()
        print("{\"count\":\(count),\"engine_heap_bytes_per_connection\":\(Double(Int(after) - Int(before)) / Double(count))}")
    }
}
