/// A strict RFC 8259 JSON parser over UTF-8 bytes.
///
/// Hand-written rather than Foundation's because the server needs what Foundation does not give:
/// booleans kept apart from numbers, a nesting limit checked while parsing (hostile input cannot
/// blow the stack), positions in errors, and one pass with no bridging on the hot path.
public struct JSONParser {
    public struct Error: Swift.Error, Equatable, CustomStringConvertible, Sendable {
        public var offset: Int
        public var reason: String
        public var description: String { "invalid JSON at offset \(offset): \(reason)" }
    }

    public static let defaultMaxDepth = 128

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(Error) -> JSON {
        var copy = text
        let result: Result<JSON, Error> = copy.withUTF8 { buffer in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            do throws(Error) { return .success(try parser.parseDocument()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    public static func parse(bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(Error) -> JSON {
        let result: Result<JSON, Error> = bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            do throws(Error) { return .success(try parser.parseDocument()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Like `parse(bytes:)`, but a number beyond the double range (`1e400`) does not fail the
    /// document: it is kept as ±infinity and `overflowed` is true, so a caller that can answer
    /// with a precise error (the wire decoder: "number out of range at b/d/x") can find it.
    /// Callers must refuse such a document; the data tree never stores a non-finite number.
    public static func parseReportingOverflow(bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(Error) -> (json: JSON, overflowed: Bool) {
        let result: Result<(JSON, Bool), Error> = bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            parser.keepsOverflow = true
            do throws(Error) {
                let json = try parser.parseDocument()
                return .success((json, parser.overflowed))
            } catch { return .failure(error) }
        }
        return try result.get()
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// See `parseReportingOverflow`: out-of-range numbers become ±infinity instead of failing.
    var keepsOverflow = false
    var overflowed = false

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String) -> JSONParser.Error { JSONParser.Error(offset: index, reason: reason) }

    mutating func parseDocument() throws(JSONParser.Error) -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
        return value
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParser.Error) -> JSON {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParser.Error) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of input") }
        let start = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] {
            throw fail("invalid literal")
        }
        index += count
    }

    mutating func enter() throws(JSONParser.Error) {
        depth += 1
        if depth > maxDepth { throw fail("nesting deeper than \(maxDepth) levels") }
    }

    mutating func parseObject() throws(JSONParser.Error) -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [(String, JSON)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONParser.Error) -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(elements) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSONParser.Error) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text) else {
            index = start
            throw fail("invalid number")
        }
        if !value.isFinite {
            guard keepsOverflow else {
                index = start
                throw fail("number out of range")
            }
            overflowed = true
        }
        return value
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    mutating func parseString() throws(JSONParser.Error) -> String {
        index += 1  // opening quote
        let start = index
        skipPlainStringBytes()
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return try validUTF8(slice, at: start)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("control character in string") }
            index += 1
        }
        var scalars: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return try scalars.withUnsafeBufferPointer { buffer throws(JSONParser.Error) in
                    try validUTF8(buffer, at: start)
                }
            }
            if byte < 0x20 { throw fail("control character in string") }
            if byte != UInt8(ascii: "\\") {
                scalars.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw fail("unexpected end of input") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append(0x22)
            case UInt8(ascii: "\\"): scalars.append(0x5C)
            case UInt8(ascii: "/"): scalars.append(0x2F)
            case UInt8(ascii: "b"): scalars.append(0x08)
            case UInt8(ascii: "f"): scalars.append(0x0C)
            case UInt8(ascii: "n"): scalars.append(0x0A)
            case UInt8(ascii: "r"): scalars.append(0x0D)
            case UInt8(ascii: "t"): scalars.append(0x09)
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800...0xDBFF).contains(code) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate in string")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate in string") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw fail("unpaired surrogate in string")
                }
                guard let scalar = Unicode.Scalar(code) else { throw fail("invalid unicode escape") }
                scalars.append(contentsOf: UTF8.encode(scalar)!)
            default:
                throw fail("invalid escape")
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseHex4() throws(JSONParser.Error) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw fail("invalid unicode escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Moves `index` past whole 8-byte words of a string that hold no quote, backslash or control
    /// byte (`JSONStringBytes`); the byte loop after it finds which one stopped it.
    mutating func skipPlainStringBytes() {
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return }
        index = JSONStringBytes.skipPlainWords(base, from: index, count: bytes.count)
    }

    func validUTF8(_ buffer: UnsafeBufferPointer<UInt8>, at offset: Int) throws(JSONParser.Error) -> String {
        guard let string = String(validating: buffer, as: UTF8.self) else {
            throw JSONParser.Error(offset: offset, reason: "invalid UTF-8 in string")
        }
        return string
    }
}
