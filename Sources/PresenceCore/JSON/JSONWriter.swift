/// Compact JSON text for the wire: integers without a fraction, shortest round-trip doubles.
public enum JSONWriter {
    public static func string(_ value: JSON) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    public static func write(_ value: JSON, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): writeNumber(n, into: &out)
        case .string(let s): writeString(s, into: &out)
        case .array(let elements):
            out += "["
            for (i, element) in elements.enumerated() {
                if i > 0 { out += "," }
                write(element, into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { out += "," }
                writeString(key, into: &out)
                out += ":"
                write(member, into: &out)
            }
            out += "}"
        }
    }

    /// Integral values within ±2^53 print as integers, as JavaScript prints them.
    public static func writeNumber(_ n: Double, into out: inout String) {
        if n.isFinite, n == n.rounded(), abs(n) < 9_007_199_254_740_992 {
            out += String(Int64(n))
        } else if n.isFinite {
            out += "\(n)"
        } else {
            out += "null"
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
