/// Paths for state kept beside the data tree, as read sets and the version window name it.
public enum VirtualPaths {
    /// The namespace's rules document: every decision made under the rules reads it; `setRules`
    /// writes it.
    public static let rules = Path(validated: [".rules"])

    /// One user's usage of one limit (per namespace, like every path of a window).
    public static func limitUsage(limit: String, uid: String) -> Path {
        Path(validated: [".limits", limit, uid])
    }
}

extension LimitUsageKey {
    /// Where read sets and the version window see this usage (`VirtualPaths.limitUsage`).
    public var versionPath: Path { VirtualPaths.limitUsage(limit: limit, uid: uid) }
}

extension Path {
    /// A path of state beside the tree: its first key starts with "." (and is not `.priority`).
    var isVirtual: Bool {
        guard let first = segments.first, first.utf8.first == UInt8(ascii: ".") else { return false }
        return first != ".priority"
    }

    /// Both in the data tree, or both under the same virtual root.
    func sharesRoot(with other: Path) -> Bool {
        let virtual = isVirtual
        guard virtual == other.isVirtual else { return false }
        return !virtual || segments[0] == other.segments[0]
    }
}
