import PresenceCore

/// Small client-side tree operations on `JSON` values, with the database's rules: `null` and empty
/// objects mean "no data", and arrays are objects keyed by index.
public enum JSONTree {
    /// Drops null children and empty objects, turns arrays into index-keyed objects.
    public static func normalized(_ value: JSON) -> JSON {
        switch value {
        case .array(let items):
            return normalized(.object(items.enumerated().map { (String($0.offset), $0.element) }))
        case .object(let members):
            var out: [(String, JSON)] = []
            for (key, child) in members {
                let n = normalized(child)
                if n.isNull { continue }
                out.removeAll { $0.0 == key }
                out.append((key, n))
            }
            return out.isEmpty ? .null : .object(out)
        default:
            return value
        }
    }

    /// The value at `segments` below `root` (null when absent).
    public static func value(at segments: ArraySlice<String>, in root: JSON) -> JSON {
        guard let first = segments.first else { return root }
        guard let child = root[first] else { return .null }
        return value(at: segments.dropFirst(), in: child)
    }

    /// `root` with the value at `segments` replaced by `newValue` (normalized).
    public static func setting(_ newValue: JSON, at segments: ArraySlice<String>, in root: JSON) -> JSON {
        guard let first = segments.first else { return normalized(newValue) }
        var members = root.objectMembers ?? []
        let current = members.last(where: { $0.0 == first })?.1 ?? .null
        let updated = setting(newValue, at: segments.dropFirst(), in: current)
        members.removeAll { $0.0 == first }
        if !updated.isNull { members.append((first, updated)) }
        return members.isEmpty ? .null : .object(members)
    }

    /// Splits a relative key path of a merge (`"a/b"`) into segments.
    public static func segments(_ relative: String) -> [String] {
        relative.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// Segments of a push path (`"users/alice"`, with or without a leading slash).
    public static func pathSegments(_ wire: String) -> [String] { segments(wire) }
}
