/// Compact JSON text made pretty a piece at a time, with the layout of `JSONWriter.pretty` (two
/// spaces per level, `": "` after a key, empty objects and arrays as `{}` and `[]`). A big REST
/// answer with `print=pretty` is written this way as its body goes out, so that no single step
/// reformats the whole text. The input must be compact JSON (no whitespace outside strings), as
/// `Node.writeJSON` and `SlicedRead` write it; pieces may be cut anywhere, even inside a string or
/// an escape.
public struct PrettyJSONStream: Sendable {
    private var depth = 0
    private var inString = false
    private var escaped = false
    /// An opening bracket seen and not yet written: written with the next byte (`{}` stays
    /// together).
    private var pendingOpen: UInt8?

    public init() {}

    /// Appends the pretty form of `piece` to `out`.
    public mutating func append(_ piece: some Collection<UInt8>, to out: inout [UInt8]) {
        out.reserveCapacity(out.count + piece.count + piece.count / 4)
        for byte in piece {
            if inString {
                out.append(byte)
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            if let open = pendingOpen {
                pendingOpen = nil
                if byte == Self.closing(of: open) {
                    out.append(open)
                    out.append(byte)
                    continue
                }
                out.append(open)
                depth += 1
                newline(into: &out)
            }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                pendingOpen = byte
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth = max(0, depth - 1)
                newline(into: &out)
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline(into: &out)
            case UInt8(ascii: ":"):
                out.append(byte)
                out.append(UInt8(ascii: " "))
            case UInt8(ascii: "\""):
                inString = true
                out.append(byte)
            default:
                out.append(byte)
            }
        }
    }

    /// What is still held at the end of the text (an opening bracket that ended it: invalid JSON,
    /// written as it came).
    public mutating func finish(into out: inout [UInt8]) {
        if let open = pendingOpen { out.append(open) }
        pendingOpen = nil
    }

    private func newline(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\n"))
        for _ in 0..<depth { out.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: " ")]) }
    }

    private static func closing(of open: UInt8) -> UInt8 {
        open == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
    }
}
