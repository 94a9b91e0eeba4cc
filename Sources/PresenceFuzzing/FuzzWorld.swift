import PresenceCore
import PresenceWire

/// What several targets share: the rules a fuzzed engine runs, a cheap deterministic digest, and
/// checks on what the server sends and stores.
enum FuzzWorld {
    /// The shipped presence rules plus an open area, so fuzzed writes reach the tree and pushes.
    static let rulesText = """
        {"rules": {
          "online-users": {".read": "auth != null"},
          "users": {"$userId": {
            "presence": {
              ".read": "auth != null", ".write": "auth != null && auth.uid == $userId",
              ".validate": "newData.hasChildren(['online', 'lastSeen'])",
              "online": {".validate": "newData.isBoolean()"},
              "lastSeen": {".validate": "newData.isNumber() && newData.val() <= now"},
              "$other": {".validate": false}
            },
            "private": {".read": "auth.uid == $userId", ".write": "auth.uid == $userId"}
          }},
          "open": {".read": true, ".write": true, ".indexOn": ["n", ".value"]},
          "scores": {".read": "query.limitToFirst <= 10 || query.orderByKey", ".write": "newData.isNumber() || !newData.exists()"}
        }}
        """
    // swiftlint:disable:next force_try
    static let rules: RuleSet = try! RuleSet.load(text: rulesText, source: "fuzz")

    static let now: Int64 = 1_700_000_000_000

    /// FNV-1a 64, eight bytes: stands in for SHA-1, so transactions and ETags work in the engine.
    static let digest: @Sendable ([UInt8]) -> [UInt8] = { bytes in
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return (0..<8).map { UInt8(truncatingIfNeeded: hash >> ($0 * 8)) }
    }

    /// Limits small enough for fuzzed inputs to reach (a few listens and ops, a read of a few KB, a
    /// second namespace), so the refusals are fuzzed too, not only the paths below the defaults.
    static let limits = EngineLimits(maxListensPerConnection: 8, maxOnDisconnectOps: 8, maxOnDisconnectBytes: 1_024,
                                     maxReadBytes: 4_096, maxNamespaces: 2)

    static func engine() -> Engine {
        var sessions = 0
        return Engine(configuration: Engine.Configuration(defaultNamespace: "fuzz", hashDigest: digest, limits: limits),
                      policy: rules, makeSessionID: {
                          sessions += 1
                          return "s\(sessions)"
                      })
    }

    /// The longest error text a client may get back: a validated path (768 bytes) plus a short
    /// quote of client input and the reason. Anything longer echoes client input whole.
    static let maxErrorBytes = 2048

    /// Every stored value is a valid tree: finite numbers, valid keys, within depth and length.
    static func checkTree(_ node: Node, depth: Int = 0, pathBytes: Int = 0) {
        invariant(depth <= Path.maxDepth, "stored data deeper than \(Path.maxDepth)")
        invariant(pathBytes <= Path.maxKeyPathBytes, "stored key path longer than \(Path.maxKeyPathBytes) bytes")
        if case .number(let n)? = node.leafValue { invariant(n.isFinite, "a non-finite number was stored") }
        if case .number(let n)? = node.priority { invariant(n.isFinite, "a non-finite priority was stored") }
        for (key, child) in node.children {
            invariant(Path.isValidKey(key), "an invalid key was stored: \(ClientInput.quoted(key))")
            checkTree(child, depth: depth + 1, pathBytes: pathBytes + key.utf8.count + (depth == 0 ? 0 : 1))
        }
    }

    /// Every message the server sends is strict JSON, and error texts are short.
    static func checkOutbound(_ text: String) -> JSON {
        guard let json = try? JSONParser.parse(text) else {
            fatalError("invariant broken: the server sent invalid JSON: \(ClientInput.quoted(text, limit: 200))")
        }
        if let status = json["d"]?["b"]?["s"]?.stringValue, status != "ok", let message = json["d"]?["b"]?["d"]?.stringValue {
            invariant(message.utf8.count <= maxErrorBytes, "an error reply of \(message.utf8.count) bytes echoes client input")
        }
        return json
    }
}
