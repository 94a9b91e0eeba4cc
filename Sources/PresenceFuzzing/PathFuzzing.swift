import PresenceCore

/// Path and key validation: the input is a path as a client sends it (`p`, a REST URL, an update
/// key). The one-pass parser must agree with the definition (split on `/`, drop empty pieces,
/// every key valid, `.priority` only last, depth ≤ 32, key path ≤ 768 bytes); a parsed path
/// prints and parses back to itself; keys that validate as path keys validate as data keys;
/// the key order is a strict order.
enum PathFuzzing {
    static let target = FuzzTarget(
        name: "path",
        summary: "path text → Path(_:) agrees with the definition, round-trips; key validation agrees with Node(json:); KeyOrder is a strict order",
        run: run)

    static func run(_ bytes: [UInt8]) {
        let raw = String(decoding: bytes, as: UTF8.self)
        let parsed = try? Path(raw)
        let expected = definition(raw)
        invariant(parsed?.segments == expected, "Path(_:) gives \(String(describing: parsed?.segments)) but the definition \(String(describing: expected))")
        if let parsed {
            invariant((try? Path(parsed.wireString)) == parsed, "a parsed path does not parse back to itself")
            invariant((try? Path(parsed.description)) == parsed, "a path's description does not parse back to it")
        }
        // Two quotes of at most 40 escaped scalars (≤ 6 bytes each, `\u0000`) and the reason.
        do {
            _ = try Path(raw)
        } catch {
            invariant(error.description.utf8.count <= 800, "a path error of \(error.description.utf8.count) bytes echoes the input")
        }
        // Each piece as a data key: valid keys store, invalid ones are refused with a short error.
        let pieces = raw.unicodeScalars.split(separator: "/", omittingEmptySubsequences: false).prefix(16)
            .map { String(String.UnicodeScalarView($0)) }
        for key in pieces {
            let stored = try? Node(json: .object([(key, .number(1))]))
            let dataKey = key == ".priority" || key == ".value" ? nil : stored
            if key.utf8.count <= Path.maxKeyPathBytes, !key.hasPrefix(".") || Path.isValidKey(key) {
                invariant((dataKey != nil) == Path.isValidKey(key), "data and path disagree on key \(ClientInput.quoted(key))")
            }
        }
        for a in pieces.prefix(4) {
            invariant(!KeyOrder.less(a, a), "KeyOrder is not irreflexive for \(ClientInput.quoted(a))")
            for b in pieces.prefix(4) where KeyOrder.less(a, b) {
                invariant(!KeyOrder.less(b, a), "KeyOrder is not antisymmetric")
            }
        }
    }

    /// The plain definition of a valid path.
    static func definition(_ raw: String) -> [String]? {
        // Split on the "/" code point, as the JS client splits (a Character split would keep a
        // "/" followed by a combining mark inside a key; found by fuzzing).
        let keys = raw.unicodeScalars.split(separator: "/", omittingEmptySubsequences: true).map { String(String.UnicodeScalarView($0)) }
        for (index, key) in keys.enumerated() where !(key == ".priority" && index == keys.count - 1) && !Path.isValidKey(key) {
            return nil
        }
        guard keys.count <= Path.maxDepth, keys.joined(separator: "/").utf8.count <= Path.maxKeyPathBytes else { return nil }
        return keys
    }
}
