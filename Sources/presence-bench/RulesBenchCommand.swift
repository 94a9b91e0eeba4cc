import ArgumentParser
import Foundation
import PresenceCore

/// `presence-bench rules`: security-rule evaluations per second for a rules file, and what the
/// rules add to a write through the engine (in process: no sockets, so only the core is measured).
struct RulesBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Measure rule evaluations per second and the cost rules add to a write (in process)."
    )

    @Option(help: "Rules file.")
    var rules = "rules/presence.rules.json"

    @Option(help: "Users in the tree (users/<uid>/presence).")
    var users = 100_000

    @Option(help: "Evaluations per measurement.")
    var iterations = 200_000

    func run() throws {
        let text = try String(contentsOfFile: rules, encoding: .utf8)
        let ruleSet = try RuleSet.load(text: text, source: rules)
        let now: Int64 = 1_800_000_000_000
        var root = Node.null
        for i in 0..<users {
            let presence = Node.branch(["online": Node(.bool(i % 2 == 0)), "lastSeen": Node(.number(Double(now - 1000)))], priority: nil)
            root.set(presence, at: Path(validated: ["users", "user\(i)", "presence"]))
        }
        let auth: PresenceCore.JSON = .object([("uid", "user42"), ("provider", "custom"), ("token", .object([("sub", "user42")]))])
        let own = Path(validated: ["users", "user42", "presence"])
        let value = Node.branch(["online": Node(.bool(true)), "lastSeen": Node(.number(Double(now)))], priority: nil)
        let paths = (0..<1024).map { Path(validated: ["users", "user\($0 * 97 % users)", "presence"]) }

        var allowed = 0
        let readSeconds = measure {
            for i in 0..<iterations where ruleSet.canRead(paths[i & 1023], root: root, auth: auth, now: now).allowed { allowed += 1 }
        }
        let writeSeconds = measure {
            for _ in 0..<iterations where ruleSet.canWrite([(own, value)], root: root, auth: auth, now: now).allowed { allowed += 1 }
        }
        let deniedSeconds = measure {
            for i in 0..<iterations where ruleSet.canWrite([(paths[i & 1023], value)], root: root, auth: auth, now: now).allowed { allowed += 1 }
        }
        // As a replicated node proposes: the same allowed write, recording its read set.
        var readSet = ReadSet()
        let recordingSeconds = measure {
            for _ in 0..<iterations where ruleSet.canWrite([(own, value)], root: root, auth: auth, now: now, recording: &readSet).allowed {
                allowed += 1
            }
        }

        let writes = min(iterations, 100_000)
        let openMicros = engineWriteMicros(policy: OpenAccessPolicy(), root: root, writes: writes, now: now)
        let rulesMicros = engineWriteMicros(policy: ruleSet, root: root, writes: writes, now: now)
        let result: [(String, String)] = [
            ("scenario", "\"rules\""),
            ("rules_file", "\"\(rules)\""),
            ("users_in_tree", "\(users)"),
            ("read_checks_per_s", String(format: "%.0f", Double(iterations) / readSeconds)),
            ("write_checks_per_s_allowed", String(format: "%.0f", Double(iterations) / writeSeconds)),
            ("write_checks_per_s_denied", String(format: "%.0f", Double(iterations) / deniedSeconds)),
            ("write_checks_per_s_recording", String(format: "%.0f", Double(iterations) / recordingSeconds)),
            ("recorded_reads", "\(readSet.count)"),
            ("engine_write_us_open_rules", String(format: "%.2f", openMicros)),
            ("engine_write_us_presence_rules", String(format: "%.2f", rulesMicros)),
            ("rules_cost_per_write_us", String(format: "%.2f", rulesMicros - openMicros)),
            ("checks_allowed", "\(allowed)"),
        ]
        print("{" + result.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    }

    /// Microseconds per `p` request through `Engine.handle`, the writer also listening to its node.
    func engineWriteMicros(policy: any AccessPolicy, root: Node, writes: Int, now: Int64) -> Double {
        struct Verifier: TokenVerifier {
            func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
                .success(.user(auth: .object([("uid", .string(credential)), ("provider", "custom")]), expiresAt: nil))
            }
        }
        let engine = Engine(verifier: Verifier(), policy: policy, makeSessionID: { "bench" })
        let id = ConnectionID(1)
        engine.open(id, namespace: "bench", lastSession: nil, host: "bench", now: now)
        engine.handle(NumberedRequest(number: 1, request: .auth(credential: "user42", authVariable: nil, noAuth: false)), from: id, now: now)
        let path = Path(validated: ["users", "user42", "presence"])
        engine.handle(NumberedRequest(number: 2, request: .listen(path: path, query: nil, tag: nil)), from: id, now: now)
        _ = engine.drainEffects()
        let data: PresenceCore.JSON = .object([("online", true), ("lastSeen", .object([(".sv", "timestamp")]))])
        let seconds = measure {
            for i in 0..<writes {
                engine.handle(NumberedRequest(number: 3 + i, request: .put(path: path, data: data, hash: nil)), from: id, now: now)
                _ = engine.drainEffects()
            }
        }
        return seconds * 1_000_000 / Double(writes)
    }

    func measure(_ body: () -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
