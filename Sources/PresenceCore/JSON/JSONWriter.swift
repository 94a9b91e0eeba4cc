/// Compact JSON text for the wire: integers without a fraction, shortest round-trip doubles.
///
/// Built as UTF-8 bytes and turned into a `String` once: appending each piece to a `String` cost
/// about 300 instructions per byte, and was a third of the storage thread's time when a connection
/// registered its onDisconnect ops in a burst (each op's credentials are written as JSON).
public enum JSONWriter {
    public static func string(_ value: JSON) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    public static func bytes(_ value: JSON) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    public static func write(_ value: JSON, into out: inout String) {
        out += string(value)
    }

    public static func write(_ value: JSON, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): writeNumber(n, into: &out)
        case .string(let s): writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Integral values within ±2^53 print as integers, as JavaScript prints them.
    public static func writeNumber(_ n: Double, into out: inout String) {
        var bytes: [UInt8] = []
        writeNumber(n, into: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// The same, as UTF-8 bytes: integers digit by digit, other finite values as Swift's shortest
    /// round-trip text, non-finite ones (never stored: the engine refuses them) as `null`.
    public static func writeNumber(_ n: Double, into out: inout [UInt8]) {
        if n.isFinite, n == n.rounded(), abs(n) < 9_007_199_254_740_992 {
            var value = Int64(n)
            if value < 0 {
                out.append(UInt8(ascii: "-"))
                value = -value
            }
            let start = out.count
            repeat {
                out.append(UInt8(ascii: "0") + UInt8(value % 10))
                value /= 10
            } while value > 0
            out[start...].reverse()
        } else if n.isFinite {
            out.append(contentsOf: "\(n)".utf8)
        } else {
            out.append(contentsOf: "null".utf8)
        }
    }

    /// `s` quoted, with quote, backslash and control characters escaped (`JSONStringBytes`).
    public static func writeString(_ s: String, into out: inout String) {
        if JSONStringBytes.isPlain(s) {
            out += "\""
            out += s
            out += "\""
        } else {
            var bytes: [UInt8] = []
            JSONStringBytes.appendQuoted(s, to: &bytes)
            out += String(decoding: bytes, as: UTF8.self)
        }
    }

    /// The same, as UTF-8 bytes.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        JSONStringBytes.appendQuoted(s, to: &out)
    }
}

extension JSONWriter {
    /// Indented JSON for `print=pretty`.
    public static func pretty(_ value: JSON, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .array(let elements) where !elements.isEmpty:
            return "[\n" + elements.map { inner + pretty($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let members) where !members.isEmpty:
            return "{\n" + members.map { key, member in
                var line = inner
                writeString(key, into: &line)
                return line + ": " + pretty(member, indent: inner)
            }.joined(separator: ",\n") + "\n" + indent + "}"
        default:
            return string(value)
        }
    }
}
