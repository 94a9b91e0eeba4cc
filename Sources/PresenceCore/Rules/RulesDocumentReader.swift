/// Reads a rules document with Firebase's leniency: `//` and `/* */` comments outside strings, and
/// raw line breaks (or other control characters) inside strings. A pre-pass rewrites the text into
/// strict JSON (comments become spaces, raw control characters become escapes) and hands it to
/// `JSONParser`; error offsets are mapped back to the original text.
enum RulesDocumentReader {
    struct Failure: Error {
        /// 1-based line and column in the original text.
        var line: Int
        var column: Int
        var offset: Int
        var reason: String
    }

    static func parse(_ text: String) throws(Failure) -> JSON {
        let original = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(original.count + 16)
        // Original offsets of the bytes inserted by escaping (ascending).
        var insertions: [Int] = []
        var index = 0
        var inString = false
        while index < original.count {
            let byte = original[index]
            if inString {
                if byte == UInt8(ascii: "\\"), index + 1 < original.count {
                    output.append(byte)
                    output.append(original[index + 1])
                    index += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") { inString = false }
                if byte < 0x20 {
                    let escape = escapeBytes(byte)
                    output.append(contentsOf: escape)
                    for _ in 1..<escape.count { insertions.append(index) }
                } else {
                    output.append(byte)
                }
                index += 1
                continue
            }
            if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "/"), index + 1 < original.count {
                let next = original[index + 1]
                if next == UInt8(ascii: "/") {
                    while index < original.count, original[index] != 0x0A {
                        output.append(UInt8(ascii: " "))
                        index += 1
                    }
                    continue
                }
                if next == UInt8(ascii: "*") {
                    let start = index
                    index += 2
                    var closed = false
                    while index < original.count {
                        if original[index] == UInt8(ascii: "*"), index + 1 < original.count,
                            original[index + 1] == UInt8(ascii: "/")
                        {
                            index += 2
                            closed = true
                            break
                        }
                        index += 1
                    }
                    guard closed else {
                        throw failure(at: start, in: original, reason: "unterminated /* comment")
                    }
                    for offset in start..<index {
                        output.append(original[offset] == 0x0A ? 0x0A : UInt8(ascii: " "))
                    }
                    continue
                }
            }
            output.append(byte)
            index += 1
        }
        do {
            return try JSONParser.parse(bytes: output)
        } catch {
            // Map the offset in `output` back to the original text: every inserted byte sits
            // right after the byte (at original offset `inserted`) it escapes.
            var shift = 0
            for inserted in insertions where inserted + shift < error.offset - 1 { shift += 1 }
            let originalOffset = max(0, min(original.count, error.offset - shift))
            throw failure(at: originalOffset, in: original, reason: error.reason)
        }
    }

    private static func escapeBytes(_ byte: UInt8) -> [UInt8] {
        switch byte {
        case 0x0A: return Array("\\n".utf8)
        case 0x0D: return Array("\\r".utf8)
        case 0x09: return Array("\\t".utf8)
        default:
            let hex = Array("0123456789abcdef".utf8)
            return Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
        }
    }

    private static func failure(at offset: Int, in bytes: [UInt8], reason: String) -> Failure {
        var line = 1
        var lineStart = 0
        for index in 0..<min(offset, bytes.count) where bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        let column = String(decoding: bytes[lineStart..<min(offset, bytes.count)], as: UTF8.self).count + 1
        return Failure(line: line, column: column, offset: offset + 1, reason: reason)
    }
}
