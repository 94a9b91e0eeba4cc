/// Resolves `{".sv":"timestamp"}` and `{".sv":{"increment":n}}` placeholders (§6) with one `now`
/// per write. `current` reads the stored value at a path, for increments.
public enum ServerValues {
    public static func resolve(_ json: JSON, at path: Path, now: Int64, current: (Path) -> Node) throws(DataError) -> JSON {
        switch json {
        case .object(let members):
            if let placeholder = members.first(where: { $0.0 == ".sv" })?.1 {
                return try resolvePlaceholder(placeholder, at: path, now: now, current: current)
            }
            var resolved: [(String, JSON)] = []
            resolved.reserveCapacity(members.count)
            for (key, member) in members {
                // `.priority` may itself be a server value; it resolves like any leaf.
                let childPath = key.hasPrefix(".") ? path : path.child(key)
                resolved.append((key, try resolve(member, at: childPath, now: now, current: current)))
            }
            return .object(resolved)
        case .array(let elements):
            var resolved: [JSON] = []
            for (index, element) in elements.enumerated() {
                resolved.append(try resolve(element, at: path.child(String(index)), now: now, current: current))
            }
            return .array(resolved)
        default:
            return json
        }
    }

    /// True when the value holds any placeholder, so callers can skip the copy in the common case.
    public static func containsPlaceholder(_ json: JSON) -> Bool {
        switch json {
        case .object(let members):
            return members.contains { $0.0 == ".sv" || containsPlaceholder($0.1) }
        case .array(let elements):
            return elements.contains(where: containsPlaceholder)
        default:
            return false
        }
    }

    private static func resolvePlaceholder(_ placeholder: JSON, at path: Path, now: Int64, current: (Path) -> Node) throws(DataError) -> JSON {
        switch placeholder {
        case .string("timestamp"):
            return .number(Double(now))
        case .object:
            guard let delta = placeholder["increment"]?.numberValue else {
                throw DataError.unknownServerValue(path: path.description)
            }
            // A number stored at exactly this path is incremented; anything else is replaced (§6.2).
            var result = delta
            if case .leaf(.number(let existing), _) = current(path) { result = existing + delta }
            // A sum beyond ±1.8e308 is ±Infinity, which JSON cannot carry (clients would read
            // null). What Firebase does is not documented; the write is refused, nothing stored.
            guard result.isFinite else {
                throw DataError.invalidData(path: path.description, reason: "increment overflows: the result is beyond ±1.7976931348623157e308")
            }
            return .number(result)
        default:
            throw DataError.unknownServerValue(path: path.description)
        }
    }
}
