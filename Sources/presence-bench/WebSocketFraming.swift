import Crypto
import Foundation
import Glibc

// The byte-level parts of the epoll transport (RFC 6455), kept free of sockets so the self-test can
// drive them with hand-made frames: a reusable byte buffer, the client handshake, masked client
// frames and a parser for server frames.

/// A growable byte buffer that is allocated once and reused: the transport's per-connection receive
/// and send queues. Bytes live in `start..<end`; `reserve` compacts before it grows.
struct ByteBuffer {
    private(set) var base: UnsafeMutableRawPointer?
    private(set) var capacity = 0
    private(set) var start = 0
    private(set) var end = 0

    init(capacity: Int) { ensureFree(capacity) }

    var count: Int { end - start }
    var isEmpty: Bool { start == end }
    var readable: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base.map { $0 + start }, count: end - start) }
    var freeBytes: Int { capacity - end }

    /// Makes room for at least `n` more bytes at the end and returns where they go.
    @discardableResult
    mutating func ensureFree(_ n: Int) -> UnsafeMutableRawPointer {
        if capacity - end >= n, let base { return base + end }
        if start > 0, let base {
            memmove(base, base + start, end - start)
            end -= start
            start = 0
            if capacity - end >= n { return base + end }
        }
        var newCapacity = max(capacity * 2, 4096)
        while newCapacity - end < n { newCapacity *= 2 }
        guard let grown = realloc(base, newCapacity) else { fatalError("out of memory (\(newCapacity) bytes)") }
        base = grown
        capacity = newCapacity
        return grown + end
    }

    /// Counts `n` bytes written at the pointer `ensureFree` returned.
    mutating func commit(_ n: Int) { end += n }

    /// Drops `n` bytes from the front (rewinds when empty, so the next write starts at the base).
    mutating func consume(_ n: Int) {
        start += n
        if start >= end { start = 0; end = 0 }
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        ensureFree(bytes.count).copyMemory(from: src, byteCount: bytes.count)
        end += bytes.count
    }

    mutating func removeAll() { start = 0; end = 0 }

    /// Frees the storage (the buffer is empty and unusable until the next `ensureFree`).
    mutating func release() {
        free(base)
        base = nil
        capacity = 0
        start = 0
        end = 0
    }
}

/// The client side of the opening handshake (RFC 6455 §4.1).
enum WebSocketHandshake {
    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
    static func makeKey() -> String {
        var g = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &g) }).base64EncodedString()
    }

    /// The `Sec-WebSocket-Accept` a server must answer to `key`.
    static func accept(forKey key: String) -> String {
        Data(Insecure.SHA1.hash(data: Array((key + acceptGUID).utf8))).base64EncodedString()
    }

    static func request(host: String, port: Int, path: String, key: String, subprotocol: String?, userAgent: String) -> String {
        var r = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        r += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\nUser-Agent: \(userAgent)\r\n"
        if let subprotocol { r += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        return r + "\r\n"
    }

    /// Length of the response head up to and including the blank line, or nil if incomplete.
    static func headLength(_ b: UnsafeRawBufferPointer) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    /// Checks a response head: `101`, `Upgrade: websocket`, `Connection: upgrade`, the expected
    /// accept value and, when one was asked for, the subprotocol. Returns why it is wrong, or nil.
    static func problem(head: UnsafeRawBufferPointer, key: String, subprotocol: String?) -> String? {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n")
        guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
            return "no 101 Switching Protocols: \(lines.first ?? "")"
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard headers["upgrade"]?.lowercased() == "websocket" else { return "no Upgrade: websocket" }
        guard headers["connection"]?.lowercased().contains("upgrade") == true else { return "no Connection: upgrade" }
        guard headers["sec-websocket-accept"] == accept(forKey: key) else {
            return "wrong Sec-WebSocket-Accept \(headers["sec-websocket-accept"] ?? "(none)")"
        }
        if let subprotocol, headers["sec-websocket-protocol"] != subprotocol {
            return "subprotocol \(headers["sec-websocket-protocol"] ?? "(none)"), asked for \(subprotocol)"
        }
        return nil
    }
}

/// Frame opcodes (RFC 6455 §5.2).
enum WebSocketOpcode {
    static let continuation: UInt8 = 0x0, text: UInt8 = 0x1, binary: UInt8 = 0x2
    static let close: UInt8 = 0x8, ping: UInt8 = 0x9, pong: UInt8 = 0xA
}

/// Client frames: always masked (§5.3), written straight into a send buffer.
enum WebSocketFrameWriter {
    /// Appends one frame of `payload`, masked with `mask` (the key's bytes in wire order are its
    /// little-endian bytes).
    static func append(opcode: UInt8, fin: Bool = true, payload: UnsafeRawBufferPointer, mask: UInt32, to out: inout ByteBuffer) {
        let n = payload.count
        let headerBytes = n < 126 ? 6 : n <= 0xFFFF ? 8 : 14
        let p = out.ensureFree(headerBytes + n)
        p.storeBytes(of: (fin ? 0x80 : 0) | opcode, as: UInt8.self)
        if n < 126 {
            p.storeBytes(of: 0x80 | UInt8(n), toByteOffset: 1, as: UInt8.self)
        } else if n <= 0xFFFF {
            p.storeBytes(of: 0x80 | 126, toByteOffset: 1, as: UInt8.self)
            p.storeBytes(of: UInt16(n).bigEndian, toByteOffset: 2, as: UInt16.self)
        } else {
            p.storeBytes(of: 0x80 | 127, toByteOffset: 1, as: UInt8.self)
            p.storeBytes(of: UInt64(n).bigEndian, toByteOffset: 2, as: UInt64.self)
        }
        p.storeBytes(of: mask, toByteOffset: headerBytes - 4, as: UInt32.self)
        let dst = p + headerBytes
        if n > 0, let src = payload.baseAddress {
            // XOR 8 bytes at a time with the key repeated twice, then the tail byte by byte.
            let m64 = UInt64(mask) | UInt64(mask) << 32
            var i = 0
            while i + 8 <= n {
                dst.storeBytes(of: src.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ m64, toByteOffset: i, as: UInt64.self)
                i += 8
            }
            while i < n {
                let k = UInt8(truncatingIfNeeded: mask >> (UInt32(i & 3) * 8))
                dst.storeBytes(of: src.load(fromByteOffset: i, as: UInt8.self) ^ k, toByteOffset: i, as: UInt8.self)
                i += 1
            }
        }
        out.commit(headerBytes + n)
    }
}

/// What a server sent, frame by frame, with fragmented messages joined.
enum WebSocketInbound {
    /// A whole text or binary message; the bytes are borrowed for the call.
    case message(UnsafeRawBufferPointer, binary: Bool)
    case ping(UnsafeRawBufferPointer)
    case pong
    /// A close frame with its status code, if it had one. Nothing after it is parsed.
    case close(code: UInt16?)
}

enum WebSocketFrameError: Error, Equatable {
    /// The peer broke the protocol: we close with 1002.
    case protocolError(String)
    /// A message over the limit: we close with 1009.
    case tooLarge
}

/// Parses server frames (unmasked, §5.1): data frames, continuation frames, and control frames
/// between fragments. A message in one frame is handed out in place (no copy); only fragmented
/// messages are collected, in a buffer that is reused.
struct WebSocketFrameReader {
    let maxMessageBytes: Int
    private var fragments: [UInt8] = []
    private var fragmentBinary = false
    private var inFragmentedMessage = false

    init(maxMessageBytes: Int) { self.maxMessageBytes = maxMessageBytes }

    /// Calls `body` for every complete frame at the front of `b`; returns how many bytes it used.
    /// Stops after a close frame.
    mutating func consume(_ b: UnsafeRawBufferPointer, _ body: (WebSocketInbound) -> Void) throws(WebSocketFrameError) -> Int {
        var i = 0
        while b.count - i >= 2 {
            let b0 = b[i], b1 = b[i + 1]
            let fin = b0 & 0x80 != 0
            let opcode = b0 & 0x0F
            guard b0 & 0x70 == 0 else { throw .protocolError("reserved bits set (no extension was negotiated)") }
            guard b1 & 0x80 == 0 else { throw .protocolError("masked frame from the server") }
            var length = Int(b1 & 0x7F)
            var header = 2
            if length == 126 {
                guard b.count - i >= 4 else { break }
                length = Int(b[i + 2]) << 8 | Int(b[i + 3])
                header = 4
            } else if length == 127 {
                guard b.count - i >= 10 else { break }
                var v: UInt64 = 0
                for k in 2..<10 { v = v << 8 | UInt64(b[i + k]) }
                guard v <= UInt64(maxMessageBytes) else { throw .tooLarge }
                length = Int(v)
                header = 10
            }
            guard length <= maxMessageBytes else { throw .tooLarge }
            guard b.count - i - header >= length else { break }
            let payload = UnsafeRawBufferPointer(rebasing: b[(i + header)..<(i + header + length)])
            i += header + length
            switch opcode {
            case WebSocketOpcode.close, WebSocketOpcode.ping, WebSocketOpcode.pong:
                guard fin, length <= 125 else { throw .protocolError("fragmented or long control frame") }
                if opcode == WebSocketOpcode.ping {
                    body(.ping(payload))
                } else if opcode == WebSocketOpcode.pong {
                    body(.pong)
                } else {
                    body(.close(code: length >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil))
                    return i
                }
            case WebSocketOpcode.text, WebSocketOpcode.binary:
                guard !inFragmentedMessage else { throw .protocolError("new message inside a fragmented one") }
                if fin {
                    body(.message(payload, binary: opcode == WebSocketOpcode.binary))
                } else {
                    inFragmentedMessage = true
                    fragmentBinary = opcode == WebSocketOpcode.binary
                    fragments.removeAll(keepingCapacity: true)
                    fragments.append(contentsOf: payload)
                }
            case WebSocketOpcode.continuation:
                guard inFragmentedMessage else { throw .protocolError("continuation frame without a first frame") }
                guard fragments.count + length <= maxMessageBytes else { throw .tooLarge }
                fragments.append(contentsOf: payload)
                if fin {
                    inFragmentedMessage = false
                    let binary = fragmentBinary
                    fragments.withUnsafeBytes { body(.message($0, binary: binary)) }
                }
            default:
                throw .protocolError("reserved opcode \(opcode)")
            }
        }
        return i
    }
}
