/// Collects what one rules evaluation read from the stored tree, as a `ReadSet` (only when the
/// caller asked for it: the evaluator skips every call when it has no recorder).
///
/// Reads of `root` and `data` are reads of the stored tree at their location. A read of `newData`
/// at location L reads the stored tree only where the pending writes leave it showing through:
/// - L at or below a written path: the written value alone, nothing stored.
/// - no write at, above or below L: the stored tree at L, like `data`.
/// - writes below L only: with at least one non-null value there, L is a branch whatever is stored
///   (so `exists()`, `val()`, `hasChildren()` and `isString()` … read nothing, and `getPriority()`
///   reads L's own shape); with only deletes, what remains depends on the stored siblings: L's
///   subtree.
final class ReadRecorder {
    enum Read {
        /// `exists()`, `val()`, `hasChildren()`, `isNumber()`/`isString()`/`isBoolean()`,
        /// `hasChild()` and each `hasChildren([...])` name.
        case shape
        case priority
        case subtree
    }

    /// A location as the evaluator holds it: the first `baseCount` keys of `base`, then `extra`
    /// (read without copying: most `newData` reads turn out to be of written values).
    struct Location {
        var base: [String]
        var baseCount: Int
        var extra: [String] = []

        var count: Int { baseCount + extra.count }
        var segments: [String] { Array(base.prefix(baseCount)) + extra }

        /// Compares `keys` with the location's first keys: how they order, or `nil` when `keys`
        /// is a prefix of the location or the location a prefix of `keys`.
        func compare(_ keys: [String]) -> Bool? {
            let shared = min(keys.count, count)
            var index = 0
            while index < shared {
                let key = index < baseCount ? base[index] : extra[index - baseCount]
                if keys[index] != key { return keys[index] < key }
                index += 1
            }
            return nil
        }

        var hasEmptyKey: Bool {
            for index in 0..<baseCount where base[index].isEmpty { return true }
            for key in extra where key.isEmpty { return true }
            return false
        }
    }

    private(set) var readSet = ReadSet()
    /// The pending writes behind `newData`.
    var writes: WriteOverlay?

    /// Deeper locations, or keys longer than any stored key path, are recorded as the subtree
    /// above them: conservative, and it bounds what one read adds to a log entry.
    static let maxDepth = ReadSet.maxPathDepth

    /// Runs `body` with a fresh recorder and adds what it recorded to `readSet`.
    static func recording<T>(into readSet: inout ReadSet, _ body: (ReadRecorder) -> T) -> T {
        let recorder = ReadRecorder()
        let result = body(recorder)
        readSet.formUnion(recorder.readSet)
        return result
    }

    /// Records `read` of `snapshot`'s location, or of `relative` (a `child()` path) below it.
    func record(_ snapshot: RuleSnapshot, _ read: Read, relative: String? = nil) {
        var location = Location(base: snapshot.base, baseCount: snapshot.baseCount, extra: snapshot.extra)
        if let relative {
            if relative.isEmpty { return }
            if !relative.utf8.contains(UInt8(ascii: "/")) {
                location.extra.append(relative)
            } else {
                for piece in relative.split(separator: "/", omittingEmptySubsequences: true) { location.extra.append(String(piece)) }
            }
        }
        record(location, isNew: snapshot.isNew, read)
    }

    /// Records `read` at the first `count` keys of `path`.
    func record(_ path: [String], count: Int, isNew: Bool, _ read: Read) {
        record(Location(base: path, baseCount: count), isNew: isNew, read)
    }

    func record(_ location: Location, isNew: Bool, _ read: Read) {
        // `child('')` is a location that never exists, whatever is stored.
        if location.hasEmptyKey { return }
        guard isNew, let writes, !writes.entries.isEmpty else {
            insert(location.segments, read == .subtree ? .subtree : .shape)
            return
        }
        let entries = writes.entries
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if Self.less(entries[mid].segments, location) { low = mid + 1 } else { high = mid }
        }
        // No entry is below another, so one at or above `location` sorts right before the entries
        // below it, which follow `location` directly.
        if low < entries.count, entries[low].segments.count == location.count, location.compare(entries[low].segments) == nil { return }
        if low > 0, entries[low - 1].segments.count <= location.count, location.compare(entries[low - 1].segments) == nil { return }
        var below = false
        var valueBelow = false
        var index = low
        while index < entries.count, entries[index].segments.count > location.count, location.compare(entries[index].segments) == nil {
            below = true
            if entries[index].value.exists { valueBelow = true }
            index += 1
        }
        switch (below, read) {
        case (false, .subtree): insert(location.segments, .subtree)
        case (false, _): insert(location.segments, .shape)
        case (true, .shape) where valueBelow: return
        case (true, .priority) where valueBelow: insert(location.segments, .shape)
        case (true, _): insert(location.segments, .subtree)
        }
    }

    /// A read of the stored tree itself (not through `newData`).
    func recordStored(_ path: [String], _ read: Read) {
        record(path, count: path.count, isNew: false, read)
    }

    private func insert(_ segments: [String], _ kind: ReadSet.Kind) {
        var segments = segments
        var kind = kind
        if let long = segments.firstIndex(where: { $0.utf8.count > Path.maxKeyPathBytes }) {
            segments.removeSubrange(long...)
            kind = .subtree
        }
        if segments.count > Self.maxDepth {
            segments.removeSubrange(Self.maxDepth...)
            kind = .subtree
        }
        readSet.insert(Path(validated: segments), kind)
    }

    /// `WriteOverlay.less(entry, location)`.
    private static func less(_ entry: [String], _ location: Location) -> Bool {
        location.compare(entry) ?? (entry.count < location.count)
    }
}
