import ArgumentParser
import Foundation
import PresenceCore
import PresenceStorage

/// `presence-bench abuse`: what one client's hostile pattern costs the engine (in process, no
/// sockets): how the cost of the n-th listen, onDisconnect op or re-auth grows with n, big reads,
/// the online list, tagged queries under a write flood, namespace churn. Wall-clock times are
/// indicative on a shared machine; run under `valgrind --tool=callgrind` for exact counts.
struct AbuseBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "abuse",
        abstract: "Measure the engine under one client's abuse patterns (in process)."
    )

    @Option(help: "listens, ondisconnect, reauth, bigread, online, tagged, tagged-window or namespaces.")
    var scenario: String

    @Option(help: "How many listens, ops, children, users, queries or namespaces.")
    var count = 20_000

    @Option(help: "Re-auths (reauth) or writes (tagged, tagged-window).")
    var repeats = 300

    @Option(help: "ondisconnect: a SQLite data directory to commit each step to (default: none).")
    var dataDir: String?

    static let now: Int64 = 1_800_000_000_000

    struct Verifier: TokenVerifier {
        func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
            .success(.user(auth: .object([("uid", .string(credential)), ("provider", "custom")]), expiresAt: nil))
        }
    }

    /// Reads that depend on `auth` (so a new identity re-checks listens); everything else open.
    static let rules = try! RuleSet.load(text: #"{"rules": {".read": "auth != null", ".write": true}}"#, source: "bench")

    @Option(help: "The read budget (--max-read-bytes) for bigread and online.")
    var maxReadBytes = EngineLimits.default.maxReadBytes

    @Option(help: "tagged-window: distinct queries one connection may hold at one location (default: unlimited).")
    var maxQueriesPerLocation = Int.max

    /// The engine with the per-connection limits raised past `count`, to see the cost grow unbounded.
    func makeEngine() -> Engine {
        let limits = EngineLimits(maxListensPerConnection: .max, maxQueriesPerLocation: maxQueriesPerLocation, maxOnDisconnectOps: .max, maxOnDisconnectBytes: .max,
                                  maxReadBytes: maxReadBytes, maxNamespaces: .max)
        return Engine(configuration: Engine.Configuration(limits: limits), verifier: Verifier(), policy: Self.rules,
                      makeSessionID: { UUID().uuidString })
    }

    /// A connection signed in as `bench` (the rules let signed-in users read).
    static func open(_ engine: Engine, _ id: ConnectionID, _ namespace: String) {
        engine.open(id, namespace: namespace, lastSession: nil, host: "bench", now: now)
        engine.handle(NumberedRequest(number: nil, request: .auth(credential: "bench", authVariable: nil, noAuth: false)), from: id, now: now)
    }

    func run() throws {
        var result: [(String, String)] = [("scenario", "\"\(scenario)\""), ("count", "\(count)")]
        switch scenario {
        case "listens": result += listens()
        case "ondisconnect": result += try onDisconnect()
        case "reauth": result += reauth()
        case "bigread": result += bigRead()
        case "online": result += online()
        case "tagged": result += tagged()
        case "tagged-window": result += taggedWindow()
        case "namespaces": result += namespaces()
        default: throw ValidationError("unknown scenario \(scenario)")
        }
        print("{" + result.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    }

    /// The time per item of the first and the last tenth: equal when the n-th costs O(1).
    func tenths(_ items: Int, _ body: (Int) -> Void) -> [(String, String)] {
        let tenth = max(1, items / 10)
        var first = 0.0, last = 0.0
        let total = Self.measure {
            for index in 0..<items {
                if index < tenth {
                    first += Self.measure { body(index) }
                } else if index >= items - tenth {
                    last += Self.measure { body(index) }
                } else {
                    body(index)
                }
            }
        }
        return [("total_s", Self.format(total)), ("first_tenth_us_each", Self.format(first * 1e6 / Double(tenth))),
                ("last_tenth_us_each", Self.format(last * 1e6 / Double(tenth)))]
    }

    func listens() -> [(String, String)] {
        let engine = makeEngine()
        let id = ConnectionID(1)
        Self.open(engine, id, "bench")
        return tenths(count) { index in
            engine.handle(NumberedRequest(number: index, request: .listen(path: Path(validated: ["x", "k\(index)"]), query: nil, tag: nil)),
                          from: id, now: Self.now)
            _ = engine.drainEffects()
        }
    }

    func onDisconnect() throws -> [(String, String)] {
        let engine = makeEngine()
        let storage = try dataDir.map { try SQLiteStorage(directory: $0, options: .init(durability: .off)) }
        engine.enableJournal()
        let id = ConnectionID(1)
        Self.open(engine, id, "bench")
        var journalled = 0
        var failure: (any Error)?
        let timings = tenths(count) { index in
            let value: PresenceCore.JSON = .object([("online", false), ("lastSeen", .object([(".sv", "timestamp")]))])
            engine.handle(NumberedRequest(number: index, request: .onDisconnectPut(path: Path(validated: ["x", "k\(index)"]), data: value)),
                          from: id, now: Self.now)
            _ = engine.drainEffects()
            if let batch = engine.takeJournal() {
                journalled += batch.mutations.count
                do { try storage?.commit(batch) } catch { failure = error }
            }
        }
        try storage?.close()
        if let failure { throw failure }
        return timings + [("mutations_journalled", "\(journalled)")]
    }

    func reauth() -> [(String, String)] {
        let engine = makeEngine()
        let id = ConnectionID(1)
        Self.open(engine, id, "bench")
        engine.handle(NumberedRequest(number: 0, request: .auth(credential: "alice", authVariable: nil, noAuth: false)), from: id, now: Self.now)
        for index in 0..<count {
            engine.handle(NumberedRequest(number: index, request: .listen(path: Path(validated: ["x", "k\(index)"]), query: nil, tag: nil)),
                          from: id, now: Self.now)
        }
        _ = engine.drainEffects()
        let same = Self.measure {
            for index in 0..<repeats {
                engine.handle(NumberedRequest(number: index, request: .auth(credential: "alice", authVariable: nil, noAuth: false)), from: id, now: Self.now)
                _ = engine.drainEffects()
            }
        }
        let changing = Self.measure {
            for index in 0..<repeats {
                let who = index % 2 == 0 ? "bob" : "alice"
                engine.handle(NumberedRequest(number: index, request: .auth(credential: who, authVariable: nil, noAuth: false)), from: id, now: Self.now)
                _ = engine.drainEffects()
            }
        }
        return [("repeats", "\(repeats)"), ("same_identity_ms_each", Self.format(same * 1e3 / Double(repeats))),
                ("changing_identity_ms_each", Self.format(changing * 1e3 / Double(repeats)))]
    }

    /// A namespace with `count` children of two leaves each, written through the engine.
    func populated(_ engine: Engine, children: Int, collection: String = "items") -> ConnectionID {
        let id = ConnectionID(1)
        Self.open(engine, id, "bench")
        var members: [(String, PresenceCore.JSON)] = []
        for index in 0..<children {
            members.append(("k\(index)", .object([("online", .bool(index % 3 == 0)), ("lastSeen", .number(Double(index)))])))
            if members.count == 5_000 || index == children - 1 {
                let updates = members.map { Request.Update(path: Path(validated: [$0.0, "presence"]), value: $0.1) }
                engine.handle(NumberedRequest(number: nil, request: .merge(path: Path(validated: [collection]), children: updates)), from: id, now: Self.now)
                _ = engine.drainEffects()
                members.removeAll()
            }
        }
        return id
    }

    /// Time of one request and the size of what it produced (its effects' JSON text).
    func timed(_ engine: Engine, _ request: Request, from id: ConnectionID) -> (seconds: Double, bytes: Int, status: String) {
        var bytes = 0
        var status = "ok"
        let seconds = Self.measure {
            engine.handle(NumberedRequest(number: 1, request: request), from: id, now: Self.now)
            for effect in engine.drainEffects() {
                guard case .send(_, let message) = effect else { continue }
                switch message {
                case .reply(_, .success(.node(let node))), .data(_, let node, _): bytes += node.jsonString(exportFormat: true).utf8.count
                case .reply(_, .failure(let error)): status = "\(error)"
                default: break
                }
            }
        }
        return (seconds, bytes, status)
    }

    func bigRead() -> [(String, String)] {
        let engine = makeEngine()
        let id = populated(engine, children: count)
        let items = Path(validated: ["items"])
        var result: [(String, String)] = []
        let limited: PresenceCore.JSON = .object([("l", 3), ("vf", "r"), ("i", "presence/lastSeen")])
        for (name, request) in [("get", Request.get(path: items, query: nil)), ("get_limit_to_last_3", .get(path: items, query: limited)),
                                ("listen_limit_to_last_3", .listen(path: items, query: limited, tag: 7))] {
            let (seconds, bytes, status) = timed(engine, request, from: id)
            result += [("\(name)_ms", Self.format(seconds * 1e3)), ("\(name)_bytes", "\(bytes)"), ("\(name)_status", JSONWriter.string(.string(status)))]
        }
        return result
    }

    func online() -> [(String, String)] {
        let engine = makeEngine()
        let id = populated(engine, children: count, collection: "users")
        let (seconds, bytes, status) = timed(engine, .get(path: Path(validated: ["online-users"]), query: nil), from: id)
        let (again, _, _) = timed(engine, .get(path: Path(validated: ["online-users"]), query: nil), from: id)
        return [("online_users_ms", Self.format(seconds * 1e3)), ("online_users_again_ms", Self.format(again * 1e3)),
                ("bytes", "\(bytes)"), ("status", JSONWriter.string(.string(status)))]
    }

    /// `count` connections with the same tagged query on one user's presence, then writes to it.
    func tagged() -> [(String, String)] {
        let engine = makeEngine()
        let path = Path(validated: ["users", "alice", "presence"])
        let query: PresenceCore.JSON = .object([("l", 5), ("vf", "l")])
        for index in 0..<count {
            let id = ConnectionID(UInt64(index + 1))
            Self.open(engine, id, "bench")
            engine.handle(NumberedRequest(number: 1, request: .listen(path: path, query: query, tag: 1 + index % 3)), from: id, now: Self.now)
        }
        _ = engine.drainEffects()
        var sends = 0
        let writer = ConnectionID(1)
        let seconds = Self.measure {
            for index in 0..<repeats {
                let value: PresenceCore.JSON = .object([("online", .bool(index % 2 == 0)), ("lastSeen", .number(Double(index)))])
                engine.handle(NumberedRequest(number: 2 + index, request: .put(path: path, data: value, hash: nil)), from: writer, now: Self.now)
                sends += engine.drainEffects().count
            }
        }
        return [("writes", "\(repeats)"), ("ms_per_write", Self.format(seconds * 1e3 / Double(repeats))),
                ("send_effects_per_write", "\(sends / max(1, repeats))")]
    }

    /// One connection with `count` distinct queries (`limitToLast k` by child `ts`, k = 1...count) on
    /// a location of 50 children, then writes that move the oldest child to the newest: every
    /// window moves (the attack harness's `tagged-window`).
    func taggedWindow() -> [(String, String)] {
        let engine = makeEngine()
        let path = Path(validated: ["tagger", "items"])
        let id = ConnectionID(1)
        Self.open(engine, id, "bench")
        let children: PresenceCore.JSON = .object((0..<50).map { ("k\($0)", .object([("ts", .number(Double($0)))])) })
        engine.handle(NumberedRequest(number: 1, request: .put(path: path, data: children, hash: nil)), from: id, now: Self.now)
        var refused = 0
        for k in 1...max(1, count) {
            let query: PresenceCore.JSON = .object([("i", "ts"), ("l", .number(Double(k))), ("vf", "r")])
            engine.handle(NumberedRequest(number: 1 + k, request: .listen(path: path, query: query, tag: k)), from: id, now: Self.now)
            for case .send(_, .reply(_, .failure(.tooBig))) in engine.drainEffects() { refused += 1 }
        }
        var sends = 0
        let seconds = Self.measure {
            for index in 0..<repeats {
                let write = NumberedRequest(number: 10_000 + index, request: .put(path: path.child("k\(index % 50)"),
                                            data: .object([("ts", .number(Double(50 + index)))]), hash: nil))
                engine.handle(write, from: id, now: Self.now)
                sends += engine.drainEffects().count
            }
        }
        return [("queries_refused", "\(refused)"), ("writes", "\(repeats)"), ("ms_per_write", Self.format(seconds * 1e3 / Double(max(1, repeats)))),
                ("send_effects_per_write", "\(sends / max(1, repeats))")]
    }

    func namespaces() -> [(String, String)] {
        let engine = makeEngine()
        let seconds = Self.measure {
            for index in 0..<count {
                let id = ConnectionID(UInt64(index + 1))
                Self.open(engine, id, "ns\(index)")
                engine.disconnect(id, now: Self.now)
                _ = engine.drainEffects()
            }
        }
        return [("namespaces_left", "\(engine.namespaceNames.count)"), ("total_s", Self.format(seconds))]
    }

    static func measure(_ body: () -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    static func format(_ value: Double) -> String { String(format: "%.3f", value) }
}
