/// The bytes of a JSON string that need care, found a word at a time: a quote, a backslash or a
/// control byte (< 0x20). Big values (256 KB of text) are the common case of a string with none,
/// and going byte by byte through them was most of a big write's time on the loop, when reading
/// it (the parser) and when writing it to every listener (the writers; issue 16).
enum JSONStringBytes {
    static func isSpecial(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// The offset of the first 8-byte word at or after `start` holding a special byte, or of the
    /// last bytes (fewer than 8) of `count`. Exact for "any such byte in the word" (the classic
    /// has-zero-byte and has-less-than tests); the caller's byte loop finds which one.
    @inline(__always)
    static func skipPlainWords(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = ones &* 0x22, backslashes = ones &* 0x5C, spaces = ones &* 0x20
        var index = start
        while count &- index >= 8 {
            let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            let quote = word ^ quotes, backslash = word ^ backslashes
            let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- spaces) & ~word)
            if special & highs != 0 { return index }
            index &+= 8
        }
        return index
    }

    /// The offset of the first special byte at or after `start`, or `bytes.count` if none.
    static func firstSpecial(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return bytes.count }
        var index = start
        while index < bytes.count {
            index = skipPlainWords(base, from: index, count: bytes.count)
            let wordEnd = min(index &+ 8, bytes.count)
            while index < wordEnd {
                if isSpecial(bytes[index]) { return index }
                index &+= 1
            }
        }
        return bytes.count
    }

    /// Appends `s` as a quoted JSON string: plain runs copied whole; quote, backslash and control
    /// characters escaped (`\n`, `\r`, `\t`, `\b`, `\f`, else `\u00XX` in lower-case hex).
    static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = s
        // No reserveCapacity here: Array reserves exactly what it is asked, so reserving for each
        // of a big object's keys reallocated the whole output every time (quadratic).
        text.withUTF8 { utf8 in
            var run = 0
            while run < utf8.count {
                let special = firstSpecial(in: utf8, from: run)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<special]))
                guard special < utf8.count else { break }
                appendEscape(utf8[special], to: &out)
                run = special &+ 1
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether `s` needs no escape at all (written between quotes as it is).
    static func isPlain(_ s: String) -> Bool {
        var text = s
        return text.withUTF8 { firstSpecial(in: $0, from: 0) == $0.count }
    }

    private static func appendEscape(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
        case 0x0A: out.append(contentsOf: #"\n"#.utf8)
        case 0x0D: out.append(contentsOf: #"\r"#.utf8)
        case 0x09: out.append(contentsOf: #"\t"#.utf8)
        case 0x08: out.append(contentsOf: #"\b"#.utf8)
        case 0x0C: out.append(contentsOf: #"\f"#.utf8)
        default:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: #"\u00"#.utf8)
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0xF)])
        }
    }
}
