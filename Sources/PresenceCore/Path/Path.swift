/// A location in a database: the keys from the root, `/`-joined on the wire.
public struct Path: Hashable, Sendable, CustomStringConvertible, Comparable {
    public private(set) var segments: [String]

    public static let root = Path(validated: [])

    /// The limits the official clients enforce on every written value (`ValidationPath` in the JS SDK).
    public static let maxKeyPathBytes = 768
    public static let maxDepth = 32

    public init(validated segments: [String]) { self.segments = segments }

    /// Parses a wire path (`/users/alice`, `users/alice`, `/` or empty). Empty pieces are dropped,
    /// as every client does; each key must be valid (§8.1). A trailing `.priority` is allowed.
    ///
    /// One pass over the UTF-8 bytes that stops at the first invalid key and as soon as the path
    /// is deeper than `maxDepth` or longer than `maxKeyPathBytes`, so a megabyte of hostile path
    /// costs no more than a valid one; the error quotes only a short prefix of it.
    public init(_ string: String) throws(DataError) {
        var segments: [String] = []
        var keyPathBytes = 0
        var invalidKey: String?
        var tooLong = false
        let parsed: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
            var start = 0
            var index = 0
            var forbidden = false
            while index <= bytes.count {
                let atEnd = index == bytes.count
                let byte: UInt8 = atEnd ? UInt8(ascii: "/") : bytes[index]
                if byte != UInt8(ascii: "/") {
                    if Path.isForbiddenKeyByte(byte) { forbidden = true }
                    index += 1
                    if keyPathBytes + (index - start) > Path.maxKeyPathBytes {
                        tooLong = true
                        return
                    }
                    continue
                }
                if index > start {
                    let piece = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    let key = String(decoding: piece, as: UTF8.self)
                    // `.priority` may only end the path; any other key must have no forbidden byte.
                    if (forbidden && key != ".priority") || segments.last == ".priority" {
                        invalidKey = segments.last == ".priority" ? ".priority" : key
                        return
                    }
                    keyPathBytes += piece.count + (segments.isEmpty ? 0 : 1)
                    segments.append(key)
                    if segments.count > Path.maxDepth || keyPathBytes > Path.maxKeyPathBytes {
                        tooLong = true
                        return
                    }
                }
                forbidden = false
                index += 1
                start = index
            }
        }
        if parsed == nil {
            // Not contiguous (a bridged string): make it native and parse that.
            var native = string
            native.makeContiguousUTF8()
            self = try Path(native)
            return
        }
        if let invalidKey {
            throw DataError.invalidPath(string, reason: "invalid key \(ClientInput.quoted(invalidKey)): keys must be non-empty and may not contain . $ # [ ] / or control characters")
        }
        if tooLong {
            if segments.count > Path.maxDepth {
                throw DataError.invalidPath(string, reason: "deeper than \(Path.maxDepth) levels")
            }
            throw DataError.invalidPath(string, reason: "longer than \(Path.maxKeyPathBytes) bytes")
        }
        self.segments = segments
    }

    /// A key may not be empty nor contain `. $ # [ ] /`, ASCII control characters or DEL.
    public static func isValidKey(_ key: String) -> Bool {
        !key.isEmpty && !key.utf8.contains(where: isForbiddenKeyByte)
    }

    @inline(__always)
    static func isForbiddenKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0...31, 127, UInt8(ascii: "."), UInt8(ascii: "$"), UInt8(ascii: "#"),
            UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }

    /// Length in UTF-8 bytes of the `/`-joined key path, the measure the 768-byte limit uses.
    public var byteLength: Int {
        segments.reduce(0) { $0 + $1.utf8.count } + max(0, segments.count - 1)
    }

    public var isRoot: Bool { segments.isEmpty }
    public var count: Int { segments.count }
    public var last: String? { segments.last }

    public var parent: Path? {
        guard !segments.isEmpty else { return nil }
        return Path(validated: Array(segments.dropLast()))
    }

    public func child(_ key: String) -> Path { Path(validated: segments + [key]) }

    public func appending(_ other: Path) -> Path { Path(validated: segments + other.segments) }

    /// `self` then `other`, held to the limits a parsed path is: a merge's child paths are each
    /// valid, but joined to the merge's location they may not be (found by the `rest` fuzz target:
    /// an update stored at 1,000 bytes and 40 levels).
    public func appendingWithinLimits(_ other: Path) throws(DataError) -> Path {
        let joined = appending(other)
        if joined.count > Path.maxDepth {
            throw DataError.invalidPath(joined.description, reason: "deeper than \(Path.maxDepth) levels")
        }
        if joined.byteLength > Path.maxKeyPathBytes {
            throw DataError.invalidPath(joined.description, reason: "longer than \(Path.maxKeyPathBytes) bytes")
        }
        return joined
    }

    /// True when `self` is `other` or one of its ancestors.
    public func contains(_ other: Path) -> Bool {
        guard segments.count <= other.segments.count else { return false }
        for index in segments.indices where segments[index] != other.segments[index] { return false }
        return true
    }

    /// `other` relative to `self`, when `self.contains(other)`.
    public func relative(_ other: Path) -> Path? {
        guard contains(other) else { return nil }
        return Path(validated: Array(other.segments[segments.count...]))
    }

    /// The wire form used in pushes: no leading slash, the root is "".
    public var wireString: String { segments.joined(separator: "/") }

    /// The form used in logs and errors: a leading slash, the root is "/".
    public var description: String { "/" + segments.joined(separator: "/") }

    public static func < (lhs: Path, rhs: Path) -> Bool {
        for (a, b) in zip(lhs.segments, rhs.segments) where a != b { return a < b }
        return lhs.segments.count < rhs.segments.count
    }
}
